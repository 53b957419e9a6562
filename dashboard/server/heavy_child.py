"""The heavy lane's child process (heavy.py starts it): runs the expensive lane's requests with
the serving process's own handlers (handlers.py), at a lower OS priority, and answers over the
connections the serving process hands it. Apart from heavy.py, which the serving side imports:
the child imports the handlers only once it has set Django up (main).

Each connection has a thread that only reads and writes its socket; the database work (the
handler, each piece of a streamed list, closing it) runs on a pool of
KUBEDASH_EXPENSIVE_LANE_THREADS threads, as the lane's threads run it in-process. Django keeps a
connection per thread that queried, so the child holds at most that many database connections
however many whole lists stream at once (their pieces take turns on the pool).

While the serving process's fast lane is busy, the pool's work is paced (Pacer):
a lower OS priority alone did not keep it off the renewals' path (docs/SERVING.md)."""
from __future__ import annotations

import io
import logging
import os
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection

import django
from django.conf import settings

from dashboard.kube import context

from .heavy import API, FULL, STREAMED_MARK, FastLoad

log = logging.getLogger(__name__)

MAX_PAUSE_SECONDS = 0.05   # (one pause's longest sleep: a page still answers within a few of them)
# Pacing starts when the fast lane was busy this share of the last ~100 ms (a worker that has
# time to spare: Tables go at full speed) and is full from the second (renewals want the CPU).
PACE_FROM, PACE_FULL = 0.5, 0.9


class Pacer:
    """The heavy work's pause points (kube/yielding.py's every ROWS rows, and the end of each of
    the pool's tasks): while the serving process's fast lane is busy (the shared FastLoad: at
    least PACE_FULL of the last ~100 ms), each sleeps so that the thread has worked at most
    `duty` of the time since its last pause, MAX_PAUSE_SECONDS at most; less so between
    PACE_FROM and PACE_FULL (the sleep scaled down in proportion); not at all below: with
    renewals leaving the worker time to spare, a Table runs at full speed.

    Why, beside the child's lower OS priority: with PostgreSQL on the same machine a renewal
    needs a database backend as well as the event loop. While the child keeps the other core
    busy (at any priority, SCHED_IDLE too) the kernel wakes that backend on the loop's core, and
    renewals ran at 0.5x their rate alone (docs/BENCHMARKS.md's history in git): the CPU has to be left free."""

    def __init__(self, fast: FastLoad, duty: float):
        self.fast, self.duty = fast, duty
        self._since = threading.local()   # (per thread: when it last paused or began a task,
                                          # and how long it has slept in this task)

    def task(self, fn, *args) -> tuple:
        """One of the pool's tasks, timed from its start, with a pause point at its end:
        (fn's result, the seconds it slept in pauses)."""
        self._since.at, self._since.slept = time.monotonic(), 0.0
        try:
            result = fn(*args)
        finally:
            self.pause()
        return result, self._since.slept

    def pause(self) -> None:
        now = time.monotonic()
        worked = now - getattr(self._since, "at", now)
        self._since.at = now
        if self.duty >= 1:
            return
        scale = min(1.0, (self.fast.share() - PACE_FROM) / (PACE_FULL - PACE_FROM))
        if scale <= 0:
            return
        wait = min(worked * (1 - self.duty) / self.duty * scale, MAX_PAUSE_SECONDS)
        time.sleep(wait)
        self._since.at = time.monotonic()
        self._since.slept = getattr(self._since, "slept", 0.0) + wait


def serve_connection(conn: Connection, handlers: dict, work: ThreadPoolExecutor, pacer: Pacer) -> None:
    from .handlers import respond   # noqa: PLC0415 (main() sets Django up before the handlers may be imported)

    paced = 0.0   # (this request's pauses so far)

    def run(fn, *args):   # on the pool: its threads hold the child's database connections
        nonlocal paced
        result, slept = work.submit(pacer.task, fn, *args).result()
        paced += slept
        return result

    try:
        while True:
            try:
                kind, environ = conn.recv()
            except (EOFError, OSError):
                return
            environ["wsgi.input"] = io.BytesIO(environ["wsgi.input"])
            environ["wsgi.errors"] = sys.stderr
            paced = 0.0
            status, headers, content = run(respond, handlers[kind], environ)
            ctx = environ[context.KEY]   # (its plain part, heavy.py: what it learnt goes back)
            if paced:
                ctx.record["paced"] = round(paced, 4)   # (a streamed list's later pieces: not counted)
            if isinstance(content, bytes):   # the body raw after its size: not pickled, not copied again
                conn.send((status, headers, len(content), ctx.record, ctx.limits_hit))
                conn.send_bytes(content)
                continue
            conn.send((status, headers, STREAMED_MARK, ctx.record, ctx.limits_hit))
            pieces = iter(content)
            try:
                while conn.recv() == "next":
                    try:
                        conn.send(("piece", run(next, pieces, None)))
                    except Exception as err:   # noqa: BLE001 - the parent cuts the response
                        log.exception("streamed response failed")
                        conn.send(("error", repr(err)))
            finally:
                run(content.close)
            conn.send(("closed", None))
    except (EOFError, OSError):
        return
    finally:
        conn.close()


def lower_priority(nice: str) -> None:
    """This process (and the threads it starts) `nice` steps lower, or SCHED_IDLE for "idle": it
    then runs only on a core nothing else wants, and a waking renewal preempts it at once.
    (Below its serving process, whose session it shares, heavy.py: where the kernel groups tasks
    by session, a nice value ranks a task only within its session's group.)"""
    if nice == "idle":
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    else:
        os.setpriority(os.PRIO_PROCESS, 0, min(19, os.getpriority(os.PRIO_PROCESS, 0) + int(nice)))


def main(control_fd: int, nice: str, fast_load_fd: int, duty: float) -> None:
    # (started in a session of its own, heavy.py: a SIGINT still sent to it changes nothing; it
    # ends when its serving process does, the control socket closing, after the drain)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lower_priority(nice)

    # The child serves no sockets of its own: without daphne's app (which installs Twisted's
    # reactor at setup, for runserver) it is ~10 MB smaller. Everything it serves is the same.
    settings.INSTALLED_APPS = [app for app in settings.INSTALLED_APPS if app != "daphne"]
    django.setup()

    from dashboard.kube import schema_state, yielding   # noqa: PLC0415 (after django.setup(): the project's modules need it)

    from .handlers import APIWSGIHandler, LaneWSGIHandler   # noqa: PLC0415 (after django.setup(), as yielding)

    pacer = Pacer(FastLoad(fast_load_fd), duty)
    yielding.install(pacer.pause)
    handlers = {FULL: LaneWSGIHandler(), API: APIWSGIHandler()}
    schema_state.check_at_start(quiet=True)   # (a newer schema: refused here too; its serving process said so)
    work = ThreadPoolExecutor(max_workers=settings.KUBEDASH_EXPENSIVE_LANE_THREADS, thread_name_prefix="lane-heavy")
    control = socket.socket(fileno=control_fd)
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(control, 16, 4)
        except OSError:
            break
        if not msg:
            break   # the serving process is gone
        for fd in fds:
            threading.Thread(target=serve_connection, args=(Connection(fd), handlers, work, pacer), daemon=True,
                             name="heavy-relay").start()
    os._exit(0)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))

"""The expensive lane's work in a process of its own, at a lower OS priority (issue 28).

In one process the expensive lane's thread (a Table of 3,000 Jobs) and the event loop serving
renewals share one GIL: pauses (kube/yielding.py) give the loop turns, but how much of the two
cores the Table takes still swung from run to run. Here each serving process (a worker, or
`serve --workers 1`) starts one child, `python -m dashboard.server.heavy_child`, niced by
KUBEDASH_HEAVY_NICE (default 19; `idle`: SCHED_IDLE): the serving process only relays.
Each request is sent (its WSGI environ, body included) over a connection of its own to the
child, whose thread runs the same Django handler the lane thread would have, and sends the
answer back: in one piece, or piece by piece for a streamed response (each piece asked for by
the relay). The serving process's side of it runs on the event loop (HeavyProcess.respond,
RemoteStream.read): non-blocking socket calls, no lane thread. So the GIL is the child's
own, and the kernel gives the renewals' process the CPU first when both want it.

What stays in the serving process: admission and 429s (lanes.Lane), the request log and
metrics (observe.py, from the record the child sends back), the tarpit (from the limits hit the
child sends back), streaming's backpressure, and requests answered from this process's state:
/metrics, and requests under /clusters/<name>/ (their cluster is entered in this process's
task: cluster_paths.py): see takes(). The child gets the request context's plain part
(RequestContext.portable: the record, the streams flag).

Connections: a socketpair per request in flight, made on demand, its child end handed to the
child over the control socket (SCM_RIGHTS; nothing else can connect); up to the lane's
thread count are kept for the next request. Each is one child thread that relays; the database
work runs on the child's pool of the lane's thread count (heavy_child.py), so its database
connections are that many however many streams are in flight. The child exits when the control
socket closes (its parent is gone); a child that died is started again by the next request, and
the requests it had answer 503.
"""
from __future__ import annotations

import asyncio
import logging
import math
import mmap
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
import time

import orjson
from django.core.exceptions import ImproperlyConfigured
from prometheus_client import Counter

from dashboard.kube import context
from dashboard.kube.context import RequestContext
from dashboard.kube.errors import ApiError

log = logging.getLogger(__name__)

PACED = Counter("kubedash_heavy_paced_seconds_total",
                "Seconds the heavy child's work paused while the fast lane was busy (heavy_child.Pacer)")

FULL, API = "full", "api"   # which of handlers.py's handlers serves the request
SOCKET_BUFFER_BYTES = 4 * 1024 * 1024   # (the kernel caps it at net.core.wmem_max)


# Answered from the serving process's own state: its metrics registry (single process: in memory).
OWN_STATE_PATHS = frozenset({"/metrics"})


def takes(scope, ctx: RequestContext) -> bool:
    """Does an expensive request go to the child? Not one whose answer is this process's own
    state, nor one under /clusters/<name>/ (its cluster is entered here: cluster_paths.py)."""
    return scope["path"] not in OWN_STATE_PATHS and not ctx.cluster_path


FAST_LOAD_SECONDS = 0.1   # (the time constant of FastLoad's share: about the last 100 ms)


def _decayed(share: float, busy: float, elapsed: float) -> float:
    """The share of time busy, an exponential average: `share` then, `busy` (1 or 0) since."""
    kept = math.exp(-elapsed / FAST_LOAD_SECONDS)
    return share * kept + (1 - kept) * busy


class FastLoad:
    """How busy the serving process's fast lane has been: the share of about the last 100 ms in
    which it held a request (running or queued), read by its heavy child to pace its work
    (heavy_child.Pacer). Saturating renewals keep it near 1; a few hundred a second, a quarter or
    so. 24 bytes of memory both map (a memfd: the serving process makes it, the child maps the
    descriptor it inherits): the share, whether busy, and when that changed (time.monotonic,
    one clock for every process of the machine), written only when busy changes."""

    def __init__(self, fd: int | None = None):
        if fd is None:
            fd = os.memfd_create("kubedash-fast-load")
            os.ftruncate(fd, 24)   # (zeros: idle, always)
        self.fd = fd
        self._map = mmap.mmap(fd, 24)
        self._share, self._busy, self._since = 0.0, 0.0, time.monotonic()

    def set(self, admitted: int) -> None:
        """(The serving process: at each admit and release of the fast lane.)"""
        busy = 1.0 if admitted > 0 else 0.0
        if busy == self._busy:
            return
        now = time.monotonic()
        self._share = _decayed(self._share, self._busy, now - self._since)
        self._busy, self._since = busy, now
        struct.pack_into("ddd", self._map, 0, self._share, busy, now)

    def share(self) -> float:
        """(The child.) A torn read (the three written meanwhile) only misjudges one pause."""
        share, busy, since = struct.unpack_from("ddd", self._map, 0)
        return _decayed(share, busy, max(0.0, time.monotonic() - since))


class HeavyProcess:
    """The serving process's side: the child, and its idle connections."""

    def __init__(self, keep: int, nice: str, duty: float = 1.0):
        if nice != "idle" and not nice.isdigit():
            raise ImproperlyConfigured(f"KUBEDASH_HEAVY_NICE={nice!r}: a number of nice steps (0-19) or idle")
        if not 0 < duty <= 1:
            raise ImproperlyConfigured(f"KUBEDASH_HEAVY_DUTY={duty!r}: a share of the time above 0, at most 1")
        self.keep, self.nice, self.duty = keep, nice, duty
        self.fast_load = FastLoad()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._idle: list[socket.socket] = []
        self._slots = None   # (asyncio.Semaphore: made on the event loop)

    def start(self) -> None:
        with self._lock:
            self._ensure()

    def _ensure(self) -> None:
        """(Under the lock) a live child: started now if there is none or it died."""
        if self._proc is not None and self._proc.poll() is None:
            return
        if self._proc is not None:
            log.warning("heavy lane process %d exited with %s; starting another", self._proc.pid, self._proc.returncode)
            self._control.close()
            for conn in self._idle:
                conn.close()
            self._idle.clear()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # Two malloc arenas, not 8 per core: the child's threads (one per connection, and its
        # pool) each took an arena of their own: 15-20 MB more RSS after Table loops.
        env = {**os.environ, "MALLOC_ARENA_MAX": os.environ.get("MALLOC_ARENA_MAX", "2")}
        # Its own process group: a terminal's Ctrl-C (sent to the whole foreground group) is for
        # the serving process, which drains; the child ends when that process closes the socket.
        # Not a session of its own: where the kernel groups tasks by session (autogroups), that
        # made it a scheduling group of its own, whose nice 19 ranked it below nothing (issue 42).
        self._proc = subprocess.Popen([sys.executable, "-m", "dashboard.server.heavy_child", str(theirs.fileno()),
                                       str(self.nice), str(self.fast_load.fd), repr(self.duty)],
                                      pass_fds=[theirs.fileno(), self.fast_load.fd], env=env, process_group=0)
        theirs.close()
        self._control = ours

    def _checkout(self) -> socket.socket:
        with self._lock:
            self._ensure()
            if self._idle:
                return self._idle.pop()
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            for end in (ours, theirs):
                # A piece of a big list (~1 MB) in one write and one read, not 200 KB ones.
                end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER_BYTES)
                end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER_BYTES)
            try:
                socket.send_fds(self._control, [b"c"], [theirs.fileno()])
            finally:
                theirs.close()
            ours = _Sock(ours)
            ours.setblocking(False)   # (read and written by the event loop)
            ours.child = self._proc   # (kept for the next request only while this child lives)
            return ours

    def _lost(self) -> None:
        """A connection broke: its child is likely dying. Its idle connections go, and the next
        checkout starts another child once this one has exited."""
        with self._lock:
            for conn in self._idle:
                conn.close()
            self._idle.clear()
            try:
                self._proc.wait(1)   # (a child's exit closes its sockets just before it ends)
            except subprocess.TimeoutExpired:
                pass   # alive: only that connection's thread failed

    def _checkin(self, conn: socket.socket) -> None:
        with self._lock:
            if len(self._idle) < self.keep and conn.fileno() >= 0 and conn.child is self._proc:
                self._idle.append(conn)
                return
        conn.close()   # (the child's thread for it ends, and closes its database connection)

    async def respond(self, kind: str, environ: dict, executor) -> tuple:
        """LanedHTTP's answer, from the child: (status, headers, body or a streamed response's
        iterator); what the child's request context learnt (the record's additions, limits hit)
        goes to environ's. Relayed on the event loop itself: non-blocking socket reads when
        the child's bytes are there, no lane thread taking turns at the GIL, and the body read
        raw (not unpickled). At most `keep` requests at the child at once (the lane's threads
        before); a streamed response is read piece by piece, on the loop too (RemoteStream)."""
        loop = asyncio.get_running_loop()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.keep)
        ctx = environ[context.KEY]
        sent = {k: v for k, v in environ.items() if k not in ("wsgi.input", "wsgi.errors", context.KEY)}
        sent["wsgi.input"] = environ["wsgi.input"].getvalue()
        sent[context.KEY] = ctx.portable()
        request = frame(pickle.dumps((kind, sent), pickle.HIGHEST_PROTOCOL))
        # A read is sent again, once, to a new child if the child died under it (not a write:
        # the child may have made it before it died).
        attempts = 2 if environ["REQUEST_METHOD"] in ("GET", "HEAD") else 1
        async with self._slots:
            for attempt in range(attempts):
                try:
                    conn = self._checkout()
                except OSError:
                    log.exception("heavy lane process unreachable")
                    return unavailable()
                try:
                    await loop.sock_sendall(conn, request)
                    status, headers, size, child_record, limits_hit = pickle.loads(await recv_frame(loop, conn))
                    if size != STREAMED_MARK:
                        content = await recv_frame(loop, conn)   # (send_bytes: a frame of its own)
                    break
                except (OSError, EOFError):
                    conn.close()
                    await loop.run_in_executor(executor, self._lost)
                    if attempt == attempts - 1:
                        log.exception("heavy lane process failed a request")
                        return unavailable()
                except BaseException:   # (cancelled mid-answer: the connection's state is unknown)
                    conn.close()
                    raise
        ctx.record.update(child_record)
        ctx.limits_hit = limits_hit
        PACED.inc(child_record.get("paced", 0.0))
        if size == STREAMED_MARK:
            return status, headers, RemoteStream(self, conn)
        self._checkin(conn)
        return status, headers, content


class _Sock(socket.socket):
    """A socket that can carry the child it belongs to."""

    def __init__(self, sock: socket.socket):
        super().__init__(sock.family, sock.type, sock.proto, fileno=sock.detach())
        self.child = None


# Frames as multiprocessing.connection.Connection writes them (the child's side): a 4-byte
# big-endian length (-1 and then an 8-byte one for 2 GiB or more), then the bytes.
def frame(payload: bytes) -> bytes:
    return struct.pack("!i", len(payload)) + payload


async def recv_exactly(loop, sock: socket.socket, size: int) -> bytes:
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = await loop.sock_recv_into(sock, view[got:])
        if not n:
            raise EOFError
        got += n
    return bytes(buf)   # (one copy: the server's transport takes bytes only)


async def recv_frame(loop, sock: socket.socket) -> bytes:
    size, = struct.unpack("!i", await recv_exactly(loop, sock, 4))
    if size == -1:
        size, = struct.unpack("!Q", await recv_exactly(loop, sock, 8))
    return await recv_exactly(loop, sock, size)


STREAMED_MARK = -1   # (the body's size for a streamed response: pieces follow on request)


class RemoteStream:
    """A streamed response being read from the child, on the event loop like the rest of the
    relay: dispatch.LanedHTTP._stream awaits read() (None at the end; the next one while the loop
    sends this piece) and aclose() at the end, whatever happened."""

    streaming = True

    def __init__(self, heavy: HeavyProcess, conn: socket.socket):
        self.heavy, self.conn = heavy, conn
        self.done = False
        self.broken = False   # (cut mid-frame: the connection cannot be used again)

    async def _ask(self, what: str):
        loop = asyncio.get_running_loop()
        self.broken = True
        await loop.sock_sendall(self.conn, frame(pickle.dumps(what)))
        answer = pickle.loads(await recv_frame(loop, self.conn))
        self.broken = False
        return answer

    async def read(self) -> bytes | None:
        if self.done:
            return None
        kind, piece = await self._ask("next")
        if kind == "error":
            self.done = True
            raise RuntimeError(f"streamed response failed in the heavy lane process: {piece}")
        if piece is None:
            self.done = True
        return piece

    async def aclose(self) -> None:
        try:
            if self.broken:
                raise EOFError
            await self._ask("close")   # (the child closed it: its connection is free again)
        except (OSError, EOFError):
            self.conn.close()
            return
        except BaseException:
            self.conn.close()
            raise
        self.heavy._checkin(self.conn)


def unavailable() -> tuple:
    err = ApiError(503, "ServiceUnavailable", "the expensive lane's process is restarting; try again shortly",
                   headers={"Retry-After": "1"})
    return 503, [(b"content-type", b"application/json"), (b"retry-after", b"1")], orjson.dumps(err.status())

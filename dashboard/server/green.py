"""Sync request code on the event loop: SQLite's LoopInline calls it there directly (inline.py),
and PostgreSQL's fast lane runs it in greenlets that hand their round trips to the loop.

GreenLane: a bearer-token resource request (a renewal, a GET of one object) runs its sync code,
Django's handler, the view and the store as on a thread, in a greenlet on the loop's thread
(kube/postgresql/base.py, LoopWaits). Where psycopg would wait for the server's answer, the
greenlet hands the wait to the loop (psycopg's own asyncio wait, compat/psycopg.py), which
serves other requests and resumes the greenlet once the answer is there. So a renewal neither
crosses to a lane thread and back nor, after each of its round trips, waits for that thread to
win the GIL back from the loop and the other threads: that was a fifth of its CPU
(docs/BENCHMARKS.md's history in git). Only its Python work holds the loop, as on SQLite.

Each request in flight has a database connection of its own, put in place as the thread's own
while its greenlet runs (Django keeps a connection per thread; one psycopg connection holds one
conversation at a time), and a copy of its context, as a lane thread would run it. As many
connections as the fast lane has threads (KUBEDASH_FAST_LANE_THREADS), kept open; further
requests wait for one, in order.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from dashboard.compat.asyncio import loop_hidden
from dashboard.compat.django import new_connection, thread_connection
from dashboard.compat.psycopg import wait_on_loop
from dashboard.kube.postgresql.base import AWAIT, WAIT, LoopWaits


class GreenLane:
    def __init__(self, size: int):
        self.free = [None] * size   # connections (DatabaseWrappers), each made at its first use
        self.waiting: deque[asyncio.Future] = deque()
        # (psycopg's connect has no hook for its waits: a new connection is opened here)
        self.connector = ThreadPoolExecutor(max_workers=1, thread_name_prefix="green-connect")

    async def serve(self, fn, *args):
        """fn(*args), run in a greenlet on the loop: its result, or its exception."""
        connection = await self._take()
        # Shielded: a request cancelled mid-way still ends its conversation with the database
        # (its connection stays usable), and only then is its connection free again.
        return await asyncio.shield(asyncio.ensure_future(self._run(connection, fn, args)))

    async def _take(self):
        if self.free:
            return self.free.pop()
        turn = asyncio.get_running_loop().create_future()
        self.waiting.append(turn)
        try:
            return await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._give(turn.result())   # (handed over just as it was cancelled)
            raise

    def _give(self, connection) -> None:
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():
                turn.set_result(connection)
                return
        self.free.append(connection)

    async def _run(self, connection, fn, args):
        try:
            if connection is None:   # (made on the loop's thread, where Django will check it is used)
                connection = new_connection()
            child = LoopWaits(fn)
            child.gr_context = contextvars.copy_context()   # (the request's, as on a lane thread)
            resume = functools.partial(child.switch, *args)
            while True:
                with loop_hidden(), thread_connection(connection):
                    wanted = resume()   # (returns when the greenlet waits, or ends: its result)
                if child.dead:
                    return wanted
                kind, what, more = wanted
                try:
                    if kind == WAIT:
                        value = await wait_on_loop(what, more)
                    elif kind == AWAIT:
                        value = await what(*more)
                    else:
                        value = await asyncio.get_running_loop().run_in_executor(self.connector, what, *more)
                except BaseException as exc:   # noqa: BLE001 - the greenlet's own call raises it
                    resume = functools.partial(child.throw, exc)
                else:
                    resume = functools.partial(child.switch, value)
        finally:
            self._give(connection)

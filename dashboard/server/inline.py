"""The fast lane's requests answered on the event loop itself (dispatch.LanedHTTP asks LoopInline
first): no hop to the lane's thread and back."""
from __future__ import annotations

import asyncio
import contextvars

from django.conf import settings
from django.db import DatabaseError

from dashboard.compat.asyncio import loop_hidden
from dashboard.kube import storage
from dashboard.kube.context import RequestContext
from dashboard.kube.views import bearer_route

from .green import GreenLane
from .handlers import respond


class LoopInline:
    """The fast lane's requests (a renewal, a GET of one object), run on
    the event loop itself instead of a hop to the lane's thread: no thread hand-over, no GIL
    ping-pong between the two (a fifth of a renewal's CPU).

    SQLite: as sync code, and only while it cannot wait: its connection waits neither for the
    writers' turn (kube/sqlite/base.py) nor in SQLite's busy handler, so a write that finds
    either taken at BEGIN gets "database is locked" before writing anything (the request's
    context says it would wait), and is run again on the lane's thread, which may wait. A write
    that sees the turn taken before it starts looks again a little later instead. The work runs
    (the loop hidden: Django's ORM refuses to run under a running loop) in one long-lived
    contextvars context, so it keeps one database connection; nothing of a request is kept in
    it (its state is its RequestContext), and a request about a followed cluster, which would
    need its cluster entered there, is not taken.

    PostgreSQL: every request of the fast and background lanes (sessions' and followed
    clusters' too), each in a greenlet (green.GreenLane) whose round trips the loop waits for
    while it serves others; several at once, each with its own connection.

    KUBEDASH_INLINE_FAST_LANE=0 turns it off (the thread serves every request).
    """

    def __init__(self):
        mode = storage.backend().loop_mode   # "inline" (SQLite), "green" (PostgreSQL)
        self.enabled = bool(settings.KUBEDASH_INLINE_FAST_LANE and mode)
        self.green = GreenLane(settings.KUBEDASH_FAST_LANE_THREADS) if self.enabled and mode == "green" else None
        self.context = contextvars.Context()

    def takes(self, scope, ctx: RequestContext, bare: bool) -> bool:
        """bare: the request needs no more than the API's middleware (bearer token)."""
        if not self.enabled:
            return False
        if self.green is not None:
            return True    # (each in a copy of its task's contextvars, as on a thread)
        if not bare or ctx.cluster_path:
            return False   # (a followed cluster's reads need its cluster entered: cluster_paths.py)
        authorization = next((v for n, v in scope.get("headers", ()) if n == b"authorization"), b"")
        return bearer_route(scope["method"], authorization.decode("latin-1"), scope["path"]) is not None

    # Another worker's write holds the turn (or SQLite's lock) for a few hundred µs: look again
    # after these pauses (the loop serves others meanwhile) before handing the request to the
    # thread, which waits.
    RETRY_SECONDS = (0.0002, 0.0004, 0.0008, 0.0016, 0.0032)

    async def serve(self, handler, make_environ, ctx: RequestContext, *, writes: bool) -> tuple | None:
        """handlers.respond(handler, make_environ()) on the loop, or None: it would have waited."""
        if self.green is not None:
            answer = await self.green.serve(self._answer, handler, make_environ, ctx)
            return None if answer is WOULD_WAIT else answer
        answer = self.run(handler, make_environ, ctx, writes)
        for pause in self.RETRY_SECONDS:
            if answer is not WOULD_WAIT:
                return answer
            await asyncio.sleep(pause)
            answer = self.run(handler, make_environ, ctx, writes)
        return None if answer is WOULD_WAIT else answer

    def run(self, handler, make_environ, ctx: RequestContext, writes: bool):
        with loop_hidden():
            return self.context.run(self._run, handler, make_environ, ctx, writes)

    @staticmethod
    def _run(handler, make_environ, ctx, writes):
        try:
            db = storage.backend()
            db.never_wait()
            if writes and not db.writers_turn_free():
                return WOULD_WAIT    # another writer has the turn: look again soon
        except DatabaseError:
            return None
        return LoopInline._answer(handler, make_environ, ctx)

    @staticmethod
    def _answer(handler, make_environ, ctx: RequestContext):
        # (views: no streamed answers on the loop; SQLite's lock taken is "would wait")
        ctx.inline, ctx.would_wait = True, False
        try:
            answer = respond(handler, make_environ())
        finally:
            ctx.inline = False   # (run again, it runs on a thread)
        return WOULD_WAIT if ctx.would_wait else answer


WOULD_WAIT = object()   # LoopInline: the turn or SQLite's lock is taken right now

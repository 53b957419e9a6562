"""Django's PostgreSQL backend, with a health check that costs no round trip, and waits that
the event loop can take over.

The health check (compat/django.py's PostgreSQLWrapper) asks the connection's socket before
the server: with CONN_HEALTH_CHECKS Django would otherwise send `SELECT 1` before each
request's first query, one of the four round trips of a Lease renewal.

The fast lane's requests run on the event loop, each in a LoopWaits greenlet
(dashboard/server/green.py): where psycopg would block its thread for the server's answer
(compat/psycopg.py's WaitHookedConnection) or for a new connection, such a greenlet hands the
wait to its parent, the loop, which serves other requests until the socket is ready (and so,
through await_on_the_loop, for other I/O: Redis's publish of a commit). Anywhere else psycopg
waits as usual.
"""
from __future__ import annotations

import greenlet
from django.conf import settings

from dashboard.compat.django import PostgreSQLWrapper
from dashboard.compat.psycopg import WaitHookedConnection, adopt

WAIT = "wait"   # (generator, socket): psycopg's protocol generator, driven until done
CALL = "call"   # (function, args): a blocking call, run on a thread
AWAIT = "await"   # (coroutine function, args): awaited on the loop


class LoopWaits(greenlet.greenlet):
    """A greenlet whose parent (the event loop's) takes its database waits: switched to with
    (WAIT, gen, fileno) or (CALL, fn, args), it switches back with the result, or throws."""


def _loop_waits() -> LoopWaits | None:
    current = greenlet.getcurrent()
    return current if isinstance(current, LoopWaits) else None


def on_the_loop() -> bool:
    """Is this sync code running on the event loop, in a LoopWaits greenlet?"""
    return _loop_waits() is not None


def await_on_the_loop(coroutine_function, *args):
    """From a LoopWaits greenlet: coroutine_function(*args), awaited by the loop; its result."""
    return _loop_waits().parent.switch((AWAIT, coroutine_function, args))


class Connection(WaitHookedConnection):
    """psycopg's, its waits for the server handed to the loop from a LoopWaits greenlet."""

    __slots__ = ()

    def wait_for_server(self, gen):
        waiter = _loop_waits()
        if waiter is None:
            return super().wait_for_server(gen)
        try:
            first = next(gen)   # (one that needs no wait ends here, with no trip to the loop: a
        except StopIteration as done:   # pipeline's enter and each of its statements)
            return done.value
        return waiter.parent.switch((WAIT, _resumed(gen, first), self.pgconn.socket))


def _resumed(gen, first):
    """psycopg's protocol generator gen, whose first wait (`first`) was already taken from it,
    as a generator that yields that wait, then goes on with gen."""
    ready = yield first
    while True:
        try:
            state = gen.send(ready)
        except StopIteration as done:
            return done.value
        ready = yield state


# psycopg prepares a statement after this many runs; Django's None turns preparing off for good,
# even for a query run with prepare=True. So: never of itself, but when asked (the update's
# prepared statement: kube/storage/postgresql.py). Through PgBouncer's transaction pooling
# (settings.py) nothing is prepared.
ONLY_WHEN_ASKED = 2 ** 31 - 1


class DatabaseWrapper(PostgreSQLWrapper):
    def make_connection(self, make, conn_params):
        waiter = _loop_waits()
        if waiter is None:
            connection = make(conn_params)
        else:   # (psycopg's connect waits with no hook: on a thread, the loop going on)
            connection = waiter.parent.switch((CALL, make, (conn_params,)))
        if connection.prepare_threshold is None and not settings.KUBEDASH_PGBOUNCER:
            connection.prepare_threshold = ONLY_WHEN_ASKED
        return adopt(connection, Connection)

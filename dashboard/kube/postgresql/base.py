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
        return waiter.parent.switch((WAIT, gen, self.pgconn.socket))


class DatabaseWrapper(PostgreSQLWrapper):
    def make_connection(self, make, conn_params):
        waiter = _loop_waits()
        if waiter is None:
            connection = make(conn_params)
        else:   # (psycopg's connect waits with no hook: on a thread, the loop going on)
            connection = waiter.parent.switch((CALL, make, (conn_params,)))
        return adopt(connection, Connection)

"""Django's PostgreSQL backend, with a health check that costs no round trip, and waits that
the event loop can take over.

With CONN_HEALTH_CHECKS (settings) Django checks a persistent connection before each request's
first query with `SELECT 1`: on PostgreSQL a round trip, one of the four of a Lease renewal,
and one more wait for the GIL when a Table thread is busy. A connection the server (or a
pooler) has closed shows as a readable socket: the server's goodbye message, or EOF. So the
socket is asked first, without waiting; only when something is there (a closed connection, or
a rare notice) does Django's `SELECT 1` run and decide.

The fast lane's requests run on the event loop, each in a LoopWaits greenlet
(dashboard/server/green.py): where psycopg would block its thread for the server's answer
(Connection.wait) or for a new connection, such a greenlet hands the wait to its parent, the
loop, which serves other requests until the socket is ready (and so, through
await_on_the_loop, for other I/O: Redis's publish of a commit). Anywhere else psycopg waits as
usual.
"""
from __future__ import annotations

import select

import greenlet
import psycopg
from django.db.backends.postgresql import base

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


class Connection(psycopg.Connection):
    __slots__ = ()

    def wait(self, gen, *args, **kwargs):
        waiter = _loop_waits()
        if waiter is None or args or kwargs:   # (a wait with a timeout: LISTEN's, never the fast lane's)
            return super().wait(gen, *args, **kwargs)
        return waiter.parent.switch((WAIT, gen, self.pgconn.socket))


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        waiter = _loop_waits()
        if waiter is None:
            connection = super().get_new_connection(conn_params)
        else:   # (psycopg's connect waits with no hook: on a thread, the loop going on)
            connection = waiter.parent.switch((CALL, super().get_new_connection, (conn_params,)))
        if type(connection) is psycopg.Connection:
            connection.__class__ = Connection   # (same layout: only wait() differs)
        return connection

    def is_usable(self):
        if self.connection is None or self.connection.closed:
            return False
        try:
            poll = select.poll()   # (not select(): descriptors above 1024)
            poll.register(self.connection.fileno(), select.POLLIN)
            if not poll.poll(0):
                return True        # nothing from the server since our last answer: still open
        except (OSError, ValueError, base.Database.Error):
            pass
        return super().is_usable()

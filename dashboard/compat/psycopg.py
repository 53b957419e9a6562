"""psycopg internals kubedash relies on (checked with psycopg 3.3.9; tests/serving/test_compat.py).

Where a sync connection waits for the server, a connection psycopg made turned into a subclass,
and psycopg's own wait on an asyncio loop: what lets the fast lane's greenlets on PostgreSQL
hand their round trips to the event loop (kube/postgresql/base.py, server/green.py).
"""
from __future__ import annotations

import psycopg
from psycopg import waiting


class WaitHookedConnection(psycopg.Connection):
    """psycopg's sync Connection whose waits for the server a subclass may take:
    wait_for_server(gen) gets each, psycopg's own blocking wait unless overridden.

    Relies on every blocking wait of a sync connection (a statement's answer, a commit, a
    rollback) going through Connection.wait(gen, interval, timeout) with the generator alone
    (one of psycopg's protocol generators: driven to its end, its result is the wait's); a wait
    given an interval or a timeout (notifies) stays psycopg's. A subclass adds no state
    (__slots__ = ()): adopt() turns the connections psycopg.connect makes into one."""

    __slots__ = ()

    def wait(self, gen, *args, **kwargs):
        if args or kwargs:
            return super().wait(gen, *args, **kwargs)
        return self.wait_for_server(gen)

    def wait_for_server(self, gen):
        return psycopg.Connection.wait(self, gen)


def adopt(connection, cls: type[WaitHookedConnection]):
    """connection, as psycopg.connect made it (a psycopg.Connection), as a cls from now on: a
    class swap, which keeps the object as it is because cls adds no state; a connection of
    another class is returned as it is."""
    if type(connection) is psycopg.Connection:
        connection.__class__ = cls
    return connection


# wait_async's interval: how often a wait wakes to look again with nothing ready. Its default,
# 0.0 since psycopg 3.3 (None is refused), wakes at every turn of the loop: a wait for the
# server was a busy loop that took a core while PostgreSQL, on the same machine, needed it
# (docs/BENCHMARKS.md, "PostgreSQL writes after the spin, the convoy and the index"). psycopg's AsyncConnection passes 0.1.
WAIT_INTERVAL = 0.1


def wait_on_loop(gen, fileno: int):
    """An awaitable that drives gen (one of psycopg's protocol generators, on the connection whose
    socket is fileno) to its end on the running asyncio loop: its result is gen's
    (psycopg.waiting.wait_async, psycopg's own wait for its AsyncConnection; the waiting module
    is not documented)."""
    return waiting.wait_async(gen, fileno, interval=WAIT_INTERVAL)

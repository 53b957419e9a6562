"""Django's PostgreSQL backend, with a health check that costs no round trip.

With CONN_HEALTH_CHECKS (settings) Django checks a persistent connection before each request's
first query with `SELECT 1`: on PostgreSQL a round trip, one of the four of a Lease renewal,
and one more wait for the GIL when a Table thread is busy. A connection the server (or a
pooler) has closed shows as a readable socket: the server's goodbye message, or EOF. So the
socket is asked first, without waiting; only when something is there (a closed connection, or
a rare notice) does Django's `SELECT 1` run and decide.
"""
from __future__ import annotations

import select

from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
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

"""SQLite: the write lock is BEGIN IMMEDIATE (settings), and every write takes the portable path
(interface.py): one transaction, its counter, log row and typed row one statement each.

Django's ENGINE for it is kube/sqlite/base.py (writers take turns through a lock file; the event
loop's connection never waits). Other processes' commits show in PRAGMA data_version, which the
hub's follower polls (notify.py) instead of needing a doorbell.
"""
from __future__ import annotations

from django.db import OperationalError, connection

from .interface import Storage


class SQLiteStorage(Storage):
    loop_mode = "inline"
    counts_commits = True

    def lock(self) -> None:
        pass   # BEGIN IMMEDIATE (settings) already holds the write lock

    def data_version(self) -> int:
        """Commits by other connections to this database file (3-4 us)."""
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA data_version")
            return cursor.fetchone()[0]

    def never_wait(self) -> None:
        """This thread's connection waits neither for the writers' turn nor in SQLite's busy
        handler from now on: a write that finds either taken is refused at BEGIN (would_wait)."""
        connection.never_wait()

    def writers_turn_free(self) -> bool:
        """Is the writers' turn free right now? (A hint: taken and given back at once.)"""
        return connection.writers_turn_free()

    def would_wait(self, exc: Exception) -> bool:
        # SQLite's own "database is locked", and kube/sqlite/base.py's for the writers' turn.
        return isinstance(exc, OperationalError) and "locked" in str(exc)

"""Django's SQLite backend, with writers taking turns through a lock file instead of sleeping.

Every write transaction starts with BEGIN IMMEDIATE (settings), which takes SQLite's write lock;
a second writer that finds it held waits in SQLite's busy handler, which *sleeps* 1, 2, 5, 10,
15, 20, 25 ... 100 ms between tries. With several worker processes writing (serve --workers N),
those sleeps, not the work, set a renewal's latency. So each connection first takes an
exclusive flock(2) on `<database>-writers`: a waiting writer polls it every few hundred
microseconds and gets it right after the holder commits. The lock only orders writers that use
it; SQLite's own lock still decides correctness, so after WAIT_SECONDS a writer goes on to
BEGIN IMMEDIATE without it (and a write outside a transaction never takes it).
"""
from __future__ import annotations

import fcntl
import os
import time

from django.db import OperationalError

from dashboard.compat.django import SQLiteWrapper

WAIT_SECONDS = 20.0        # as long as SQLite's own busy timeout (settings)
# The event loop's connection waits for the turn this long at most: about one other worker's
# transaction, less than doing the request's work again after a refusal.
NEVER_WAIT_SECONDS = 0.0003
POLL_SECONDS = (0.00005, 0.0001, 0.0002, 0.0005)   # then every 0.5 ms


class DatabaseWrapper(SQLiteWrapper):
    """Django's (compat/django.py's SQLiteWrapper: its statements' rewrite remembered), each
    transaction taking the writers' turn before its BEGIN and giving it back when it ends."""

    _writers_fd: int | None = None
    _holds_writers = False
    # The event loop's connection (dashboard/server/inline.py, LoopInline) never waits: not in
    # SQLite's busy handler (busy_timeout 0), and for the writers' turn at most
    # NEVER_WAIT_SECONDS. Either is then "database is locked" at BEGIN, before anything is written.
    _never_waits = None     # the underlying connection told so

    def never_wait(self) -> None:
        """No waiting on this connection, from now on (once per underlying connection)."""
        self.ensure_connection()
        if self._never_waits is not self.connection:
            self.connection.execute("PRAGMA busy_timeout = 0")
            self._never_waits = self.connection

    def writers_turn_free(self) -> bool:
        """Is the writers' turn free right now? (Taken and given back at once: a hint.)"""
        fd = self._writers_lock()
        if fd is None or self._holds_writers:
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True

    def _writers_lock(self) -> int | None:
        if self._writers_fd is None and not self.is_in_memory_db():
            # One open file per connection: flock excludes other connections of this process too.
            self._writers_fd = os.open(f"{self.settings_dict['NAME']}-writers", os.O_RDWR | os.O_CREAT, 0o600)
        return self._writers_fd

    def before_begin(self) -> None:
        """Take the writers' turn (WAIT_SECONDS at most, then SQLite's busy handler decides)."""
        fd = self._writers_lock()
        if fd is None or self._holds_writers:
            return
        deadline = None
        tries = 0
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._holds_writers = True
                return
            except BlockingIOError:
                pass
            never_waits = self._never_waits is not None and self._never_waits is self.connection
            now = time.monotonic()
            deadline = deadline or now + (NEVER_WAIT_SECONDS if never_waits else WAIT_SECONDS)
            if now > deadline:
                if never_waits:
                    raise OperationalError("database is locked: another writer has the writers' turn")
                return          # SQLite's busy handler decides from here
            time.sleep(POLL_SECONDS[min(tries, len(POLL_SECONDS) - 1)])
            tries += 1

    def transaction_ended(self) -> None:
        """Give the writers' turn back."""
        if self._holds_writers:
            self._holds_writers = False
            fcntl.flock(self._writers_fd, fcntl.LOCK_UN)

    def connection_closed(self) -> None:
        self.transaction_ended()
        if self._writers_fd is not None:
            os.close(self._writers_fd)
            self._writers_fd = None

"""Where objects are stored: the interface the store writes through (interface.py), the
statements both databases share (rows.py), one module per database (sqlite.py, postgresql.py,
with PostgreSQL's object cache, objcache.py), and backend(): the one serving a connection.

Code outside this package never asks which database it is talking to; it asks the backend
(a method, or a capability such as loop_mode or confirms_tokens()).
"""
from __future__ import annotations

from django.db import connection

from .interface import (ADDED, DELETED, MODIFIED, RV_MARK, Change, Key, Storage, TokenCheck, Unconfirmed, announce,
                        revision_committed)
from .postgresql import PostgreSQLStorage
from .sqlite import SQLiteStorage

__all__ = ["ADDED", "DELETED", "MODIFIED", "RV_MARK", "Change", "Key", "Storage", "TokenCheck", "Unconfirmed",
           "announce", "backend", "revision_committed"]

_BACKENDS: dict[str, Storage] = {"sqlite": SQLiteStorage(), "postgresql": PostgreSQLStorage()}


def backend(db=None) -> Storage:
    """The Storage of a database connection (default: this thread's, django.db.connection)."""
    return _BACKENDS[(connection if db is None else db).vendor]

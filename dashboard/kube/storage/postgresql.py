"""PostgreSQL: an advisory lock is the write lock; a revision's counter, log row and typed row are
one statement; an update is computed outside the lock and written by one conditional message.

guaranteed_update first tries optimistically: it reads (or takes objcache.py's copy at the
revision the request names: kube's GuaranteedUpdate from its watch cache), computes, and writes
with one round trip that takes the lock, writes only if the typed row still holds the revision
it read, and commits: a pipeline of the lock and the update, prepared on the server once per
connection (_prepared), or through PgBouncer one simple-query message. The lock is then held
for that statement and its commit's WAL flush alone, not for the read, the Python work and four
round trips. With KUBEDASH_GROUP_COMMIT=1 (group commit) the message is `CALL kube_write(...)`
(migrations 0006, 0008): a writer that finds the lock taken queues its update and the holder, of
whichever process, commits it with its own: writers across processes share one transaction and
one WAL flush. The
message may also check the caller's token (TokenCheck: kube/views.py serves a renewal before
its token is checked, and throws away any answer but a confirmed write). After OPTIMISTIC_TRIES
lost races, for a create or a delete, inside a transaction, for a dry run, or with server-side
binding (which allows one statement per message), the locked path of interface.py.

Django's ENGINE for it is kube/postgresql/base.py (the health check without a round trip, the
event loop's greenlets taking psycopg's waits).
"""
from __future__ import annotations

import contextlib
import functools
from datetime import datetime

import psycopg
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from prometheus_client import Counter

from ..errors import ApiError
from ..models import Revision
from ..registry import Resource
from . import objcache, rows
from .interface import (MODIFIED, RV_FIELD, Change, Key, Preconditions, Storage, TokenCheck, TryUpdate, Unconfirmed,
                        log_row, numbered)

REVISION_LOCK = 7411   # pg_advisory_xact_lock: every write takes it before its first read
MIGRATE_LOCK = 7412    # one `migrate` at a time (never meets the revision lock)
LOCK = f"SELECT pg_advisory_xact_lock({REVISION_LOCK})"

OPTIMISTIC_TRIES = 3

# Group commit's procedure (migration 0006): an update's bound statement in, (revision, outcome) out.
QUEUED_WRITE = "CALL kube_write(%s, NULL, NULL)"
GROUP_COMMITS = Counter("kubedash_group_commit", "PostgreSQL updates through group commit, by who committed "
                        "them: own (in the writer's transaction, with any others queued), handed (in another "
                        "session's), failed (raised in another's: run again alone)", ["what"])

# The server ended the session (admin_shutdown: pg_terminate_backend, a smart or fast shutdown;
# crash_shutdown; cannot_connect_now), or class 08, a connection exception: the server's words
# for a session gone. (Its other OperationalErrors, a statement timeout or a lock not available,
# leave the session as it was.)
SESSION_ENDED = ("57P01", "57P02", "57P03")

# An optimistic try that wrote nothing: read and try again (the object changed since it was
# read, or a try from the cache came to an answer the write does not check), or take the
# locked path (a create or a delete).
AGAIN = "again"
LOCKED = "locked"


def _counter(condition: str = "") -> str:
    """The revision counter's next value as `c`; condition: "AND ... " clauses that must hold
    for it to move (nothing is written when they do not)."""
    return f"WITH c AS (UPDATE kube_revision_counter SET value = value + 1 WHERE id = 1 {condition}RETURNING value)"


# The revision row from the counter's value, the object text's RV_MARK replaced by it
# (params: the log_row with RV_FIELD and its replacement's head after the text).
_LOG_FROM_COUNTER = (f"INSERT INTO kube_revision ({rows.LOG_COLUMNS}) "
                     "SELECT c.value, %s, %s, %s, %s, %s, replace(%s, %s, %s || c.value || '\"'), %s, %s FROM c")
RECORD = f"{_counter()} {_LOG_FROM_COUNTER} RETURNING rv"


@functools.cache
def _record_update(model, condition: str = "") -> str:
    """An update's counter, revision row and typed row in one statement (its current revision
    set to the new one); answers (rv, typed rows written)."""
    table = model._meta.db_table
    columns = ", ".join(f"{f.column} = r.rv" if f.attname == "current_id" else f"{f.column} = %s"
                        for f in rows.statements(model)["fields"])
    return (f"{_counter(condition)}, r AS ({_LOG_FROM_COUNTER} RETURNING rv), u AS (UPDATE {table} SET {columns}"
            f" FROM r WHERE {table}.id = %s RETURNING 1) SELECT r.rv, (SELECT count(*) FROM u) FROM r")


@functools.cache
def _conditional_update(model, token_sql: str = "") -> str:
    """An update computed outside the lock: one simple-query string, so one round trip and one
    implicit transaction (it commits at its end). It takes the lock, then writes only if the
    typed row still holds the revision the object was read at (params: row id, that revision,
    then a TokenCheck's, then _record_update's); else it writes nothing and answers no row. The
    second statement's snapshot is taken after the lock is held: it sees every write that
    committed before (a writer lets go of the lock only once it committed). Without the lock,
    which goes in front of the message (or kube_write takes it: group commit)."""
    table = model._meta.db_table
    column = next(f.column for f in rows.statements(model)["fields"] if f.attname == "current_id")
    unchanged = f"AND EXISTS (SELECT 1 FROM {table} WHERE id = %s AND {column} = %s) "
    return _record_update(model, unchanged + (f"AND {token_sql} " if token_sql else ""))


def _log_params(row: list) -> list:
    return [*row[:5], row[5], RV_FIELD, '"resourceVersion":"', *row[6:]]


def _typed_values(res: Resource, obj: dict) -> list:
    """The typed row's values but its current revision (the statement sets that one)."""
    fields = rows.statements(res.model)["fields"]
    return [value for f, value in zip(fields, rows.row_params(res, obj, 0)) if f.attname != "current_id"]


class PostgreSQLStorage(Storage):
    loop_mode = "green"

    # -----------------------------------------------------------------------------------------
    # The interface

    def get_raw(self, key: Key) -> tuple[int, str, int] | None:
        """As the portable one, remembered for the next update (objcache)."""
        hit = rows.load_raw(*key)
        if hit is not None:
            objcache.read(key.res, key.namespace, key.name, *hit)
        return hit

    def guaranteed_update(self, key: Key, try_update: TryUpdate, preconditions: Preconditions | None = None, *,
                          moment: datetime, known_rv: str = "", dry_run: bool = False,
                          token_check: TokenCheck | None = None) -> Change:
        """Optimistic tries (the module's docstring), then the locked path."""
        if dry_run or connection.in_atomic_block or not self.one_message_updates():
            return super().guaranteed_update(key, try_update, preconditions, moment=moment, dry_run=dry_run,
                                             token_check=token_check)
        if known_rv:
            written = self._try_cached(key, known_rv, try_update, preconditions, moment, token_check)
            if written is not None:
                return written
        for _ in range(OPTIMISTIC_TRIES):
            row_id, current = self.load(key)
            outcome = self._try(key, row_id, current, try_update, preconditions, moment, token_check)
            if outcome is LOCKED:
                break
            if outcome is not AGAIN:
                return outcome
        return super().guaranteed_update(key, try_update, preconditions, moment=moment, token_check=token_check)

    def _try_cached(self, key: Key, known_rv: str, try_update: TryUpdate, preconditions: Preconditions | None,
                    moment: datetime, token_check: TokenCheck | None) -> Change | None:
        """The first try from objcache's copy at known_rv, when it holds that revision: what it
        wrote, or None. Whatever else happens on it (the object changed, any ApiError, a no-op,
        a create or a delete) nothing was written: the entry is dropped and the tries after it
        read as usual, so a stale entry never gives an answer."""
        cache_key, hit = objcache.lookup(key.res, key.namespace, key.name, known_rv)
        if hit is None:
            return None
        try:
            outcome = self._try(key, *hit, try_update, preconditions, moment, token_check, cached=True)
        except ApiError:
            outcome = AGAIN
        if outcome is AGAIN or outcome is LOCKED:
            objcache.stale(cache_key)
            return None
        objcache.hit()
        return outcome

    def _try(self, key: Key, row_id: int | None, current: dict | None, try_update: TryUpdate,
             preconditions: Preconditions | None, moment: datetime, token_check: TokenCheck | None,
             cached: bool = False):
        """One optimistic try from current (read, or cached): the change written, or AGAIN or
        LOCKED, having written nothing."""
        if preconditions is not None:
            preconditions(current)
        if current is None:
            return LOCKED   # (a create: the locked path checks the name)
        read_rv = int(current["metadata"]["resourceVersion"])
        change = try_update(current, final=False)
        if change.event is None:
            return AGAIN if cached else change   # (from the cache, an answer the write does not check)
        if change.event != MODIFIED:
            return LOCKED
        row = log_row(key.res, change.obj, MODIFIED, moment)
        rv = self._log_if_unchanged(row, key.res, row_id, change.obj, read_rv, token_check)
        if rv is None:
            return AGAIN
        self._written(key.res, change.obj, rv, row_id, row[5])
        return change

    def _log_if_unchanged(self, row: list, res: Resource, row_id: int, obj: dict, read_rv: int,
                          token_check: TokenCheck | None) -> int | None:
        """_conditional_update: the revision written, or None when the object changed since
        read_rv. Under a TokenCheck: confirmed, or Unconfirmed if the object or the token has
        changed (no retry under it)."""
        statement = _conditional_update(res.model, token_check.sql if token_check is not None else "")
        params = [row_id, read_rv, *(token_check.params if token_check is not None else ()),
                  *_log_params(row), *_typed_values(res, obj), row_id]
        hit = self._group_commit(statement, params) if settings.KUBEDASH_GROUP_COMMIT else AGAIN
        if hit is AGAIN:   # (through PgBouncer, which keeps no prepared statement: one simple-query message)
            hit = self._one_message(statement, params) if settings.KUBEDASH_PGBOUNCER else \
                self._prepared(statement, params)
        if token_check is not None:
            if hit is None:
                raise Unconfirmed
            token_check.confirmed = True
        return None if hit is None else hit[0]

    @staticmethod
    def _one_message(statement: str, params: list):
        """The lock and the update as one simple-query string (client-side binding): (revision,)
        or None."""
        with connection.cursor() as cursor:
            cursor.execute(f"{LOCK}; {statement}", params)
            cursor.nextset()   # (the lock's result)
            return cursor.fetchone()

    @staticmethod
    def _prepared(statement: str, params: list):
        """The update as the lock and the statement in one pipeline (one round trip, one
        transaction), the statement bound on the server's side and prepared at its first run on a
        connection (prepare=True: Django turns psycopg's automatic preparing off), so PostgreSQL
        then neither parses nor plans it again (as one simple-query message, both were ~40% of
        its CPU per write: docs/BENCHMARKS.md). Its answer: (revision,) or None. Errors come as
        Django's (wrap_database_errors)."""
        with connection.wrap_database_errors:
            connection.ensure_connection()
            raw = connection.connection
            cursor = psycopg.Cursor(raw)   # (server-side binding; Django's cursors bind on this side)
            # (no BEGIN or COMMIT: what a pipeline sends before its Sync is one transaction,
            # committed at the Sync, or rolled back if a statement failed; the cursor keeps the
            # last statement's answer)
            with raw.pipeline():
                cursor.execute(LOCK, prepare=True)
                cursor.execute(statement, params, prepare=True)
            return cursor.fetchone()

    @staticmethod
    def _group_commit(statement: str, params: list):
        """The update through kube_write: (revision,) or None as the message's answer, or AGAIN
        when it raised in another session's transaction (its owner runs it alone, so that its
        error, if any, is its own and comes as PostgreSQL raised it)."""
        with connection.cursor() as cursor:
            # (one_message_updates: psycopg's ClientCursor, which binds on this side)
            cursor.execute(QUEUED_WRITE, [cursor.cursor.mogrify(statement, params)])
            rv, outcome = cursor.fetchone()
        GROUP_COMMITS.labels(outcome).inc()
        if outcome == "failed":
            return AGAIN
        return None if rv is None else (rv,)

    # -----------------------------------------------------------------------------------------
    # Writing, inside the locked transaction

    def lock(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(LOCK)

    def _log(self, row: list, update: tuple | None) -> int:
        """The counter, the log row and an update's typed row in one statement (one round trip
        fewer inside the revision lock's critical section)."""
        statement, params = RECORD, _log_params(row)
        if update is not None:
            res, row_id, obj = update
            statement = _record_update(res.model)
            params += [*_typed_values(res, obj), row_id]
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            hit = cursor.fetchone()
        if hit is None:   # (no counter row: nothing was written; the portable path starts it again)
            return super()._log(row, update)
        if update is not None and hit[1] != 1:   # (its id was read under the revision lock)
            raise RuntimeError(f"the typed row {update[1]} of {update[0].kind} vanished inside its write")
        return hit[0]

    def _written(self, res: Resource, obj: dict, rv: int, row_id: int | None, text: str) -> None:
        if row_id is not None:   # (the stored text: the database put the revision in for RV_MARK)
            objcache.written(res, obj, row_id, rv, numbered(text, rv))
        super()._written(res, obj, rv, row_id, text)

    def _remove(self, key: Key, row_id: int, obj: dict, moment: datetime) -> None:
        super()._remove(key, row_id, obj, moment)
        objcache.dropped(*key)

    # -----------------------------------------------------------------------------------------
    # What the code around asks

    def one_message_updates(self) -> bool:
        """Can an update go as one multi-statement message? psycopg's client-side binding
        (Django's default); server-side binding allows one statement per message."""
        return not connection.settings_dict["OPTIONS"].get("server_side_binding")

    def confirms_tokens(self) -> bool:
        return self.one_message_updates()

    def fingerprint_sql(self, columns: tuple[str, ...]) -> str:
        return f"md5(ROW({', '.join(columns)})::text)"

    def forget_cache(self, **_) -> None:
        objcache.clear()

    def log_size(self) -> int:
        """The planner's estimate (no scan), while it has one."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = %s", [Revision._meta.db_table])
            row = cursor.fetchone()
        if row is not None and row[0] >= 0:
            return row[0]
        return super().log_size()

    def connection_counts(self) -> tuple[int, int]:
        """Every client's connections (other databases and deployments count against the same
        max_connections); through PgBouncer, its server connections."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FILTER (WHERE backend_type = 'client backend'), "
                           "current_setting('max_connections')::int FROM pg_stat_activity")
            used, most = cursor.fetchone()
        return used, most

    @contextlib.contextmanager
    def one_migration_at_a_time(self, db):
        """An advisory lock around `migrate`, so the migrate init containers of several new pods,
        a compose `migrate` step and an operator's run never migrate the same database at once:
        the others wait, then find nothing left to apply.

        Directly on PostgreSQL a session lock. Through PgBouncer in transaction pooling
        (KUBEDASH_PGBOUNCER) a session lock would stay on whichever server connection took it
        (and the unlock might reach another): there the whole migrate runs in one transaction,
        which holds both its server connection and a transaction-level lock until it ends
        (PostgreSQL's DDL is transactional; each migration is a savepoint inside it)."""
        if settings.KUBEDASH_PGBOUNCER:
            with transaction.atomic(using=db.alias):
                with db.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATE_LOCK])
                yield
            return
        with db.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [MIGRATE_LOCK])
        try:
            yield
        finally:
            if db.connection is not None:   # (a lost connection has released it already)
                with db.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [MIGRATE_LOCK])

    def server_address(self) -> tuple[str, int] | None:
        db = connection.settings_dict
        return (db["HOST"], int(db.get("PORT") or 5432)) if db.get("HOST") else None

    def connection_lost(self, exc: Exception) -> bool:
        """Decided from the error itself, not from the connection afterwards: a write's transaction
        (transaction.atomic) that failed this way has, on its way out, rolled back, dropped the
        dead connection and opened a new one (Django's Atomic.__exit__ restores autocommit), so
        the connection looks fine by the time anyone asks; and psycopg raises the server's
        FATAL message before it has seen the socket close. Lost: an InterfaceError, psycopg's
        own OperationalError (no SQLSTATE: "consuming input failed", "the connection is
        lost"), or the server's SESSION_ENDED / class 08. The connection is then closed here
        (outside a transaction), so the next request opens a new one and never meets a dead one."""
        if not isinstance(exc, (OperationalError, InterfaceError)):
            return False
        state = getattr(exc.__cause__, "sqlstate", None)
        if isinstance(exc, InterfaceError) or state is None or state.startswith("08") or state in SESSION_ENDED:
            if not connection.in_atomic_block:
                connection.close()
            return True
        return self._connection_gone()

    def _connection_gone(self) -> bool:
        raw = connection.connection
        return raw is None or raw.closed or raw.broken   # (psycopg: broken once its connection was lost)

"""The storage the store writes through, shaped like kube-apiserver's storage.Interface
(k8s.io/apiserver/pkg/storage/interfaces.go), and the path both of its backends share.

    get_raw(key)                             one current object, as stored
    create(key, obj)                         a new object; 409 when the name is taken
    guaranteed_update(key, try_update, preconditions)
                                             read the current object, check the preconditions, let
                                             try_update compute what to store from it, store it; as
                                             often as it takes (kube's GuaranteedUpdate)
    delete(key, try_delete, preconditions)   the same for a delete (404 when missing), under the lock

kube's List and Watch read the typed rows and the log through the ORM, alike on both databases:
lists.py, and every process's hub (hub.py) following revlog.read_after. They are not here.

A backend (sqlite.py, postgresql.py; storage.backend() picks a connection's) owns its write
lock, its revision counter's statements, its object cache, whether a write can check a caller's
token in its own statement (TokenCheck), and the answers the code around it asks instead of
testing the vendor. What is here is the portable path, every write in one transaction: take the
lock before the first read (write order is revision order: a watcher reading "revisions after
N" never misses one that commits late), read the current object, compute once, give it the next
revision, log it, write its typed row, and announce the revision once committed.
"""
from __future__ import annotations

import contextlib
import uuid
from datetime import datetime
from typing import Callable, NamedTuple

import django.dispatch
import orjson
from django.db import InterfaceError, OperationalError, connection, transaction

from dashboard.access import clusters

from .. import revlog
from ..errors import already_exists, not_found
from ..models import Revision, RevisionCounter
from ..registry import Resource
from . import rows

ADDED, MODIFIED, DELETED = Revision.ADDED, Revision.MODIFIED, Revision.DELETED

# Sent after commit with rv=<int>; the watch hub's notifier (notify.py) listens to it.
revision_committed = django.dispatch.Signal()


class Key(NamedTuple):
    """One object's place (in the cluster the work is about, access/clusters.py)."""
    res: Resource
    namespace: str
    name: str


class Change(NamedTuple):
    """What a write makes of an object: the object and its revision's event (ADDED creates it,
    MODIFIED rewrites it, DELETED ends it), or None: unchanged, nothing to write (a no-op keeps
    its resourceVersion, as etcd does). A backend returns it as stored, resourceVersion set."""
    obj: dict
    event: str | None


# try_update(current, final) -> Change: the pure part of an update (store.py). current: the
# object read (None: there is none). final: no other try follows, so it may use up the
# request's body. Raises ApiError to refuse.
TryUpdate = Callable[[dict | None, bool], Change]
# preconditions(current): raises ApiError (409) when the current object is not the one meant.
Preconditions = Callable[[dict | None], None]


class TokenCheck:
    """A write on behalf of a caller whose token this request has not checked yet (kube/views.py
    _unconfirmed_write): a backend that confirms_tokens() checks it inside the write's own
    statement (sql, params: a condition and its parameters) and sets confirmed once that
    statement wrote; every other path raises Unconfirmed, having written nothing."""

    __slots__ = ("sql", "params", "confirmed")

    def __init__(self, sql: str, params: list):
        self.sql, self.params, self.confirmed = sql, params, False


class Unconfirmed(Exception):
    """Under a TokenCheck, nothing was written: check the token and serve the request again."""


# The revision's own number inside its stored text, until the database knows it (record()).
# A JSON string never holds an unescaped quote, so RV_FIELD can only be a resourceVersion key
# and its value; with this value, random per process (no client can send it), it is the
# object's own metadata.resourceVersion (log_row sets it just before).
RV_MARK = f"kubedash-rv-{uuid.uuid4().hex}"
RV_FIELD = f'"resourceVersion":"{RV_MARK}"'


def numbered(text: str, rv: int) -> str:
    """A stored text with its revision in place of RV_MARK."""
    return text.replace(RV_FIELD, f'"resourceVersion":"{rv}"')


def log_row(res: Resource, obj: dict, event: str, moment: datetime) -> list:
    """(cluster, kind, namespace, name, type, object text, created, upstream_rv) of obj's next
    revision, in the current cluster: its text with RV_MARK as its resourceVersion."""
    m = obj["metadata"]
    m["resourceVersion"] = RV_MARK   # (the database numbers it: record)
    text = orjson.dumps({"kind": res.kind, "apiVersion": res.api_version, **obj}).decode()
    return [clusters.current(), res.kind, m.get("namespace", ""), m["name"], event, text,
            connection.ops.adapt_datetimefield_value(moment), ""]


def announce(rv: int) -> None:
    """Once the transaction commits: revision_committed (the watch hubs, here and elsewhere)."""
    transaction.on_commit(lambda: revision_committed.send(sender=Revision, rv=rv))


class _RolledBack(Exception):
    """Raised inside a dry run's transaction to roll it back, carrying its answer out."""

    def __init__(self, change: Change):
        self.change = change


class Storage:
    """The portable path; a backend subclass gives the dialect (lock, and record's statements
    where it has better ones) and the answers below the interface."""

    # How the server may run the fast lane's requests on its event loop (server/bridge.py):
    # "inline" as sync code while it need not wait (never_wait, writers_turn_free), "green"
    # each in a greenlet whose round trips the loop awaits, None only on the lane's threads.
    loop_mode: str | None = None
    # data_version() tells when another connection committed (notify.py's follower polls it).
    counts_commits = False

    # -----------------------------------------------------------------------------------------
    # The interface

    def get_raw(self, key: Key) -> tuple[int, str, int] | None:
        """(row id, stored JSON text, revision) of the current object, or None."""
        return rows.load_raw(*key)

    def load(self, key: Key) -> tuple[int | None, dict | None]:
        """(row id, object) of the current object, or (None, None)."""
        hit = self.get_raw(key)
        if hit is None:
            return None, None
        return hit[0], orjson.loads(hit[1])

    def create(self, key: Key, obj: dict, *, moment: datetime, dry_run: bool = False) -> Change:
        """Store a new object (its pure part done: store.py); 409 if the name is taken."""
        def write() -> Change:
            self.lock()
            return self._insert(key, obj, moment)

        return self._transaction(dry_run, write)

    def guaranteed_update(self, key: Key, try_update: TryUpdate, preconditions: Preconditions | None = None, *,
                          moment: datetime, known_rv: str = "", dry_run: bool = False,
                          token_check: TokenCheck | None = None) -> Change:
        """Store what try_update makes of the current object. Here, in one transaction: read it
        under the lock, check preconditions(current), compute once (final), store.

        known_rv: the resourceVersion the request names (a backend with an object cache may
        compute from its copy at that revision instead of reading). token_check: written only
        by a backend that checks it in its own statement (confirms_tokens): this path raises
        Unconfirmed. dry_run: everything but the commit (the revision is handed out again)."""
        if token_check is not None:
            raise Unconfirmed   # (this path writes without checking the token)

        def write() -> Change:
            self.lock()
            row_id, current = self.load(key)
            if preconditions is not None:
                preconditions(current)
            return self._write(key, row_id, try_update(current, final=True), moment)

        return self._transaction(dry_run, write)

    def delete(self, key: Key, try_delete: Callable[[dict], Change], preconditions: Preconditions | None = None, *,
               moment: datetime, dry_run: bool = False) -> Change:
        """End the object, or write what try_delete(current) makes of it (a deletion waiting on
        finalizers is an update, as kube's): always under the lock; 404 when there is none."""
        def write() -> Change:
            self.lock()
            row_id, current = self.load(key)
            if current is None:
                raise not_found(key.res.group, key.res.plural, key.name)
            if preconditions is not None:
                preconditions(current)
            return self._write(key, row_id, try_delete(current), moment)

        return self._transaction(dry_run, write)

    # -----------------------------------------------------------------------------------------
    # Writing, inside the locked transaction

    def lock(self) -> None:
        """Serialize writers from their first read (read-modify-write), not just their first write."""
        raise NotImplementedError

    def _write(self, key: Key, row_id: int | None, change: Change, moment: datetime) -> Change:
        if change.event == MODIFIED:
            self.record(key.res, change.obj, MODIFIED, moment, row_id=row_id)
        elif change.event == ADDED:
            self._insert(key, change.obj, moment)
        elif change.event == DELETED:
            self._remove(key, row_id, change.obj, moment)
        return change

    def _insert(self, key: Key, obj: dict, moment: datetime) -> Change:
        if rows.exists(*key):   # (plain SQL: the ORM's query was a fifth of a create)
            raise already_exists(key.res.group, key.res.plural, key.name)
        rv = self.record(key.res, obj, ADDED, moment)
        rows.insert_row(key.res, key.namespace, key.name, obj, rv)
        return Change(obj, ADDED)

    def _remove(self, key: Key, row_id: int, obj: dict, moment: datetime) -> None:
        self.record(key.res, obj, DELETED, moment)
        rows.delete_row(key.res, row_id)

    def record(self, res: Resource, obj: dict, event: str, moment: datetime, row_id: int | None = None) -> int:
        """Give obj the next revision and log it (in the current cluster); row_id: write its
        typed row too (an update's). Returns the revision, now obj's resourceVersion; the
        commit announces it."""
        row = log_row(res, obj, event, moment)
        rv = self._log(row, None if row_id is None else (res, row_id, obj))
        self._written(res, obj, rv, row_id, row[5])
        return rv

    def _log(self, row: list, update: tuple | None) -> int:
        """Number and log a log_row; update: (res, row id, object) of the typed row to write
        too. Portable: the counter, the log row and the typed row, one statement each."""
        rv = self.next_revision()
        rows.log_revision([rv, *row[:5], numbered(row[5], rv), *row[6:]])
        if update is not None:
            rows.update_row(*update, rv)
        return rv

    def _written(self, res: Resource, obj: dict, rv: int, row_id: int | None, text: str) -> None:
        """obj is stored at rv (text: as logged, RV_MARK still in it)."""
        obj["metadata"]["resourceVersion"] = str(rv)
        announce(rv)

    def next_revision(self) -> int:
        with connection.cursor() as cursor:
            cursor.execute("UPDATE kube_revision_counter SET value = value + 1 WHERE id = 1 RETURNING value")
            row = cursor.fetchone()
        if row is None:  # the singleton row is gone (a flushed test database): start again after the log
            last = revlog.last_logged()
            RevisionCounter.objects.create(pk=1, value=last + 1)
            return last + 1
        return row[0]

    def next_revisions(self, n: int) -> int:
        """Hand out n consecutive revisions; returns the first."""
        with connection.cursor() as cursor:
            cursor.execute("UPDATE kube_revision_counter SET value = value + %s WHERE id = 1 RETURNING value", [n])
            row = cursor.fetchone()
        if row is None:   # (no counter row: next_revision starts it again)
            first = self.next_revision()
            with connection.cursor() as cursor:
                cursor.execute("UPDATE kube_revision_counter SET value = value + %s WHERE id = 1", [n - 1])
            return first
        return row[0] - n + 1

    @staticmethod
    def _transaction(dry_run: bool, write: Callable[[], Change]) -> Change:
        """write() in one transaction; a dry run's is rolled back, its answer kept."""
        if not dry_run:
            with transaction.atomic():
                return write()
        try:
            with transaction.atomic():
                raise _RolledBack(write())
        except _RolledBack as done:
            return done.change

    # -----------------------------------------------------------------------------------------
    # What the code around asks of the database (never its vendor)

    def confirms_tokens(self) -> bool:
        """Can an update check a TokenCheck in its own statement (kube/views.py _unconfirmed_write)?"""
        return False

    def fingerprint_sql(self, columns: tuple[str, ...]) -> str | None:
        """The SQL hashing a token row's columns into the fingerprint a TokenCheck compares
        (access/authentication.py, given it at start-up); None: tokens are checked first."""
        return None

    def forget_cache(self, **_) -> None:
        """Drop what this process remembers of stored objects (post_migrate: a flushed or
        restored database hands out old revision numbers again)."""

    def data_version(self) -> int:
        """(counts_commits) How many commits other connections made to the database."""
        raise NotImplementedError

    def log_size(self) -> int:
        """Rows in the revision log (/metrics)."""
        return revlog.logged_count()

    def connection_counts(self) -> tuple[int, int] | None:
        """(client connections the database server has open, its max_connections), or None (a file)."""
        return None

    def one_migration_at_a_time(self, db) -> contextlib.AbstractContextManager:
        """Around `migrate` on db (server/management/commands/migrate.py)."""
        return contextlib.nullcontext()

    def server_address(self) -> tuple[str, int] | None:
        """(host, port) of a database server reached over the network, or None (a file)."""
        return None

    def connection_lost(self, exc: Exception) -> bool:
        """Did the request's database connection break (not the request's fault: worth a retry)?"""
        return isinstance(exc, (OperationalError, InterfaceError)) and self._connection_gone()

    def _connection_gone(self) -> bool:
        return connection.connection is None

    def would_wait(self, exc: Exception) -> bool:
        """Is exc a refusal to wait for another writer (a never-waiting connection, nothing written)?"""
        return False

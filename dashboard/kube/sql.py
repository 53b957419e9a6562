"""The statements every write runs, as plain SQL built once per kind.

The write path runs on every renew: its statements are plain SQL (the ORM's query building
was a third of a renewal's CPU). Values go through each field's own get_db_prep_save, so
SQLite and PostgreSQL get what the ORM would send. store.py (one object per transaction) and
mirror.py (a followed cluster's batches) write through these; every other read of the log is
in revlog.py. `load` joins the typed row to its current revision: that is how a current
object is read, inside the write transaction too.
"""
from __future__ import annotations

import contextvars
import functools
import uuid

import orjson
from django.db import connection

from dashboard.access import clusters

from . import meta as kmeta
from . import objcache, revlog
from .models import RevisionCounter
from .registry import Resource

INSERT_REVISION_HEAD = ("INSERT INTO kube_revision (rv, cluster, kind, namespace, name, type, object, created, "
                        "upstream_rv) VALUES ")
INSERT_REVISION = INSERT_REVISION_HEAD + "(%s, %s, %s, %s, %s, %s, %s, %s, %s)"


class TokenCheck:
    """A write on behalf of a caller not yet checked in this request (kube/views.py serve_direct,
    access/authentication.py recent_principal): the one-statement update checks the token
    itself (sql, params: appended to its condition); any other write path refuses."""

    __slots__ = ("sql", "params", "confirmed")

    def __init__(self, sql: str, params: list):
        self.sql, self.params, self.confirmed = sql, params, False


class Unconfirmed(Exception):
    """Under a TokenCheck, nothing was written: check the token and serve the request again."""


unconfirmed_token: contextvars.ContextVar[TokenCheck | None] = contextvars.ContextVar("unconfirmed_token", default=None)


def lock() -> None:
    """Serialize writers from their first read (read-modify-write), not just their first write."""
    if unconfirmed_token.get() is not None:
        raise Unconfirmed   # (the locked path writes without checking the token)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(7411)")
    # SQLite: BEGIN IMMEDIATE (settings) already holds the write lock.


def next_revision() -> int:
    with connection.cursor() as cursor:
        cursor.execute("UPDATE kube_revision_counter SET value = value + 1 WHERE id = 1 RETURNING value")
        row = cursor.fetchone()
    if row is None:  # the singleton row is gone (a flushed test database): start again after the log
        last = revlog.last_logged()
        RevisionCounter.objects.create(pk=1, value=last + 1)
        return last + 1
    return row[0]


def next_revisions(n: int) -> int:
    """Hand out n consecutive revisions; returns the first."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE kube_revision_counter SET value = value + %s WHERE id = 1 RETURNING value", [n])
        row = cursor.fetchone()
    if row is None:   # (no counter row: next_revision starts it again)
        first = next_revision()
        with connection.cursor() as cursor:
            cursor.execute("UPDATE kube_revision_counter SET value = value + %s WHERE id = 1", [n - 1])
        return first
    return row[0] - n + 1


@functools.cache
def statements(model) -> dict:
    table = model._meta.db_table
    fields = [f for f in model._meta.concrete_fields if f.name not in ("id", "cluster", "namespace", "name")]
    insert_head = f"INSERT INTO {table} (cluster, namespace, name, " + ", ".join(f.column for f in fields) + ") VALUES "
    return {
        # (cluster last: callers pass namespace and name, then clusters.current())
        "load": (f"SELECT t.id, r.object, r.rv FROM {table} t JOIN kube_revision r ON r.rv = t.resource_version "
                 "WHERE t.namespace = %s AND t.name = %s AND t.cluster = %s"),
        "exists": f"SELECT 1 FROM {table} WHERE namespace = %s AND name = %s AND cluster = %s",
        "update": f"UPDATE {table} SET " + ", ".join(f"{f.column} = %s" for f in fields) + " WHERE id = %s",
        "insert": insert_head + "(" + ", ".join(["%s"] * (len(fields) + 3)) + ") RETURNING id",
        "insert_head": insert_head,   # mirror's multi-row form: one (%s, ...) per row after it
        "delete": f"DELETE FROM {table} WHERE id = %s",
        "fields": fields,
        # PostgreSQL, an update: counter, revision row and typed row in one statement (record()).
        "record_update": (f"{RECORD_HEAD}, r AS ({RECORD_INSERT} RETURNING rv), u AS (UPDATE {table} SET "
                          + ", ".join(f"{f.column} = r.rv" if f.attname == "current_id" else f"{f.column} = %s"
                                      for f in fields)
                          + f" FROM r WHERE {table}.id = %s RETURNING 1) SELECT r.rv, (SELECT count(*) FROM u) FROM r"),
    }


def one_message_writes() -> bool:
    """Can an update go as one multi-statement query (conditional_update)? PostgreSQL with
    psycopg's client-side binding (Django's default): server-side binding allows one statement."""
    return connection.vendor == "postgresql" and not connection.settings_dict["OPTIONS"].get("server_side_binding")


@functools.cache
def conditional_update(model, token_check: str = "") -> str:
    """PostgreSQL, an update computed outside the revision lock (store._run): one simple-query
    string, so one round trip and one implicit transaction (it commits at its end). It takes the
    lock, then writes only if the typed row still holds the revision the object was read at
    (params: row id, that revision, then record_update's); else it writes nothing and answers
    no row. The second statement's snapshot is taken after the lock is held: it sees every
    write that committed before (a writer lets go of the lock only once it committed).
    token_check: a TokenCheck's condition, after them (its params after the revision)."""
    table = model._meta.db_table
    column = next(f.column for f in statements(model)["fields"] if f.attname == "current_id")
    head = RECORD_HEAD.replace(" WHERE id = 1 ", f" WHERE id = 1 AND EXISTS (SELECT 1 FROM {table} "
                               f"WHERE id = %s AND {column} = %s) " + (f"AND {token_check} " if token_check else ""))
    return "SELECT pg_advisory_xact_lock(7411); " + statements(model)["record_update"].replace(RECORD_HEAD, head, 1)


def load_raw(res: Resource, namespace: str, name: str) -> tuple[int, str, int] | None:
    """(row id, stored JSON text, revision) of the current object in the current cluster, or
    None. Remembered for the next update (objcache)."""
    with connection.cursor() as cursor:
        cursor.execute(statements(res.model)["load"], [namespace, name, clusters.current()])
        hit = cursor.fetchone()
    if hit is not None:
        objcache.read(res, namespace, name, *hit)
    return hit


def exists(res: Resource, namespace: str, name: str) -> bool:
    """Is there a current object of that name (in the current cluster)? (A create's 409 check.)"""
    with connection.cursor() as cursor:
        cursor.execute(statements(res.model)["exists"], [namespace, name, clusters.current()])
        return cursor.fetchone() is not None


def load(res: Resource, namespace: str, name: str):
    """(row id, object dict) of the current object, or (None, None)."""
    hit = load_raw(res, namespace, name)
    if hit is None:
        return None, None
    return hit[0], orjson.loads(hit[1])


def log_revision(row: list) -> None:
    """One revision row: (rv, cluster, kind, namespace, name, type, object text, created, upstream_rv)."""
    with connection.cursor() as cursor:
        cursor.execute(INSERT_REVISION, row)


# The revision's own number inside its stored text, until the database knows it (record()).
# A JSON string never holds an unescaped quote, so RV_FIELD can only be a resourceVersion key
# and its value; with this value, random per process (no client can send it), it is the
# object's own metadata.resourceVersion (store._record sets it just before).
RV_MARK = f"kubedash-rv-{uuid.uuid4().hex}"
RV_FIELD = f'"resourceVersion":"{RV_MARK}"'

# PostgreSQL: bump the counter and append the revision row in one statement (one round trip
# fewer inside the revision lock's critical section, store.py).
RECORD_HEAD = "WITH c AS (UPDATE kube_revision_counter SET value = value + 1 WHERE id = 1 RETURNING value)"
RECORD_INSERT = (INSERT_REVISION_HEAD.replace(" VALUES ", " ")
                 + "SELECT c.value, %s, %s, %s, %s, %s, replace(%s, %s, %s || c.value || '\"'), %s, %s FROM c")
RECORD = f"{RECORD_HEAD} {RECORD_INSERT} RETURNING rv"


def record(row: list, update: tuple | None = None, expect: int | None = None) -> int | None:
    """Give a revision its number and log it: row is (cluster, kind, namespace, name, type, object
    text with RV_MARK as its resourceVersion, created, upstream_rv); returns the revision.
    update: (res, row id, object) to write the object's typed row too (an update's).
    expect (PostgreSQL, an update, outside any transaction): the revision the object was read
    at; the write takes the lock and commits in one round trip (conditional_update), and
    returns None, having written nothing, if the object has changed since (under a TokenCheck:
    raises Unconfirmed, if the object or the token has)."""
    if connection.vendor == "postgresql":
        params = [*row[:5], row[5], RV_FIELD, '"resourceVersion":"', *row[6:]]
        statement, check = RECORD, None
        if update is not None:
            res, row_id, obj = update
            statement = statements(res.model)["record_update"]
            values = dict(zip((f.attname for f in statements(res.model)["fields"]), row_params(res, obj, 0)))
            del values["current_id"]   # (the statement sets it to the new revision)
            params += [*values.values(), row_id]
            if expect is not None:
                check = unconfirmed_token.get()
                statement = conditional_update(res.model, check.sql if check else "")
                params = [row_id, expect, *(check.params if check else ()), *params]
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            if expect is not None:
                cursor.nextset()   # (the lock's result)
            hit = cursor.fetchone()
        if expect is not None:
            if check is not None:
                if hit is None:
                    raise Unconfirmed   # (the token, or the object, has changed: no retry under it)
                check.confirmed = True
            return hit[0] if hit is not None else None
        if hit is not None:
            if update is not None and hit[1] != 1:   # (its id was read under the revision lock)
                raise RuntimeError(f"the typed row {update[1]} of {update[0].kind} vanished inside its write")
            return hit[0]
        # (no counter row: nothing was written; next_revision starts it again)
    rv = next_revision()
    log_revision([rv, *row[:5], row[5].replace(RV_FIELD, f'"resourceVersion":"{rv}"'), *row[6:]])
    if update is not None:
        update_row(update[0], update[1], update[2], rv)
    return rv


def _row_fields(res: Resource, obj: dict, rv: int) -> dict:
    m = obj["metadata"]
    fields = {
        "uid": m["uid"],
        "current_id": rv,
        "generation": m.get("generation"),
        "creation_timestamp": kmeta.parse_time(m.get("creationTimestamp")),
        "deletion_timestamp": kmeta.parse_time(m.get("deletionTimestamp")),
        "labels": m.get("labels") or {},
    }
    fields.update(res.typed_columns(obj))
    return fields


def row_params(res: Resource, obj: dict, rv: int) -> list:
    """The typed row's column values (after cluster, namespace, name), as the ORM would send them."""
    values = _row_fields(res, obj, rv)
    return [f.get_db_prep_save(values[f.attname], connection) for f in statements(res.model)["fields"]]


def insert_row(res: Resource, namespace: str, name: str, obj: dict, rv: int) -> int:
    """The typed row of a new object (in the current cluster); returns its id."""
    with connection.cursor() as cursor:
        cursor.execute(statements(res.model)["insert"],
                       [clusters.current(), namespace, name, *row_params(res, obj, rv)])
        return cursor.fetchone()[0]


def update_row(res: Resource, row_id: int, obj: dict, rv: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statements(res.model)["update"], row_params(res, obj, rv) + [row_id])


def delete_row(res: Resource, row_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statements(res.model)["delete"], [row_id])


def insert_many(head: str, rows: list[tuple], per_statement: int = 100) -> None:
    """INSERT rows with one statement per `per_statement` of them (multi-row VALUES)."""
    if not rows:
        return
    marks = "(" + ", ".join(["%s"] * len(rows[0])) + ")"
    with connection.cursor() as cursor:
        for i in range(0, len(rows), per_statement):
            chunk = rows[i:i + per_statement]
            cursor.execute(head + ", ".join([marks] * len(chunk)), [v for row in chunk for v in row])


def rows_and_upstream(res: Resource, names: list[str]) -> list[tuple[str, str, int, str]]:
    """(namespace, name, row id, upstream resourceVersion) of the current cluster's stored
    objects of res with these names: one query for a whole mirror batch of a kind."""
    sql = (f"SELECT t.namespace, t.name, t.id, r.upstream_rv FROM {res.model._meta.db_table} t "
           "JOIN kube_revision r ON r.rv = t.resource_version WHERE t.cluster = %s AND t.name IN ("
           + ", ".join(["%s"] * len(names)) + ")")
    with connection.cursor() as cursor:
        cursor.execute(sql, [clusters.current(), *names])
        return cursor.fetchall()

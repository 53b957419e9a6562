"""The statements both databases run alike: the typed rows and plain log rows, as plain SQL built once per kind.

The write path runs on every renew: its statements are plain SQL (the ORM's query building
was a third of a renewal's CPU). Values go through each field's own get_db_prep_save, so
SQLite and PostgreSQL get what the ORM would send. The backends (interface.py and the two
dialects) and mirror.py (a followed cluster's batches) write through these. `load` joins the
typed row to its current revision: that is how a current object is read, inside the write
transaction too (the write path's own read of the log; every other read is in revlog.py).
"""
from __future__ import annotations

import functools

from django.db import connection

from dashboard.access import clusters

from .. import meta as kmeta
from ..registry import Resource

LOG_COLUMNS = "rv, cluster, kind, namespace, name, type, object, created, upstream_rv"
INSERT_REVISION_HEAD = f"INSERT INTO kube_revision ({LOG_COLUMNS}) VALUES "   # mirror's multi-row form
INSERT_REVISION = INSERT_REVISION_HEAD + "(%s, %s, %s, %s, %s, %s, %s, %s, %s)"


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
    }


def load_raw(res: Resource, namespace: str, name: str) -> tuple[int, str, int] | None:
    """(row id, stored JSON text, revision) of the current object in the current cluster, or None."""
    with connection.cursor() as cursor:
        cursor.execute(statements(res.model)["load"], [namespace, name, clusters.current()])
        return cursor.fetchone()


def exists(res: Resource, namespace: str, name: str) -> bool:
    """Is there a current object of that name (in the current cluster)? (A create's 409 check.)"""
    with connection.cursor() as cursor:
        cursor.execute(statements(res.model)["exists"], [namespace, name, clusters.current()])
        return cursor.fetchone() is not None


def log_revision(row: list) -> None:
    """One revision row: (rv, cluster, kind, namespace, name, type, object text, created, upstream_rv)."""
    with connection.cursor() as cursor:
        cursor.execute(INSERT_REVISION, row)


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

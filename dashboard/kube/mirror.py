"""A followed cluster's copy (dashboard/follow): objects as read upstream, stored verbatim.

The follower's only way in: store.py refuses client writes outside the local cluster. Each
batch is one transaction under the storage's write lock (storage/), logged in the same revision
log, so watches, lists and continue tokens through /clusters/<name>/ work on kubedash's revisions.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

import orjson
from django.db import connection, transaction

from dashboard.access import clusters

from . import meta as kmeta
from . import revlog, storage
from .models import Revision
from .registry import Resource, all_resources
from .storage import Key, rows


@dataclass
class Mirrored:
    """One upstream change: the object as the cluster served it (None: deleted)."""

    res: Resource
    namespace: str
    name: str
    obj: dict | None
    # A watch event: not applied over a newer upstream version already stored (a dashboard
    # write mirrored its answer first, follow/writes.py). upstream_rv: a deletion's revision.
    newer_only: bool = False
    upstream_rv: str = ""


def _older(change: str, stored: str | None) -> bool:
    """change is an older upstream resourceVersion than stored. They are opaque to clients, but
    kube's and kubedash's are increasing integers; anything else is never judged older."""
    return bool(stored) and change.isdigit() and stored.isdigit() and int(change) < int(stored)


def mirror(cluster: str, changes: list[Mirrored], still_followed: Callable[[], bool] | None = None) -> int:
    """Apply upstream changes to cluster's copy in one transaction; returns the revisions written.

    The object is kept as served (uid, generation, managedFields...), with kubedash's revision
    as its resourceVersion and the upstream one kept beside it (Revision.upstream_rv), so
    watches and continue tokens through /clusters/<name>/ work on kubedash's log. A change
    that repeats what is stored (same upstream resourceVersion) writes nothing.
    still_followed() is asked once the write lock is held: False (the cluster was removed, and
    forget() ran or will run after this) writes nothing, so no object outlives its cluster.

    A batch is written in a few statements, not a few per object: its revisions are numbered
    as one block, logged with multi-row INSERTs, and each key's typed row is written once, as
    the batch leaves it (a relist of thousands of objects; a burst of watch events).
    """
    moment = kmeta.now()
    db = storage.backend()
    with clusters.within(cluster), transaction.atomic():
        db.lock()
        if still_followed is not None and not still_followed():
            return 0
        held = _held(changes)
        upstream = {key: urv for key, (_, urv) in held.items()}   # key -> upstream rv, None: absent
        latest: dict[tuple, tuple[Resource, dict | None]] = {}       # key -> the object the batch leaves
        entries: list[tuple[Resource, tuple, str, dict | None, str]] = []
        for ch in changes:
            key = (ch.res.kind, ch.namespace, ch.name)
            present = upstream.get(key) is not None
            if ch.obj is None:
                if present and ch.newer_only and _older(ch.upstream_rv, upstream[key]):
                    continue
                if present:
                    # (None: stored before this batch, read below)
                    entries.append((ch.res, key, Revision.DELETED, latest.get(key, (None, None))[1], ""))
                    upstream[key], latest[key] = None, (ch.res, None)
                continue
            new_upstream_rv = str(ch.obj["metadata"].get("resourceVersion", ""))
            if present and (upstream[key] == new_upstream_rv
                            or ch.newer_only and _older(new_upstream_rv, upstream[key])):
                continue
            obj = copy.deepcopy(ch.obj)
            obj["apiVersion"], obj["kind"] = ch.res.api_version, ch.res.kind
            entries.append((ch.res, key, Revision.MODIFIED if present else Revision.ADDED, obj, new_upstream_rv))
            upstream[key], latest[key] = new_upstream_rv, (ch.res, obj)
        if not entries:
            return 0
        first = db.next_revisions(len(entries))
        created = connection.ops.adapt_datetimefield_value(moment)
        logged, last_rv = [], {}
        for rv, (res, key, event, obj, upstream_rv) in enumerate(entries, start=first):
            if obj is None:
                obj = db.load(Key(res, key[1], key[2]))[1]
            obj["metadata"]["resourceVersion"] = str(rv)
            text = orjson.dumps({"kind": res.kind, "apiVersion": res.api_version, **obj}).decode()
            logged.append((rv, cluster, res.kind, key[1], key[2], event, text, created, upstream_rv))
            last_rv[key] = rv
        rows.insert_many(rows.INSERT_REVISION_HEAD, logged)
        _write_rows(cluster, held, latest, last_rv)
        storage.announce(first + len(entries) - 1)
        return len(entries)


def _write_rows(cluster: str, held: dict, latest: dict, last_rv: dict) -> None:
    """Each changed key's typed row as the batch leaves it: inserted, updated or deleted, once."""
    inserts: dict[str, tuple[Resource, list]] = {}   # kind -> (resource, rows)
    for key, (res, obj) in latest.items():
        row_id = held[key][0] if key in held else None
        if obj is None:
            if row_id is not None:
                rows.delete_row(res, row_id)
            continue
        if row_id is None:
            inserts.setdefault(res.kind, (res, []))[1].append(
                (cluster, key[1], key[2], *rows.row_params(res, obj, last_rv[key])))
        else:
            rows.update_row(res, row_id, obj, last_rv[key])
    for res, new_rows in inserts.values():
        rows.insert_many(rows.statements(res.model)["insert_head"], new_rows)


def _held(changes: list[Mirrored]) -> dict[tuple[str, str, str], tuple[int, str]]:
    """(kind, namespace, name) -> (row id, upstream resourceVersion) of the stored objects the
    changes name: one query per kind for the whole batch."""
    by_kind: dict[str, tuple[Resource, set[str]]] = {}
    for ch in changes:
        by_kind.setdefault(ch.res.kind, (ch.res, set()))[1].add(ch.name)
    out = {}
    for res, names in by_kind.values():
        for ns, name, row_id, upstream_rv in rows.rows_and_upstream(res, list(names)):
            out[(res.kind, ns, name)] = (row_id, upstream_rv)
    return out


def upstream_rv(cluster: str, res: Resource, namespace: str, name: str) -> str:
    """The upstream resourceVersion of the stored copy of one object ("" when not held)."""
    with clusters.within(cluster):
        for ns, _name, _row, urv in rows.rows_and_upstream(res, [name]):
            if ns == namespace:
                return urv or ""
    return ""


def mirrored_keys(cluster: str, res: Resource, namespace: str | None = None,
                  only: dict | None = None) -> dict[tuple[str, str], str]:
    """(namespace, name) -> upstream resourceVersion of every object held for cluster (a relist
    compares it with what upstream listed); `only`: a filter on the typed columns (the part of
    the kind a field-selected reflector lists: Resource.follow_selectors)."""
    with clusters.within(cluster):
        held = res.model.objects.filter(**(only or {}))
        if namespace:
            held = held.filter(namespace=namespace)
        keyed = revlog.with_current(held, "namespace", "name", logged="upstream_rv")
        return {(ns, name): urv for ns, name, urv in keyed}


def forget(cluster: str) -> int:
    """Delete every object held for a followed cluster (it is no longer followed): each a
    DELETED revision, so its watchers and pages see them go."""
    removed = 0
    for res in all_resources():
        with clusters.within(cluster):
            keys = list(res.model.objects.values_list("namespace", "name"))
        for i in range(0, len(keys), 500):
            removed += mirror(cluster, [Mirrored(res, ns, name, None) for ns, name in keys[i:i + 500]])
    return removed

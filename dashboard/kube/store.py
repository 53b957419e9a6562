"""The only code that changes stored objects, and the consistent reads that go with it.

Every write runs in one transaction: take the revision lock, read the current object, apply
the kind's strategy (defaults, validation), insert the revision row, upsert the typed row,
commit, then announce the revision (transaction.on_commit). Write order is revision order:
the first statement of a write is the counter increment, which on PostgreSQL row-locks the
counter until commit, and SQLite's BEGIN IMMEDIATE (settings) locks the database at BEGIN.
A watcher reading "revisions after N" therefore never misses a revision that commits late.

Reads at a revision N (lists, continue tokens) use the typed tables for keys untouched since N
and the revision log for the few keys written after N.
"""
from __future__ import annotations

import base64
import copy
import functools
from dataclasses import dataclass
from typing import Callable, Iterator

import django.dispatch
import orjson
from django.db import connection, transaction
from django.db.models import Q

from dashboard.access import clusters

from . import managed_fields as mf
from . import meta as kmeta
from . import revlog, schema
from .errors import (STALE_OBJECT, ApiError, already_exists, bad_request, conflict, gone,
                     invalid, invalid_object, not_found)
from .models import CompactionState, Revision, RevisionCounter
from .registry import Resource
from .selectors import field_getter

# Sent after commit with rv=<int>; the watch hub (and anything else) listens to it.
revision_committed = django.dispatch.Signal()

_dumps = orjson.dumps


# ---------------------------------------------------------------------------------------------
# Helpers


def _next_revision() -> int:
    with connection.cursor() as cursor:
        cursor.execute("UPDATE kube_revision_counter SET value = value + 1 WHERE id = 1 RETURNING value")
        row = cursor.fetchone()
    if row is None:  # the singleton row is gone (a flushed test database): start again after the log
        last = revlog.last_logged()
        RevisionCounter.objects.create(pk=1, value=last + 1)
        return last + 1
    return row[0]


def _lock() -> None:
    """Serialize writers from their first read (read-modify-write), not just their first write."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(7411)")
    # SQLite: BEGIN IMMEDIATE (settings) already holds the write lock.


def current_revision() -> int:
    return RevisionCounter.objects.filter(pk=1).values_list("value", flat=True).first() or 0


def compacted_revision() -> int:
    return CompactionState.objects.filter(pk=1).values_list("compacted_rv", flat=True).first() or 0


def _announce(rv: int) -> None:
    transaction.on_commit(lambda: revision_committed.send(sender=Revision, rv=rv))


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


# The write path runs on every renew: its three statements are plain SQL built once per kind
# (the ORM's query building was a third of a renewal's CPU). Values go through each field's
# own get_db_prep_save, so SQLite and PostgreSQL get what the ORM would send.
# "load" (like _page_at's current__object) joins the typed row to its current revision: that is
# how a current object is read, inside the write transaction too, so it stays here; history and
# snapshots of the log are read through revlog.py.
_INSERT_REVISION = ("INSERT INTO kube_revision (rv, cluster, kind, namespace, name, type, object, created, upstream_rv) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)")


@functools.cache
def _sql(model) -> dict:
    table = model._meta.db_table
    fields = [f for f in model._meta.concrete_fields if f.name not in ("id", "cluster", "namespace", "name")]
    insert_head = f"INSERT INTO {table} (cluster, namespace, name, " + ", ".join(f.column for f in fields) + ") VALUES "
    return {
        # (cluster last: callers pass namespace and name, then clusters.current())
        "load": (f"SELECT t.id, r.object FROM {table} t JOIN kube_revision r ON r.rv = t.resource_version "
                 "WHERE t.namespace = %s AND t.name = %s AND t.cluster = %s"),
        "update": f"UPDATE {table} SET " + ", ".join(f"{f.column} = %s" for f in fields) + " WHERE id = %s",
        "insert": insert_head + "(" + ", ".join(["%s"] * (len(fields) + 3)) + ") RETURNING id",
        "insert_head": insert_head,   # mirror()'s multi-row form: one (%s, ...) per row after it
        "delete": f"DELETE FROM {table} WHERE id = %s",
        "fields": fields,
    }


def _record(res: Resource, obj: dict, event: str, moment, upstream_rv: str = "") -> int:
    """Give obj the next revision and append it to the log (in the current cluster); returns
    the revision. upstream_rv: a followed object's resourceVersion in its own cluster."""
    rv = _next_revision()
    obj["metadata"]["resourceVersion"] = str(rv)
    m = obj["metadata"]
    text = _dumps({"kind": res.kind, "apiVersion": res.api_version, **obj}).decode()
    with connection.cursor() as cursor:
        cursor.execute(_INSERT_REVISION, [rv, clusters.current(), res.kind, m.get("namespace", ""), m["name"], event,
                                          text, connection.ops.adapt_datetimefield_value(moment), upstream_rv])
    _announce(rv)
    return rv


def _row_params(res: Resource, obj: dict, rv: int) -> list:
    """The typed row's column values (after cluster, namespace, name), as the ORM would send them."""
    values = _row_fields(res, obj, rv)
    return [f.get_db_prep_save(values[f.attname], connection) for f in _sql(res.model)["fields"]]


def _insert_row(res: Resource, namespace: str, name: str, obj: dict, rv: int) -> int:
    """The typed row of a new object (in the current cluster); returns its id."""
    with connection.cursor() as cursor:
        cursor.execute(_sql(res.model)["insert"], [clusters.current(), namespace, name, *_row_params(res, obj, rv)])
        return cursor.fetchone()[0]


def _update_row(res: Resource, row_id: int, obj: dict, rv: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_sql(res.model)["update"], _row_params(res, obj, rv) + [row_id])


def _validate(res: Resource, obj: dict, causes: list) -> None:
    if causes:
        raise invalid_object(res.group, res.kind, obj["metadata"].get("name", ""), causes)


def _meta_causes(obj: dict) -> list:
    from . import validation
    return validation.validate_object_meta(obj.get("metadata") or {}, namespaced=True)


def _meta_update_causes(new: dict, old: dict) -> list:
    from . import validation
    return validation.validate_object_meta_update(new["metadata"], old["metadata"])


@dataclass
class Result:
    object: dict
    created: bool = False
    deleted: bool = False      # gone from storage (False: still there, e.g. waiting on finalizers)
    changed: bool = True


class DryRun(Exception):
    """Raised inside a write transaction to roll it back while keeping the answer."""

    def __init__(self, result):
        self.result = result


def _run(dry_run: bool, work: Callable[[], Result]) -> Result:
    if not clusters.is_local():
        # A followed cluster is written only by its follower (mirror below), never by a client.
        raise ApiError(405, "MethodNotAllowed",
                       f"cluster {clusters.current()!r} is followed read-only: change it in the cluster itself")
    if not dry_run:
        with transaction.atomic():
            return work()
    try:
        with transaction.atomic():
            raise DryRun(work())
    except DryRun as done:
        return done.result


def _load(res: Resource, namespace: str, name: str):
    """(row id, object dict) of the current object, or (None, None)."""
    with connection.cursor() as cursor:
        cursor.execute(_sql(res.model)["load"], [namespace, name, clusters.current()])
        hit = cursor.fetchone()
    if hit is None:
        return None, None
    return hit[0], orjson.loads(hit[1])


# ---------------------------------------------------------------------------------------------
# Reads


def get_raw(res: Resource, namespace: str, name: str) -> bytes:
    """The stored JSON of one object, as served (no decode, no re-encode)."""
    with connection.cursor() as cursor:
        cursor.execute(_sql(res.model)["load"], [namespace, name, clusters.current()])
        hit = cursor.fetchone()
    if hit is None:
        raise not_found(res.group, res.plural, name)
    return hit[1].encode()


def get(res: Resource, namespace: str, name: str) -> dict:
    return orjson.loads(get_raw(res, namespace, name))


@dataclass
class ListPage:
    items: list[bytes]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


@dataclass
class ListQuery:
    namespace: str | None = None
    label_selector: object = None          # selectors.LabelSelector or None
    field_selector: object = None          # selectors.FieldSelector or None
    limit: int | None = None
    continue_token: str = ""
    resource_version: int | None = None
    resource_version_match: str = ""
    names: tuple[str, ...] = ()            # from fieldSelector metadata.name=X (pushdown)


def encode_continue(rv: int, namespace: str, name: str) -> str:
    raw = _dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": [namespace, name]})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str, str]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = orjson.loads(base64.urlsafe_b64decode(padded.encode()))
        rv, (ns, name) = int(data["rv"]), data["start"]
        if data.get("v") != "meta.k8s.io/v1" or rv < 0 or not isinstance(ns, str) or not isinstance(name, str):
            raise ValueError
        return rv, ns, name
    except Exception:
        raise bad_request("continue key is not valid: the continue token is malformed or was not issued by this server")


def _snapshot_revision(q: ListQuery) -> tuple[int, bool]:
    """The revision a list reads at, and whether it must be exactly that revision."""
    current = current_revision()
    if q.continue_token:
        rv, _, _ = decode_continue(q.continue_token)
        return rv, True
    if q.resource_version is None or q.resource_version == 0:
        return current, False
    # Legacy: limit + resourceVersion without resourceVersionMatch lists at exactly that revision.
    if q.resource_version_match == "Exact" or (q.limit and not q.resource_version_match):
        if q.resource_version > current:
            raise ApiError(504, "Timeout", f"Too large resource version: {q.resource_version}, current: {current}",
                           {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                            "retryAfterSeconds": 1})
        return q.resource_version, True
    if q.resource_version > current:
        raise ApiError(504, "Timeout", f"Too large resource version: {q.resource_version}, current: {current}",
                       {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                        "retryAfterSeconds": 1})
    return current, False


def _history_at(res: Resource, rv: int, namespace: str | None) -> dict[tuple[str, str], str | None]:
    """For keys written after rv: their object text at rv (None if absent then)."""
    out: dict[tuple[str, str], str | None] = {}
    for ns, name in revlog.keys_written_after(res.kind, rv, namespace):
        out[(ns, name)] = revlog.text_as_of(res.kind, ns, name, rv)
    return out


def _matches(res: Resource, q: ListQuery, labels: dict | None, text: str | None, obj: dict | None) -> bool:
    if q.label_selector is not None and not q.label_selector.empty:
        if labels is None:
            obj = obj or orjson.loads(text)
            labels = obj.get("metadata", {}).get("labels") or {}
        if not q.label_selector.matches(labels):
            return False
    if q.field_selector is not None and not q.field_selector.empty:
        obj = obj or orjson.loads(text)
        if not q.field_selector.matches(field_getter(obj, res.field_getters)):
            return False
    return True


_NEWEST = 2 ** 62   # above any revision


def list_objects(res: Resource, q: ListQuery) -> ListPage:
    snapshot, exact = _snapshot_revision(q)
    start = decode_continue(q.continue_token)[1:] if q.continue_token else None
    if exact:
        compacted = compacted_revision()
        if snapshot < compacted:
            if q.continue_token:
                fresh = encode_continue(current_revision(), *start)
                raise _expired_continue(fresh)
            raise gone("The resourceVersion for the provided list is too old.")
    if not exact:
        # "The most recent" state: any recent snapshot will do. When writes land while the rows
        # are read, take a newer snapshot and read again, rather than rebuild the old one from
        # the log key by key (a follower's batch of thousands of objects made that seconds).
        for _ in range(3):
            page = _page_at(res, q, snapshot, start, {})
            if not revlog.changed_between([res.kind], snapshot, _NEWEST, q.namespace or ""):
                return page
            snapshot = current_revision()
    # Keys written after the snapshot come from the log; the rest from the typed table. A write
    # that lands while the rows are read (another process) changes the set of such keys: then
    # read again, so the page is exactly the snapshot.
    for _ in range(5):
        overrides = _history_at(res, snapshot, q.namespace)
        page = _page_at(res, q, snapshot, start, overrides)
        if revlog.keys_written_after(res.kind, snapshot, q.namespace) == set(overrides):
            break
    return page


def _page_at(res: Resource, q: ListQuery, snapshot: int, start, overrides: dict) -> ListPage:
    from .selectors import label_selector_q

    rows = res.model.objects.all()
    if q.namespace is not None:
        rows = rows.filter(namespace=q.namespace)
    if q.names:
        rows = rows.filter(name__in=q.names)
    if start is not None:
        rows = rows.filter(Q(namespace__gt=start[0]) | Q(namespace=start[0], name__gt=start[1]))
    if q.label_selector is not None and not q.label_selector.empty:
        pushed = label_selector_q(q.label_selector)
        if pushed is not None:
            rows = rows.filter(pushed)
        columns = ("namespace", "name", "labels", "current__object")
    else:
        columns = ("namespace", "name", "current__object")
    rows = rows.order_by("namespace", "name").values_list(*columns)

    extra = sorted(k for k, text in overrides.items() if text is not None
                   and (q.namespace is None or k[0] == q.namespace)
                   and (start is None or k > tuple(start))
                   and (not q.names or k[1] in q.names))

    def candidates() -> Iterator[tuple[tuple[str, str], dict | None, str]]:
        pending = iter(extra)
        nxt = next(pending, None)
        for row in rows.iterator(chunk_size=2000):
            key = (row[0], row[1])
            while nxt is not None and nxt <= key:
                yield nxt, None, overrides[nxt]
                nxt = next(pending, None)
            if key in overrides:
                continue  # served from the log (or absent at the snapshot)
            yield key, (row[2] if len(row) == 4 else None), row[-1]
        while nxt is not None:
            yield nxt, None, overrides[nxt]
            nxt = next(pending, None)

    items: list[bytes] = []
    last_key = None
    more = False
    for key, labels, text in candidates():
        if not _matches(res, q, labels, text, None):
            continue
        if q.limit and len(items) >= q.limit:
            more = True
            break
        items.append(text.encode() if isinstance(text, str) else text)
        last_key = key
    token = encode_continue(snapshot, *last_key) if more and last_key else ""
    remaining = None
    if token and _unselective(q):
        remaining = _count_after(res, q, last_key, overrides)
    return ListPage(items=items, resource_version=snapshot, continue_token=token, remaining=remaining)


def _unselective(q: ListQuery) -> bool:
    """No label or field selector: kube counts remainingItemCount only then (a count of the
    keys after the page would overcount a filtered list)."""
    return ((q.label_selector is None or q.label_selector.empty)
            and (q.field_selector is None or q.field_selector.empty) and not q.names)


def _count_after(res: Resource, q: ListQuery, last_key: tuple[str, str], overrides: dict) -> int:
    """How many objects the snapshot holds after last_key: the typed rows, corrected for the
    keys written since the snapshot (absent then, or created since)."""
    after = res.model.objects.all()
    if q.namespace is not None:
        after = after.filter(namespace=q.namespace)
    after = after.filter(Q(namespace__gt=last_key[0]) | Q(namespace=last_key[0], name__gt=last_key[1]))
    count = after.count()
    later = [k for k in overrides if k > last_key and (q.namespace is None or k[0] == q.namespace)]
    if later:
        now_live = set(after.filter(name__in={k[1] for k in later}).values_list("namespace", "name"))
        count += sum((overrides[k] is not None) - (k in now_live) for k in later)
    return count


def _expired_continue(fresh: str) -> ApiError:
    err = ApiError(410, "Expired",
                   "The provided continue parameter is too old to display a consistent list result. "
                   "You can start a new list without the continue parameter, or use the continue token "
                   "in this response to retrieve the remainder of the results. Continuing with the provided "
                   "token results in an inconsistent list - objects that were created, modified, or deleted "
                   "between the time the first chunk was returned and now may show up in the list.")
    err.list_continue = fresh
    return err


# ---------------------------------------------------------------------------------------------
# Writes


def create(res: Resource, namespace: str, obj: dict, *, dry_run: bool = False,
           manager: str = mf.WEB_MANAGER) -> Result:
    """Create obj (already decoded) in namespace; 409 if the name is taken.

    manager: who writes, for managedFields. The API passes its request's; the default is the
    dashboard's own (forms, the YAML editor and the domain actions call the store directly).
    """
    obj.setdefault("metadata", {})

    def work() -> Result:
        _lock()
        return _create_inside(res, namespace, obj, kmeta.now(), manager=manager)

    result = _run(dry_run, work)
    if dry_run:
        result.object["metadata"].pop("resourceVersion", None)
    return result


def _check_preconditions(res: Resource, name: str, current: dict, uid: str | None, rv: str | None) -> None:
    m = current["metadata"]
    if uid and uid != m.get("uid"):
        raise conflict(res.group, res.plural, name,
                       f"Precondition failed: UID in precondition: {uid}, UID in object meta: {m.get('uid')}")
    if rv and rv != m.get("resourceVersion"):
        raise conflict(res.group, res.plural, name,
                       f"Precondition failed: ResourceVersion in precondition: {rv}, "
                       f"ResourceVersion in object meta: {m.get('resourceVersion')}")


@dataclass
class Apply:
    """A server-side apply: the applied configuration (decoded, without managedFields)."""
    config: dict
    force: bool = False


def update(res: Resource, namespace: str, name: str, obj_or_fn, *, subresource: str = "",
           dry_run: bool = False, is_patch: bool = False, manager: str = mf.WEB_MANAGER) -> Result:
    """Replace an object. obj_or_fn is the new object, fn(current) -> new object (PATCH), or
    an Apply (server-side apply: merged by the schema; creates the object when missing).

    The main resource keeps the stored status; /status keeps everything but status.
    manager: who writes, for managedFields (see create).
    """
    moment = kmeta.now()
    applying = obj_or_fn if isinstance(obj_or_fn, Apply) else None

    def work() -> Result:
        _lock()
        row_id, current = _load(res, namespace, name)
        if current is None:
            if applying is not None and not subresource:
                new = copy.deepcopy(applying.config)
                new.setdefault("metadata", {})["name"] = name
                return _create_inside(res, namespace, new, moment, manager=manager, apply=applying)
            if not is_patch and applying is None and res.allow_create_on_update and not subresource:
                new = obj_or_fn
                new.setdefault("metadata", {})["name"] = name
                new["metadata"].pop("resourceVersion", None)
                return _create_inside(res, namespace, new, moment, manager=manager)
            raise not_found(res.group, res.plural, name)
        fields = None
        if applying is not None:
            new, fields = _apply(res, current, copy.deepcopy(applying.config), applying.force, manager,
                                 subresource, moment)
        else:
            new = obj_or_fn(copy.deepcopy(current)) if callable(obj_or_fn) else obj_or_fn
        sent_fields = (new.get("metadata") or {}).get("managedFields") if isinstance(new, dict) else None
        new["apiVersion"], new["kind"] = res.api_version, res.kind
        nm = new.setdefault("metadata", {})
        if nm.get("name", name) != name:
            # A PUT body names its object; a patch that changes the name is invalid.
            if is_patch:
                raise invalid_object(res.group, res.kind, name, [
                    invalid("metadata.name", nm.get("name"), "field is immutable")])
            raise bad_request(f"the name of the object ({nm.get('name')}) does not match the name on the URL ({name})")
        nm["name"] = name
        if nm.get("namespace", namespace) != namespace:
            if is_patch:
                raise invalid_object(res.group, res.kind, name, [
                    invalid("metadata.namespace", nm.get("namespace"), "field is immutable")])
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        nm["namespace"] = namespace
        wanted_rv = nm.get("resourceVersion") or ""
        if wanted_rv:
            if wanted_rv != current["metadata"]["resourceVersion"]:
                raise conflict(res.group, res.plural, name, STALE_OBJECT)
        elif not res.allow_unconditional_update and not is_patch:
            raise invalid_object(res.group, res.kind, name, [
                invalid("metadata.resourceVersion", "0x0", "must be specified for an update")])
        old = current
        res.default(new)  # kube decodes (and defaults) status bodies too: times get normalized
        if applying is None:
            # kube's field manager sees the decoded, defaulted object, before the strategy's
            # PrepareForUpdate: what the strategy sets is nobody's.
            fields = _updated_fields(res, old, new, sent_fields, manager, subresource, moment)
        kmeta.prepare_update(nm, old["metadata"])
        if subresource == "status":
            # kube's status strategies reset only the spec: metadata (labels, annotations,
            # finalizers...) written through /status is kept, as the main resource keeps status.
            _keep(new, old, res.spec_keys)
        else:
            res.prepare_for_update(new, old)
            _keep(new, old, res.status_keys)
            if res.has_generation and any(new.get(k) != old.get(k) for k in res.spec_keys):
                new["metadata"]["generation"] = (old["metadata"].get("generation") or 0) + 1
        kmeta.drop_empty(new["metadata"])
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if subresource == "status":
            causes = _meta_causes(new) + _meta_update_causes(new, old) + res.validate_status_update(new, old)
        else:
            causes = _meta_causes(new) + _meta_update_causes(new, old) + res.validate(new) + res.validate_update(new, old)
        _validate(res, new, causes)
        if subresource != "status":
            res.canonicalize(new)
        _set_fields(new, fields)
        if new == old:
            return Result(old, changed=False)  # no-op writes keep the resourceVersion, as etcd does
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            return _delete_inside(res, row_id, new, moment)
        rv = _record(res, new, Revision.MODIFIED, moment)
        _update_row(res, row_id, new, rv)
        return Result(new)

    return _run(dry_run, work)


def _keep(new: dict, old: dict, keys) -> None:
    """The stored values of keys win over the request's (absent stays absent)."""
    for key in keys:
        if key in old:
            new[key] = old[key]
        else:
            new.pop(key, None)


def _create_inside(res: Resource, namespace: str, obj: dict, moment, *, manager: str,
                   apply: Apply | None = None) -> Result:
    """Create inside an open, locked write transaction (POST, create-on-update, apply)."""
    obj["apiVersion"], obj["kind"] = res.api_version, res.kind
    m = obj["metadata"]
    m["namespace"] = namespace
    sent_fields = m.get("managedFields")
    fields = None
    if apply is not None:
        obj, fields = _apply(res, None, obj, apply.force, manager, "", moment)
        m = obj["metadata"]
    res.default(obj)
    if apply is None:  # before PrepareForCreate, as kube's field manager (see update)
        fields = mf.created(mf.without_managed_fields(obj), _zero(res), schema.node(res.definition), manager=manager,
                            subresource="", api_version=res.api_version, ignored=mf.ignored_fields(res, ""),
                            now=kmeta.format_time(moment), sent=sent_fields)
    kmeta.prepare_create(m, has_generation=res.has_generation, moment=moment)
    res.prepare_for_create(obj)
    kmeta.drop_empty(m)
    _validate(res, obj, _meta_causes(obj) + res.validate(obj))
    res.canonicalize(obj)
    _set_fields(obj, fields)
    if res.model.objects.filter(namespace=namespace, name=m["name"]).exists():
        raise already_exists(res.group, res.plural, m["name"])
    rv = _record(res, obj, Revision.ADDED, moment)
    _insert_row(res, namespace, m["name"], obj, rv)
    return Result(obj, created=True)


# ---------------------------------------------------------------------------------------------
# managedFields on every write (managed_fields.py, apply.py)


def _set_fields(obj: dict, fields: list | None) -> None:
    if fields:
        obj["metadata"]["managedFields"] = fields
    else:
        obj["metadata"].pop("managedFields", None)


_zeros: dict[str, dict] = {}


def _zero(res: Resource) -> dict:
    """The kind's empty object as kube compares a create against (Go's zero value: metadata,
    spec, status and a pod template's metadata and spec are structs, present though empty)."""
    found = _zeros.get(res.kind)
    if found is not None:
        return found
    root = schema.node(res.definition)
    zero: dict = {"metadata": {}}
    for key in ("spec", "status"):
        if key in getattr(root, "props", {}):
            zero[key] = {}
    spec = getattr(root, "props", {}).get("spec")
    if spec is not None and "template" in getattr(spec, "props", {}):
        zero["spec"]["template"] = {"metadata": {}, "spec": {}}
    _zeros[res.kind] = zero
    return zero


def _updated_fields(res: Resource, old: dict, new: dict, sent, manager: str, subresource: str, moment):
    """managedFields after a non-apply write (create, update, patch, status)."""
    managers = mf.decode_live_or_new(old["metadata"].get("managedFields"), sent, subresource)
    encoded = mf.update(managers, mf.without_managed_fields(old), mf.without_managed_fields(new),
                        schema.node(res.definition), manager=manager, subresource=subresource,
                        api_version=res.api_version, ignored=mf.ignored_fields(res, subresource),
                        now=kmeta.format_time(moment))
    return encoded if encoded is not None else mf.encode_all(managers)


def _apply(res: Resource, current: dict | None, config: dict, force: bool, manager: str, subresource: str,
           moment):
    """(merged object, managedFields) of a server-side apply of config over current (None: create)."""
    from . import apply as kapply

    live = mf.without_managed_fields(current) if current is not None else None
    managers = (mf.decode(current["metadata"].get("managedFields")) or {}) if current is not None else {}
    return kapply.apply(live, config, managers, schema.node(res.definition),
                        manager=manager, subresource=subresource, api_version=res.api_version,
                        ignored=mf.ignored_fields(res, subresource), force=force,
                        now=kmeta.format_time(moment))


def _delete_inside(res: Resource, row_id: int, obj: dict, moment) -> Result:
    _record(res, obj, Revision.DELETED, moment)
    with connection.cursor() as cursor:
        cursor.execute(_sql(res.model)["delete"], [row_id])
    return Result(obj, deleted=True)


def delete(res: Resource, namespace: str, name: str, *, uid: str | None = None, rv: str | None = None,
           dry_run: bool = False) -> Result:
    """Delete now, or mark deletionTimestamp when finalizers remain (the object stays)."""
    moment = kmeta.now()

    def work() -> Result:
        _lock()
        row_id, current = _load(res, namespace, name)
        if current is None:
            raise not_found(res.group, res.plural, name)
        _check_preconditions(res, name, current, uid, rv)
        m = current["metadata"]
        if m.get("finalizers"):
            if m.get("deletionTimestamp"):
                return Result(current, changed=False)
            m["deletionTimestamp"] = kmeta.format_time(moment)
            m["deletionGracePeriodSeconds"] = 0
            new_rv = _record(res, current, Revision.MODIFIED, moment)
            _update_row(res, row_id, current, new_rv)
            return Result(current)
        return _delete_inside(res, row_id, current, moment)

    return _run(dry_run, work)


def keys_matching(res: Resource, q: ListQuery) -> list[tuple[str, str]]:
    """(namespace, name) of every current object the query selects (for deletecollection)."""
    q = ListQuery(**{**q.__dict__, "limit": None, "continue_token": ""})
    page = list_objects(res, q)
    out = []
    for text in page.items:
        m = orjson.loads(text)["metadata"]
        out.append((m["namespace"], m["name"]))
    return out


# ---------------------------------------------------------------------------------------------
# A followed cluster's copy (dashboard/follow): objects as read upstream, stored verbatim


@dataclass
class Mirrored:
    """One upstream change: the object as the cluster served it (None: deleted)."""

    res: Resource
    namespace: str
    name: str
    obj: dict | None


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
    with clusters.within(cluster), transaction.atomic():
        _lock()
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
                if present:
                    # (None: stored before this batch, read below)
                    entries.append((ch.res, key, Revision.DELETED, latest.get(key, (None, None))[1], ""))
                    upstream[key], latest[key] = None, (ch.res, None)
                continue
            new_upstream_rv = str(ch.obj["metadata"].get("resourceVersion", ""))
            if present and upstream[key] == new_upstream_rv:
                continue
            obj = copy.deepcopy(ch.obj)
            obj["apiVersion"], obj["kind"] = ch.res.api_version, ch.res.kind
            entries.append((ch.res, key, Revision.MODIFIED if present else Revision.ADDED, obj, new_upstream_rv))
            upstream[key], latest[key] = new_upstream_rv, (ch.res, obj)
        if not entries:
            return 0
        first = _next_revisions(len(entries))
        created = connection.ops.adapt_datetimefield_value(moment)
        rows, last_rv = [], {}
        for rv, (res, key, event, obj, upstream_rv) in enumerate(entries, start=first):
            if obj is None:
                obj = _load(res, key[1], key[2])[1]
            obj["metadata"]["resourceVersion"] = str(rv)
            text = _dumps({"kind": res.kind, "apiVersion": res.api_version, **obj}).decode()
            rows.append((rv, cluster, res.kind, key[1], key[2], event, text, created, upstream_rv))
            last_rv[key] = rv
        _insert_many("INSERT INTO kube_revision (rv, cluster, kind, namespace, name, type, object, created, "
                     "upstream_rv) VALUES ", rows)
        _write_rows(cluster, held, latest, last_rv)
        _announce(first + len(entries) - 1)
        return len(entries)


def _next_revisions(n: int) -> int:
    """Hand out n consecutive revisions; returns the first."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE kube_revision_counter SET value = value + %s WHERE id = 1 RETURNING value", [n])
        row = cursor.fetchone()
    if row is None:   # (no counter row: _next_revision starts it again)
        first = _next_revision()
        with connection.cursor() as cursor:
            cursor.execute("UPDATE kube_revision_counter SET value = value + %s WHERE id = 1", [n - 1])
        return first
    return row[0] - n + 1


def _insert_many(head: str, rows: list[tuple], per_statement: int = 100) -> None:
    """INSERT rows with one statement per `per_statement` of them (multi-row VALUES)."""
    if not rows:
        return
    marks = "(" + ", ".join(["%s"] * len(rows[0])) + ")"
    with connection.cursor() as cursor:
        for i in range(0, len(rows), per_statement):
            chunk = rows[i:i + per_statement]
            cursor.execute(head + ", ".join([marks] * len(chunk)), [v for row in chunk for v in row])


def _write_rows(cluster: str, held: dict, latest: dict, last_rv: dict) -> None:
    """Each changed key's typed row as the batch leaves it: inserted, updated or deleted, once."""
    inserts: dict[str, tuple[Resource, list]] = {}   # kind -> (resource, rows)
    with connection.cursor() as cursor:
        for key, (res, obj) in latest.items():
            sql = _sql(res.model)
            row_id = held[key][0] if key in held else None
            if obj is None:
                if row_id is not None:
                    cursor.execute(sql["delete"], [row_id])
                continue
            params = _row_params(res, obj, last_rv[key])
            if row_id is None:
                inserts.setdefault(res.kind, (res, []))[1].append((cluster, key[1], key[2], *params))
            else:
                cursor.execute(sql["update"], params + [row_id])
    for res, rows in inserts.values():
        _insert_many(_sql(res.model)["insert_head"], rows)


def _held(changes: list[Mirrored]) -> dict[tuple[str, str, str], tuple[int, str]]:
    """(kind, namespace, name) -> (row id, upstream resourceVersion) of the stored objects the
    changes name: one query per kind for the whole batch."""
    by_kind: dict[str, tuple[Resource, set[str]]] = {}
    for ch in changes:
        by_kind.setdefault(ch.res.kind, (ch.res, set()))[1].add(ch.name)
    out = {}
    for res, names in by_kind.values():
        names = list(names)
        # (plain SQL, like the write path's: one query per batch, asked on every upstream change)
        sql = (f"SELECT t.namespace, t.name, t.id, r.upstream_rv FROM {res.model._meta.db_table} t "
               "JOIN kube_revision r ON r.rv = t.resource_version WHERE t.cluster = %s AND t.name IN ("
               + ", ".join(["%s"] * len(names)) + ")")
        with connection.cursor() as cursor:
            cursor.execute(sql, [clusters.current(), *names])
            for ns, name, row_id, upstream_rv in cursor.fetchall():
                out[(res.kind, ns, name)] = (row_id, upstream_rv)
    return out


def mirrored_keys(cluster: str, res: Resource, namespace: str | None = None,
                  only: dict | None = None) -> dict[tuple[str, str], str]:
    """(namespace, name) -> upstream resourceVersion of every object held for cluster (a relist
    compares it with what upstream listed); `only`: a filter on the typed columns (the part of
    the kind a field-selected reflector lists: Resource.follow_selectors)."""
    with clusters.within(cluster):
        rows = res.model.objects.filter(**(only or {}))
        if namespace:
            rows = rows.filter(namespace=namespace)
        return {(ns, name): urv for ns, name, urv in rows.values_list("namespace", "name", "current__upstream_rv")}


def forget(cluster: str) -> int:
    """Delete every object held for a followed cluster (it is no longer followed): each a
    DELETED revision, so its watchers and pages see them go."""
    from .registry import all_resources

    removed = 0
    for res in all_resources():
        with clusters.within(cluster):
            keys = list(res.model.objects.values_list("namespace", "name"))
        for i in range(0, len(keys), 500):
            removed += mirror(cluster, [Mirrored(res, ns, name, None) for ns, name in keys[i:i + 500]])
    return removed

"""The only code that changes a kubedash object: create, update (and patch, apply), delete.

Laid out like kube-apiserver's generic registry store (registry/generic/registry/store.go):
each verb loads the current object, runs the kind's strategy (defaults, PrepareFor*,
validation, canonicalization) and managedFields, then stores it. Every write runs in one
transaction: take the write lock, read the current object, give it the next revision, append
it to the revision log, write its typed row, commit, then announce the revision
(transaction.on_commit -> revision_committed). Write order is revision order: the lock (on
PostgreSQL an advisory lock, on SQLite BEGIN IMMEDIATE, settings) is taken before the first
read, and the counter increment row-locks the counter until commit, so a watcher reading
"revisions after N" never misses a revision that commits late. On PostgreSQL an update reads
and computes first, outside the lock, then takes the lock, writes only if the object is
unchanged and commits, in one round trip (_run, sql.conditional_update): same lock, same order.

The statements are in sql.py; lists at a revision in lists.py; a followed cluster's copy
(written by its follower, never by a client) in mirror.py.
"""
from __future__ import annotations

import contextvars
import copy
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import django.dispatch
import orjson
from django.db import connection, transaction

from dashboard.access import clusters

from . import apply as kapply
from . import managed_fields as mf
from . import meta as kmeta
from . import objcache, schema, sql, validation
from .errors import STALE_OBJECT, ApiError, already_exists, bad_request, conflict, invalid, invalid_object, not_found
from .models import Revision, RevisionCounter
from .registry import Resource, version_field_names

# Sent after commit with rv=<int>; the watch hub's notifier (notify.py) listens to it.
revision_committed = django.dispatch.Signal()


@dataclass
class Result:
    object: dict
    created: bool = False
    deleted: bool = False      # gone from storage (False: still there, e.g. waiting on finalizers)
    changed: bool = True


@dataclass
class Apply:
    """A server-side apply: the applied configuration (decoded, without managedFields)."""
    config: dict
    force: bool = False


# A followed cluster's writer (follow/writes.py) for the dashboard's writes in this context: set
# by the pages (web/edit_views.editor_view) when the cluster takes writes from this user.
_through: contextvars.ContextVar = contextvars.ContextVar("kubedash_write_through", default=None)


@contextmanager
def writing_through(writer):
    """Inside: create / update / delete on a followed cluster go to `writer` (its API server)
    instead of being refused; its object comes back mirrored. kube knows no follower: the
    writer is handed in (create, update, delete with the store's own arguments)."""
    token = _through.set(writer)
    try:
        yield writer
    finally:
        _through.reset(token)


def _upstream():
    return None if clusters.is_local() else _through.get()


def current_revision() -> int:
    return RevisionCounter.objects.filter(pk=1).values_list("value", flat=True).first() or 0


# ---------------------------------------------------------------------------------------------
# Get


def get_raw(res: Resource, namespace: str, name: str) -> bytes:
    """The stored JSON of one object, as served (no decode, no re-encode)."""
    hit = sql.load_raw(res, namespace, name)
    if hit is None:
        raise not_found(res.group, res.plural, name)
    return hit[1].encode()


def get(res: Resource, namespace: str, name: str) -> dict:
    return orjson.loads(get_raw(res, namespace, name))


# ---------------------------------------------------------------------------------------------
# Create


def create(res: Resource, namespace: str, obj: dict, *, dry_run: bool = False,
           manager: str = mf.WEB_MANAGER, version: str = "") -> Result:
    """Create obj (already decoded) in namespace; 409 if the name is taken.

    manager: who writes, for managedFields. The API passes its request's; the default is the
    dashboard's own (forms, the YAML editor and the domain actions call the store directly).
    version: the apiVersion the request wrote through (another version of a kind stored once,
    events.k8s.io/v1 for core/v1 Events), which its managedFields entry records.
    """
    obj.setdefault("metadata", {})
    if (writer := _upstream()) is not None:
        return writer.create(res, namespace, obj, dry_run=dry_run)

    def work() -> Result:
        sql.lock()
        return _create_inside(res, namespace, obj, kmeta.now(), manager=manager, version=version)

    result = _run(dry_run, work)
    if dry_run:
        result.object["metadata"].pop("resourceVersion", None)
    return result


def _create_inside(res: Resource, namespace: str, obj: dict, moment, *, manager: str,
                   apply: Apply | None = None, version: str = "") -> Result:
    """Create inside an open, locked write transaction (POST, create-on-update, apply)."""
    obj["apiVersion"], obj["kind"] = res.api_version, res.kind
    m = obj["metadata"]
    m["namespace"] = namespace
    sent_fields = _fields_in(res, m.get("managedFields"))
    fields = None
    if apply is not None:
        obj, fields = _apply(res, None, obj, apply.force, manager, "", moment, version)
        m = obj["metadata"]
    res.default(obj)
    if apply is None:  # before PrepareForCreate, as kube's field manager (see update)
        fields = mf.created(mf.without_managed_fields(obj), _zero(res), schema.node(res.definition), manager=manager,
                            subresource="", api_version=version or res.api_version,
                            ignored=mf.ignored_fields(res, ""), now=kmeta.format_time(moment), sent=sent_fields)
    kmeta.prepare_create(m, has_generation=res.has_generation, moment=moment)
    res.prepare_for_create(obj)
    kmeta.drop_empty(m)
    _validate(res, obj, _meta_causes(obj) + res.validate(obj))
    res.canonicalize(obj)
    _set_fields(obj, _fields_out(res, fields))
    if sql.exists(res, namespace, m["name"]):   # (plain SQL: the ORM's query was a fifth of a create)
        raise already_exists(res.group, res.plural, m["name"])
    rv = _record(res, obj, Revision.ADDED, moment)
    sql.insert_row(res, namespace, m["name"], obj, rv)
    return Result(obj, created=True)


# ---------------------------------------------------------------------------------------------
# Update


def _check_preconditions(res: Resource, name: str, current: dict, uid: str | None, rv: str | None) -> None:
    m = current["metadata"]
    if uid and uid != m.get("uid"):
        raise conflict(res.group, res.plural, name,
                       f"Precondition failed: UID in precondition: {uid}, UID in object meta: {m.get('uid')}")
    if rv and rv != m.get("resourceVersion"):
        raise conflict(res.group, res.plural, name,
                       f"Precondition failed: ResourceVersion in precondition: {rv}, "
                       f"ResourceVersion in object meta: {m.get('resourceVersion')}")


def _check_uid_precondition(res: Resource, namespace: str, name: str, current: dict | None, body: dict) -> None:
    """A PUT body's metadata.uid is a precondition (kube's DefaultUpdatedObjectInfo): it must be
    the stored object's (a missing object has none), else 409 as kube's storage words it."""
    uid = (body.get("metadata") or {}).get("uid") if isinstance(body, dict) else None
    stored = (current or {}).get("metadata", {}).get("uid", "")
    if uid and uid != stored:
        raise conflict(res.group, res.plural, name,
                       f"StorageError: invalid object, Code: 4, Key: /registry/{res.plural}/{namespace}/{name}, "
                       f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, "
                       f"UID in object meta: {stored}")


def update(res: Resource, namespace: str, name: str, obj_or_fn, *, subresource: str = "",
           dry_run: bool = False, is_patch: bool = False, manager: str = mf.WEB_MANAGER,
           version: str = "") -> Result:
    """Replace an object. obj_or_fn is the new object, fn(current) -> new object (PATCH), or
    an Apply (server-side apply: merged by the schema; creates the object when missing).

    The main resource keeps the stored status; /status keeps everything but status.
    manager, version: who writes, through which apiVersion, for managedFields (see create).
    """
    moment = kmeta.now()
    applying = obj_or_fn if isinstance(obj_or_fn, Apply) else None
    if (writer := _upstream()) is not None and applying is None and not subresource:
        return writer.update(res, namespace, name, obj_or_fn, dry_run=dry_run)

    def work(optimistic: bool = False, cached: tuple | None = None) -> Result:
        if not optimistic:
            sql.lock()
        # cached: (row id, object) from objcache at the revision the body names, instead of a read
        row_id, current = cached if cached is not None else sql.load(res, namespace, name)
        # (an optimistic try may be run again: it writes on a copy of the body)
        body = _copied(obj_or_fn) if optimistic and isinstance(obj_or_fn, dict) else obj_or_fn
        if applying is None and not is_patch:
            _check_uid_precondition(res, namespace, name, current, body)
        if current is None:
            if optimistic:
                raise _NeedsLock   # (a create: the locked path, which checks the name)
            if applying is not None and (applying.config.get("metadata") or {}).get("uid"):
                raise conflict(res.group, res.plural, name, "uid mismatch: the provided object specified uid "
                               f"{applying.config['metadata']['uid']}, and no existing object was found")
            if applying is not None and not subresource:
                new = copy.deepcopy(applying.config)
                new.setdefault("metadata", {})["name"] = name
                return _create_inside(res, namespace, new, moment, manager=manager, apply=applying, version=version)
            if not is_patch and applying is None and res.allow_create_on_update and not subresource:
                new = body
                new.setdefault("metadata", {})["name"] = name
                new["metadata"].pop("resourceVersion", None)
                return _create_inside(res, namespace, new, moment, manager=manager, version=version)
            raise not_found(res.group, res.plural, name)
        fields = None
        if applying is not None:
            new, fields = _apply(res, current, copy.deepcopy(applying.config), applying.force, manager,
                                 subresource, moment, version)
        else:
            new = obj_or_fn(copy.deepcopy(current)) if callable(obj_or_fn) else body
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
            fields = _updated_fields(res, old, new, _fields_in(res, sent_fields), manager, subresource, moment,
                                     version)
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
        _set_fields(new, _fields_out(res, fields))
        if new == old:
            if cached is not None:
                raise _Stale   # (an answer the write does not check: read first)
            return Result(old, changed=False)  # no-op writes keep the resourceVersion, as etcd does
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
            if optimistic:
                raise _NeedsLock
            return _delete_inside(res, row_id, new, moment)
        _record(res, new, Revision.MODIFIED, moment, row_id=row_id,
                expect=int(old["metadata"]["resourceVersion"]) if optimistic else None)
        return Result(new)

    # A PUT names the revision it was computed from: the object cached at that revision (objcache)
    meta = obj_or_fn.get("metadata") if applying is None and not is_patch and isinstance(obj_or_fn, dict) else None
    named = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return _run(dry_run, work, optimistic=True, cached=(res, namespace, name, named) if named else None)


def _keep(new: dict, old: dict, keys) -> None:
    """The stored values of keys win over the request's (absent stays absent)."""
    for key in keys:
        if key in old:
            new[key] = old[key]
        else:
            new.pop(key, None)


# ---------------------------------------------------------------------------------------------
# Delete


def _delete_inside(res: Resource, row_id: int, obj: dict, moment) -> Result:
    _record(res, obj, Revision.DELETED, moment)
    sql.delete_row(res, row_id)
    objcache.dropped(res, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
    return Result(obj, deleted=True)


def delete(res: Resource, namespace: str, name: str, *, uid: str | None = None, rv: str | None = None,
           dry_run: bool = False) -> Result:
    """Delete now, or mark deletionTimestamp when finalizers remain (the object stays)."""
    moment = kmeta.now()
    if (writer := _upstream()) is not None:
        return writer.delete(res, namespace, name, uid=uid, rv=rv, dry_run=dry_run)

    def work() -> Result:
        sql.lock()
        row_id, current = sql.load(res, namespace, name)
        if current is None:
            raise not_found(res.group, res.plural, name)
        _check_preconditions(res, name, current, uid, rv)
        m = current["metadata"]
        if m.get("finalizers"):
            if m.get("deletionTimestamp"):
                return Result(current, changed=False)
            m["deletionTimestamp"] = kmeta.format_time(moment)
            m["deletionGracePeriodSeconds"] = 0
            _record(res, current, Revision.MODIFIED, moment, row_id=row_id)
            return Result(current)
        return _delete_inside(res, row_id, current, moment)

    return _run(dry_run, work)


# ---------------------------------------------------------------------------------------------
# The transaction and the revision


class DryRun(Exception):
    """Raised inside a write transaction to roll it back while keeping the answer."""

    def __init__(self, result):
        self.result = result


class _Stale(Exception):
    """An optimistic write found its object changed since it was read: compute it again."""


class _NeedsLock(Exception):
    """An optimistic write turned out to be a create or a delete: the locked path does it."""


OPTIMISTIC_TRIES = 3


def _copied(body: dict) -> dict:
    return orjson.loads(orjson.dumps(body))


def _run(dry_run: bool, work: Callable[..., Result], optimistic: bool = False,
         cached: tuple | None = None) -> Result:
    """Run work in a write transaction (dry_run: rolled back).

    optimistic (an update; PostgreSQL, not inside a transaction): first work(optimistic=True),
    which reads and computes outside the revision lock and writes with one statement that takes
    the lock, writes only if the object is still the one read, and commits (sql.record's
    expect). The lock is then held for that statement alone, not for the read, the Python work
    and four round trips. After OPTIMISTIC_TRIES lost races (or for a create or delete), the
    locked path, which always gets through.

    cached: (res, namespace, name, resourceVersion) of a PUT naming the revision it was computed
    from. When objcache holds the object at that revision, the first try computes from it instead
    of reading (kube's GuaranteedUpdate from its watch cache); the conditional write verifies it.
    Whatever else happens on that try (the object changed, any ApiError, a no-op, a create or a
    delete) nothing was written: the entry is dropped and the tries below read as before, so a
    stale entry never gives an answer."""
    if not clusters.is_local():
        # A followed cluster is written only by its follower (mirror.py), never by a client.
        raise ApiError(405, "MethodNotAllowed",
                       f"cluster {clusters.current()!r} is followed read-only: change it in the cluster itself")
    if optimistic and not dry_run and sql.one_message_writes() and not connection.in_atomic_block:
        if cached is not None:
            key, hit = objcache.lookup(*cached)
            if hit is not None:
                try:
                    result = work(optimistic=True, cached=hit)
                except (_Stale, _NeedsLock, ApiError):
                    objcache.stale(key)
                else:
                    objcache.hit()
                    return result
        for _ in range(OPTIMISTIC_TRIES):
            try:
                return work(optimistic=True)
            except _Stale:
                continue
            except _NeedsLock:
                break
    if not dry_run:
        with transaction.atomic():
            return work()
    try:
        with transaction.atomic():
            raise DryRun(work())
    except DryRun as done:
        return done.result


def _record(res: Resource, obj: dict, event: str, moment, *, row_id: int | None = None,
            expect: int | None = None) -> int:
    """Give obj the next revision and append it to the log (in the current cluster); returns
    the revision. row_id: also write obj's typed row (that row's update, in the same statement
    on PostgreSQL: sql.record). expect: an optimistic update's revision read (sql.record);
    raises _Stale if the object has changed since."""
    m = obj["metadata"]
    m["resourceVersion"] = sql.RV_MARK   # (the database numbers it: sql.record)
    text = orjson.dumps({"kind": res.kind, "apiVersion": res.api_version, **obj}).decode()
    rv = sql.record([clusters.current(), res.kind, m.get("namespace", ""), m["name"], event, text,
                     connection.ops.adapt_datetimefield_value(moment), ""],
                    update=None if row_id is None else (res, row_id, obj), expect=expect)
    if rv is None:
        raise _Stale
    m["resourceVersion"] = str(rv)
    if row_id is not None:   # (the stored text: the database put the revision in for RV_MARK)
        objcache.written(res, obj, row_id, rv, text.replace(sql.RV_FIELD, f'"resourceVersion":"{rv}"'))
    announce(rv)
    return rv


def announce(rv: int) -> None:
    """Once the transaction commits: revision_committed (the watch hubs, here and elsewhere)."""
    transaction.on_commit(lambda: revision_committed.send(sender=Revision, rv=rv))


# ---------------------------------------------------------------------------------------------
# Validation and managedFields on every write (validation.py, managed_fields.py, apply.py)


def _validate(res: Resource, obj: dict, causes: list) -> None:
    if causes:
        raise invalid_object(res.group, res.kind, obj["metadata"].get("name", ""), causes)


def _meta_causes(obj: dict) -> list:
    return validation.validate_object_meta(obj.get("metadata") or {}, namespaced=True)


def _meta_update_causes(new: dict, old: dict) -> list:
    return validation.validate_object_meta_update(new["metadata"], old["metadata"])


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


def _fields_in(res: Resource, entries):
    """managedFields as the field manager compares them: in the stored version's field names."""
    return mf.renamed(entries, version_field_names(res), to_storage=True)


def _fields_out(res: Resource, entries):
    """managedFields as stored: each entry in the field names of the version it was written through."""
    return mf.renamed(entries, version_field_names(res), to_storage=False)


def _updated_fields(res: Resource, old: dict, new: dict, sent, manager: str, subresource: str, moment,
                    version: str = ""):
    """managedFields after a non-apply write (create, update, patch, status)."""
    managers = mf.decode_live_or_new(_fields_in(res, old["metadata"].get("managedFields")), sent, subresource)
    encoded = mf.update(managers, mf.without_managed_fields(old), mf.without_managed_fields(new),
                        schema.node(res.definition), manager=manager, subresource=subresource,
                        api_version=version or res.api_version, ignored=mf.ignored_fields(res, subresource),
                        now=kmeta.format_time(moment))
    return encoded if encoded is not None else mf.encode_all(managers)


def _apply(res: Resource, current: dict | None, config: dict, force: bool, manager: str, subresource: str,
           moment, version: str = ""):
    """(merged object, managedFields) of a server-side apply of config over current (None: create)."""
    live = mf.without_managed_fields(current) if current is not None else None
    managers = (mf.decode(_fields_in(res, current["metadata"].get("managedFields"))) or {}) \
        if current is not None else {}
    return kapply.apply(live, config, managers, schema.node(res.definition),
                        manager=manager, subresource=subresource, api_version=version or res.api_version,
                        ignored=mf.ignored_fields(res, subresource), force=force,
                        now=kmeta.format_time(moment))

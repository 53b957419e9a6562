"""The only code that changes a kubedash object: create, update (and patch, apply), delete.

Laid out like kube-apiserver's generic registry store (registry/generic/registry/store.go).
Each verb has a pure part, a function of the current object and the request: the kind's
strategy (defaults, PrepareFor*, validation, canonicalization), managedFields, the name,
namespace and resourceVersion checks. It hands that part to the storage (storage/), as
store.go hands its tryUpdate to Storage.GuaranteedUpdate: the backend reads the current object,
calls it, and writes what it returns in revision order, as often as it takes. Which path a
write takes there (one locked transaction, or PostgreSQL's optimistic tries, from its object
cache first) is the backend's; the pure part only learns whether it may use up the request's
body (final: no other try follows).

A followed cluster's copy is written by its follower (mirror.py), never through here: the store
refuses (405), unless the pages hand it the cluster's own writer (`through`).
"""
from __future__ import annotations

import copy
import functools
from dataclasses import dataclass
from datetime import datetime

import orjson

from dashboard.access import clusters

from . import apply as kapply
from . import managed_fields as mf
from . import meta as kmeta
from . import schema, storage, validation
from .errors import STALE_OBJECT, ApiError, bad_request, conflict, invalid, invalid_object, not_found
from .models import RevisionCounter
from .registry import Resource, version_field_names
from .storage import ADDED, DELETED, MODIFIED, Change, Key, TokenCheck


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


def _result(change: Change) -> Result:
    return Result(change.obj, created=change.event == ADDED, deleted=change.event == DELETED,
                  changed=change.event is not None)


def current_revision() -> int:
    return RevisionCounter.objects.filter(pk=1).values_list("value", flat=True).first() or 0


# ---------------------------------------------------------------------------------------------
# Followed clusters: written by their follower, or through their own API server
#
# create / update / delete take `through`: a followed cluster's writer (follow/writes.py; the
# pages hand it in, web/edit_views.editor_view, when the cluster takes writes from this user),
# to which they go (its API server) instead of being refused; its object comes back mirrored.
# kube knows no follower: the writer has the store's verbs, with the store's own arguments.


def _refuse_followed() -> None:
    if not clusters.is_local():
        # A followed cluster is written only by its follower (mirror.py), never by a client.
        raise ApiError(405, "MethodNotAllowed",
                       f"cluster {clusters.current()!r} is followed read-only: change it in the cluster itself")


# ---------------------------------------------------------------------------------------------
# Get


def get_raw(res: Resource, namespace: str, name: str) -> bytes:
    """The stored JSON of one object, as served (no decode, no re-encode)."""
    hit = storage.backend().get_raw(Key(res, namespace, name))
    if hit is None:
        raise not_found(res.group, res.plural, name)
    return hit[1].encode()


def get(res: Resource, namespace: str, name: str) -> dict:
    return orjson.loads(get_raw(res, namespace, name))


# ---------------------------------------------------------------------------------------------
# Create


def create(res: Resource, namespace: str, obj: dict, *, dry_run: bool = False,
           manager: str = mf.WEB_MANAGER, version: str = "", through=None) -> Result:
    """Create obj (already decoded) in namespace; 409 if the name is taken.

    manager: who writes, for managedFields. The API passes its request's; the default is the
    dashboard's own (forms, the YAML editor and the domain actions call the store directly).
    version: the apiVersion the request wrote through (another version of a kind stored once,
    events.k8s.io/v1 for core/v1 Events), which its managedFields entry records.
    through: a followed cluster's writer (above).
    """
    obj.setdefault("metadata", {})
    if through is not None and not clusters.is_local():
        return through.create(res, namespace, obj, dry_run=dry_run)
    _refuse_followed()
    moment = kmeta.now()
    new = _new_object(res, namespace, obj, moment, manager=manager, version=version)
    result = _result(storage.backend().create(Key(res, namespace, new["metadata"]["name"]), new, moment=moment,
                                              dry_run=dry_run))
    if dry_run:
        result.object["metadata"].pop("resourceVersion", None)
    return result


def _new_object(res: Resource, namespace: str, obj: dict, moment: datetime, *, manager: str,
                apply: Apply | None = None, version: str = "") -> dict:
    """The pure part of a create (POST, create-on-update, apply): obj as it will be stored."""
    obj["apiVersion"], obj["kind"] = res.api_version, res.kind
    m = obj["metadata"]
    m["namespace"] = namespace
    sent_fields = _fields_in(res, m.get("managedFields"))
    fields = None
    if apply is not None:
        obj, fields = _apply(res, None, obj, apply.force, manager, "", moment, version)
        m = obj["metadata"]
    res.default(obj)
    if apply is None:  # before PrepareForCreate, as kube's field manager (see _updated)
        fields = mf.created(mf.without_managed_fields(obj), _zero(res), schema.node(res.definition), manager=manager,
                            subresource="", api_version=version or res.api_version,
                            ignored=mf.ignored_fields(res, ""), now=kmeta.format_time(moment), sent=sent_fields)
    kmeta.prepare_create(m, has_generation=res.has_generation, moment=moment)
    res.prepare_for_create(obj)
    kmeta.drop_empty(m)
    _validate(res, obj, _meta_causes(obj) + res.validate(obj))
    res.canonicalize(obj)
    _set_fields(obj, _fields_out(res, fields))
    return obj


# ---------------------------------------------------------------------------------------------
# Update


def update(res: Resource, namespace: str, name: str, obj_or_fn, *, subresource: str = "",
           dry_run: bool = False, is_patch: bool = False, manager: str = mf.WEB_MANAGER,
           version: str = "", token_check: TokenCheck | None = None, through=None) -> Result:
    """Replace an object. obj_or_fn is the new object, fn(current) -> new object (PATCH), or
    an Apply (server-side apply: merged by the schema; creates the object when missing).

    The main resource keeps the stored status; /status keeps everything but status.
    manager, version: who writes, through which apiVersion, for managedFields (see create).
    token_check: the caller's token is not checked yet (kube/views.py _unconfirmed_write): only
    a backend that checks it in the write's own statement writes (token_check.confirmed);
    anything else raises storage.Unconfirmed, having written nothing.
    through: a followed cluster's writer (above).
    """
    applying = obj_or_fn if isinstance(obj_or_fn, Apply) else None
    if through is not None and not clusters.is_local() and applying is None and not subresource:
        return through.update(res, namespace, name, obj_or_fn, dry_run=dry_run)
    _refuse_followed()
    request = _Update(res, namespace, name, obj_or_fn, applying, subresource, is_patch, manager, version, kmeta.now())
    # A PUT's body: its metadata.uid is a precondition, and the resourceVersion it names is the
    # one it was computed from (a backend may hold that object already: known_rv).
    put = applying is None and not is_patch
    meta = obj_or_fn.get("metadata") if put and isinstance(obj_or_fn, dict) else None
    named = meta.get("resourceVersion") if isinstance(meta, dict) else None
    change = storage.backend().guaranteed_update(
        Key(res, namespace, name), functools.partial(_updated, request),
        functools.partial(_check_uid_precondition, res, namespace, name, obj_or_fn) if put else None,
        moment=request.moment, known_rv=named or "", dry_run=dry_run, token_check=token_check)
    return _result(change)


@dataclass(slots=True)
class _Update:
    """An update as its request asked it: all its pure part needs besides the current object."""
    res: Resource
    namespace: str
    name: str
    body: object             # the new object, fn(current) -> new object (PATCH), or an Apply
    applying: Apply | None
    subresource: str
    is_patch: bool
    manager: str
    version: str
    moment: datetime


def _check_uid_precondition(res: Resource, namespace: str, name: str, body, current: dict | None) -> None:
    """A PUT body's metadata.uid is a precondition (kube's DefaultUpdatedObjectInfo): it must be
    the stored object's (a missing object has none), else 409 as kube's storage words it."""
    uid = (body.get("metadata") or {}).get("uid") if isinstance(body, dict) else None
    stored = (current or {}).get("metadata", {}).get("uid", "")
    if uid and uid != stored:
        raise conflict(res.group, res.plural, name,
                       f"StorageError: invalid object, Code: 4, Key: /registry/{res.plural}/{namespace}/{name}, "
                       f"ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: {uid}, "
                       f"UID in object meta: {stored}")


def _updated(req: _Update, current: dict | None, final: bool) -> Change:
    """The pure part of an update: what the request makes of `current` (None: there is none),
    as the object to store and how (storage.Change), or an ApiError. No database: the backend
    calls it with the object it read (or cached), as often as it needs. final: no other try
    follows, so the request's body may be used up; before that each try works on a copy."""
    res, namespace, name, applying, moment = req.res, req.namespace, req.name, req.applying, req.moment
    body = req.body if final or not isinstance(req.body, dict) else _copied(req.body)
    if current is None:
        return Change(_created_by_update(req, body), ADDED)
    fields = None
    if applying is not None:
        new, fields = _apply(res, current, copy.deepcopy(applying.config), applying.force, req.manager,
                             req.subresource, moment, req.version)
    else:
        new = body(copy.deepcopy(current)) if callable(body) else body
    sent_fields = (new.get("metadata") or {}).get("managedFields") if isinstance(new, dict) else None
    new["apiVersion"], new["kind"] = res.api_version, res.kind
    nm = new.setdefault("metadata", {})
    if nm.get("name", name) != name:
        # A PUT body names its object; a patch that changes the name is invalid.
        if req.is_patch:
            raise invalid_object(res.group, res.kind, name, [
                invalid("metadata.name", nm.get("name"), "field is immutable")])
        raise bad_request(f"the name of the object ({nm.get('name')}) does not match the name on the URL ({name})")
    nm["name"] = name
    if nm.get("namespace", namespace) != namespace:
        if req.is_patch:
            raise invalid_object(res.group, res.kind, name, [
                invalid("metadata.namespace", nm.get("namespace"), "field is immutable")])
        raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
    nm["namespace"] = namespace
    wanted_rv = nm.get("resourceVersion") or ""
    if wanted_rv:
        if wanted_rv != current["metadata"]["resourceVersion"]:
            raise conflict(res.group, res.plural, name, STALE_OBJECT)
    elif not res.allow_unconditional_update and not req.is_patch:
        raise invalid_object(res.group, res.kind, name, [
            invalid("metadata.resourceVersion", "0x0", "must be specified for an update")])
    old = current
    res.default(new)  # kube decodes (and defaults) status bodies too: times get normalized
    if applying is None:
        # kube's field manager sees the decoded, defaulted object, before the strategy's
        # PrepareForUpdate: what the strategy sets is nobody's.
        fields = _updated_fields(res, old, new, _fields_in(res, sent_fields), req.manager, req.subresource, moment,
                                 req.version)
    kmeta.prepare_update(nm, old["metadata"])
    if req.subresource == "status":
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
    if req.subresource == "status":
        causes = _meta_causes(new) + _meta_update_causes(new, old) + res.validate_status_update(new, old)
    else:
        causes = _meta_causes(new) + _meta_update_causes(new, old) + res.validate(new) + res.validate_update(new, old)
    _validate(res, new, causes)
    if req.subresource != "status":
        res.canonicalize(new)
    _set_fields(new, _fields_out(res, fields))
    if new == old:
        return Change(old, None)   # no-op writes keep the resourceVersion, as etcd does
    if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
        return Change(new, DELETED)   # (kube's shouldDeleteDuringUpdate: the last finalizer went)
    return Change(new, MODIFIED)


def _created_by_update(req: _Update, body) -> dict:
    """An update of a missing object: a server-side apply creates it, a PUT of a kind that allows
    create-on-update too; else 404."""
    res, name, applying = req.res, req.name, req.applying
    if applying is not None and (applying.config.get("metadata") or {}).get("uid"):
        raise conflict(res.group, res.plural, name, "uid mismatch: the provided object specified uid "
                       f"{applying.config['metadata']['uid']}, and no existing object was found")
    if applying is not None and not req.subresource:
        new = copy.deepcopy(applying.config)
        new.setdefault("metadata", {})["name"] = name
        return _new_object(res, req.namespace, new, req.moment, manager=req.manager, apply=applying,
                           version=req.version)
    if not req.is_patch and applying is None and res.allow_create_on_update and not req.subresource:
        new = body
        new.setdefault("metadata", {})["name"] = name
        new["metadata"].pop("resourceVersion", None)
        return _new_object(res, req.namespace, new, req.moment, manager=req.manager, version=req.version)
    raise not_found(res.group, res.plural, name)


def _keep(new: dict, old: dict, keys) -> None:
    """The stored values of keys win over the request's (absent stays absent)."""
    for key in keys:
        if key in old:
            new[key] = old[key]
        else:
            new.pop(key, None)


def _copied(body: dict) -> dict:
    return orjson.loads(orjson.dumps(body))


# ---------------------------------------------------------------------------------------------
# Delete


def delete(res: Resource, namespace: str, name: str, *, uid: str | None = None, rv: str | None = None,
           dry_run: bool = False, through=None, expired: bool = False) -> Result:
    """Delete now, or mark deletionTimestamp when finalizers remain (the object stays).
    through: a followed cluster's writer (above). expired: its time to live is over (kube/expiry.py):
    gone whatever its finalizers, as etcd's lease deletes an expired Event."""
    moment = kmeta.now()
    if through is not None and not clusters.is_local():
        return through.delete(res, namespace, name, uid=uid, rv=rv, dry_run=dry_run)
    _refuse_followed()
    change = storage.backend().delete(Key(res, namespace, name), functools.partial(_deleting, moment, expired),
                                      functools.partial(_check_preconditions, res, name, uid, rv),
                                      moment=moment, dry_run=dry_run)
    return _result(change)


def _check_preconditions(res: Resource, name: str, uid: str | None, rv: str | None, current: dict) -> None:
    m = current["metadata"]
    if uid and uid != m.get("uid"):
        raise conflict(res.group, res.plural, name,
                       f"Precondition failed: UID in precondition: {uid}, UID in object meta: {m.get('uid')}")
    if rv and rv != m.get("resourceVersion"):
        raise conflict(res.group, res.plural, name,
                       f"Precondition failed: ResourceVersion in precondition: {rv}, "
                       f"ResourceVersion in object meta: {m.get('resourceVersion')}")


def _deleting(moment: datetime, expired: bool, current: dict) -> Change:
    """The pure part of a delete: gone, or (finalizers remain, and not expired) marked with
    deletionTimestamp, once (kube's updateForGracefulDeletionAndFinalizers)."""
    m = current["metadata"]
    if expired or not m.get("finalizers"):
        return Change(current, DELETED)
    if m.get("deletionTimestamp"):
        return Change(current, None)
    m["deletionTimestamp"] = kmeta.format_time(moment)
    m["deletionGracePeriodSeconds"] = 0
    return Change(current, MODIFIED)


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

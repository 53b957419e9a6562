"""What a follower may store of an upstream object: the API's own checks, before store.mirror.

A followed cluster is another server's word. An object kubedash's API would refuse (a name it
cannot hold, a field of the wrong type, a time that is not one, a value longer than its column)
would fail the whole batch it came in (and, retried, the follower) or be served to clients that
trust the API's shapes. admit() runs what a create runs: JSON bounds (codec.check_value), the
kind's schema (types; unknown fields dropped as the API drops them), ObjectMeta's rules and the
kind's validation, the times the store reads; it returns the object to store or why not, as a
short reason that names the field and never repeats upstream's values (follow/informer.py
reports it by the object's name: the Clusters page, the log).
"""
from __future__ import annotations

from typing import Any

from dashboard.kube import codec, registry, schema, validation
from dashboard.kube.errors import ApiError
from dashboard.kube.formats import parse_time

MAX_NAME_SHOWN = 253
MAX_UID = 36                 # ObjectRow.uid
MAX_RESOURCE_VERSION = 64    # Revision.upstream_rv


class Refused(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def key_of(obj: Any) -> tuple[str, str] | None:
    """(namespace, name) of an upstream object, or None when it has no usable name."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return None
    name, namespace = meta.get("name"), meta.get("namespace", "")
    if not isinstance(name, str) or not name or not isinstance(namespace, str):
        return None
    return namespace, name


def shown_key(obj: Any) -> str:
    """The object's namespace/name for a report: printable, bounded."""
    key = key_of(obj)
    if key is None:
        return "an object without a name"
    text = "/".join(p for p in key if p)
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= MAX_NAME_SHOWN else text[:MAX_NAME_SHOWN] + "…"


def _causes_reason(causes: list) -> str:
    fields = []
    for cause in causes:
        where = f"{cause.get('field') or 'the object'}: {cause.get('reason') or 'invalid'}"
        if where not in fields:
            fields.append(where)
    return ", ".join(fields[:3]) + (f" (and {len(fields) - 3} more)" if len(fields) > 3 else "")


def admit(res: registry.Resource, obj: Any) -> dict:
    """The object as it may be stored, or Refused(reason)."""
    if key_of(obj) is None:
        raise Refused("it has no metadata.name")
    try:
        codec.check_value(obj)
    except codec.Unrepresentable:
        raise Refused("it holds a value JSON cannot (too deep, too large, not text)") from None
    try:
        pruned, _unknown = schema.decode(obj, res.definition)
    except ApiError as err:   # (the decoder's words name the field and the types, never the value)
        raise Refused(f"it does not match the {res.kind} schema ({getattr(err, 'detail', '') or err.reason})") from None
    meta = pruned.get("metadata") or {}
    if not isinstance(meta.get("uid"), str) or not meta["uid"]:
        raise Refused("it has no metadata.uid")
    # Server-owned fields the API never takes from a client: bounded as kube's own values are
    # (a UID, a uint64 revision), which is what their columns hold (kube/models.py).
    if len(meta["uid"]) > MAX_UID:
        raise Refused(f"metadata.uid: longer than {MAX_UID} characters (not a UID)")
    if len(str(meta.get("resourceVersion") or "")) > MAX_RESOURCE_VERSION:
        raise Refused(f"metadata.resourceVersion: longer than {MAX_RESOURCE_VERSION} characters")
    for field in ("creationTimestamp", "deletionTimestamp"):
        if meta.get(field) is not None and parse_time(meta[field]) is None:
            raise Refused(f"metadata.{field}: not a time")
    try:
        causes = validation.validate_object_meta(meta, namespaced=True) + res.validate(pruned)
        if not causes:
            res.typed_columns(pruned)
    except Exception:   # noqa: BLE001 - a shape the kind's rules never expected
        raise Refused(f"it does not match the {res.kind} schema") from None
    if causes:
        raise Refused(_causes_reason(causes))
    return pruned

"""ObjectMeta rules: what the server owns (uid, timestamps, resourceVersion, generation) and
what clients may set, and the small query formats (resourceVersion, ParseBool)."""
from __future__ import annotations

import random
import uuid
from datetime import datetime

from .errors import bad_request
from .formats import format_time, now, parse_time  # noqa: F401  (meta.now / meta.format_time: ObjectMeta's clock)

# Server-owned metadata: clients cannot set these, an update keeps the stored values.
SYSTEM_FIELDS = ("uid", "creationTimestamp", "resourceVersion", "generation", "deletionTimestamp",
                 "deletionGracePeriodSeconds", "selfLink", "managedFields")
_GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # kube's utilrand alphabet: no vowels, no look-alikes


def parse_bool(value: str | None, name: str, default: bool = False) -> bool:
    """Go's strconv.ParseBool, which is what kube-apiserver uses for query parameters."""
    if value is None or value == "":
        return default
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise bad_request(f'invalid value for query parameter "{name}": strconv.ParseBool: parsing "{value}": invalid syntax')


def parse_resource_version(value, *, what: str = "resourceVersion") -> int | None:
    """"" or None -> None; otherwise a decimal revision (a uint64), or 400 in the wording of
    kube's versioner (strconv.ParseUint)."""
    if value is None or value == "":
        return None
    text = str(value)
    if not (text.isascii() and text.isdigit()):
        why = "invalid syntax"
    elif int(text) >= 1 << 64:
        why = "value out of range"
    else:
        return int(text)
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    raise bad_request(f'{what}: Invalid value: "{quoted}": strconv.ParseUint: parsing "{quoted}": {why}')


def generate_name(prefix: str) -> str:
    return prefix + "".join(random.choice(_GENERATE_CHARS) for _ in range(5))


def new_uid() -> str:
    return str(uuid.uuid4())


def prepare_create(meta: dict, *, has_generation: bool, moment: datetime) -> None:
    """Set the server-owned fields of a new object (resourceVersion comes from the store)."""
    for key in SYSTEM_FIELDS:
        meta.pop(key, None)
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = generate_name(meta["generateName"])
    meta["uid"] = new_uid()
    meta["creationTimestamp"] = format_time(moment)
    if has_generation:
        meta["generation"] = 1


def prepare_update(meta: dict, old_meta: dict) -> None:
    """Keep the server-owned fields of the stored object; the client's copies are ignored."""
    for key in SYSTEM_FIELDS:
        meta.pop(key, None)
        if key in old_meta and key != "resourceVersion":
            meta[key] = old_meta[key]


def drop_empty(meta: dict) -> None:
    """Go's omitempty: empty maps and lists are not part of the stored object."""
    for key in ("labels", "annotations", "finalizers", "ownerReferences"):
        if key in meta and not meta[key]:
            del meta[key]

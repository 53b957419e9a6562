"""Conflicts: what changed while someone edited, and what "Reapply my changes" submits.

For the forms (conflict_view: the form's fields, grouped as the form's comparable() says) and
for the YAML editor (yaml_rows: the object's leaves by path; reapply_yaml: a merge patch of
the user's changes onto the current object).
"""
from __future__ import annotations

import copy
import json
from typing import Any, Callable

from dashboard.kube.patch import merge_patch

from .base import ObjectForm


def _values(form_cls: type[ObjectForm], data: dict, mode: str) -> dict | None:
    form = form_cls(data, mode=mode)
    return form.cleaned_data if form.is_valid() else None


def conflict_view(form: ObjectForm, posted: dict, base: dict | None, current: dict) -> tuple[list[dict], dict]:
    """Compare the user's values with the current object (and with the version the form was
    loaded from, when the revision log still has it).

    Returns (rows for the table, form data for "reapply"). Reapplying submits the user's value
    for what the user changed and the current value for everything else, so another person's
    change to a field the user did not touch survives.
    """
    cls = type(form)
    current_data = cls.data_from_object(current)
    base_data = cls.data_from_object(base) if base is not None else None
    yours = form.cleaned_data
    now_values = _values(cls, current_data, form.mode) or {}
    base_values = (_values(cls, base_data, form.mode) or {}) if base_data is not None else None
    # The widest set of fields (e.g. the repeated sections of either version).
    probe = cls(current_data, mode=form.mode)
    groups = {key: (label, names) for key, label, names in probe.comparable()}
    for key, label, names in form.comparable():
        if key in groups:
            groups[key] = (label, tuple(dict.fromkeys(groups[key][1] + names)))
        else:
            groups[key] = (label, names)
    rows, merged = [], {}
    for label, names in groups.values():
        mine = cls.group_value(yours, names)
        theirs = cls.group_value(now_values, names)
        was = cls.group_value(base_values, names) if base_values is not None else None
        you_changed = base_values is None or mine != was
        they_changed = base_values is not None and was != theirs
        source = posted if you_changed else current_data
        for name in names:
            if name in source:
                merged[name] = source[name]
        if mine != theirs:
            note = _note(you_changed, they_changed)
            rows.append({"field": label, "yours": cls.group_display(yours, names),
                         "current": cls.group_display(now_values, names), "note": note,
                         "theirs_changed": they_changed})
    for name in ("name", "namespace"):
        if name in posted:
            merged[name] = posted[name]
    return rows, merged


def _note(you_changed: bool, they_changed: bool) -> str:
    """Who changed a field, and what "Reapply" does with it."""
    if you_changed and they_changed:
        return "changed by you and by someone else: reapplying saves yours"
    if they_changed:
        return "changed by someone else: reapplying keeps theirs"
    return "your change: reapplying saves it"


# Fields the server sets on every write (noise in a diff), and what an edit cannot change.
NOISY_PATHS = ("metadata.resourceVersion", "metadata.managedFields", "metadata.generation", "metadata.uid",
               "metadata.creationTimestamp", "apiVersion", "kind")
IGNORED_PATHS = NOISY_PATHS + ("status",)


def under(path: str, prefixes) -> bool:
    """Is this flattened path one of the prefixes or inside one of them?"""
    return any(path == p or path.startswith(p + ".") or path.startswith(p + "[") for p in prefixes)


def flatten(value: Any, prefix: str = "", item_key: Callable[[list], str | None] | None = None) -> dict[str, Any]:
    """Leaves of an object by path ("spec.template.spec.containers[0].image"). With item_key,
    a list whose items it names a key for is addressed by that key's values instead of indexes
    ("status.conditions[type=Complete].status")."""
    if isinstance(value, list) and value and item_key is not None and (key := item_key(value)):
        out: dict[str, Any] = {}
        for item in value:
            out.update(flatten(item, f"{prefix}[{key}={item[key]}]", item_key))
        return out
    if isinstance(value, dict) and value:
        out = {}
        for k, item in value.items():
            out.update(flatten(item, f"{prefix}.{k}" if prefix else str(k), item_key))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{i}]", item_key))
        return out
    return {prefix: value}


def yaml_rows(yours: dict, base: dict | None, current: dict) -> list[dict]:
    """Differences between the edited object and the current one (server-owned fields and
    status left out: an update cannot change them)."""
    mine, theirs = flatten(yours), flatten(current)
    was = flatten(base) if base is not None else None
    rows = []
    for path in sorted(set(mine) | set(theirs)):
        if under(path, IGNORED_PATHS):
            continue
        if mine.get(path) == theirs.get(path):
            continue
        they_changed = was is not None and was.get(path) != theirs.get(path)
        you_changed = was is None or was.get(path) != mine.get(path)
        note = _note(you_changed, they_changed)
        rows.append({"field": path, "yours": _leaf(mine, path), "current": _leaf(theirs, path), "note": note,
                     "theirs_changed": they_changed})
    return rows


def _leaf(values: dict, path: str) -> str:
    if path not in values:
        return "(not set)"
    value = values[path]
    if value in ({}, []):
        return "(empty)"
    return value if isinstance(value, str) else json.dumps(value)


def merge_diff(base: Any, yours: Any) -> Any:
    """A JSON merge patch (RFC 7386) that turns base into yours (lists are replaced whole)."""
    if not isinstance(base, dict) or not isinstance(yours, dict):
        return copy.deepcopy(yours)
    patch: dict = {}
    for key in base:
        if key not in yours:
            patch[key] = None
    for key, value in yours.items():
        if key not in base:
            patch[key] = copy.deepcopy(value)
        elif base[key] != value:
            patch[key] = merge_diff(base[key], value)
    return patch


def reapply_yaml(yours: dict, base: dict | None, current: dict) -> dict:
    """The user's edit replayed on the current object: the changes they made to the version
    they loaded, as a merge patch onto the current one (all of theirs when that version is no
    longer in the revision log)."""
    if base is None:
        out = copy.deepcopy(yours)
    else:
        out = merge_patch(copy.deepcopy(current), merge_diff(base, yours))
    out.setdefault("metadata", {})["resourceVersion"] = current["metadata"].get("resourceVersion", "")
    return out

"""What a save sends, and conflicts: what changed while someone edited, and what "Reapply my
changes" submits.

A save sends only what the person changed since the page was loaded: the form's values as
loaded travel with it (a hidden field, LOADED; the YAML editor posts its original text), and
the difference between those and what was submitted is a JSON merge patch onto the object as
it is now (form_changes, yaml_changes), conditional on those fields only: it conflicts only
when someone else changed one of them differently meanwhile (a Lease renewed every second
stays editable; kubectl label does the same with its patch).

For the conflict page: conflict_view (the form's fields, grouped as the form's comparable()
says) and, for the YAML editor, yaml_rows (the object's leaves by path) and reapply_yaml (a
merge patch of the user's changes onto the current object).
"""
from __future__ import annotations

import copy
import json
from typing import Any, Callable

from dashboard.kube.patch import merge_patch

from .base import ObjectForm


LOADED = "loaded"   # the edit form's hidden field: its values as loaded (JSON), what a save diffs against
# Fields the server sets on every write (noise in a diff), and what an edit cannot change.
NOISY_PATHS = ("metadata.resourceVersion", "metadata.managedFields", "metadata.generation", "metadata.uid",
               "metadata.creationTimestamp", "apiVersion", "kind")
IGNORED_PATHS = NOISY_PATHS + ("status",)


def _values(form_cls: type[ObjectForm], data: dict, mode: str) -> dict | None:
    form = form_cls(data, mode=mode)
    return form.cleaned_data if form.is_valid() else None


def loaded_text(data: dict) -> str:
    """The value of the LOADED field for form data (data_from_object's strings)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def posted_loaded(post) -> dict | None:
    """The form's values as loaded, from a POST; None when absent or not what loaded_text wrote."""
    try:
        data = json.loads(post.get(LOADED) or "")
    except ValueError:
        return None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        return None
    return data


def _groups(*forms: ObjectForm) -> list[tuple[str, tuple[str, ...]]]:
    """(label, field names) of what the forms compare, the widest set of fields (e.g. the
    repeated sections of either version)."""
    groups: dict[str, tuple[str, tuple[str, ...]]] = {}
    for form in forms:
        for key, label, names in form.comparable():
            if key in groups:
                groups[key] = (groups[key][0], tuple(dict.fromkeys(groups[key][1] + names)))
            else:
                groups[key] = (label, names)
    return list(groups.values())


def form_changes(form: ObjectForm, loaded: dict, current: dict) -> tuple[dict, list[str]] | None:
    """What the person changed in a valid edit form since it was loaded (loaded: the form's data
    then), onto the object as it is now: (a JSON merge patch for current, the labels of the
    fields they changed that someone else changed differently meanwhile). None when the loaded
    values do not make a valid form (the caller falls back to the resourceVersion).

    The patch is the difference between the loaded values and the submitted ones, each written
    into the current object by the form's own apply(): the fields the person left alone come
    out the same on both sides, so a field the form shows but nobody touched (a Lease's
    renewTime, renewed meanwhile) is not sent at all."""
    cls = type(form)
    before = cls(loaded, mode=form.mode)
    if not before.is_valid():
        return None
    now = cls(cls.data_from_object(current), mode=form.mode)
    theirs_values = now.cleaned_data if now.is_valid() else {}
    clashes = []
    for label, names in _groups(form, before, now):
        mine, was = cls.group_value(form.cleaned_data, names), cls.group_value(before.cleaned_data, names)
        theirs = cls.group_value(theirs_values, names)
        if mine != was and theirs != was and theirs != mine:
            clashes.append(label)
    unchanged = before.apply(copy.deepcopy(current))
    return merge_diff(unchanged, form.apply(copy.deepcopy(current))), clashes


def conflict_view(form: ObjectForm, posted: dict, loaded: dict | None, current: dict) -> tuple[list[dict], dict]:
    """Compare the user's values with the current object (and with the values the form was
    loaded with, when known): a row for each field the user changed that differs now.

    Returns (rows for the table, form data for "reapply"). Reapplying submits the user's value
    for what the user changed and the current value for everything else (and the current
    values as the LOADED ones), so another person's change to a field the user did not touch
    survives.
    """
    cls = type(form)
    current_data = cls.data_from_object(current)
    yours = form.cleaned_data
    now_values = _values(cls, current_data, form.mode) or {}
    base_values = (_values(cls, loaded, form.mode) or {}) if loaded is not None else None
    groups = {label: (label, names) for label, names in _groups(cls(current_data, mode=form.mode), form)}
    rows, merged = [], {LOADED: loaded_text(current_data)}
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
        if mine != theirs and you_changed:
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
    """Differences between the edited object and the current one in the fields the person
    changed (server-owned fields and status left out: an update cannot change them)."""
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
        if not you_changed:
            continue
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


def _editable(obj: dict) -> dict:
    """obj without what an edit cannot change (IGNORED_PATHS): what a YAML diff compares."""
    out = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("apiVersion", "kind", "status")}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: v for k, v in meta.items() if not under(f"metadata.{k}", IGNORED_PATHS)}
    return out


def yaml_changes(original: dict, edited: dict, current: dict) -> tuple[dict, list[str]]:
    """What the person changed in the YAML editor since it was loaded (original: the object as
    loaded, edited: as submitted), onto the object as it is now: (a JSON merge patch for
    current, the paths they changed that someone else changed differently meanwhile). Lists
    are replaced whole, as a merge patch does: a list is one field here."""
    base, mine = _editable(original), _editable(edited)
    patch = merge_diff(base, mine)
    return patch, _clashes(patch, base, mine, current, "")


def _clashes(patch: dict, base: Any, mine: Any, current: Any, path: str) -> list[str]:
    out = []
    for key, value in patch.items():
        where = f"{path}.{key}" if path else str(key)
        was, wanted, now = (x.get(key) if isinstance(x, dict) else None for x in (base, mine, current))
        if isinstance(value, dict) and isinstance(was, dict) and isinstance(now, dict):
            out += _clashes(value, was, wanted, now, where)
        elif now != was and now != wanted:
            out.append(where)
    return out

"""View-models for a detail page's History and Field owners views (pure functions of objects,
plus the log reads in history_page/latest, all through kube/revlog.py).

History: each logged revision of one object, newest first, with who wrote it (from the
managedFields entry that moved between it and the revision before, as kube-apiserver stamps
the writer's entry) and a diff of its leaves to the revision before, without the fields the
server changes on every write (forms.conflict.NOISY_PATHS).

Field owners: the object's YAML line by line, each line with the managers that own it, read
from metadata.managedFields (fieldsV1: f:<field>, k:<list-map key>, v:<set value>, i:<index>,
"." = the node itself; an empty {} at a map or list field owns all of it, as for atomic lists).
"""
from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Callable

import yaml

from dashboard.kube import registry, revlog, schema
from dashboard.kube.formats import parse_time
# The schema walk kube/managed_fields.py builds field sets with: which values are one leaf.
from dashboard.kube.managed_fields import _child as _schema_child, _leaf_of as _schema_leaf

from .forms.conflict import NOISY_PATHS, flatten, under
from .present import _YamlDumper, clock, iso

PAGE = 50                 # revisions per history page
VALUE_CHARS = 300         # a longer value is cut in the diff (the YAML view shows it whole)
NOISE_NAMES = ", ".join(p.split(".")[-1] for p in NOISY_PATHS)


# ---------------------------------------------------------------------------------------------
# Who wrote a revision


def _entries(obj: dict | None) -> dict[tuple, dict]:
    managed = ((obj or {}).get("metadata") or {}).get("managedFields") or []
    return {(e.get("manager", ""), e.get("operation", ""), e.get("subresource", ""), e.get("apiVersion", "")): e
            for e in managed if isinstance(e, dict)}


def writer(before: dict | None, after: dict | None) -> dict | None:
    """The manager and operation of the write that turned `before` into `after`, or None.

    kube-apiserver sets `time` on the writing manager's entry (and only on it) whenever the
    write changed a field; other managers' entries can only lose fields. So the writer is the
    entry that is new or whose time moved (the latest, if several did).
    """
    now, was = _entries(after), _entries(before)
    moved = [e for key, e in now.items() if key not in was or was[key].get("time") != e.get("time")]
    if not moved:
        moved = [e for key, e in now.items() if was[key].get("fieldsV1") != e.get("fieldsV1")
                 and len(_fields(e)) > len(_fields(was[key]))]
    if not moved:
        return None
    return _who(max(moved, key=lambda e: e.get("time") or ""))


# kube-apiserver records a write with neither a fieldManager nor a User-Agent under an empty
# manager (the entry has no "manager" key at all).
UNNAMED = "(unnamed manager)"


def manager_name(entry: dict) -> str:
    return entry.get("manager") or UNNAMED


def _who(e: dict) -> dict:
    return {"manager": manager_name(e), "operation": e.get("operation", ""), "subresource": e.get("subresource", ""),
            "hue": hue(e.get("manager", ""))}


def _stamped(obj: dict, when: datetime) -> dict | None:
    """The writer when no entry's time moved (the same manager wrote twice within a second):
    the one entry stamped with the revision's own second, if exactly one is."""
    hits = []
    for e in _entries(obj).values():
        try:
            if abs((parse_time(e.get("time") or "") - when).total_seconds()) < 2:
                hits.append(e)
        except Exception:   # no time, or one we cannot read: not this one
            continue
    if len(hits) != 1:
        return None
    return _who(hits[0])


def hue(manager: str) -> int:
    """A stable colour per manager (its name is always shown beside it)."""
    return int(hashlib.sha1(manager.encode()).hexdigest()[:4], 16) % 360


# ---------------------------------------------------------------------------------------------
# Diffs


def _show(value: Any) -> str:
    if value in ({}, []):
        return "(empty)"
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "…"


# A list whose items all carry one of these, with distinct values, is compared item by item
# under that key ("status.conditions[type=Complete].status"), so that an item added or removed
# in the middle reads as that, not as every later item changing.
ITEM_KEYS = ("name", "type", "ip")


def _item_key(items: list) -> str | None:
    for key in ITEM_KEYS:
        values = [item.get(key) if isinstance(item, dict) else None for item in items]
        if all(isinstance(v, str) and v for v in values) and len(set(values)) == len(values):
            return key
    return None


def leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """forms.conflict.flatten, with keyed list items where ITEM_KEYS allows."""
    return flatten(value, prefix, _item_key)


def diff(before: dict | None, after: dict) -> list[dict]:
    """Changed, added and removed leaves (paths as "spec.template.spec.containers[name=c].image"),
    in the object's order, the server's per-write fields left out."""
    old = leaves(before) if before is not None else {}
    new = leaves(after)

    def filled(path: str, value, other: dict) -> bool:
        # An empty map or list that gained (or lost) entries: its entries tell the change.
        return value in ({}, []) and any(p.startswith((path + ".", path + "[")) for p in other)

    rows = []
    for path, value in new.items():
        if under(path, NOISY_PATHS) or (path not in old and filled(path, value, old)):
            continue
        if path not in old:
            rows.append({"path": path, "change": "added", "new": _show(value)})
        elif old[path] != value:
            rows.append({"path": path, "change": "changed", "old": _show(old[path]), "new": _show(value)})
    for path, value in old.items():
        if path not in new and not under(path, NOISY_PATHS) and not filled(path, value, new):
            rows.append({"path": path, "change": "removed", "old": _show(value)})
    return rows


# ---------------------------------------------------------------------------------------------
# History pages


def entry(rv: int, event: str, obj: dict, when: datetime, previous: dict | None, known_previous: bool,
          previous_hidden: bool = False) -> dict:
    """One revision as the history shows it. previous: the revision before it (None when this
    is the first, or when the log no longer has it: known_previous says which)."""
    out = {"rv": rv, "at": when, "event": event, "when": clock(when), "when_iso": iso(when), "changes": [],
           "writer": None, "note": "", "recorded": bool(_entries(obj))}
    if event == revlog.DELETED:
        out["note"] = "Deleted (the API does not record who deletes)."
        return out
    if previous_hidden:
        out["note"] = "The revision before this one is outside this shared view."
        out["writer"] = writer(None, obj)
        return out
    if previous is None and known_previous:
        out["note"] = "Earlier revisions were compacted: no diff to show."
        out["writer"] = writer(None, obj)   # the newest entry time: the last writer that changed a field
        return out
    out["writer"] = writer(previous, obj) or _stamped(obj, when)
    out["changes"] = diff(previous, obj)
    out["created"] = event == revlog.ADDED
    if not out["changes"]:
        out["note"] = "No visible change (only fields the server sets on every write)."
    return out


def history_page(kind: str, namespace: str, name: str, visible: Callable[[dict], bool],
                 before: int | None = None) -> dict | None:
    """One page of an object's history (newest first, PAGE revisions below `before`), or None
    when the log holds nothing of it. visible(object): may the viewer see this revision
    (a share link's selector; the page checked the rest)."""
    rows = revlog.object_revisions(kind, namespace, name, PAGE + 1, before=before)
    if not rows:
        return None
    shown, extra = rows[:PAGE], rows[PAGE:]
    entries = _entries_of(visible, shown, extra[0] if extra else None)
    first = revlog.first_logged(kind, namespace, name)
    compacted_rv, compacted_at = revlog.horizon()
    complete = first is not None and first[1] == revlog.ADDED
    return {
        "entries": entries,
        "newest_rv": shown[0][0],
        "older": shown[-1][0] if extra else None,
        "paged": before is not None,
        "total": revlog.count_revisions(kind, namespace, name),
        "complete": complete,
        "horizon_rv": compacted_rv if not complete else None,
        "horizon_at": clock(compacted_at) if compacted_at and not complete else "",
        "noise": NOISE_NAMES,
    }


def _entries_of(visible: Callable[[dict], bool], rows: list, older: tuple | None) -> list[dict]:
    """Entries for rows (newest first); `older` is the revision just below the last row, if logged."""
    chain = rows + ([older] if older else [])
    seen = [visible(obj) for _, _, obj, _ in chain]
    out = []
    for i, (rv, event, obj, when) in enumerate(rows):
        if not seen[i]:
            out.append({"rv": rv, "at": when, "hidden": True, "when": clock(when), "when_iso": iso(when)})
            continue
        has_prev = i + 1 < len(chain) and event != revlog.ADDED   # a re-created object starts afresh
        prev = chain[i + 1][2] if has_prev else None
        known = not has_prev and event != revlog.ADDED    # the log should have had one
        out.append(entry(rv, event, obj, when, prev if has_prev and seen[i + 1] else None, known,
                         previous_hidden=has_prev and not seen[i + 1]))
    return out


def newer_entries(kind: str, namespace: str, name: str, visible: Callable[[dict], bool], after: int) -> list[dict]:
    """Entries for the revisions written after `after` (the live page's newest), newest first."""
    rows = revlog.object_revisions(kind, namespace, name, PAGE + 1, after=after)
    if not rows:
        return []
    older = revlog.object_revisions(kind, namespace, name, 1, before=rows[-1][0])
    return _entries_of(visible, rows[:PAGE], older[0] if older else None)


# ---------------------------------------------------------------------------------------------
# One timeline: the revisions and what happened to the object (its Events: kinds.Timeline)

SHOW = ("", "changes", "warnings")   # ?show=: everything, the revisions only, the warnings only


def merge(revisions: list[dict], happenings: list[dict], show: str = "", *, since=None, until=None) -> list[dict]:
    """Revisions and Events in one list, newest first, filtered by `show`. Events are kept to
    the span the revisions cover (after `since`, up to `until`; None: open-ended), so a page of
    older revisions shows the Events of its own time."""
    if show == "warnings":
        revisions = []
    kept = [e for e in happenings if (since is None or (e["at"] is not None and e["at"] >= since))
            and (until is None or (e["at"] is not None and e["at"] <= until))
            and (show != "warnings" or e["warning"]) and show != "changes"]
    merged = revisions + kept
    # By the second (an Event's times have no fraction), then by revision: what was written
    # in the same second stays in the order it was written.
    merged.sort(key=lambda e: (e["at"] is not None, int(e["at"].timestamp()) if e["at"] else 0, e["rv"]),
                reverse=True)
    return merged


def timeline_page(page: dict, happenings: list[dict], show: str) -> list[dict]:
    """A history page's entries merged with the Events of its span."""
    revisions = page["entries"]
    if not revisions:
        return merge([], happenings, show)
    oldest = revisions[-1]["at"] if page["older"] is not None else None   # the whole history: every Event
    newest = revisions[0]["at"] if page["paged"] else None
    return merge(revisions, happenings, show, since=oldest, until=newest)


def latest(kind: str, namespace: str, name: str) -> tuple[int, str, dict, datetime] | None:
    """The newest logged revision of an object (its current state, or its deletion)."""
    rows = revlog.object_revisions(kind, namespace, name, 1)
    return rows[0] if rows else None


# ---------------------------------------------------------------------------------------------
# Field owners

_ALL = "all"   # an ancestor was owned whole (an atomic list or map): everything below is too


def _scalar(value: Any) -> list[str]:
    text = yaml.dump(value, Dumper=_YamlDumper, allow_unicode=True, width=10**6)
    if text.endswith("\n...\n"):
        text = text[:-5]
    return text.rstrip("\n").split("\n")


def _match_item(tree: dict, index: int, item: Any) -> Any:
    """The subtree of a list's fieldsV1 that describes this item (k:, v: or i:), or None."""
    for key, sub in tree.items():
        try:
            if key.startswith("k:"):
                want = json.loads(key[2:])
                if isinstance(item, dict) and isinstance(want, dict) and all(item.get(k) == v for k, v in want.items()):
                    return sub
            elif key.startswith("v:"):
                if json.loads(key[2:]) == item:
                    return sub
            elif key == f"i:{index}":
                return sub
        except (ValueError, TypeError):
            continue
    return None


def _child(state: Any, key: str | None, index: int | None = None, item: Any = None) -> Any:
    """One manager's fieldsV1 state one level down (a field by name, or a list item)."""
    if state is _ALL:
        return _ALL
    if not isinstance(state, dict):
        return None
    return state.get(f"f:{key}") if key is not None else _match_item(state, index, item)


def _owns(state: Any) -> bool:
    return state is _ALL or state == {} or (isinstance(state, dict) and "." in state)


def _below(state: Any, atomic: bool) -> Any:
    """What the children of a node see: everything when the node is atomic and owned ({}),
    nothing when a granular node is owned only itself ({})."""
    if state is _ALL or (state == {} and atomic):
        return _ALL
    return None if state == {} else state


def _fields(entry: dict) -> list[str]:
    """The leaves an entry owns (for the legend's count)."""
    out = []

    def walk(tree, path):
        if not isinstance(tree, dict) or not tree:
            out.append(path)
            return
        for key, sub in tree.items():
            if key == ".":
                out.append(path)
            else:
                walk(sub, f"{path}/{key}")
    walk(entry.get("fieldsV1") or {}, "")
    return out


def field_owners(obj: dict, kind: str | None = None) -> dict:
    """The object's YAML (as the YAML panel shows it: keys sorted, managedFields left out) as
    lines, each with the indexes of the managers that own it, and the legend of managers.

    A manager that owns a field whose value is atomic for the schema (an atomic list, an atomic
    struct such as a label selector: a leaf in its FieldsV1) owns every line below it too; one
    that owns a granular map or struct itself ({} or ".") owns only that line.
    """
    managed = [e for e in ((obj.get("metadata") or {}).get("managedFields") or [])
               if isinstance(e, dict)]
    shown = dict(obj)
    meta = dict(shown.get("metadata") or {})
    meta.pop("managedFields", None)
    shown["metadata"] = meta
    lines: list[dict] = []

    def owners(states: list) -> list[int]:
        return [i for i, s in enumerate(states) if _owns(s)]

    def add(text: str, states: list, extra: list | None = None):
        idx = sorted(set(owners(states)) | set(extra or ()))
        lines.append({"text": text, "owners": idx, "via": [i for i in idx if states[i] is _ALL]})

    def emit_value(prefix: str, value: Any, indent: int, states: list, node, field_meta,
                   head: list | None = None, inner: int | None = None):
        """One `prefix` ("key:" or "- key:") at `indent`, its value after it or on the lines
        below (at `inner`, default two deeper); head: more owners for the first line."""
        pad = " " * indent
        inner = indent + 2 if inner is None else inner
        atomic = _schema_leaf(value, node, field_meta)
        if isinstance(value, dict) and value:
            add(pad + prefix, states, head)
            for k in sorted(value):
                child, child_meta, _ = _schema_child(node, k)
                emit_value(f"{k}:", value[k], inner, [_child(_below(s, atomic), k) for s in states], child, child_meta)
        elif isinstance(value, list) and value:
            add(pad + prefix, states, head)
            # Lists sit under their key, as kubectl prints them.
            emit_list(value, inner - 2, [_below(s, atomic) for s in states], getattr(node, "item", schema.ANY))
        else:
            text = _scalar(value)
            add(f"{pad}{prefix} {text[0]}", states, head)
            for more in text[1:]:
                add(pad + more, states)

    def emit_list(items: list, indent: int, states: list, item_node):
        pad = " " * indent
        for i, item in enumerate(items):
            item_states = [_child(s, None, i, item) for s in states]
            if isinstance(item, dict) and item:
                keys = sorted(item)
                fields = [_below(s, _schema_leaf(item, item_node, schema.NO_META)) for s in item_states]
                # "- name: c" carries the item's owners and its first field's; the item's other
                # fields line up under the first.
                for n, k in enumerate(keys):
                    child, child_meta, _ = _schema_child(item_node, k)
                    if n == 0:
                        emit_value(f"- {k}:", item[k], indent, [_child(s, k) for s in fields], child, child_meta,
                                   head=owners(item_states), inner=indent + 4)
                    else:
                        emit_value(f"{k}:", item[k], indent + 2, [_child(s, k) for s in fields], child, child_meta)
            elif isinstance(item, list) and item:
                add(pad + "-", item_states)
                emit_list(item, indent + 2, [_below(s, True) for s in item_states], schema.ANY)
            else:
                emit_value("-", item, indent, item_states, item_node, schema.NO_META)

    root = [e.get("fieldsV1") or {} for e in managed]
    res = registry.by_kind(kind) if kind else None
    top = schema.node(res.definition) if res is not None else schema.ANY
    for key in sorted(shown):
        child, child_meta, _ = _schema_child(top, key)
        emit_value(f"{key}:", shown[key], 0, [_child(s, key) for s in root], child, child_meta)
    legend = [{"index": i, "manager": manager_name(e), "operation": e.get("operation", ""),
               "subresource": e.get("subresource", ""), "api_version": e.get("apiVersion", ""),
               "time": _time(e.get("time")), "fields": len(_fields(e)), "hue": hue(e.get("manager", ""))}
              for i, e in enumerate(managed)]
    for line in lines:
        line["badges"] = [legend[i] for i in line["owners"]]
    return {"lines": lines, "managers": legend, "recorded": bool(managed)}


def _time(text: str | None) -> str:
    if not text:
        return ""
    try:
        return clock(parse_time(text))
    except Exception:   # a stored time we cannot read: show it as written
        return text

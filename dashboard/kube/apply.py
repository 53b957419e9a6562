"""Server-side apply (application/apply-patch+yaml) as kube-apiserver 1.32 does it
(sigs.k8s.io/structured-merge-diff merge.Updater.Apply): merge the applied configuration into
the live object by the schema's list and map types, give the applier the fields it applied,
remove what it applied before and omits now unless someone else owns it, and refuse (409) a
different value for a field another manager owns unless forced.
"""
from __future__ import annotations

import json
from typing import Any

from . import managed_fields as mf
from . import schema
from .managed_fields import _MISSING, _child, _list_kind, _shape, item_pe


def merge(live: Any, config: Any, node: schema.Node, meta: schema.PatchMeta = schema.NO_META) -> Any:
    """typed.Merge: config's values win; structs and maps merge by key, associative lists by
    item key (in structured-merge-diff's order), atomic values are replaced whole."""
    if live is _MISSING or live is None:
        return config
    shape = _shape(config, node, meta)
    if shape in ("struct", "map") and isinstance(live, dict) and isinstance(config, dict):
        out = dict(live)
        for k, v in config.items():
            child, cmeta, _ = _child(node, k)
            out[k] = merge(live.get(k, _MISSING), v, child, cmeta)
        return out
    if shape == "list" and isinstance(live, list) and isinstance(config, list):
        kind, keys = _list_kind(meta)
        if kind == "atomic":
            return config
        return _merge_list(live, config, node.item, kind, keys)
    return config


def _merge_list(lhs: list, rhs: list, item: schema.Node, kind: str, keys: tuple) -> list:
    """The order of structured-merge-diff's mergingWalker.visitListItems: live items stay
    where they are, the applied items shared with the live list follow the applied order."""
    lpes = [item_pe(v, kind, keys, i) for i, v in enumerate(lhs)]
    rpes = [item_pe(v, kind, keys, i) for i, v in enumerate(rhs)]
    lvals = {pe: v for pe, v in zip(lpes, lhs)}
    rvals = {pe: v for pe, v in zip(rpes, rhs)}
    shared = [pe for pe in rpes if pe in lvals]
    shared_at = 0
    out: list = []
    merged: set = set()

    def one(pe: str) -> Any:
        if kind == "map":
            return merge(lvals.get(pe, _MISSING), rvals[pe], item)
        return rvals[pe]

    li = ri = 0
    while li < len(lpes) or ri < len(rpes):
        if li < len(lpes) and ri < len(rpes):
            pe = lpes[li]
            if pe == rpes[ri]:
                merged.add(pe)
                out.append(one(pe))
                li += 1
                ri += 1
                shared_at += 1
                continue
            next_shared = shared[shared_at] if shared_at < len(shared) else None
            if pe in rvals and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lpes):
            pe = lpes[li]
            if pe not in rvals:
                out.append(lhs[li])
                li += 1
                continue
            if pe in merged:
                li += 1
        if ri < len(rpes):
            pe = rpes[ri]
            merged.add(pe)
            out.append(one(pe))
            ri += 1
            if shared_at < len(shared) and shared[shared_at] == pe:
                shared_at += 1
    return out


def _owned_anywhere(last: dict, owned: dict) -> dict:
    """What pruning removes: the paths of the applier's last set that no manager now owns at
    or below (kube's prune: RemoveItems, then addBackOwnedItems and addBackDanglingItems)."""
    out: dict = {}
    for k, v in last.items():
        if k == ".":
            continue
        theirs = owned.get(k)
        if theirs is None:
            out[k] = {}
        elif v:
            sub = _owned_anywhere(mf._kids(v), mf._kids(theirs))
            if sub:
                out[k] = sub
    return out


def apply(live: dict | None, config: dict, managers: dict[tuple, mf.Manager], root: schema.Node, *,
          manager: str, subresource: str, api_version: str, ignored: tuple, force: bool,
          now: str) -> tuple[dict, list[dict] | None]:
    """(new object, its managedFields) for an apply of config over live (None: create).

    live and config come without managedFields; the result's object has none either.
    Raises the 409 of managed_fields.conflict_error.
    """
    base = live if live is not None else {}
    merged = merge(base, config, root)
    me = (manager, mf.APPLY, subresource)
    applied = mf._strip(mf.field_set(config, root), ignored)
    last = managers.get(me)
    managers = dict(managers)
    managers[me] = mf.Manager(manager, mf.APPLY, subresource, api_version,
                              last.time if last else None, applied, None)
    if last is not None and last.fields:
        owned: dict = {}
        for m in managers.values():
            owned = mf.union(owned, m.fields)
        doomed = _owned_anywhere(last.fields, owned)
        if doomed:
            merged = mf.remove_items(merged, root, schema.NO_META, doomed)
    cmp = mf.compare(base, merged, root)
    changed = mf._strip(cmp.changed(), ignored)
    removed = mf._strip(cmp.removed, ignored)
    conflicts: list[tuple[mf.Manager, str]] = []
    taken: dict[tuple, dict] = {}
    for key, m in managers.items():
        if key == me:
            continue
        clash = mf.intersection(m.fields, changed) if changed else {}
        if clash:
            taken[key] = clash
            conflicts.extend((m, path) for path in mf.paths(clash))
    if conflicts and not force and manager == "kubectl":
        # kube's lastAppliedManager: kubectl's first server-side apply over a client-side
        # applied object may take the fields its last-applied annotation still matches.
        allowed = _last_applied_fields(base, root)
        taken = {k: left for k, v in taken.items() if (left := mf.difference(v, allowed))} if allowed else taken
        conflicts = [(managers[k], path) for k, v in taken.items() for path in mf.paths(v)]
        if not conflicts:
            force = True
            taken = {key: mf.intersection(m.fields, changed) for key, m in managers.items() if key != me}
    if conflicts and not force:
        raise mf.conflict_error(conflicts)
    for key, m in list(managers.items()):
        if key == me:
            continue
        left = mf.difference(mf.difference(m.fields, taken.get(key, {})), removed)
        if not left:
            del managers[key]
        elif left != m.fields:
            managers[key] = mf.Manager(m.manager, m.operation, m.subresource, m.api_version, m.time, left)
    mine = managers[me]
    object_changed = merged != base
    if object_changed:          # kube's managedFieldsUpdater: a no-op apply keeps the time
        mine.time = now
    if not mine.fields:
        del managers[me]
    elif last is not None and last.fields == mine.fields and last.time == mine.time:
        mine.entry = last.entry   # unchanged: keep the stored entry (no re-encoding)
    if manager == "kubectl" and LAST_APPLIED in ((merged.get("metadata") or {}).get("annotations") or {}):
        # kube's lastAppliedUpdater: keep the client-side apply annotation in step, so that a
        # later `kubectl apply` (client-side) computes its patch from this configuration.
        merged = {**merged, "metadata": {**merged["metadata"], "annotations": {
            **merged["metadata"]["annotations"], LAST_APPLIED: _last_applied_text(config)}}}
    return merged, mf.encode_all(managers) or None


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def _last_applied_text(config: dict) -> str:
    """buildLastApplied: the applied object without the annotation, as Go's json.Marshal of an
    unstructured object writes it (sorted keys, compact, a newline)."""
    meta = dict(config.get("metadata") or {})
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    if "annotations" in meta:
        meta["annotations"] = notes
    return mf._json_sorted({**config, "metadata": meta}) + "\n"


def _last_applied_fields(live: dict, root: schema.Node) -> dict:
    """The fields of the last-applied annotation whose values the live object still has."""
    text = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if not text:
        return {}
    try:
        last = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(last, dict) or last.get("apiVersion") != live.get("apiVersion"):
        return {}
    cmp = mf.compare(last, live, root)
    return mf.difference(mf.difference(mf.difference(mf.field_set(last, root), cmp.modified), cmp.added),
                         cmp.removed)


"""metadata.managedFields as kube-apiserver 1.32 keeps them (k8s.io/apimachinery/pkg/util/
managedfields and sigs.k8s.io/structured-merge-diff): field sets, the FieldsV1 encoding,
managers, Update bookkeeping and apply conflicts.

A field set is held in its FieldsV1 form, so stored entries need no decoding: a dict of path
elements ("f:name", 'k:{"name":"a"}', 'v:"x"', "i:0") to nodes; a node is {} (a member leaf),
or its children with "." when the node itself is a member too. Sets are never mutated once
built; the operations below return new dicts and share untouched subtrees.

Which fields a value holds follows the schema's list and map types (schema.py's nodes and
their PatchMeta): atomic lists and maps are one leaf, sets are v: items, maps k: items.
"""
from __future__ import annotations

import functools
import json
from typing import Any, Iterator

from . import schema
from .errors import ApiError

APPLY, UPDATE = "Apply", "Update"
WEB_MANAGER = "kubedash-web"   # forms, the YAML editor and the domain actions
MAX_MANAGER_LENGTH = 128
MAX_UPDATE_MANAGERS = 10       # kube's DefaultMaxUpdateManagers: older Update entries merge
ANCIENT = "ancient-changes"

_MISSING = object()
LEAF = "leaf"                  # scalars, atomic lists and maps: one member, no children

# kube's stripMetaManager: never owned by anyone (exact paths, not their children).
_STRIP_META = {"f:name", "f:namespace", "f:creationTimestamp", "f:selfLink", "f:uid", "f:clusterName",
               "f:generation", "f:managedFields", "f:resourceVersion"}


# ---------------------------------------------------------------------------------------------
# Set operations on FieldsV1 trees


def _member(node: dict) -> bool:
    return not node or "." in node


def _node(kids: dict, member: bool) -> dict | None:
    if member:
        return {".": {}, **kids} if kids else {}
    return kids or None


def _kids(node: dict) -> dict:
    return {k: v for k, v in node.items() if k != "."} if "." in node else node


def union(a: dict, b: dict) -> dict:
    if not a:
        return b
    if not b or a is b:
        return a
    out = dict(a)
    for k, bv in b.items():
        av = out.get(k)
        if av is None:
            out[k] = bv
        elif k != "." and av is not bv:
            out[k] = _node(union(_kids(av), _kids(bv)), _member(av) or _member(bv))
    return out


def difference(a: dict, b: dict) -> dict:
    """The members of a that are not members of b."""
    if not b or not a:
        return a
    out = {}
    for k, av in a.items():
        if k == ".":
            continue
        bv = b.get(k)
        if bv is None:
            out[k] = av
            continue
        sub = _node(difference(_kids(av), _kids(bv)) if av and bv else _kids(av),
                    _member(av) and not _member(bv))
        if sub is not None:
            out[k] = sub
    return out


def intersection(a: dict, b: dict) -> dict:
    out = {}
    for k, av in a.items():
        if k == ".":
            continue
        bv = b.get(k)
        if bv is None:
            continue
        sub = _node(intersection(_kids(av), _kids(bv)) if av and bv else {}, _member(av) and _member(bv))
        if sub is not None:
            out[k] = sub
    return out


def _put(tree: dict, pe: str, kids: dict, member: bool) -> None:
    node = _node(kids, member)
    if node is not None:
        tree[pe] = node


# ---------------------------------------------------------------------------------------------
# Path elements: their order (PathElement.Compare), text (PathElement.String) and keys


def _value_rank(v: Any) -> tuple:
    """structured-merge-diff's value order: numbers, strings, bools, lists, maps, null."""
    if isinstance(v, bool):
        return (2, v)
    if isinstance(v, (int, float)):
        return (0, v)
    if isinstance(v, str):
        return (1, v)
    if isinstance(v, list):
        return (3, tuple(_value_rank(x) for x in v))
    if isinstance(v, dict):
        return (4, tuple((k, _value_rank(v[k])) for k in sorted(v)))
    return (5,)


@functools.lru_cache(maxsize=4096)
def _order(pe: str) -> tuple:
    kind, rest = pe[0], pe[2:]
    if kind == "f":
        return (0, rest)
    if kind == "k":
        fields = json.loads(rest)
        return (1, tuple((k, _value_rank(fields[k])) for k in sorted(fields)), len(fields))
    if kind == "v":
        return (2, _value_rank(json.loads(rest)))
    return (3, int(rest))


def _go_string(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return str(v)


@functools.lru_cache(maxsize=4096)
def path_element_text(pe: str) -> str:
    """kube's PathElement.String(): .name, [key=value,...], [=value], [index]."""
    kind, rest = pe[0], pe[2:]
    if kind == "f":
        return "." + rest
    if kind == "k":
        fields = json.loads(rest)
        return "[" + ",".join(f"{k}={_go_string(fields[k])}" for k in sorted(fields)) + "]"
    if kind == "v":
        return "[=" + _go_string(json.loads(rest)) + "]"
    return f"[{rest}]"


def _json(v: Any) -> str:
    # Go's encoder: no spaces, HTML characters escaped.
    return (json.dumps(v, separators=(",", ":"), ensure_ascii=False)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _json_sorted(v: Any) -> str:
    return (json.dumps(v, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def value_pe(v: Any) -> str:
    return "v:" + _json(v)


def key_pe(item: dict, keys: tuple) -> str:
    fields = {}
    for k in sorted(keys):
        v = item.get(k, _MISSING)
        if v is _MISSING:
            if k == "protocol":
                v = "TCP"          # the schema's default for port keys (kube-openapi declares it)
            else:
                continue
        fields[k] = v
    return "k:" + _json(fields)


def encode(tree: dict) -> dict:
    """The FieldsV1 JSON of a set: children in PathElement order, "." first."""
    out = {}
    if "." in tree:
        out["."] = {}
    for k in sorted((k for k in tree if k != "."), key=_order):
        v = tree[k]
        out[k] = encode(v) if v else {}
    return out


def paths(tree: dict, prefix: str = "") -> Iterator[str]:
    """The members of a set as kube prints paths (.spec.replicas), in set order."""
    for k in sorted((k for k in tree if k != "."), key=_order):
        v = tree[k]
        here = prefix + path_element_text(k)
        if _member(v):
            yield here
        if v:
            yield from paths(v, here)


def valid_fields(tree: Any) -> bool:
    """Whether a FieldsV1 value decodes (kube: FieldsToSet)."""
    if not isinstance(tree, dict):
        return False
    for k, v in tree.items():
        if k == ".":
            continue
        if len(k) < 2 or k[1] != ":" or not isinstance(v, dict):
            return False
        try:
            if k[0] in "kv":
                parsed = json.loads(k[2:])
                if k[0] == "k" and not isinstance(parsed, dict):
                    return False
            elif k[0] == "i":
                int(k[2:])
            elif k[0] != "f":
                return False
        except ValueError:
            return False
        if not valid_fields(v):
            return False
    return True


# ---------------------------------------------------------------------------------------------
# The schema's view of a value: leaf, struct, map or list (and which kind of list)


@functools.lru_cache(maxsize=None)
def _atomic_struct(definition: str) -> bool:
    return schema.definitions().get(definition, {}).get("x-kubernetes-map-type") == "atomic"


def _list_kind(meta: schema.PatchMeta) -> tuple[str, tuple]:
    """atomic / set / map (with keys), as kube-openapi's schemaconv reads the extensions."""
    if meta.list_type == "map":
        return "map", tuple(meta.map_keys)
    if meta.list_type in ("set", "atomic"):
        return meta.list_type, ()
    if "merge" in meta.strategies:
        return ("map", (meta.merge_key,)) if meta.merge_key else ("set", ())
    return "atomic", ()


def _shape(value: Any, node: schema.Node, meta: schema.PatchMeta) -> str:
    if isinstance(node, schema.ObjectNode):
        return LEAF if _atomic_struct(node.name) else "struct"
    if isinstance(node, schema.MapNode):
        return "map"
    if isinstance(node, schema.ListNode):
        return "list"
    if isinstance(node, schema.AnyNode):
        # Untyped territory: maps are granular, lists atomic (structured-merge-diff's deduced type).
        return "map" if isinstance(value, dict) else LEAF
    return LEAF


def _child(node: schema.Node, key: str) -> tuple[schema.Node, schema.PatchMeta, bool]:
    """(child node, its patch metadata, whether key is a declared struct field)."""
    if isinstance(node, schema.ObjectNode):
        found = node.props.get(key)
        if found is not None:
            return found, node.meta.get(key, schema.NO_META), True
        return schema.ANY, schema.NO_META, False
    if isinstance(node, schema.MapNode):
        return node.value, schema.NO_META, False
    return schema.ANY, schema.NO_META, False


def item_pe(item: Any, kind: str, keys: tuple, index: int) -> str:
    if kind == "map" and isinstance(item, dict):
        return key_pe(item, keys)
    if kind == "set":
        return value_pe(item)
    return f"i:{index}"


# ---------------------------------------------------------------------------------------------
# The fields a value holds (ToFieldSet) and what changed between two values (Compare)


def field_set(obj: dict, root: schema.Node) -> dict:
    """The set of an applied configuration (typed.ToFieldSet)."""
    return _fs_kids(obj, root, schema.NO_META)


def _fs_kids(value: Any, node: schema.Node, meta: schema.PatchMeta) -> dict:
    shape = _shape(value, node, meta)
    out: dict = {}
    if shape in ("struct", "map"):
        if not isinstance(value, dict):
            return out
        for k, v in value.items():
            child, cmeta, declared = _child(node, k)
            kids = _fs_kids(v, child, cmeta) if v is not None else {}
            leaf = v is None or v == {} or _leaf_of(v, child, cmeta)
            _put(out, "f:" + k, kids, leaf or not declared)
        return out
    if shape == "list" and isinstance(value, list):
        kind, keys = _list_kind(meta)
        if kind == "atomic":
            return out
        for i, item in enumerate(value):
            pe = item_pe(item, kind, keys, i)
            kids = _fs_kids(item, node.item, schema.NO_META) if kind == "map" else {}
            _put(out, pe, kids, True)
    return out


def _leaf_of(value: Any, node: schema.Node, meta: schema.PatchMeta) -> bool:
    shape = _shape(value, node, meta)
    return shape == LEAF or (shape == "list" and _list_kind(meta)[0] == "atomic")


class Comparison:
    __slots__ = ("added", "modified", "removed")

    def __init__(self):
        self.added: dict = {}
        self.modified: dict = {}
        self.removed: dict = {}

    def changed(self) -> dict:
        return union(self.modified, self.added)

    def empty(self) -> bool:
        return not (self.added or self.modified or self.removed)


def compare(old: dict, new: dict, root: schema.Node) -> Comparison:
    """typed.Compare: paths added, modified (leaves whose value differs) and removed."""
    out = Comparison()
    _cmp_kids(old, new, root, schema.NO_META, out.added, out.modified, out.removed)
    return out


def _cmp_kids(lhs: Any, rhs: Any, node: schema.Node, meta: schema.PatchMeta,
              added: dict, modified: dict, removed: dict) -> None:
    """Fill the three trees with the differences below one (granular) value."""
    probe = rhs if rhs is not _MISSING else lhs
    shape = _shape(probe, node, meta)
    if shape in ("struct", "map"):
        lm = lhs if isinstance(lhs, dict) else {}
        rm = rhs if isinstance(rhs, dict) else {}
        if lm is rm:
            return
        for k in dict.fromkeys([*lm, *rm]):
            lv, rv = lm.get(k, _MISSING), rm.get(k, _MISSING)
            if lv is rv or (lv == rv and lv is not _MISSING):
                continue
            child, cmeta, _ = _child(node, k)
            _cmp_one("f:" + k, lv, rv, child, cmeta, added, modified, removed)
        return
    if shape == "list":
        kind, keys = _list_kind(meta)
        ll = lhs if isinstance(lhs, list) else []
        rl = rhs if isinstance(rhs, list) else []
        lmap = {item_pe(v, kind, keys, i): v for i, v in enumerate(ll)}
        rmap = {item_pe(v, kind, keys, i): v for i, v in enumerate(rl)}
        for pe in list(lmap) + [p for p in rmap if p not in lmap]:
            lv, rv = lmap.get(pe, _MISSING), rmap.get(pe, _MISSING)
            if lv == rv:
                continue
            _cmp_one(pe, lv, rv, node.item, schema.NO_META, added, modified, removed)


def _cmp_one(pe: str, lv: Any, rv: Any, node: schema.Node, meta: schema.PatchMeta,
             added: dict, modified: dict, removed: dict) -> None:
    probe = rv if rv is not _MISSING else lv
    empty = (lv is _MISSING or lv in ({}, [], None)) and (rv is _MISSING or rv in ({}, [], None))
    if _leaf_of(probe, node, meta) or (empty and not isinstance(node, schema.ScalarNode)):
        if lv is _MISSING:
            added[pe] = {}
        elif rv is _MISSING:
            removed[pe] = {}
        elif lv != rv:
            modified[pe] = {}
        return
    a, m, r = {}, {}, {}
    _cmp_kids(None if lv is _MISSING else lv, None if rv is _MISSING else rv, node, meta, a, m, r)
    _put(added, pe, a, lv is _MISSING)
    _put(modified, pe, m, False)
    _put(removed, pe, r, rv is _MISSING)


def remove_items(value: Any, node: schema.Node, meta: schema.PatchMeta, tree: dict) -> Any:
    """value without the members of tree (each with everything below it)."""
    shape = _shape(value, node, meta)
    if shape in ("struct", "map") and isinstance(value, dict):
        out = {}
        for k, v in value.items():
            sub = tree.get("f:" + k)
            if sub is None:
                out[k] = v
            elif not _member(sub):
                child, cmeta, _ = _child(node, k)
                out[k] = remove_items(v, child, cmeta, sub)
        return out
    if shape == "list" and isinstance(value, list):
        kind, keys = _list_kind(meta)
        out = []
        for i, item in enumerate(value):
            sub = tree.get(item_pe(item, kind, keys, i))
            if sub is None:
                out.append(item)
            elif not _member(sub):
                out.append(remove_items(item, node.item, schema.NO_META, sub))
        return out
    return value


# ---------------------------------------------------------------------------------------------
# Managers: the decoded managedFields of an object


class Manager:
    """One managedFields entry: its identity (manager, operation, subresource), set and time."""
    __slots__ = ("manager", "operation", "subresource", "api_version", "time", "fields", "entry")

    def __init__(self, manager: str, operation: str, subresource: str, api_version: str,
                 time: str | None, fields: dict, entry: dict | None = None):
        self.manager, self.operation, self.subresource = manager, operation, subresource
        self.api_version, self.time, self.fields = api_version, time, fields
        self.entry = entry     # the stored entry while unchanged (re-encoding skipped)

    @property
    def key(self) -> tuple:
        return (self.manager, self.operation, self.subresource)

    def encoded(self) -> dict:
        if self.entry is not None:
            return self.entry
        out = {}
        if self.manager:
            out["manager"] = self.manager
        out["operation"] = self.operation
        out["apiVersion"] = self.api_version
        if self.time:
            out["time"] = self.time
        out["fieldsType"] = "FieldsV1"
        out["fieldsV1"] = encode(self.fields)
        if self.subresource:
            out["subresource"] = self.subresource
        return out

    def describe(self) -> str:
        """kube's printManager: "name" [with subresource "s"] [using v at time]."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == UPDATE:
            text += f" using {self.api_version}" + (f" at {self.time}" if self.time else "")
        return text


def decode(entries: Any) -> dict[tuple, Manager] | None:
    """The managers of a managedFields list, or None when kube's DecodeManagedFields would
    fail (then kube keeps the live object's, see decode_live_or_new)."""
    if not isinstance(entries, list):
        return None
    out: dict[tuple, Manager] = {}
    for e in entries:
        if not isinstance(e, dict):
            return None
        op = e.get("operation")
        if op not in (APPLY, UPDATE) or not e.get("apiVersion") or e.get("fieldsType") != "FieldsV1":
            return None
        fields = e.get("fieldsV1") or {}
        if not valid_fields(fields):
            return None
        m = Manager(e.get("manager") or "", op, e.get("subresource") or "", e["apiVersion"], e.get("time"),
                    fields, e)
        out[m.key] = m
    return out


def renamed(entries: Any, names: dict[str, dict[str, str]], *, to_storage: bool) -> Any:
    """managedFields with the top-level field names of each entry written through another
    version of the kind (names: {apiVersion: {stored name: its name}}) turned into the stored
    version's (to_storage), or back: the field manager compares in the stored version's names,
    each entry keeps its own version's (kube converts each manager's set to the version it works in)."""
    if not names or not isinstance(entries, list):
        return entries
    out = []
    for e in entries:
        rename = names.get(e.get("apiVersion")) if isinstance(e, dict) else None
        fields = e.get("fieldsV1") if rename else None
        if isinstance(fields, dict):
            if to_storage:
                rename = {theirs: ours for ours, theirs in rename.items()}
            e = {**e, "fieldsV1": {(f"f:{rename.get(k[2:], k[2:])}" if k.startswith("f:") else k): v
                                   for k, v in fields.items()}}
        out.append(e)
    return out


def is_reset(entries: Any) -> bool:
    """[] or [{}]: the client asks to clear managedFields (kube's isResetManagedFields)."""
    return isinstance(entries, list) and (entries == [] or entries == [{}])


def decode_live_or_new(live_entries: Any, new_entries: Any, subresource: str) -> dict[tuple, Manager]:
    """Which managedFields an update starts from (kube's decodeLiveOrNew): the request's when
    it sends valid ones, none when it resets them, else (absent, invalid, or a subresource
    write) the stored object's."""
    if not subresource and new_entries is not None:
        if is_reset(new_entries):
            return {}
        sent = decode(new_entries)
        if sent:
            return sent
    return decode(live_entries) or {}


def encode_all(managers: dict[tuple, Manager]) -> list[dict]:
    """managedFields in kube's order: operation, time (seconds), manager, apiVersion, subresource."""
    items = sorted(managers.values(),
                   key=lambda m: (m.operation, m.time or "", m.manager, m.api_version, m.subresource))
    return [m.encoded() for m in items]


def _strip(fields: dict, ignored: tuple) -> dict:
    """kube's stripMetaManager plus the strategy's reset fields (status on the main resource,
    spec on /status), removed with everything below them."""
    if not fields:
        return fields
    out = {k: v for k, v in fields.items() if k not in ignored and k not in ("f:apiVersion", "f:kind")}
    meta = out.get("f:metadata")
    if meta is not None:
        kept = {k: v for k, v in meta.items() if k not in _STRIP_META and k != "."}
        if kept:
            out["f:metadata"] = kept
        else:
            del out["f:metadata"]
    return out


def ignored_fields(res, subresource: str) -> tuple:
    """The fields a write through this endpoint never owns (the strategy's GetResetFields)."""
    if subresource == "status":
        return tuple("f:" + k for k in res.spec_keys)
    return tuple("f:" + k for k in res.status_keys)


def without_managed_fields(obj: dict) -> dict:
    m = obj.get("metadata")
    if not m or "managedFields" not in m:
        return obj
    return {**obj, "metadata": {k: v for k, v in m.items() if k != "managedFields"}}


# ---------------------------------------------------------------------------------------------
# The two operations


def _identifier(m: "Manager") -> str:
    """kube's BuildManagerIdentifier for an Update entry (its tie-break order)."""
    ident = {"manager": m.manager} if m.manager else {}
    ident.update(operation=m.operation, apiVersion=m.api_version)
    if m.subresource:
        ident["subresource"] = m.subresource
    return json.dumps(ident, separators=(",", ":"))


def _cap(managers: dict[tuple, Manager]) -> None:
    """kube's capManagersManager: at most MAX_UPDATE_MANAGERS Update entries; the oldest merge
    into an "ancient-changes" bucket (which takes the time of the newest one merged)."""
    updaters = [m for m in managers.values() if m.operation == UPDATE]
    if len(updaters) <= MAX_UPDATE_MANAGERS:
        return
    updaters.sort(key=lambda m: (m.time or "", _identifier(m)))
    first: Manager | None = None
    length = len(updaters)
    for m in updaters:
        if length <= MAX_UPDATE_MANAGERS:
            break
        bucket_key = (ANCIENT, UPDATE, "")
        if first is None or m.key == bucket_key:
            first = first or m
            continue
        bucket = managers.get(bucket_key)
        if bucket is None:
            del managers[first.key]
            bucket = first
        managers[bucket_key] = Manager(ANCIENT, UPDATE, "", m.api_version, m.time, union(m.fields, bucket.fields))
        del managers[m.key]
        length -= 1


def _take_from_others(managers: dict, me: tuple, taken: dict, removed: dict) -> None:
    for key, m in list(managers.items()):
        if key == me:
            continue
        left = difference(difference(m.fields, taken), removed) if (taken or removed) else m.fields
        if left is not m.fields:
            if not left:
                del managers[key]
            elif left != m.fields:
                managers[key] = Manager(m.manager, m.operation, m.subresource, m.api_version, m.time, left)


def update(managers: dict[tuple, Manager], old: dict, new: dict, root: schema.Node, *, manager: str,
           subresource: str, api_version: str, ignored: tuple, now: str) -> list[dict] | None:
    """managedFields after a non-apply write of new over old (kube's Update): the writer owns
    what it added or changed; others lose it and what was removed. None when nothing changed
    (the stored list stays as it is)."""
    cmp = compare(old, new, root)
    changed = _strip(cmp.changed(), ignored)
    removed = _strip(cmp.removed, ignored)
    if not changed and not removed:
        return None
    me = (manager, UPDATE, subresource)
    _take_from_others(managers, me, changed, removed)
    mine = managers.get(me)
    if changed:
        before = difference(mine.fields, removed) if mine else {}
        managers[me] = Manager(manager, UPDATE, subresource, api_version, now, union(before, changed))
    elif mine is not None:
        left = difference(mine.fields, removed)
        if left:
            managers[me] = Manager(manager, UPDATE, subresource, api_version, mine.time, left)
        else:
            del managers[me]
    _cap(managers)
    return encode_all(managers)


def created(new: dict, empty: dict, root: schema.Node, *, manager: str, subresource: str,
            api_version: str, ignored: tuple, now: str, sent: Any = None) -> list[dict] | None:
    """managedFields of a new object: what the request sent (if valid), plus the creator's
    Update entry for every field it set (against the kind's zero value, as kube compares)."""
    managers = {} if sent is None or is_reset(sent) else (decode(sent) or {})
    encoded = update(managers, empty, new, root, manager=manager, subresource=subresource,
                     api_version=api_version, ignored=ignored, now=now)
    if encoded is None:
        return encode_all(managers) or None
    return encoded or None


def conflict_error(conflicts: list[tuple[Manager, str]]) -> ApiError:
    """409 Conflict with one FieldManagerConflict cause per field (kube's NewConflictError)."""
    causes = [{"reason": "FieldManagerConflict", "message": f"conflict with {m.describe()}", "field": path}
              for m, path in conflicts]
    if len(conflicts) == 1:
        m, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {m.describe()}: {path}"
    else:
        lines = []
        for who in sorted({m.describe() for m, _ in conflicts}):
            lines.append(f"conflicts with {who}:")
            lines.extend(f"- {path}" for m, path in conflicts if m.describe() == who)
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(409, "Conflict", message, {"causes": causes})

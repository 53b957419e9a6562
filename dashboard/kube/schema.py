"""The Kubernetes 1.32 OpenAPI definitions, loaded once and compiled into the one schema walker.

One source of truth for every consumer:
- decode(): what kube-apiserver's JSON decoder does to a request body (drop unknown fields
  and report them for fieldValidation, reject wrong JSON types with a 400);
- normalize_formats() / normalize_object(): re-spell Quantity, Time and MicroTime values as
  Go sends them back (the strategies' defaulting step);
- semantic_equal(): apiequality.Semantic.DeepEqual (validation's immutability checks);
- patch.py: strategic-merge-patch metadata (merge keys, patch strategies) per field;
- openapi.py and tables.py: the published /openapi documents and column descriptions.

The definitions file ships with the kubernetes_validate package (definitions() reads it).
Each definition is compiled once, on first use, into a small tree of Node objects (a dict
of property -> node per struct), so decoding a Lease is a few dict lookups per field rather
than a schema walk.
"""
from __future__ import annotations

import functools
import json
import re
import threading
from importlib import resources
from typing import Any, Callable, Iterable, NamedTuple

from . import formats
from .errors import ApiError
from .formats import json_kind  # noqa: F401  (schema.json_kind: the decoder's error wording)

SCHEMA_DIR = "kubernetes-json-schema/v1.32.0-local-strict"
REF_PREFIX = "#/$defs/"

INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
MICRO_TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
TIME = "io.k8s.apimachinery.pkg.apis.meta.v1.Time"

# The Go types that re-spell their value when decoded (normalize_formats), by definition.
FORMAT_NORMALIZERS: dict[str, Callable[[Any], str]] = {
    QUANTITY: formats.canonical_quantity,
    MICRO_TIME: formats.normalize_micro_time,
    TIME: formats.normalize_time,
}

# Top-level fields every kind accepts even if a definition forgot them.
_ALWAYS_KNOWN = ("apiVersion", "kind", "metadata")


# --------------------------------------------------------------------------- loading

@functools.cache
def definitions() -> dict[str, dict]:
    """All definitions, name -> JSON schema (read once per process)."""
    path = resources.files("kubernetes_validate") / SCHEMA_DIR / "_definitions.json"
    with path.open("rb") as fh:
        return json.load(fh)["$defs"]


def ref_name(schema: dict) -> str | None:
    """The definition a schema points at, through $ref or allOf: [{$ref}]."""
    ref = schema.get("$ref")
    if ref is None:
        all_of = schema.get("allOf")
        if all_of and len(all_of) == 1:
            ref = all_of[0].get("$ref")
    if ref is None:
        return None
    return ref[len(REF_PREFIX):] if ref.startswith(REF_PREFIX) else ref.rsplit("/", 1)[-1]


def resolve(schema: dict) -> dict:
    """Follow $ref / allOf[$ref] chains to the schema that has the content."""
    seen = 0
    while (name := ref_name(schema)) is not None and seen < 32:
        schema = definitions()[name]
        seen += 1
    return schema


def gvk(definition: str) -> dict | None:
    """{group, version, kind} of a top-level kind definition (the first one listed)."""
    entries = definitions().get(definition, {}).get("x-kubernetes-group-version-kind")
    return entries[0] if entries else None


def _types(schema: dict) -> set[str]:
    t = schema.get("type")
    if t is None:
        return set()
    return {t} if isinstance(t, str) else set(t) - {"null"}


def _go_type_of_definition(name: str) -> str:
    """io.k8s.api.core.v1.PodSpec -> v1.PodSpec (Go's package.Type, as its errors print)."""
    parts = name.split(".")
    return f"{parts[-2]}.{parts[-1]}" if len(parts) >= 2 else name


# --------------------------------------------------------------------------- nodes

class PatchMeta(NamedTuple):
    """Strategic-merge-patch metadata of one field (declared on the parent struct)."""

    strategies: frozenset = frozenset()   # {"merge"}, {"replace"}, {"retainKeys"}, ...
    merge_key: str | None = None
    list_type: str | None = None          # atomic / set / map
    map_keys: tuple = ()


NO_META = PatchMeta()


class _Mismatch(Exception):
    """A JSON value of the wrong kind; turned into kube's decoder message by decode()."""

    def __init__(self, path: str, value: Any, go_type: str, number_literal: bool = False):
        super().__init__(path)
        self.path = path
        self.value = value
        self.go_type = go_type
        self.number_literal = number_literal   # Go prints "number 1.5" for bad numbers
        self.struct: str | None = None          # filled by the nearest enclosing struct


class _ValueError(Exception):
    """A value the Go type itself rejects (e.g. a malformed Quantity); message is final."""


def _join(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def _is_unset(value: Any) -> bool:
    return value is None or value == {} or value == []


def _loose_equal(a: Any, b: Any) -> bool:
    """Semantic equality without a schema: nil and empty maps and slices are equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        return all(_loose_equal(a.get(k), b.get(k)) for k in set(a) | set(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_loose_equal(x, y) for x, y in zip(a, b))
    if _is_unset(a) or _is_unset(b):
        return _is_unset(a) and _is_unset(b)
    return a == b


class Node:
    """A compiled schema.

    decode(value, parent_path, key, unknown) -> cleaned value; normalize(value) -> value with
    its Go-typed formats re-spelled (in place); equal(a, b) -> semantic equality.
    """

    go_type = "interface {}"
    normalizer: Callable[[Any], str] | None = None   # Quantity / Time / MicroTime only
    has_formats: bool | None = None                  # cache of _formats_below(self)

    def decode(self, value: Any, parent: str, key: str | int, unknown: list[str]) -> Any:
        return value

    def field(self, name: str) -> tuple["Node", PatchMeta]:
        """Child schema for a map key / struct field, and its patch metadata."""
        return ANY, NO_META

    def zero(self) -> Any:
        return None

    def children(self) -> tuple["Node", ...]:
        return ()

    def normalize(self, value: Any) -> Any:
        return value

    def equal(self, a: Any, b: Any) -> bool:
        return _loose_equal(a, b)


class AnyNode(Node):
    """Free-form JSON (RawExtension, FieldsV1, unknown territory): kept as is."""


ANY = AnyNode()

_INT_RANGE = {"int32": (-(2 ** 31), 2 ** 31 - 1), "int64": (-(2 ** 63), 2 ** 63 - 1)}


class ScalarNode(Node):
    """string / int32 / int64 / bool / float64 / IntOrString / Quantity / Time."""

    def __init__(self, kind: str, go_type: str):
        self.kind = kind
        self.go_type = go_type
        self.range = _INT_RANGE.get(kind)

    def decode(self, value, parent, key, unknown):
        kind = self.kind
        t = type(value)
        if kind == "string":
            if t is str:
                return value
        elif self.range is not None:
            if t is int:
                lo, hi = self.range
                if lo <= value <= hi:
                    return value
                raise _Mismatch(_join(parent, key), value, self.go_type, number_literal=True)
            if t is float:
                raise _Mismatch(_join(parent, key), value, self.go_type, number_literal=True)
        elif kind == "bool":
            if t is bool:
                return value
        elif kind == "float":
            if t is int or t is float:
                return value
        elif kind == "int-or-string":
            if t is str:
                return value
            if t is int:
                if -(2 ** 31) <= value < 2 ** 31:
                    return value
                raise _Mismatch(_join(parent, key), value, self.go_type, number_literal=True)
            if t is float:
                raise _Mismatch(_join(parent, key), value, self.go_type, number_literal=True)
        elif kind == "quantity":
            if t is int or t is float:
                return value
            if t is str:
                try:
                    formats.check_quantity_literal(value)
                except formats.FormatError as exc:
                    raise _ValueError(str(exc)) from None
                return value
        raise _Mismatch(_join(parent, key), value, self.go_type)

    def zero(self):
        return {"string": "", "bool": False, "float": 0, "quantity": "0"}.get(self.kind, 0)

    def normalize(self, value):
        return value if self.normalizer is None else self.normalizer(value)

    def equal(self, a, b):
        if self.kind == "quantity" and a is not None and b is not None:
            try:
                return formats.parse_quantity(a).compare(formats.parse_quantity(b)) == 0
            except formats.FormatError:
                return a == b
        return _loose_equal(a, b)


class ListNode(Node):
    def __init__(self, item: Node):
        self.item = item

    @property
    def go_type(self):  # computed lazily: item may still be compiling (recursive types)
        return "[]" + self.item.go_type

    def decode(self, value, parent, key, unknown):
        if type(value) is not list:
            raise _Mismatch(_join(parent, key), value, self.go_type)
        path = _join(parent, key)
        item = self.item
        out = []
        for i, v in enumerate(value):
            # Go's decoder turns a null element into the element type's zero value.
            out.append(item.zero() if v is None else item.decode(v, path, i, unknown))
        return out

    def field(self, name):
        return self.item, NO_META

    def zero(self):
        return []

    def children(self):
        return (self.item,)

    def normalize(self, value):
        if isinstance(value, list) and _formats_below(self):
            item = self.item
            for i, v in enumerate(value):
                if v is not None:
                    value[i] = item.normalize(v)
        return value

    def equal(self, a, b):
        if _is_unset(a) or _is_unset(b):
            return _is_unset(a) and _is_unset(b)
        if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
            return False
        return all(self.item.equal(x, y) for x, y in zip(a, b))


class MapNode(Node):
    """A map with free keys (labels, annotations, resource lists): only values are typed."""

    def __init__(self, value: Node):
        self.value = value

    @property
    def go_type(self):
        return "map[string]" + self.value.go_type

    def decode(self, value, parent, key, unknown):
        if type(value) is not dict:
            raise _Mismatch(_join(parent, key), value, self.go_type)
        path = _join(parent, key)
        node = self.value
        return {k: (node.zero() if v is None else node.decode(v, path, k, unknown))
                for k, v in value.items()}

    def field(self, name):
        return self.value, NO_META

    def zero(self):
        return {}

    def children(self):
        return (self.value,)

    def normalize(self, value):
        if isinstance(value, dict) and _formats_below(self):
            node = self.value
            for k in list(value):
                if value[k] is not None:
                    value[k] = node.normalize(value[k])
        return value

    def equal(self, a, b):
        if _is_unset(a) or _is_unset(b):
            return _is_unset(a) and _is_unset(b)
        if not isinstance(a, dict) or not isinstance(b, dict) or set(a) != set(b):
            return False
        return all(self.value.equal(a[k], b[k]) for k in a)


class ObjectNode(Node):
    """A struct: known properties, each with its node and (maybe) patch metadata."""

    def __init__(self, name: str):
        self.name = name
        self.struct = name.rsplit(".", 1)[-1]
        self.go_type = _go_type_of_definition(name)
        self.props: dict[str, Node] = {}
        self.meta: dict[str, PatchMeta] = {}

    def decode(self, value, parent, key, unknown):
        if type(value) is not dict:
            raise _Mismatch(_join(parent, key), value, self.go_type)
        path = _join(parent, key)
        props = self.props
        out = {}
        try:
            for k, v in value.items():
                node = props.get(k)
                if node is None:
                    unknown.append(f"{path}.{k}" if path else k)
                elif v is not None:          # null = unset, as Go's decoder leaves it
                    out[k] = node.decode(v, path, k, unknown)
        except _Mismatch as exc:
            if exc.struct is None:
                exc.struct = self.struct
            raise
        return out

    def field(self, name):
        node = self.props.get(name)
        if node is None:
            return ANY, NO_META
        return node, self.meta.get(name, NO_META)

    def zero(self):
        return {}

    def children(self):
        return tuple(self.props.values())

    def normalize(self, value):
        if isinstance(value, dict) and _formats_below(self):
            for k, node in self.props.items():   # in schema order: the first bad value is reported
                if value.get(k) is not None:
                    value[k] = node.normalize(value[k])
        return value

    def equal(self, a, b):
        # A struct: a nil pointer is not an empty struct.
        if a is None or b is None:
            return a is None and b is None
        if not isinstance(a, dict) or not isinstance(b, dict):
            return a == b
        props = self.props
        return all(props.get(k, ANY).equal(a.get(k), b.get(k)) for k in set(a) | set(b))


def _formats_below(root: Node) -> bool:
    """Whether anything at or below this node has a normalizer (prunes the walk)."""
    found = root.has_formats
    if found is None:
        seen: set[int] = set()
        stack = [root]
        found = False
        while stack and not found:
            n = stack.pop()
            if id(n) not in seen:
                seen.add(id(n))
                found = n.normalizer is not None
                stack.extend(n.children())
        root.has_formats = found
    return found


# --------------------------------------------------------------------------- compiling

_compiled: dict[str, Node] = {}     # finished nodes, safe to read without the lock
_pending: dict[str, Node] = {}      # nodes being built (under _lock)
_lock = threading.RLock()


def node(definition: str) -> Node:
    """The compiled node of a definition (compiled once, then cached)."""
    found = _compiled.get(definition)
    if found is not None:
        return found
    # Built under a lock and published whole: another thread must never see a struct
    # whose properties are still being filled in (it would report them as unknown).
    with _lock:
        try:
            built = _build(definition)
            _compiled.update(_pending)
            return built
        finally:
            _pending.clear()


def _build(definition: str) -> Node:
    found = _compiled.get(definition) or _pending.get(definition)
    if found is not None:
        return found
    schema = definitions()[definition]
    if "properties" in schema:
        obj = ObjectNode(definition)
        _pending[definition] = obj         # registered first: definitions can be recursive
        for prop, sub in schema["properties"].items():
            obj.props[prop] = _compile(sub, definition)
            meta = _patch_meta(sub)
            if meta is not NO_META:
                obj.meta[prop] = meta
        if gvk(definition) is not None:
            for prop in _ALWAYS_KNOWN:
                obj.props.setdefault(prop, ANY)
        return obj
    compiled = _compile_inline(schema, definition)
    if definition in FORMAT_NORMALIZERS:
        compiled.normalizer = FORMAT_NORMALIZERS[definition]
    _pending[definition] = compiled
    return compiled


# What patch.py needs about a kind: the root node; walk it with .field(name) / .item.
merge_info = node


def _patch_meta(schema: dict) -> PatchMeta:
    strategy = schema.get("x-kubernetes-patch-strategy")
    merge_key = schema.get("x-kubernetes-patch-merge-key")
    list_type = schema.get("x-kubernetes-list-type")
    if strategy is None and merge_key is None and list_type is None:
        return NO_META
    return PatchMeta(
        strategies=frozenset(s.strip() for s in (strategy or "").split(",") if s.strip()),
        merge_key=merge_key,
        list_type=list_type,
        map_keys=tuple(schema.get("x-kubernetes-list-map-keys", ())),
    )


def _compile(schema: dict, owner: str) -> Node:
    name = ref_name(schema)
    if name is not None:
        return _build(name)
    return _compile_inline(schema, owner)


def _compile_inline(schema: dict, name: str) -> Node:
    one_of = schema.get("oneOf")
    if one_of:
        kinds = set().union(*(_types(s) for s in one_of))
        if "integer" in kinds:
            return ScalarNode("int-or-string", "intstr.IntOrString")
        return ScalarNode("quantity", "resource.Quantity")
    types = _types(schema)
    if "array" in types:
        return ListNode(_compile(schema.get("items", {}), name))
    if "object" in types:
        if "properties" in schema:           # an inline struct (not used by 1.32, but cheap)
            obj = ObjectNode(name)
            for prop, sub in schema["properties"].items():
                obj.props[prop] = _compile(sub, name)
            return obj
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            return MapNode(_compile(extra, name))
        return ANY                           # RawExtension, FieldsV1: any JSON
    fmt = schema.get("format")
    if "string" in types:
        if fmt == "date-time" and name in definitions():
            return ScalarNode("string", _go_type_of_definition(name))
        return ScalarNode("string", "string")
    if "integer" in types:
        return ScalarNode("int32" if fmt == "int32" else "int64", "int32" if fmt == "int32" else "int64")
    if "number" in types:
        return ScalarNode("float", "float64")
    if "boolean" in types:
        return ScalarNode("bool", "bool")
    return ANY


# --------------------------------------------------------------------------- decoding

class DecodeError(ApiError):
    """400 BadRequest from decoding; .detail is the bare decoder message.

    Create/update answer it as is. A PATCH answers 422 with the detail instead
    (see codec.patch_invalid), as kube-apiserver does for a patched object that
    does not decode.
    """

    def __init__(self, message: str, detail: str):
        super().__init__(400, "BadRequest", message)
        self.detail = detail


def _cannot_handle(kind: str, version: str, detail: str) -> str:
    """kube's transformDecodeError prefix: `Lease in version "v1" cannot be handled as a Lease: `."""
    return f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}'


def _definition_error(definition: str, detail: str) -> DecodeError:
    g = gvk(definition)
    kind = g["kind"] if g else definition.rsplit(".", 1)[-1]
    return DecodeError(_cannot_handle(kind, g["version"] if g else "", detail), detail)


def decode(obj: Any, definition: str) -> tuple[dict, list[str]]:
    """Decode a request body as kube-apiserver would.

    Returns (a copy with unknown fields and nulls dropped, unknown field paths such as
    "spec.template.spec.containers[0].imagee"). Raises DecodeError (400) for JSON values of
    the wrong type, worded like Go's encoding/json.
    """
    root = node(definition)
    unknown: list[str] = []
    try:
        out = root.decode(obj, "", "", unknown)
    except _Mismatch as exc:
        got = json_kind(exc.value)
        if exc.number_literal:
            got = f"number {json.dumps(exc.value)}"
        go_path = re.sub(r"\[\d+\]", "", exc.path)
        if go_path and exc.struct:
            detail = (f"json: cannot unmarshal {got} into Go struct field "
                      f"{exc.struct}.{go_path} of type {exc.go_type}")
        else:
            detail = f"json: cannot unmarshal {got} into Go value of type {exc.go_type}"
        raise _definition_error(definition, detail) from None
    except _ValueError as exc:
        raise _definition_error(definition, str(exc)) from None
    return out, unknown


def strict_detail(unknown: list[str], others: Iterable[str] = ()) -> str:
    """'strict decoding error: unknown field "spec.x", duplicate field "spec.y"'; others are
    the decoder's other complaints (duplicate fields), already worded."""
    return "strict decoding error: " + ", ".join(unknown_field_warnings(unknown) + list(others))


def strict_error(definition: str, unknown: list[str], others: Iterable[str] = ()) -> DecodeError:
    """The 400 a create/update with fieldValidation=Strict gets for unknown (or repeated) fields."""
    return _definition_error(definition, strict_detail(unknown, others))


def unknown_field_warnings(unknown: list[str]) -> list[str]:
    """Texts for `Warning: 299 - "..."` headers under fieldValidation=Warn."""
    return [f'unknown field "{p}"' for p in unknown]


def duplicate_field_texts(paths: list[str], prefix: str = "") -> list[str]:
    """sigs.k8s.io/json's strict complaint for a repeated key (JSON patches prefix "json patch ")."""
    return [f'{prefix}duplicate field "{p}"' for p in paths]


# --------------------------------------------------------------------------- formats

def normalize_formats(value: Any, definition: str) -> Any:
    """Re-spell every Quantity / MicroTime / Time below `definition` as Go would send it back.

    Mutates dicts and lists in place and returns the (possibly new) value. Raises
    formats.FormatError(<Go's message>) for a value its Go type cannot decode.
    """
    return value if value is None else node(definition).normalize(value)


def normalize_object(obj: dict, definition: str) -> None:
    """normalize_formats for a whole object, answering a bad value with kube's 400 (named
    after the object's own kind and apiVersion)."""
    try:
        normalize_formats(obj, definition)
    except formats.FormatError as exc:
        detail = str(exc)
        version = (obj.get("apiVersion") or "").split("/")[-1]
        raise DecodeError(_cannot_handle(obj.get("kind") or "", version, detail), detail) from None


# --------------------------------------------------------------------------- equality

def semantic_equal(a: Any, b: Any, definition: str | None = None) -> bool:
    """apiequality.Semantic.DeepEqual on JSON values.

    Nil and empty maps and slices are equal; a pointer to an empty struct is not nil. JSON
    cannot tell a struct from a map, so give the OpenAPI definition of the values when they
    are objects (without one, every empty object counts as unset). Quantities compare by value.
    """
    if definition is None:
        return _loose_equal(a, b)
    return node(definition).equal(a, b)

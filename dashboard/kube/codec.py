"""Request bodies: JSON or YAML text -> a Kubernetes object (a dict), then decoded against its
kind's schema (decode_object: unknown and duplicate fields under fieldValidation), one way for
every caller: the API, the forms and the domain actions.

YAML is read the way kube-apiserver reads it (sigs.k8s.io/yaml converts YAML to JSON first):
an unquoted time stays a string, since JSON has no time type; the schema's Time fields then
parse it. The API's bodies and apply patches and the dashboard's YAML editor all use load_yaml.

Every decoded value is bounded (check_value): at most MAX_DEPTH levels of objects and lists,
and only what JSON can hold (no lone surrogates, no NaN or Infinity, integers within 64 bits),
so nothing deeper or stranger reaches the patchers, the schema walker or storage (docs/SERVING.md,
"Limits"). YAML's aliases are limited before anything is built (_check_yaml_depth): an alias
bomb is refused in milliseconds, on every path that reads YAML.
"""
from __future__ import annotations

import json
from typing import Any

import orjson
import yaml

from . import schema
from .errors import ApiError, bad_request, invalid, invalid_object, unsupported_media_type

JSON = "application/json"
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
BODY_TYPES = [JSON, "application/yaml"]
PROTOBUF = "application/vnd.kubernetes.protobuf"
APPLY_PATCH = "application/apply-patch+yaml"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class _KubeYamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """SafeLoader without the timestamp resolver."""


_KubeYamlLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

YAMLError = yaml.YAMLError

# Objects and lists nested deeper than this are refused (400). kube's decoders allow 10000, but
# nothing in the kinds served here nests beyond ~15, and Python code that walks a value
# recursively (copy.deepcopy, the patchers, the schema walker) must stay far from the
# interpreter's recursion limit.
MAX_DEPTH = 100
# YAML aliases (anchors reused: `*a`) are what makes a small body expand into a huge value;
# kube-apiserver limits them since CVE-2019-11253 (go-yaml: "excessive aliasing"). No served
# kind needs many. MAX_YAML_NODES bounds every node, expanded: more than a 3 MiB body of
# plain YAML can hold (2 bytes a node at the least).
MAX_YAML_ALIASES = 1000
MAX_YAML_ALIAS_NODES = 100_000
MAX_YAML_NODES = 2_000_000
INT_RANGE = (-(2**63), 2**64 - 1)   # int64 and uint64, what Go decodes an integer into
_OPENS = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSES = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class Unrepresentable(YAMLError, ValueError):
    """A body the API cannot hold: nested too deeply, a lone surrogate, a huge integer, NaN.
    A YAMLError too, so the YAML editor reports it as it reports any YAML problem."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


class OverLimit(Unrepresentable):
    """A body over a decoding limit (MAX_DEPTH, the YAML alias and node limits): one no honest
    body meets (nesting, alias expansion, node count). Its refusal is marked (refused_body, the
    editor's form error), and the server answers it slowly (server/tarpit.py), so a client
    looping on such bodies costs the server a few requests a second, not a core."""


def refused_body(message: str, exc: YAMLError) -> ApiError:
    """The 400 refusing a body that exc (raised decoding it) says cannot be held; marked
    limits_hit when it met a decoding limit."""
    err = bad_request(message)
    err.limits_hit = isinstance(exc, OverLimit)
    return err


def _path(parts: tuple) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


def _bad_scalar(value: Any) -> str | None:
    """Why JSON cannot hold this scalar, or None."""
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return "a string holds a lone UTF-16 surrogate (such as \\ud800), which is not a Unicode character"
    elif isinstance(value, bool) or value is None:
        return None
    elif isinstance(value, int):
        if not INT_RANGE[0] <= value <= INT_RANGE[1]:
            return "an integer is too large: integers must fit in 64 bits"
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            return f"{value} is not a JSON number (NaN and Infinity cannot be represented)"
    return None


def check_value(value: Any, scalars: bool = True) -> Any:
    """Refuse what JSON cannot hold (Unrepresentable); returns the value, with mapping keys
    that are not strings turned into strings as sigs.k8s.io/yaml does (`1: x` -> "1").

    scalars=False checks only the depth (orjson's output holds nothing else JSON cannot hold).
    Iterative, so depth never costs stack."""
    if not scalars:
        return _check_depth(value)
    stack = [(value, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        if depth > MAX_DEPTH:
            raise OverLimit(f"it is nested too deeply: objects and lists may nest at most {MAX_DEPTH} levels")
        if isinstance(node, dict):
            if scalars and not all(type(k) is str for k in node):
                fixed = {_json_key(k, path): v for k, v in node.items()}
                node.clear()
                node.update(fixed)
            items = node.items()
        elif isinstance(node, list):
            items = enumerate(node)
        else:
            continue
        for key, item in items:
            if isinstance(item, (dict, list)):
                why = scalars and isinstance(key, str) and _bad_scalar(key)
                stack.append((item, depth + 1, path + (key,)))
            else:
                why = scalars and (_bad_scalar(item) or (isinstance(key, str) and _bad_scalar(key)))
            if why:
                raise Unrepresentable(f"at {_path(path + (key,))}: {why}")
    return value


def _check_depth(value: Any) -> Any:
    """check_value's depth check alone: the hot path (every JSON body and patch)."""
    level, depth = ([value] if isinstance(value, (dict, list)) else []), 1
    while level:
        if depth > MAX_DEPTH:
            raise OverLimit(f"it is nested too deeply: objects and lists may nest at most {MAX_DEPTH} levels")
        below = []
        for node in level:
            for item in (node.values() if isinstance(node, dict) else node):
                if isinstance(item, (dict, list)):
                    below.append(item)
        level, depth = below, depth + 1
    return value


def _json_key(key: Any, path: tuple) -> str:
    if isinstance(key, str):
        if why := _bad_scalar(key):
            raise Unrepresentable(f"at {_path(path)}: {why}")
        return key
    if key is None or isinstance(key, (bool, int, float)):
        if why := _bad_scalar(key):
            raise Unrepresentable(f"at {_path(path)}: {why}")
        return orjson.dumps(key).decode()
    raise Unrepresentable(f"at {_path(path)}: a mapping key must be a string, not {type(key).__name__}")


def _check_yaml_depth(text: str | bytes) -> None:
    """Refuse deep or alias-bombed YAML before composing it, reading only its event stream:
    - depth: libyaml's composer recurses in C (a crash at ~100,000 levels) and its scanner is
      quadratic in the depth of flow collections; read only as far as MAX_DEPTH levels;
    - aliases (CVE-2019-11253, "billion laughs"): at most MAX_YAML_ALIASES of them, and what
      they expand to (each alias counts the nodes of its anchor's value) at most
      MAX_YAML_ALIAS_NODES; all nodes, expanded, at most MAX_YAML_NODES. A few hundred bytes
      that would expand to millions of nodes are refused after a few hundred events, before
      any object is built (and before anything walks the expanded value)."""
    too_deep = f"it is nested too deeply: objects and lists may nest at most {MAX_DEPTH} levels"
    depth = aliases = alias_nodes = nodes = 0
    sizes: dict[str, int] = {}     # anchor -> nodes its value expands to
    open_: list[list] = []         # the open collections: [anchor, nodes so far]
    try:
        for event in yaml.parse(text, Loader=_KubeYamlLoader):
            if isinstance(event, _OPENS):
                depth += 1
                if depth > MAX_DEPTH:
                    raise OverLimit(too_deep)
                open_.append([event.anchor, 1])
                nodes += 1
                continue
            if isinstance(event, _CLOSES):
                depth -= 1
                anchor, size = open_.pop()
            elif isinstance(event, yaml.ScalarEvent):
                anchor, size = event.anchor, 1
                nodes += 1
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                anchor, size = None, sizes.get(event.anchor, 1)
                alias_nodes += size
                nodes += size
                if aliases > MAX_YAML_ALIASES:
                    raise OverLimit(f"it has too many aliases: at most {MAX_YAML_ALIASES} are allowed")
                if alias_nodes > MAX_YAML_ALIAS_NODES:
                    raise OverLimit(f"its aliases expand to too many nodes: at most {MAX_YAML_ALIAS_NODES} "
                                          "are allowed")
            else:
                continue
            if nodes > MAX_YAML_NODES:
                raise OverLimit(f"it has too many nodes: at most {MAX_YAML_NODES} are allowed")
            if anchor:
                sizes[anchor] = size
            if open_:
                open_[-1][1] += size
    except yaml.MarkedYAMLError as exc:
        # libyaml 0.2.6 (in PyYAML 6.0.4's wheels) has a nesting limit of its own, met in its
        # scanner before the events reach the count above: the same answer, in our words.
        if "maximum nesting depth" in str(exc.problem):
            raise OverLimit(too_deep) from None
        raise


def load_yaml(text: str | bytes) -> Any:
    """Parse YAML as Kubernetes does; raises YAMLError (with problem_mark) when it is not YAML,
    Unrepresentable (a YAMLError) when it holds what JSON cannot (see check_value)."""
    text = text or ""
    if text[:1] in ("{", b"{"):
        # JSON is YAML, and what kubectl sends (apply patches, YAML-typed bodies): parse it at
        # JSON's speed, with JSON's bounds (orjson refuses NaN, lone surrogates, ~1024 levels).
        try:
            return check_value(orjson.loads(text), scalars=False)
        except orjson.JSONDecodeError:
            pass
    _check_yaml_depth(text)
    try:
        value = yaml.load(text, Loader=_KubeYamlLoader)
    except ValueError as exc:
        if isinstance(exc, YAMLError):
            raise
        # int() refuses more than 4300 digits (sys.int_info.default_max_str_digits).
        raise Unrepresentable("an integer is too large: integers must fit in 64 bits") from None
    return check_value(value)


def content_type(header: str) -> str:
    """The media type of a Content-Type header, without parameters, lower case."""
    return header.split(";")[0].strip().lower()


def decode_body(raw: bytes, ctype: str) -> dict:
    """Decode a JSON or YAML request body into an object (a dict), or raise a 400/415 ApiError."""
    if ctype == PROTOBUF:
        raise unsupported_media_type(ctype, BODY_TYPES + ["(protobuf bodies are not supported yet: "
                                     "send JSON, e.g. `kubectl create ... --dry-run=client -o yaml | kubectl create -f -`)"])
    if not raw:
        raise bad_request("the request body is empty: send the object as JSON")
    if ctype in ("", JSON):
        try:
            obj = check_value(orjson.loads(raw), scalars=False)
        except orjson.JSONDecodeError as exc:
            raise bad_request(f"couldn't decode the request body as JSON: {exc}")
        except Unrepresentable as exc:
            raise refused_body(f"couldn't decode the request body as JSON: {exc.problem}", exc)
    elif ctype in YAML_TYPES:
        try:
            obj = load_yaml(raw)
        except YAMLError as exc:
            raise refused_body(f"couldn't decode the request body as YAML: {exc}", exc)
    else:
        raise unsupported_media_type(ctype, BODY_TYPES)
    if not isinstance(obj, dict):
        raise bad_request("the request body must be a JSON object (a Kubernetes object), not "
                          + type(obj).__name__)
    return obj


def decode_apply_patch(body: bytes | str) -> dict:
    """An apply patch (YAML, or JSON, which is YAML too) -> the applied configuration."""
    try:
        applied = load_yaml(body)
    except YAMLError as exc:
        raise refused_body(f"couldn't decode the apply patch: {exc}", exc)
    if not isinstance(applied, dict):
        raise bad_request("the apply patch must be an object")
    return applied


# ---------------------------------------------------------------------------------------------
# Duplicate fields (fieldValidation Strict / Warn): the parsers above keep the last value
# silently, as Go's decoder does; kube's strict decoders also report the repeat.


class _Repeated(Exception):
    pass


def _no_repeats(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Repeated
    return out


class _Pairs(list):
    """A JSON object as its (key, value) pairs, repeats kept."""


def _join(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def duplicate_json_fields(raw: bytes | str) -> list[str]:
    """Paths of keys repeated within one JSON object ("spec.parallelism", "[0].op"), in
    document order; [] for a body without repeats or that is not JSON (decoding reports that)."""
    try:
        json.loads(raw, object_pairs_hook=_no_repeats)  # the common case: one cheap pass
        return []
    except _Repeated:
        pass
    except (ValueError, TypeError, RecursionError):
        return []
    found: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, _Pairs):
            seen: set[str] = set()
            for key, item in value:
                if key in seen:
                    found.append(_join(path, key))
                seen.add(key)
                walk(item, _join(path, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, _join(path, i))

    walk(json.loads(raw, object_pairs_hook=_Pairs), "")
    return found


def duplicate_yaml_keys(raw: bytes | str) -> list[str]:
    """go-yaml's strict complaints about repeated mapping keys: 'line N: key "k" already set in map'."""
    try:
        root = yaml.compose(raw or "", Loader=_KubeYamlLoader)
    except YAMLError:
        return []
    found: list[str] = []
    pending = [root] if root is not None else []
    while pending:
        node = pending.pop()
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in seen:
                        found.append((key.start_mark.line + 1, f"line {key.start_mark.line + 1}: key {json.dumps(key.value)} already set in map"))
                    seen.add(key.value)
                pending.append(value)
        elif isinstance(node, yaml.SequenceNode):
            pending.extend(node.value)
    return [text for _, text in sorted(found)]


def yaml_lines(text: str) -> dict[str, int]:
    """The 1-based line of each field of a YAML document by its path ("spec.containers[0].image"),
    so that an error about a field can point at its line (the YAML editor); {} when the text is
    not YAML. Read within the limits load_yaml keeps (deep or alias-bombed text gives {})."""
    try:
        _check_yaml_depth(text or "")
        root = yaml.compose(text or "", Loader=_KubeYamlLoader)
    except YAMLError:
        return {}
    lines: dict[str, int] = {}
    pending = [(root, "")] if root is not None else []
    while pending:
        node, path = pending.pop()
        if isinstance(node, yaml.MappingNode):
            items = [(_join(path, key.value), key, value) for key, value in node.value if isinstance(key, yaml.ScalarNode)]
        elif isinstance(node, yaml.SequenceNode):
            items = [(_join(path, i), item, item) for i, item in enumerate(node.value)]
        else:
            continue
        for where, marked, value in items:
            lines.setdefault(where, marked.start_mark.line + 1)
            pending.append((value, where))
    return lines


# Decoding an object of a known kind ----------------------------------------------------


def check_type_meta(res, obj: dict) -> None:
    """apiVersion and kind, when the body names them, must be the URL's."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if api_version and api_version != res.api_version:
        raise bad_request(f"the API version in the data ({api_version}) does not match the expected API version ({res.api_version})")
    if kind and kind != res.kind:
        raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({res.kind})")
    if not isinstance(obj.get("metadata", {}), dict):
        raise bad_request("metadata must be an object")


FIELD_VALIDATION = ("Ignore", "Warn", "Strict")


def patch_invalid(detail: str, patched: Any) -> ApiError:
    """422 for a patched object that does not decode (wrong type, strict unknown field).

    kube-apiserver wraps decoder errors after a PATCH this way:
    ` "" is invalid: patch: Invalid value: "<patched object>": <detail>`.
    """
    text = patched if isinstance(patched, str) else json.dumps(patched, separators=(",", ":"))
    return invalid_object("", "", "", [invalid("patch", text, detail)])



def decode_object(res, obj: dict, mode: str, *, patched: bool = False,
                  duplicates: list[str] = ()) -> tuple[dict, list[str]]:
    """Drop unknown fields (an error in Strict mode), check types; returns (object, warnings).

    duplicates: the body's own strict complaints, worded (duplicate_fields: repeated keys, and
    a JSON patch's unknown operation fields). After a patch, kube-apiserver reports these as
    422 on the patched object (the patch's own complaints first), else 400.
    """
    try:
        pruned, unknown = schema.decode(obj, res.definition)
    except schema.DecodeError as err:
        if patched:
            raise patch_invalid(err.detail, obj)
        raise
    problems = (list(duplicates) + schema.unknown_field_warnings(unknown) if patched
                else schema.unknown_field_warnings(unknown) + list(duplicates))
    if problems and mode == "Strict":
        if patched:
            raise patch_invalid(schema.strict_detail([], problems), obj)
        raise schema.strict_error(res.definition, [], problems)
    return pruned, (problems if mode == "Warn" else [])


# A JSON patch operation's fields, as kube-apiserver's handlers.jsonPatchOp declares them.
JSON_PATCH_OP_FIELDS = ("op", "path", "from", "value")


def json_patch_strict_errors(raw: bytes | str) -> list[str]:
    """What kube's applyJSPatch reports of a JSON patch under Strict / Warn: the operations
    decoded strictly (sigs.k8s.io/json, case-sensitive) into []jsonPatchOp, each complaint
    prefixed "json patch ": a key that is no field of an operation (`unknown field "[0].foo"`),
    a field repeated (`duplicate field "[1].path"`, also inside a value), in document order,
    each once. [] for a body that is not a list of objects (decoding the patch reports that)."""
    try:
        ops = json.loads(raw, object_pairs_hook=_Pairs)
    except (ValueError, TypeError, RecursionError):
        return []
    if not isinstance(ops, list):
        return []
    found: list[str] = []

    def note(text: str) -> None:
        if text not in found:   # (the decoder keeps each complaint once)
            found.append(text)

    def walk(value: Any, path: str) -> None:   # a value's maps: repeated keys only
        if isinstance(value, _Pairs):
            seen: set[str] = set()
            for key, item in value:
                if key in seen:
                    note(f'json patch duplicate field "{_join(path, key)}"')
                seen.add(key)
                walk(item, _join(path, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, _join(path, i))

    for i, op in enumerate(ops):
        if not isinstance(op, _Pairs):
            continue
        seen: set[str] = set()
        for key, item in op:
            where = f"[{i}].{key}"
            if key not in JSON_PATCH_OP_FIELDS:
                note(f'json patch unknown field "{where}"')
                continue
            if key in seen:
                note(f'json patch duplicate field "{where}"')
            seen.add(key)
            if key == "value":
                walk(item, where)
    return found


def duplicate_fields(raw: bytes, media_type: str, mode: str) -> list[str]:
    """A JSON body's repeated keys as the strict decoder words them (a JSON patch's unknown
    operation fields too: json_patch_strict_errors); none under Ignore."""
    if mode == "Ignore":
        return []
    if media_type in ("", JSON, MERGE_PATCH, STRATEGIC_MERGE_PATCH):
        return schema.duplicate_field_texts(duplicate_json_fields(raw))
    if media_type == JSON_PATCH:
        return json_patch_strict_errors(raw)
    return []  # YAML bodies: PyYAML keeps the last value, as go-yaml's non-strict decoder does

"""PATCH bodies: JSON patch (RFC 6902), merge patch (RFC 7386), strategic merge patch.

All three take the current object as a dict and return a new dict; the caller then decodes
the result (schema.decode) and goes through the usual validate + store path. Server-side
apply (application/apply-patch+yaml) is not handled here.

Error codes follow kube-apiserver (staging/.../endpoints/handlers/patch.go):
- body that does not parse, or has the wrong JSON shape            -> 400 BadRequest
- JSON patch that parses but does not apply (failed test, missing
  path, unknown op)                                                -> 422 Invalid, with kube's
  fixed message "the server rejected our request due to an error in our request"
- more than 10000 JSON patch operations                            -> 413
- malformed strategic-merge directives                             -> 400 (kube answers 500 for
  some of them; we never do), lists of lists                       -> 422
- unknown Content-Type                                             -> 415
"""
from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import jsonpointer
import orjson

from . import codec, schema
from .errors import ApiError, bad_request, unsupported_media_type

from .codec import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH

# In kube-apiserver's order (it lists them in its 415 message).
SUPPORTED_PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_MERGE_PATCH)

MAX_JSON_PATCH_OPERATIONS = 10000

# Strategic merge patch directives.
_PATCH = "$patch"
_RETAIN_KEYS = "$retainKeys"
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


# --------------------------------------------------------------------------- helpers

def _unprocessable(detail: str) -> ApiError:
    """kube's NewGenericServerResponse(422): fixed message; we add the reason as a cause."""
    return ApiError(422, "Invalid", "the server rejected our request due to an error in our request",
                    {"causes": [{"message": detail}]})


def _parse(body: bytes | str | Any) -> Any:
    """A patch body -> its value, within codec's bounds (depth; orjson itself refuses NaN,
    lone surrogates and integers beyond 64 bits become floats, as in Go): 400 otherwise."""
    if not isinstance(body, (bytes, bytearray, str)):
        return body
    try:
        return codec.check_value(orjson.loads(body), scalars=False)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"error decoding patch: {exc}") from None
    except codec.Unrepresentable as exc:
        raise codec.refused_body(f"error decoding patch: {exc.problem}", exc) from None


def patch_type(content_type: str | None) -> str:
    """The patch type of a Content-Type header (parameters stripped); 415 if unsupported."""
    base = (content_type or "").split(";", 1)[0].strip().lower()
    if base not in SUPPORTED_PATCH_TYPES:
        raise unsupported_media_type(content_type or "", list(SUPPORTED_PATCH_TYPES))
    return base


# --------------------------------------------------------------------------- json patch

def json_patch(obj: dict, patch_body: bytes | str | list) -> dict:
    """Apply an RFC 6902 patch; returns a new dict (obj is left alone)."""
    ops = _parse(patch_body)
    if not isinstance(ops, list):
        raise bad_request(f"error decoding patch: json: cannot unmarshal {schema.json_kind(ops)} "
                          f"into Go value of type []handlers.jsonPatchOp")
    for op in ops:
        if not isinstance(op, dict):
            raise bad_request(f"error decoding patch: json: cannot unmarshal {schema.json_kind(op)} "
                              f"into Go struct field of type handlers.jsonPatchOp")
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise ApiError(413, "RequestEntityTooLarge",
                       f"Request entity too large: The allowed maximum operations in a JSON patch "
                       f"is {MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}")
    try:
        result = jsonpatch.JsonPatch(ops).apply(obj, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
        raise _unprocessable(str(exc)) from None
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        # jsonpatch lets a few structural problems through as plain Python errors.
        raise _unprocessable(f"json patch does not apply: {exc}") from None
    return result


# --------------------------------------------------------------------------- merge patch

def merge_patch(obj: dict, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(obj) if isinstance(obj, dict) else {}
    _merge_into(result, patch)
    return result


def _merge_into(target: dict, patch: dict) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            if not isinstance(current, dict):
                current = target[key] = {}
            _merge_into(current, value)
        else:
            target[key] = copy.deepcopy(value)


# --------------------------------------------------------------------------- strategic merge

def strategic_merge_patch(obj: dict, patch: Any, definition: str) -> dict:
    """Kubernetes strategic merge patch, driven by the definition's patch metadata."""
    patch = _parse(patch)
    if not isinstance(patch, dict):
        raise bad_request(f"json: cannot unmarshal {schema.json_kind(patch)} into Go value of type "
                          f"map[string]interface {{}}")
    return _merge_map(copy.deepcopy(obj), patch, schema.node(definition), "")


def _where(path: str) -> str:
    return path or "<root>"


def _merge_map(orig: dict, patch: dict, node: schema.Node, path: str) -> dict:
    """Merge patch into orig (a private copy, mutated and returned)."""
    directive = patch.get(_PATCH)
    if directive is not None:
        if directive == "replace":
            # The patch is the new value; directives left inside mean nothing.
            return {k: copy.deepcopy(v) for k, v in patch.items() if k != _PATCH}
        if directive == "delete":
            return {}
        raise bad_request(f"unknown patch type: {directive} in map: {_where(path)}")

    orders: dict[str, Any] = {}
    deletions: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    retain = _MISSING
    for key, value in patch.items():
        if key == _RETAIN_KEYS:
            retain = value
        elif key.startswith(_ORDER):
            orders[key[len(_ORDER):]] = value
        elif key.startswith(_DELETE_PRIMITIVE):
            deletions[key[len(_DELETE_PRIMITIVE):]] = value
        else:
            fields[key] = value

    if retain is not _MISSING:
        # $retainKeys: the map keeps only these keys (e.g. a volume switching source type).
        if not isinstance(retain, list) or any(
                v is not None and k not in retain for k, v in fields.items()):
            raise bad_request("invalid patch format of retainKeys")
        for key in [k for k in orig if k not in retain]:
            del orig[key]

    for name, values in deletions.items():
        if not isinstance(values, list):
            raise bad_request("invalid patch format of primitive list")
        current = orig.get(name)
        if isinstance(current, list):
            doomed = {_ident(v) for v in values}
            orig[name] = [v for v in current if _ident(v) not in doomed]

    for name, value in fields.items():
        if value is None:                      # null deletes the key
            orig.pop(name, None)
            continue
        child, meta = node.field(name)
        sub = f"{path}.{name}" if path else name
        current = orig.get(name)
        if isinstance(value, dict):
            if "replace" in meta.strategies:
                orig[name] = copy.deepcopy(value)
            else:
                orig[name] = _merge_map(current if isinstance(current, dict) else {}, value, child, sub)
        elif isinstance(value, list):
            if "merge" in meta.strategies:
                orig[name] = _merge_list(current if isinstance(current, list) else [], value,
                                         _item_node(child), meta.merge_key, orders.pop(name, None), sub)
            else:                              # atomic list: the patch replaces it
                orig[name] = copy.deepcopy(value)
        else:
            orig[name] = copy.deepcopy(value)

    # $setElementOrder for lists the patch did not otherwise touch: reorder only.
    for name, order in orders.items():
        if not isinstance(order, list):
            raise bad_request("invalid patch format of setElementOrder list")
        child, meta = node.field(name)
        current = orig.get(name)
        if isinstance(current, list) and "merge" in meta.strategies:
            orig[name] = _merge_list(current, [], _item_node(child), meta.merge_key, order,
                                     f"{path}.{name}" if path else name)
    return orig


def _item_node(node: schema.Node) -> schema.Node:
    return node.item if isinstance(node, schema.ListNode) else schema.ANY


def _ident(value: Any) -> Any:
    """A hashable identity for a list element or merge-key value (True is not 1)."""
    if isinstance(value, (dict, list)):
        return ("json", json.dumps(value, sort_keys=True))
    return (type(value) is bool, value)


def _merge_list(orig: list, patch: list, item: schema.Node, merge_key: str | None,
                order: Any, path: str) -> list:
    """Merge a list with patch strategy "merge", then put it in order.

    Lists of maps merge item by item on the merge key; lists of primitives are a union.
    Order: items named by the patch (or its $setElementOrder) in that order, with
    server-only items slotted in where they sat relative to them in the live list.
    """
    if order is not None and not isinstance(order, list):
        raise bad_request("invalid patch format of setElementOrder list")
    every = orig + patch
    if any(isinstance(v, list) for v in every):
        raise _unprocessable("lists of lists are not supported")
    maps = any(isinstance(v, dict) for v in every)

    if maps:
        if not merge_key:
            raise bad_request(f"cannot merge lists without merge key for {path}")
        if not all(isinstance(v, dict) for v in every):
            raise bad_request(f"invalid list in patch for {path}: items must all be objects")

        def key_of(v: dict) -> Any:
            return _ident(v.get(merge_key))

        server_order = [key_of(v) for v in orig]
        plain = []
        for entry in patch:
            directive = entry.get(_PATCH)
            if directive is None:
                plain.append(entry)
            elif directive == "delete":
                if merge_key not in entry:
                    raise bad_request(f"map: {json.dumps(entry)} does not contain declared merge key: {merge_key}")
                gone = key_of(entry)
                orig = [v for v in orig if key_of(v) != gone]
            elif directive == "replace":
                orig = []                    # the list becomes the patch's items
                server_order = []
            elif directive == "merge":
                raise bad_request("merging lists cannot yet be specified in the patch")
            else:
                raise bad_request(f"unknown patch type: {directive} in list: {path}")
        merged = list(orig)
        position = {key_of(v): i for i, v in enumerate(merged)}
        for i, entry in enumerate(plain):
            if merge_key not in entry:
                raise bad_request(f"map: {json.dumps(entry)} does not contain declared merge key: {merge_key}")
            k = key_of(entry)
            at = position.get(k)
            if at is None:
                position[k] = len(merged)
                merged.append(_merge_map({}, entry, item, f"{path}[{i}]"))
            else:
                merged[at] = _merge_map(merged[at], entry, item, f"{path}[{i}]")
        named = [key_of(v) for v in plain]
        if order is not None:
            if not all(isinstance(v, dict) and merge_key in v for v in order):
                raise bad_request("invalid patch format of setElementOrder list")
            named = [key_of(v) for v in order]
    else:
        key_of = _ident
        server_order = [_ident(v) for v in orig]
        merged, seen = [], set()
        for v in every:                       # union, first occurrence wins
            k = _ident(v)
            if k not in seen:
                seen.add(k)
                merged.append(copy.deepcopy(v))
        named = [_ident(v) for v in (order if order is not None else patch)]

    return _put_in_order(merged, key_of, named, server_order)


def _put_in_order(items: list, key_of, named: list, server_order: list) -> list:
    rank = {}
    for i, k in enumerate(named):
        rank.setdefault(k, i)
    live = {}
    for i, k in enumerate(server_order):
        live.setdefault(k, i)
    ordered = sorted((v for v in items if key_of(v) in rank), key=lambda v: rank[key_of(v)])
    # Server-only items keep their live order (new ones, if any, last).
    others = sorted((v for v in items if key_of(v) not in rank),
                    key=lambda v: live.get(key_of(v), len(live)))
    out, i, j = [], 0, 0
    while i < len(others) and j < len(ordered):
        left, right = live.get(key_of(others[i])), live.get(key_of(ordered[j]))
        # A server-only item goes first only if the live list put it before the next
        # patch item; when either is unknown to the live list, the patch item wins.
        if left is not None and right is not None and left < right:
            out.append(others[i])
            i += 1
        else:
            out.append(ordered[j])
            j += 1
    out.extend(others[i:])
    out.extend(ordered[j:])
    return out


_MISSING = object()


# --------------------------------------------------------------------------- dispatch

def apply_patch(obj: dict, patch_bytes: bytes, content_type: str, definition: str) -> dict:
    """Apply a PATCH body of the given Content-Type to obj; returns the patched dict.

    415 for unsupported types, 400 for bodies that do not parse. Server-side apply is
    routed elsewhere by the caller (patch_type() tells it apart).
    """
    kind = patch_type(content_type)
    if kind == APPLY_PATCH:
        raise ValueError("server-side apply is not a patch mechanism of this module")
    body = _parse(patch_bytes)
    if kind == JSON_PATCH:
        return json_patch(obj, body)
    if kind == MERGE_PATCH:
        if not isinstance(body, dict):
            raise bad_request(f"error decoding patch: json: cannot unmarshal {schema.json_kind(body)} "
                              f"into Go value of type map[string]interface {{}}")
        return merge_patch(obj, body)
    return strategic_merge_patch(obj, body, definition)

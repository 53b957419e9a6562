"""/openapi/v2 as protobuf: the Swagger 2.0 document of openapi.v2() in gnostic's openapi_v2
messages (github.com/google/gnostic, openapiv2/OpenAPIv2.proto), which is what kubectl asks for.

kubectl reads it when a kind of a file is not in /openapi/v3 (a Namespace, a ConfigMap beside a
Lease): with a 404 here it refused the whole file ("failed to download openapi"); with the
document it finds no such kind, skips its validation and reports "no matches for kind" for that
object alone. Only the fields the JSON document uses are encoded; field numbers are the .proto's.
"""
from __future__ import annotations

import json
import struct
from typing import Any

# What kube-openapi answers (kubectl asks with "...v2@v1.0+protobuf", which Go cannot parse back).
CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


# --- the wire format: tags, varints, length-delimited fields ------------------------------------

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:          # wire type 2: length-delimited
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _str(number: int, value: str | None) -> bytes:
    return _field(number, value.encode()) if value else b""


def _strs(number: int, values: list[str] | None) -> bytes:
    return b"".join(_field(number, v.encode()) for v in values or ())


def _bool(number: int, value: bool | None) -> bytes:
    return _varint(number << 3) + b"\x01" if value else b""


def _double(number: int, value: float | None) -> bytes:
    return _varint(number << 3 | 1) + struct.pack("<d", value) if value is not None else b""


def _msg(number: int, payload: bytes) -> bytes:
    return _field(number, payload)


# --- the messages -----------------------------------------------------------------------------

def _any(value: Any) -> bytes:                    # Any{yaml = 2}: JSON is YAML
    return _str(2, json.dumps(value, separators=(",", ":")))


def _named_any(number: int, node: dict) -> bytes:
    """The x-... keys of a node as repeated NamedAny{name = 1, value = 2}."""
    return b"".join(_msg(number, _str(1, k) + _msg(2, _any(v)))
                    for k, v in node.items() if k.startswith("x-"))


def _schema(s: dict) -> bytes:
    out = _str(1, s.get("$ref")) + _str(2, s.get("format")) + _str(4, s.get("description"))
    out += _double(7, s.get("maximum")) + _double(9, s.get("minimum"))
    out += _strs(19, s.get("required"))
    out += b"".join(_msg(20, _any(v)) for v in s.get("enum", ()))
    extra = s.get("additionalProperties")
    if isinstance(extra, dict):
        out += _msg(21, _msg(1, _schema(extra)))
    elif extra is not None:
        out += _msg(21, _bool(2, extra) or _varint(2 << 3) + b"\x00")
    if "type" in s:
        types = s["type"] if isinstance(s["type"], list) else [s["type"]]
        out += _msg(22, _strs(1, types))
    if "items" in s:
        items = s["items"] if isinstance(s["items"], list) else [s["items"]]
        out += _msg(23, b"".join(_msg(1, _schema(i)) for i in items))
    out += b"".join(_msg(24, _schema(a)) for a in s.get("allOf", ()))
    if "properties" in s:
        out += _msg(25, b"".join(_msg(1, _str(1, k) + _msg(2, _schema(v))) for k, v in s["properties"].items()))
    return out + _named_any(31, s)


def _parameter(p: dict) -> bytes:
    if p["in"] == "body":           # BodyParameter{description 1, name 2, in 3, required 4, schema 5}
        body = _str(1, p.get("description")) + _str(2, p["name"]) + _str(3, "body")
        body += _bool(4, p.get("required")) + _msg(5, _schema(p.get("schema", {})))
        return _msg(1, _msg(1, body))               # ParametersItem.parameter.body_parameter
    # Query (NonBodyParameter 3) and path (4) sub-schemas: required 1, in 2, description 3,
    # name 4, then type at 6 (query) / 5 (path), unique_items at 20 / 19.
    query = p["in"] == "query"
    sub = _bool(1, p.get("required")) + _str(2, p["in"]) + _str(3, p.get("description"))
    sub += _str(4, p["name"]) + _str(6 if query else 5, p.get("type"))
    sub += _bool(20 if query else 19, p.get("uniqueItems"))
    return _msg(1, _msg(2, _msg(3 if query else 4, sub)))


def _operation(o: dict) -> bytes:
    out = _strs(1, o.get("tags")) + _str(3, o.get("description")) + _str(5, o.get("operationId"))
    out += _strs(6, o.get("produces")) + _strs(7, o.get("consumes"))
    out += b"".join(_msg(8, _parameter(p)) for p in o.get("parameters", ()))
    codes = b""
    for code, response in o.get("responses", {}).items():
        resp = _str(1, response.get("description"))
        if "schema" in response:
            resp += _msg(2, _msg(1, _schema(response["schema"])))     # SchemaItem.schema
        codes += _msg(1, _str(1, code) + _msg(2, _msg(1, resp)))      # NamedResponseValue
    out += _msg(9, codes) + _strs(10, o.get("schemes"))
    return out + _named_any(13, o)


_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def encode(doc: dict) -> bytes:
    """A Swagger 2.0 document (dict) as an openapi_v2.Document."""
    paths = b""
    for path, item in doc.get("paths", {}).items():
        body = b"".join(_msg(_METHODS[m], _operation(o)) for m, o in item.items() if m in _METHODS)
        body += b"".join(_msg(9, _parameter(p)) for p in item.get("parameters", ()))
        paths += _msg(2, _str(1, path) + _msg(2, body))               # Paths.path: NamedPathItem
    info = doc.get("info", {})
    out = _str(1, doc.get("swagger")) + _msg(2, _str(1, info.get("title")) + _str(2, info.get("version")))
    out += _msg(8, paths)
    definitions = b"".join(_msg(1, _str(1, name) + _msg(2, _schema(s)))
                           for name, s in doc.get("definitions", {}).items())
    return out + _msg(9, definitions)

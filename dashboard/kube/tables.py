"""meta.k8s.io Table responses (what `kubectl get` prints) and Accept-header parsing.

A client asks for a Table with `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.
Columns are Name, the kind's priority-0 columns, Age, then the kind's wide (priority >= 1)
columns: the order kube-apiserver's printers use (Job: Name, Status, Completions,
Duration, Age, Containers*, Images*, Selector*).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from itertools import islice
from typing import Any, Iterable

import orjson

from . import errors, schema, yielding
from .formats import human_duration, parse_time
from .selectors import go_quote

TABLE_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT = ("Metadata", "Object", "None")


# ---------------------------------------------------------------------------------------
# Accept header parsing (shared with discovery.py)
# ---------------------------------------------------------------------------------------

def media_ranges(accept: str | None) -> list[tuple[str, dict[str, str]]]:
    """Split an Accept header into (type, params) in the client's order of preference.

    Ranges are ordered by q (highest first); equal q keeps the order the client wrote,
    which is what kube's negotiation effectively does for kubectl's headers. Ranges with
    q=0 are dropped. Parameter names are lower-cased; values keep their case.
    """
    out: list[tuple[float, int, str, dict[str, str]]] = []
    for index, part in enumerate((accept or "").split(",")):
        pieces = [p.strip() for p in part.split(";")]
        mtype = pieces[0].lower()
        if not mtype:
            continue
        params: dict[str, str] = {}
        for p in pieces[1:]:
            if "=" in p:
                k, v = p.split("=", 1)
                params[k.strip().lower()] = v.strip().strip('"')
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 1.0
        if q <= 0:
            continue
        out.append((-q, index, mtype, params))
    out.sort(key=lambda t: (t[0], t[1]))
    return [(mtype, params) for _, _, mtype, params in out]


def _is_json(mtype: str) -> bool:
    return mtype in ("application/json", "application/*", "*/*")


def table_version(accept: str | None) -> str | None:
    """"v1" / "v1beta1" when the client's preferred servable answer is a Table, else None.

    Walks the client's ranges in preference order: a Table we serve decides for a Table,
    a plain JSON range (or */*) decides against; anything else (protobuf, yaml, other `as=`
    targets, unknown Table versions) is skipped, as kube's negotiation skips what it
    cannot produce.
    """
    for mtype, params in media_ranges(accept):
        target = params.get("as")
        if target is None:
            if _is_json(mtype):
                return None
            continue
        if (mtype == "application/json" and target == "Table"
                and params.get("g") == TABLE_GROUP and params.get("v") in TABLE_VERSIONS):
            return params["v"]
    return None


# What kube-apiserver's JSON endpoints can produce, for the 406 message.
ACCEPTED_MEDIA_TYPES = "application/json, application/yaml, application/vnd.kubernetes.protobuf"
_PLAIN_TYPES = ("application/yaml", "application/vnd.kubernetes.protobuf")


def negotiate_output(accept: str | None) -> tuple[str, str | None]:
    """("object", None), ("Table", version) or ("PartialObjectMetadata", "v1") for a response,
    from the client's first range we can serve; 406 when none can be (an `as=` target kube
    does not transform to, a Table in protobuf, text/html...).

    Plain YAML or protobuf ranges are media types kube serves; we answer them with JSON (every
    client that sends them also reads JSON) rather than refuse.
    """
    ranges = media_ranges(accept)
    if not ranges:
        return "object", None
    fallback = False
    for mtype, params in ranges:
        target = params.get("as")
        if target is None:
            if _is_json(mtype):
                return "object", None
            fallback = fallback or mtype in _PLAIN_TYPES
            continue
        if mtype != "application/json" or params.get("g") != TABLE_GROUP:
            continue
        if target == "Table" and params.get("v") in TABLE_VERSIONS:
            return "Table", params["v"]
        if target in ("PartialObjectMetadata", "PartialObjectMetadataList") and params.get("v") in TABLE_VERSIONS:
            return "PartialObjectMetadata", params["v"]
    if fallback:
        return "object", None
    raise errors.ApiError(406, "NotAcceptable", "only the following media types are accepted: " + ACCEPTED_MEDIA_TYPES)


def wants_table(accept_header: str | None) -> bool:
    """True when the Accept header asks for a meta.k8s.io v1/v1beta1 Table first."""
    return table_version(accept_header) is not None


def table_content_type(version: str = "v1") -> str:
    return f"application/json;as=Table;v={version};g={TABLE_GROUP}"


# ---------------------------------------------------------------------------------------
# Durations
# ---------------------------------------------------------------------------------------

def age(timestamp: Any, now: datetime) -> str:
    """translateTimestampSince: "<unknown>" for an unset time, else HumanDuration(now - t)."""
    t = parse_time(timestamp)
    if t is None:
        return "<unknown>"
    return human_duration((now - t).total_seconds())


# ---------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _object_meta_docs() -> dict[str, str]:
    """ObjectMeta field descriptions from the 1.32 OpenAPI definitions."""
    props = schema.definitions()["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]
    return {k: v.get("description", "") for k, v in props.items()}


def _column(name: str, type_: str, fmt: str = "", description: str = "", priority: int = 0) -> dict:
    col = {"name": name, "type": type_, "format": fmt, "description": description,
           "priority": priority}
    return col


def _ordered_columns(resource) -> tuple[list, list]:
    cols = list(getattr(resource, "columns", ()) or ())
    return [c for c in cols if not c.priority], [c for c in cols if c.priority]


def column_definitions(resource) -> list[dict]:
    """columnDefinitions: Name, priority-0 columns, Age, then wide columns."""
    docs = _object_meta_docs()
    if not getattr(resource, "name_and_age_columns", True):
        return [_column(c.name, c.type, c.format, c.description, c.priority) for c in resource.columns]
    narrow, wide = _ordered_columns(resource)
    out = [_column("Name", "string", "name", docs.get("name", ""))]
    out += [_column(c.name, c.type, c.format, c.description, c.priority) for c in narrow]
    out.append(_column("Age", "string", "", docs.get("creationTimestamp", "")))
    out += [_column(c.name, c.type, c.format, c.description, c.priority) for c in wide]
    return out


def check_include_object(value: str | None) -> str:
    """Validate ?includeObject= (TableOptions); "" means Metadata. 400 when unknown."""
    if value in (None, ""):
        return "Metadata"
    if value not in INCLUDE_OBJECT:
        raise errors.bad_request(
            "Unable to convert to Table as requested: includeObject: Invalid value: "
            f"{go_quote(str(value))}: must be 'Metadata', 'Object', 'None', or empty")
    return value


def _cells(resource, obj: dict, now: datetime) -> list:
    meta = obj.get("metadata") or {}
    if not getattr(resource, "name_and_age_columns", True):
        return [c.cell(obj, now) for c in resource.columns]
    narrow, wide = _ordered_columns(resource)
    cells: list = [meta.get("name", "")]
    cells += [c.cell(obj, now) for c in narrow]
    cells.append(age(meta.get("creationTimestamp"), now))
    cells += [c.cell(obj, now) for c in wide]
    return cells


def _row_object(resource, obj: dict, include: str, api_version: str) -> dict | None:
    if include == "None":
        return None
    if include == "Object":
        if "kind" in obj and "apiVersion" in obj:
            return obj
        # kubectl needs kind/apiVersion on the row object, or it prints "<unknown>".
        return {"apiVersion": resource.api_version, "kind": resource.kind, **obj}
    return {"kind": "PartialObjectMetadata", "apiVersion": api_version,
            "metadata": obj.get("metadata") or {}}


def build_table(resource, objects: Iterable[dict], *, list_meta: dict | None = None,
                include_object: str | None = "Metadata", now: datetime | None = None,
                version: str = "v1", with_columns: bool = True) -> dict:
    """A meta.k8s.io Table for a list (or, with one object, for a single GET / watch event).

    list_meta: {"resourceVersion", "continue", ...} for lists. When None, a one-object
    table carries that object's resourceVersion, as kube's table convertor does.
    include_object: "Metadata" (default; rows carry PartialObjectMetadata), "Object"
    (the full object; kubectl --sort-by needs it) or "None" (no row object).
    version: "v1" or "v1beta1", the Table version negotiated from Accept (table_version).
    with_columns: False for watch events after the first, which may omit the definitions.
    """
    include = check_include_object(include_object)
    now = now or datetime.now(timezone.utc)
    objects = list(objects)
    api_version = f"{TABLE_GROUP}/{version}"
    if list_meta is None:
        list_meta = {}
        if len(objects) == 1:
            rv = (objects[0].get("metadata") or {}).get("resourceVersion")
            if rv:
                list_meta = {"resourceVersion": rv}
    rows = []
    for obj in objects:
        row: dict[str, Any] = {"cells": _cells(resource, obj, now)}
        row_obj = _row_object(resource, obj, include, api_version)
        if row_obj is not None:
            row["object"] = row_obj
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": api_version,
        "metadata": dict(list_meta),
        "columnDefinitions": column_definitions(resource) if with_columns else [],
        "rows": rows,
    }


# ---------------------------------------------------------------------------------------
# Tables of stored revisions, rows cached
# ---------------------------------------------------------------------------------------
# A stored revision's text never changes, so what its row needs (the cells that do not
# depend on the time, the creation time, the frozen inputs of those that do, the metadata
# as JSON) is worked out once per process and reused by every Table that lists it, as
# kube-apiserver keeps decoded objects in its watch cache. The 3,000-Job Table's time was
# mostly decoding objects and computing cells again at each request
# (docs/BENCHMARKS.md's history in git).

ROW_CACHE_SIZE = 10_000     # rows kept per process (a row: ~2 KB of key text + its cells)
_rows: dict = {}
_rows_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class _Row:
    cells: tuple          # None where Age and the time-dependent cells go
    created: datetime | None
    timed: tuple          # (index, column.at, frozen inputs) for each time-dependent cell
    metadata: bytes       # the object's metadata as JSON, for the row's PartialObjectMetadata


def _row_of(resource, text: bytes) -> _Row:
    key = (resource.kind, text)
    row = _rows.get(key)
    if row is not None:
        return row
    obj = orjson.loads(text)
    meta = obj.get("metadata") or {}
    if getattr(resource, "name_and_age_columns", True):
        narrow, wide = _ordered_columns(resource)
        cells: list = [meta.get("name", "")]
        columns = (*narrow, None, *wide)           # None: Age, filled in at each request
    else:
        cells, columns = [], resource.columns
    timed = []
    for column in columns:
        if column is None:
            cells.append(None)
        elif column.freeze is not None:
            timed.append((len(cells), column.at, column.freeze(obj)))
            cells.append(None)
        else:
            cells.append(column.cell(obj, None))   # a cell without freeze() never reads the time
    row = _Row(tuple(cells), parse_time(meta.get("creationTimestamp")), tuple(timed), orjson.dumps(meta))
    with _rows_lock:
        if len(_rows) >= ROW_CACHE_SIZE:           # drop the oldest tenth (dicts keep insertion order)
            for old in list(islice(_rows, ROW_CACHE_SIZE // 10)):
                _rows.pop(old, None)
        _rows[key] = row
    return row


def table_of_texts(resource, texts: list[bytes], *, list_meta: dict, include_object: str | None = "Metadata",
                   now: datetime | None = None, version: str = "v1") -> dict:
    """build_table for stored texts (a list or GET as kubectl asks for it), from cached rows."""
    include = check_include_object(include_object)
    if include == "Object":      # the whole objects: nothing to reuse
        return build_table(resource, [orjson.loads(t) for t in texts], list_meta=list_meta,
                           include_object=include, now=now, version=version)
    now = now or datetime.now(timezone.utc)
    api_version = f"{TABLE_GROUP}/{version}"
    age_at = 1 + len(_ordered_columns(resource)[0]) if getattr(resource, "name_and_age_columns", True) else None
    head = b'{"kind":"PartialObjectMetadata","apiVersion":"' + api_version.encode() + b'","metadata":'
    rows = []
    for i, text in enumerate(texts):
        yielding.every(i)
        r = _row_of(resource, text)
        cells = list(r.cells)
        if age_at is not None:
            cells[age_at] = "<unknown>" if r.created is None else human_duration((now - r.created).total_seconds())
        for index, at, frozen in r.timed:
            cells[index] = at(frozen, now)
        row: dict[str, Any] = {"cells": cells}
        if include == "Metadata":
            row["object"] = orjson.Fragment(head + r.metadata + b"}")
        rows.append(row)
    return {"kind": "Table", "apiVersion": api_version, "metadata": dict(list_meta),
            "columnDefinitions": column_definitions(resource), "rows": rows}

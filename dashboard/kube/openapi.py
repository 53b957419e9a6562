"""/openapi/v3 and /openapi/v2 documents, generated from the registry and the definitions.

kubectl reads them for three things (see docs KUBECTL.md §2):
- create/apply/replace/edit: a PATCH operation carrying the object's GVK and a
  `fieldValidation` query parameter means "the server validates, send fieldValidation=Strict";
- explain: components.schemas with the kind's schema tagged x-kubernetes-group-version-kind;
- client-side apply: the schemas, with x-kubernetes-patch-merge-key/-strategy, to compute a
  strategic merge patch.

The definitions file is JSON-schema flavoured (type lists with "null", "#/$defs/" refs,
additionalProperties: false); _convert() turns it into the OpenAPI shape kube-apiserver serves.
"""
from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from . import openapi_proto, registry, reviews, schema
from .patch import SUPPORTED_PATCH_TYPES

K8S_VERSION = "v1.32.0"
META = "io.k8s.apimachinery.pkg.apis.meta.v1."
# Always published, whatever the kinds: the shapes of list/delete/status/patch bodies.
META_DEFINITIONS = (META + "ObjectMeta", META + "ListMeta", META + "Status",
                    META + "DeleteOptions", META + "Patch")

# What kube-apiserver publishes for the two definitions the file writes as oneOf.
_SPECIAL = {
    schema.INT_OR_STRING: {
        "description": "IntOrString is a type that can hold an int32 or a string.  When used in "
                       "JSON or YAML marshalling and unmarshalling, it produces or consumes the "
                       "inner type.",
        "type": "string", "format": "int-or-string"},
    schema.QUANTITY: {
        "description": "Quantity is a fixed-point representation of a number, serialized as a "
                       "string such as \"100m\", \"1.5Gi\" or \"2\".",
        "type": "string"},
}


# --------------------------------------------------------------------------- schemas

def _convert(node: Any, ref_prefix: str, v3: bool) -> Any:
    """JSON-schema flavour -> OpenAPI flavour, recursively."""
    if isinstance(node, list):
        return [_convert(v, ref_prefix, v3) for v in node]
    if not isinstance(node, dict):
        return node
    name = schema.ref_name(node)
    if name is not None:
        ref = {"$ref": ref_prefix + name}
        rest = {k: _convert(v, ref_prefix, v3) for k, v in node.items() if k not in ("$ref", "allOf")}
        if not rest:
            return ref
        # OpenAPI 3 ignores siblings of $ref; kube wraps the ref in allOf to keep them.
        return {"allOf": [ref], **rest} if v3 else {**rest, **ref}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            kept = [t for t in value if t != "null"]
            if kept:
                out["type"] = kept[0]
        elif key == "additionalProperties":
            if isinstance(value, dict):           # a map's value schema; `false` is dropped
                out[key] = _convert(value, ref_prefix, v3)
        elif key == "enum":
            kept = [v for v in value if v is not None]
            if kept:
                out[key] = kept
        elif key == "properties":
            out[key] = {p: _convert(s, ref_prefix, v3) for p, s in value.items()}
        else:
            out[key] = _convert(value, ref_prefix, v3)
    return out


def _definition(name: str, ref_prefix: str, v3: bool) -> dict:
    raw = schema.definitions()[name]
    if name in _SPECIAL:
        return dict(_SPECIAL[name])
    converted = _convert(raw, ref_prefix, v3)
    if "x-kubernetes-group-version-kind" in raw:
        # The file pins apiVersion/kind with enums; kube does not (DeleteOptions etc. are
        # shared by every group, and explain would print them as constraints).
        for prop in ("apiVersion", "kind"):
            converted.get("properties", {}).get(prop, {}).pop("enum", None)
    return converted


def _closure(roots: list[str]) -> list[str]:
    """Every definition reachable from roots, in a stable order."""
    defs = schema.definitions()
    seen: dict[str, None] = {}
    stack = list(reversed(roots))
    while stack:
        name = stack.pop()
        if name in seen or name not in defs:
            continue
        seen[name] = None
        found: list[str] = []
        _refs(defs[name], found)
        stack.extend(reversed(found))
    return sorted(seen)


def _refs(node: Any, out: list[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            out.append(ref.rsplit("/", 1)[-1])
        for value in node.values():
            _refs(value, out)
    elif isinstance(node, list):
        for value in node:
            _refs(value, out)


def _served() -> list:
    """What the documents describe: every served resource (other versions of a stored kind
    included), then the access reviews (reviews.py)."""
    return [*registry.served(), *reviews.REVIEWS]


def _schemas(resources: list[registry.Resource], ref_prefix: str, v3: bool) -> dict:
    roots = [d for r in resources
             for d in ((r.definition,) if isinstance(r, reviews.Review) else (r.definition, r.definition + "List"))]
    return {name: _definition(name, ref_prefix, v3)
            for name in _closure(roots + list(META_DEFINITIONS))}


# --------------------------------------------------------------------------- parameters

def _p(name: str, kind: str, description: str, where: str = "query") -> dict:
    return {"name": name, "in": where, "description": description, "type": kind}


_PRETTY = _p("pretty", "string", "If 'true', then the output is pretty printed.")
_DRY_RUN = _p("dryRun", "string", "When present, indicates that modifications should not be "
              "persisted. The only valid value is 'All': all dry run stages are processed.")
_FIELD_MANAGER = _p("fieldManager", "string", "A name associated with the actor or entity "
                    "that is making these changes.")
_FIELD_VALIDATION = _p("fieldValidation", "string", "How the server treats unknown or "
                       "duplicate fields in the object: Ignore, Warn (the default) or Strict "
                       "(fail the request with a BadRequest).")
_FORCE = _p("force", "boolean", "Force is going to \"force\" Apply requests. It must be unset "
            "for non-apply patch requests.")
_LIST = [
    _p("allowWatchBookmarks", "boolean", "Requests watch events with type BOOKMARK."),
    _p("continue", "string", "The continue token of a previous chunked list call."),
    _p("fieldSelector", "string", "A selector to restrict the list of returned objects by "
       "their fields. Defaults to everything."),
    _p("labelSelector", "string", "A selector to restrict the list of returned objects by "
       "their labels. Defaults to everything."),
    _p("limit", "integer", "Maximum number of responses to return for a list call; more are "
       "fetched with the continue token."),
    _p("resourceVersion", "string", "Constrains which resource versions a request may be "
       "served from (see resourceVersionMatch)."),
    _p("resourceVersionMatch", "string", "How resourceVersion is applied to list calls: Exact "
       "or NotOlderThan."),
    _p("sendInitialEvents", "boolean", "With watch=true, start the stream with synthetic "
       "events for the current state, then a bookmark."),
    _p("timeoutSeconds", "integer", "Timeout for the list/watch call."),
    _p("watch", "boolean", "Watch for changes to the described resources and return them as "
       "a stream of add, update, and remove notifications."),
]
_DELETE = [
    _DRY_RUN,
    _p("gracePeriodSeconds", "integer", "The duration in seconds before the object should be "
       "deleted. Zero means delete immediately."),
    _p("orphanDependents", "boolean", "Deprecated: use propagationPolicy."),
    _p("propagationPolicy", "string", "Whether and how garbage collection will be performed: "
       "Orphan, Background or Foreground."),
]


def _path_params(kind: str, named: bool) -> list[dict]:
    params = []
    if named:
        params.append({**_p("name", "string", f"name of the {kind}", "path"), "required": True})
    params.append({**_p("namespace", "string", "object name and auth scope, such as for teams "
                        "and projects", "path"), "required": True})
    return params


# --------------------------------------------------------------------------- operations

def _camel_group(group: str) -> str:
    """coordination.k8s.io -> Coordination, "" -> Core (kube's operationId style)."""
    if not group:
        return "Core"
    return "".join(p.capitalize() for p in group.removesuffix(".k8s.io").split("."))


def _tag(r: registry.Resource) -> str:
    return f"{(r.group or 'core').removesuffix('.k8s.io').replace('.', '_')}_{r.version}"


def _op(action, op_id, desc, params, responses, body=None, consumes=None):
    return {"action": action, "operationId": op_id, "description": desc,
            "params": params, "responses": responses, "body": body, "consumes": consumes}


def _operations(r: registry.Resource) -> dict[str, dict[str, dict]]:
    """path -> method -> abstract operation (turned into v2 or v3 by the callers)."""
    gv = f"{_camel_group(r.group)}{r.version.capitalize()}"
    kind = r.kind
    writes = [_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION]
    if isinstance(r, reviews.Review):   # create only, cluster-scoped, nothing stored
        return _tagged(r, {f"{r.prefix()}/{r.plural}": {
            "_params": [_PRETTY],
            "post": _op("post", f"create{gv}{kind}", f"create a {kind}", writes,
                        {"200": r.definition, "201": r.definition, "202": r.definition}, body=r.definition)}})
    status, delete_options, patch = META + "Status", META + "DeleteOptions", META + "Patch"
    op = _op

    collection = f"{r.prefix()}/namespaces/{{namespace}}/{r.plural}"
    item = f"{collection}/{{name}}"
    paths: dict[str, dict[str, dict]] = {
        collection: {
            "_params": _path_params(kind, False) + [_PRETTY],
            "get": op("list", f"list{gv}Namespaced{kind}", f"list or watch objects of kind {kind}",
                      _LIST, {"200": r.definition + "List"}),
            "post": op("post", f"create{gv}Namespaced{kind}", f"create a {kind}", writes,
                       {"200": r.definition, "201": r.definition, "202": r.definition},
                       body=r.definition),
            "delete": op("deletecollection", f"delete{gv}CollectionNamespaced{kind}",
                         f"delete collection of {kind}", _LIST + _DELETE,
                         {"200": status}, body=delete_options),
        },
        f"{r.prefix()}/{r.plural}": {
            "_params": [_PRETTY],
            "get": op("list", f"list{gv}{kind}ForAllNamespaces",
                      f"list or watch objects of kind {kind}", _LIST, {"200": r.definition + "List"}),
        },
        item: {
            "_params": _path_params(kind, True) + [_PRETTY],
            "get": op("get", f"read{gv}Namespaced{kind}", f"read the specified {kind}", [],
                      {"200": r.definition}),
            "put": op("put", f"replace{gv}Namespaced{kind}", f"replace the specified {kind}",
                      writes, {"200": r.definition, "201": r.definition}, body=r.definition),
            "patch": op("patch", f"patch{gv}Namespaced{kind}", f"partially update the specified {kind}",
                        writes + [_FORCE], {"200": r.definition, "201": r.definition},
                        body=patch, consumes=list(SUPPORTED_PATCH_TYPES)),
            "delete": op("delete", f"delete{gv}Namespaced{kind}", f"delete a {kind}", _DELETE,
                         {"200": status, "202": status}, body=delete_options),
        },
    }
    if r.has_status:
        paths[f"{item}/status"] = {
            "_params": _path_params(kind, True) + [_PRETTY],
            "get": op("get", f"read{gv}Namespaced{kind}Status", f"read status of the specified {kind}",
                      [], {"200": r.definition}),
            "put": op("put", f"replace{gv}Namespaced{kind}Status",
                      f"replace status of the specified {kind}", writes,
                      {"200": r.definition, "201": r.definition}, body=r.definition),
            "patch": op("patch", f"patch{gv}Namespaced{kind}Status",
                        f"partially update status of the specified {kind}", writes + [_FORCE],
                        {"200": r.definition, "201": r.definition}, body=patch,
                        consumes=list(SUPPORTED_PATCH_TYPES)),
        }
    return _tagged(r, paths)


def _tagged(r, paths: dict) -> dict:
    """Each operation of r's paths with its GVK and tag."""
    gvk = {"group": r.group, "kind": r.kind, "version": r.version}
    for methods in paths.values():
        for method, o in methods.items():
            if method != "_params":
                o["gvk"] = gvk
                o["tag"] = _tag(r)
    return paths


def _v3_param(p: dict) -> dict:
    out = {k: v for k, v in p.items() if k != "type"}
    out["schema"] = {"type": p["type"], "uniqueItems": True}
    return out


def _paths(resources: list[registry.Resource], operation, param) -> dict:
    """Every kind's paths: {path: {method: operation(method, o), "parameters": [param(p)...]}}."""
    paths: dict[str, dict] = {}
    for r in resources:
        for path, methods in _operations(r).items():
            entry: dict[str, Any] = {method: operation(method, o)
                                     for method, o in methods.items() if method != "_params"}
            entry["parameters"] = [param(p) for p in methods["_params"]]
            paths[path] = entry
    return paths


def _response_description(code: str) -> str:
    return "OK" if code == "200" else ("Created" if code == "201" else "Accepted")


def _v3_operation(method: str, o: dict) -> dict:
    ref = "#/components/schemas/"
    responses = {code: {"description": _response_description(code),
                        "content": {"application/json": {"schema": {"$ref": ref + d}}}}
                 for code, d in o["responses"].items()}
    responses["401"] = {"description": "Unauthorized"}
    v3op: dict[str, Any] = {
        "tags": [o["tag"]], "description": o["description"],
        "operationId": o["operationId"],
    }
    if o["params"]:
        v3op["parameters"] = [_v3_param(p) for p in o["params"]]
    if o["body"]:
        types = o["consumes"] or ["*/*"]
        v3op["requestBody"] = {
            "content": {t: {"schema": {"$ref": ref + o["body"]}} for t in types},
            "required": method != "delete"}
    v3op["responses"] = responses
    v3op["x-kubernetes-action"] = o["action"]
    v3op["x-kubernetes-group-version-kind"] = dict(o["gvk"])
    return v3op


def _v2_operation(method: str, o: dict) -> dict:
    ref = "#/definitions/"
    params = [dict(p) for p in o["params"]]
    if o["body"]:
        params.insert(0, {"name": "body", "in": "body", "required": method != "delete",
                          "schema": {"$ref": ref + o["body"]}})
    responses = {code: {"description": _response_description(code), "schema": {"$ref": ref + d}}
                 for code, d in o["responses"].items()}
    responses["401"] = {"description": "Unauthorized"}
    v2op: dict[str, Any] = {
        "description": o["description"], "consumes": o["consumes"] or ["*/*"],
        "produces": ["application/json"], "schemes": ["https"], "tags": [o["tag"]],
        "operationId": o["operationId"], "responses": responses,
        "x-kubernetes-action": o["action"],
        "x-kubernetes-group-version-kind": dict(o["gvk"]),
    }
    if params:
        v2op["parameters"] = params
    return v2op


def _gv_path(r: registry.Resource) -> str:
    return r.prefix().lstrip("/")          # "api/v1", "apis/batch/v1"


def _registry_key() -> tuple:
    """What the documents depend on: regenerate when the registered kinds change."""
    return tuple(sorted((r.group, r.version, r.kind, r.plural, r.definition, r.has_status)
                        for r in _served()))


def _serialize(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _hash(data: bytes) -> str:
    return hashlib.sha512(data).hexdigest().upper()


@functools.lru_cache(maxsize=32)
def _group_version_doc(gv_path: str, key: tuple) -> tuple[bytes, str] | None:
    resources = sorted((r for r in _served() if _gv_path(r) == gv_path),
                       key=lambda r: r.plural)
    if not resources:
        return None
    doc = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": K8S_VERSION},
        "paths": _paths(resources, _v3_operation, _v3_param),
        "components": {"schemas": _schemas(resources, "#/components/schemas/", v3=True)},
    }
    data = _serialize(doc)
    return data, _hash(data)


def v3_group_version(gv_path: str) -> tuple[bytes, str] | None:
    """(serialized OpenAPI 3.0 document, its hash) for "api/v1" / "apis/<g>/<v>", or None."""
    return _group_version_doc(gv_path.strip("/").removeprefix("openapi/v3/"), _registry_key())


def v3_root() -> dict:
    """The /openapi/v3 discovery document: one entry per served group-version."""
    paths = {}
    for gv_path in sorted({_gv_path(r) for r in _served()}):
        found = v3_group_version(gv_path)
        if found is not None:
            paths[gv_path] = {"serverRelativeURL": f"/openapi/v3/{gv_path}?hash={found[1]}"}
    return {"paths": paths}


@functools.lru_cache(maxsize=4)
def _v2_doc(key: tuple) -> bytes:
    resources = sorted(_served(), key=lambda r: (r.group, r.version, r.plural))
    doc = {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": K8S_VERSION},
        "paths": _paths(resources, _v2_operation, dict),
        "definitions": _schemas(resources, "#/definitions/", v3=False),
    }
    return _serialize(doc)


def v2() -> bytes:
    """The Swagger 2.0 document served at /openapi/v2 (JSON)."""
    return _v2_doc(_registry_key())


@functools.lru_cache(maxsize=4)
def _v2_proto(key: tuple) -> bytes:
    return openapi_proto.encode(json.loads(_v2_doc(key)))


def v2_protobuf() -> bytes:
    """The same document in gnostic's protobuf messages (what kubectl asks for)."""
    return _v2_proto(_registry_key())

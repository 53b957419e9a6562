"""Bad input never gives a 500: random bodies, patches and parameters against every kind
(hypothesis), and every failure is a metav1.Status."""
from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manifests import ENDPOINTS, JOBS, LEASES, endpoints, job, lease

pytestmark = pytest.mark.django_db

PROFILE = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=False),
                    st.text(max_size=12))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                    max_leaves=12)
# Random values placed at plausible paths, so validation (not just decoding) gets exercised.
FIELDS = {
    LEASES: ["spec.holderIdentity", "spec.leaseDurationSeconds", "spec.renewTime", "spec.leaseTransitions",
             "spec.strategy", "metadata.labels", "metadata.name", "metadata.finalizers"],
    ENDPOINTS: ["subsets", "subsets.0.addresses", "subsets.0.ports", "subsets.0.ports.0.port",
                "subsets.0.addresses.0.ip", "metadata.annotations"],
    JOBS: ["spec.completions", "spec.parallelism", "spec.completionMode", "spec.template.spec.containers",
           "spec.template.spec.restartPolicy", "spec.podFailurePolicy", "spec.backoffLimit", "spec.selector",
           "spec.template.spec.containers.0.env", "spec.successPolicy"],
}
BASE = {LEASES: lease, ENDPOINTS: endpoints, JOBS: job}


def _set(obj, path: str, value):
    parts = path.split(".")
    cur = obj
    for part in parts[:-1]:
        key = int(part) if part.isdigit() else part
        try:
            cur = cur[key]
        except (KeyError, IndexError, TypeError):
            return obj
    last = parts[-1]
    try:
        cur[int(last) if last.isdigit() else last] = value
    except (IndexError, TypeError):
        pass
    return obj


def _assert_status_or_object(r):
    assert r.status_code < 500, r.content[:500]
    assert r["Content-Type"].startswith("application/json")
    body = r.json()
    if r.status_code >= 400:
        assert body["kind"] == "Status" and body["code"] == r.status_code and body["message"]


@PROFILE
@given(collection=st.sampled_from(list(FIELDS)), data=st.data())
def test_random_field_values_never_500(api, collection, data):
    path = data.draw(st.sampled_from(FIELDS[collection]))
    obj = _set(BASE[collection](name="fz"), path, data.draw(JSON))
    r = api.post(collection + "?fieldValidation=" + data.draw(st.sampled_from(["Strict", "Warn", "Ignore"])), obj)
    _assert_status_or_object(r)
    if r.status_code == 201:
        api.delete(f"{collection}/fz")


@PROFILE
@given(collection=st.sampled_from(list(FIELDS)), body=JSON,
       ctype=st.sampled_from(["application/json-patch+json", "application/merge-patch+json",
                              "application/strategic-merge-patch+json", "application/apply-patch+yaml",
                              "text/plain", ""]))
def test_random_patches_never_500(api, collection, body, ctype):
    api.post(collection, BASE[collection](name="pz"))
    r = api.patch(f"{collection}/pz?fieldManager=fuzz", orjson.dumps(body), content_type=ctype)
    _assert_status_or_object(r)


@PROFILE
@given(params=st.dictionaries(st.sampled_from(["labelSelector", "fieldSelector", "limit", "continue", "resourceVersion",
                                                "resourceVersionMatch", "watch", "pretty", "includeObject",
                                                "timeoutSeconds", "dryRun"]),
                              st.text(max_size=20), max_size=4))
def test_random_list_parameters_never_500(api, params):
    from urllib.parse import urlencode

    if params.get("watch"):
        params["timeoutSeconds"] = "1"
    r = api.get(LEASES + "?" + urlencode(params))
    if r.streaming:  # a valid watch: its stream is tested in test_watch.py
        assert r.status_code == 200
        return
    _assert_status_or_object(r)


@PROFILE
@given(raw=st.binary(max_size=64), ctype=st.sampled_from(["application/json", "application/yaml",
                                                          "application/vnd.kubernetes.protobuf", "image/png"]))
def test_random_bodies_never_500(api, raw, ctype):
    _assert_status_or_object(api.post(JOBS, raw, content_type=ctype))
    _assert_status_or_object(api.delete(f"{JOBS}/nothing", raw, content_type=ctype))


# -- every path and content type: objects drawn from the OpenAPI schema, and raw bytes ---------

import yaml  # noqa: E402

from dashboard.kube import registry, schema  # noqa: E402

# A fixed budget so CI time stays small (about 40 s for the three tests below on one core).
WIDE = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])

TEXT = st.text(max_size=16)
WRONG = st.one_of(SCALARS, st.lists(SCALARS, max_size=2), st.dictionaries(TEXT, SCALARS, max_size=2))
_strategies: dict[str, st.SearchStrategy] = {}


def from_schema(node: dict) -> st.SearchStrategy:
    """Values shaped by an OpenAPI schema, with a wrong-typed value now and then at every level."""
    name = schema.ref_name(node)
    if name is not None:
        if name not in _strategies:
            _strategies[name] = st.deferred(lambda: from_schema(schema.definitions()[name]))
        return _strategies[name]
    types = schema._types(node)
    if node.get("properties"):
        right = st.fixed_dictionaries({}, optional={k: from_schema(v) for k, v in node["properties"].items()})
    elif "array" in types:
        right = st.lists(from_schema(node.get("items", {})), max_size=3)
    elif "object" in types or node.get("additionalProperties"):
        right = st.dictionaries(TEXT, from_schema(node.get("additionalProperties") or {}), max_size=3)
    elif "integer" in types:
        right = st.one_of(st.integers(-2**31, 2**31), st.integers(-2**70, 2**70))
    elif "number" in types:
        right = st.floats(allow_nan=False, allow_infinity=False)
    elif "boolean" in types:
        right = st.booleans()
    elif "string" in types:
        right = st.one_of(TEXT, st.sampled_from(["2026-11-22T03:00:00Z", "2026-11-22T03:00:00.000000Z", "1Gi",
                                                  "100m", "Never", "OnFailure", "Indexed", "10.0.0.1", "TCP"]))
    else:   # IntOrString, Quantity, free-form
        right = st.one_of(st.integers(-10, 10**6), TEXT)
    return st.one_of(right, right, right, WRONG)


def _kind_object(res, name: str) -> st.SearchStrategy:
    return from_schema({"$ref": schema.REF_PREFIX + res.definition}).map(
        lambda o: {**(o if isinstance(o, dict) else {"spec": o}), "apiVersion": res.api_version, "kind": res.kind,
                   "metadata": {**(o.get("metadata") if isinstance(o, dict) and isinstance(o.get("metadata"), dict)
                                   else {}), "name": name, "namespace": "default"}})


RESOURCES = [r for r in registry.all_resources()]
BODY_TYPES = ["application/json", "application/yaml"]
PATCH_TYPES = ["application/merge-patch+json", "application/strategic-merge-patch+json",
               "application/apply-patch+yaml", "application/json-patch+json"]


def _paths(res) -> tuple[str, str]:
    base = f"/api/{res.version}" if not res.group else f"/apis/{res.group}/{res.version}"
    collection = f"{base}/namespaces/default/{res.plural}"
    return collection, f"{collection}/fz"


def _encode(value, ctype: str) -> bytes:
    if ctype in ("application/yaml", "application/apply-patch+yaml"):
        return yaml.safe_dump(value, allow_unicode=True).encode()
    return orjson.dumps(value)


@WIDE
@given(res=st.sampled_from(RESOURCES), data=st.data())
def test_schema_objects_on_every_write_never_500(api, res, data):
    """Objects drawn from the kind's OpenAPI schema, written every way the API takes a body."""
    collection, item = _paths(res)
    obj = data.draw(_kind_object(res, "fz"))
    how = data.draw(st.sampled_from(["POST", "PUT", "PUT status"] + PATCH_TYPES))
    mode = data.draw(st.sampled_from(["Strict", "Warn", "Ignore"]))
    if how == "POST":
        ctype = data.draw(st.sampled_from(BODY_TYPES))
        r = api.post(f"{collection}?fieldValidation={mode}", _encode(obj, ctype), content_type=ctype)
    elif how.startswith("PUT"):
        ctype = data.draw(st.sampled_from(BODY_TYPES))
        path = item + ("/status" if how.endswith("status") and res.has_status else "")
        r = api.put(f"{path}?fieldValidation={mode}", _encode(obj, ctype), content_type=ctype)
    else:
        api.post(collection, BASE_FOR[res.kind](name="fz")) if res.kind in BASE_FOR else None
        body = obj if how != "application/json-patch+json" else [
            {"op": data.draw(st.sampled_from(["add", "replace", "test", "remove", "move", "copy"])),
             "path": "/" + data.draw(st.sampled_from(list(obj) + ["spec/x", "metadata/labels/a", "-"])),
             "from": "/metadata", "value": obj.get(data.draw(st.sampled_from(list(obj))))}]
        r = api.patch(f"{item}?fieldManager=fz&fieldValidation={mode}", _encode(body, how), content_type=how)
    _assert_status_or_object(r)
    if r.status_code in (200, 201):
        api.delete(item)


def _nested(depth: int, leaf: str) -> str:
    return '{"a":' * depth + leaf + "}" * depth


# Values JSON cannot hold or that nest deeply, as text (JSON is YAML too; .nan is YAML's NaN).
NASTY_VALUE = st.one_of(
    st.builds(_nested, st.integers(90, 3000), st.sampled_from(["{}", "[]", "1", '"x"'])),
    st.builds(lambda d: "[" * d + "]" * d, st.integers(90, 100_000)),
    st.sampled_from(['"\\ud800"', '"a\\udfffb"', "NaN", "Infinity", "-Infinity", "1e999", ".nan", "-.inf",
                     "9" * 5000, "-" + "9" * 4400, "1" * 30, "18446744073709551616", '{"\\ud800": 1}']),
)
FIELDS_AT = ['"spec": {"holderIdentity": %s}', '"spec": {"template": %s}', '"metadata": {"name": "fz", "labels": %s}',
             '"metadata": {"name": "fz", "annotations": {"a": %s}}', '"subsets": [{"addresses": %s}]',
             '"unknownField": %s', '"status": {"active": %s}']


def _embedded(value: str, where: str, patch: bool) -> bytes:
    if patch == "application/json-patch+json":
        return ('[{"op": "add", "path": "/metadata/annotations", "value": {"a": %s}}]' % value).encode()
    return ("{" + (where % value) + "}").encode()


def _body(ctype: str) -> st.SearchStrategy:
    embedded = st.builds(_embedded, NASTY_VALUE, st.sampled_from(FIELDS_AT), st.just(ctype))
    return st.one_of(embedded, embedded, embedded, st.binary(max_size=64),
                     st.builds(lambda d: ("- " * d + "x").encode(), st.integers(90, 3000)))


ODD_TYPES = ["application/vnd.kubernetes.protobuf", "text/plain", "", "application/json; charset=utf-16",
             "multipart/form-data"]


@WIDE
@given(res=st.sampled_from(RESOURCES), data=st.data(),
       how=st.sampled_from(["POST", "PUT", "PUT status", "PATCH", "PATCH", "PATCH status", "DELETE",
                            "DELETE collection"]))
def test_raw_bytes_on_every_path_never_500(api, res, data, how):
    """Raw and hostile bodies (deep nesting, lone surrogates, huge integers, NaN) on every path
    and with every content type its method takes (and some it does not)."""
    collection, item = _paths(res)
    method, _, sub = how.partition(" ")
    ctype = data.draw(st.sampled_from((PATCH_TYPES if method == "PATCH" else BODY_TYPES) * 4 + ODD_TYPES))
    raw = data.draw(_body(ctype))
    if res.kind in BASE_FOR and method == "PATCH":
        api.post(collection, BASE_FOR[res.kind](name="fz"))
    path = collection if how in ("POST", "DELETE collection") else item + ("/status" if sub == "status" else "")
    r = api.request(method, f"{path}?fieldManager=fz", raw, content_type=ctype)
    _assert_status_or_object(r)


BASE_FOR = {"Lease": lease, "Endpoints": endpoints, "Job": job}

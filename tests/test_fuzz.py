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

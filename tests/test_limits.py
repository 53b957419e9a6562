"""Bounded input: bodies, URLs, slow clients and decoders (docs/SERVING.md, "Limits").

Decoder bounds run through the Django test client (the full API stack); the socket-level
limits (413 before reading, 401 before buffering, header timeout, 414) against a live
`manage.py serve` whose memory is read from /proc."""
from __future__ import annotations

import orjson
import pytest

from manifests import ENDPOINTS, JOBS, LEASES, endpoints, job, lease

pytestmark = pytest.mark.django_db

PATCH_TYPES = ["application/merge-patch+json", "application/strategic-merge-patch+json"]


def _nested(depth: int) -> str:
    """{"a":{"a":...{}}} nested `depth` objects deep, as JSON text (which is YAML too)."""
    return '{"a":' * depth + "{}" + "}" * depth


def _status(r, code: int, *words: str):
    assert r.status_code == code, r.content[:400]
    body = r.json()
    assert body["kind"] == "Status" and body["code"] == code, body
    for word in words:   # "a|b": either
        assert any(w in body["message"] for w in word.split("|")), body["message"]
    return body


# -- the four roots of the fuzzers' 500s (issue 11, item 4) -------------------------------------

@pytest.mark.parametrize("depth", [600, 2000, 100_000])
def test_deep_yaml_body_is_400(api, depth):
    body = '{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "deep"}, "spec": ' \
        + _nested(depth) + "}"
    _status(api.post(LEASES, body, content_type="application/yaml"), 400, "nested too deeply")
    _status(api.post(LEASES, "- " * depth + "x", content_type="application/yaml"), 400, "nested too deeply")


@pytest.mark.parametrize("ctype", PATCH_TYPES + ["application/apply-patch+yaml"])
@pytest.mark.parametrize("depth", [1000, 1020, 5000])
def test_deep_patch_is_400(api, ctype, depth):
    api.post(LEASES, lease(name="deep"))
    patch = '{"metadata": {"labels": {"a": "b"}}, "spec": ' + _nested(depth) + "}"
    r = api.patch(f"{LEASES}/deep?fieldManager=t", patch, content_type=ctype)
    _status(r, 400, "nested too deeply|depth limit")


@pytest.mark.parametrize("ctype", ["application/json", "application/yaml"])
def test_deep_json_body_is_400(api, ctype):
    body = orjson.dumps(lease(name="deepj"))[:-1] + b', "x": ' + _nested(900).encode() + b"}"
    _status(api.post(LEASES + "?fieldValidation=Ignore", body, content_type=ctype), 400, "nested too deeply")


SURROGATE = '"\\ud800"'


@pytest.mark.parametrize("ctype", ["application/json", "application/yaml"])
def test_lone_surrogate_body_is_400(api, ctype):
    body = '{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "sur", ' \
        '"annotations": {"a": ' + SURROGATE + '}}, "spec": {"holderIdentity": ' + SURROGATE + '}}'
    _status(api.post(LEASES, body, content_type=ctype), 400, "surrogate|Unicode character escape")
    assert api.get(f"{LEASES}/sur").status_code == 404


@pytest.mark.parametrize("ctype", PATCH_TYPES + ["application/apply-patch+yaml", "application/json-patch+json"])
def test_lone_surrogate_patch_is_400(api, ctype):
    api.post(LEASES, lease(name="surp"))
    if ctype == "application/json-patch+json":
        patch = '[{"op": "replace", "path": "/spec/holderIdentity", "value": ' + SURROGATE + "}]"
    else:
        patch = '{"spec": {"holderIdentity": ' + SURROGATE + '}, "metadata": {"labels": {' + SURROGATE + ': "x"}}}'
    _status(api.patch(f"{LEASES}/surp?fieldManager=t", patch, content_type=ctype), 400,
            "surrogate|Unicode character escape")
    assert api.get(f"{LEASES}/surp").json()["spec"]["holderIdentity"] == "node-a"


HUGE = "9" * 5000


@pytest.mark.parametrize("where", ["spec.leaseDurationSeconds", "metadata.annotations-key", "unknown"])
@pytest.mark.parametrize("ctype", ["application/yaml", "application/apply-patch+yaml"] + PATCH_TYPES)
def test_huge_integer_is_400(api, ctype, where):
    api.post(LEASES, lease(name="huge"))
    field = {"spec.leaseDurationSeconds": '"spec": {"leaseDurationSeconds": ' + HUGE + "}",
             "metadata.annotations-key": '"metadata": {"annotations": {"a": ' + HUGE + "}}",
             "unknown": '"extra": ' + HUGE}[where]
    body = '{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", ' + field + "}"
    if ctype == "application/yaml":
        r = api.post(LEASES, body.replace('"kind": "Lease", ', '"kind": "Lease", "metadata": {"name": "h2"}, ', 1)
                     if where != "metadata.annotations-key" else body, content_type=ctype)
    else:
        r = api.patch(f"{LEASES}/huge?fieldManager=t", body, content_type=ctype)
    _status(r, 400, "integer|infinity")
    assert api.get(f"{LEASES}/huge").json()["spec"]["leaseDurationSeconds"] == 15


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "NaN", "Infinity", "-Infinity", "1e400"])
@pytest.mark.parametrize("ctype", ["application/json", "application/yaml", "application/apply-patch+yaml",
                                   "application/json-patch+json"] + PATCH_TYPES)
def test_nan_and_infinity_are_400(api, ctype, value):
    api.post(LEASES, lease(name="nan"))
    if ctype == "application/json-patch+json":
        body = '[{"op": "add", "path": "/metadata/annotations", "value": {"a": ' + value + "}}]"
    else:
        body = '{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "nan"}, ' \
            '"spec": {"leaseDurationSeconds": ' + value + "}}"
    if ctype in ("application/json", "application/yaml"):
        r = api.put(f"{LEASES}/nan", body, content_type=ctype)
    else:
        r = api.patch(f"{LEASES}/nan?fieldManager=t", body, content_type=ctype)
    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert r.json()["kind"] == "Status"
    assert api.get(f"{LEASES}/nan").json()["spec"]["leaseDurationSeconds"] == 15


def test_yaml_non_string_keys_become_strings_as_in_kube(api):
    """sigs.k8s.io/yaml turns `1: x` into the JSON key "1"; never a 500."""
    body = "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: keys\n  labels:\n    1: one\n" \
           "    2.5: two\nspec:\n  holderIdentity: a\n"
    r = api.post(LEASES, body, content_type="application/yaml")
    assert r.status_code == 201, r.content
    assert r.json()["metadata"]["labels"] == {"1": "one", "2.5": "two"}


def test_ordinary_bodies_still_work(api):
    text = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: ok\nspec:\n  template:\n    spec:\n" \
           "      restartPolicy: Never\n      containers:\n      - name: main\n        image: busybox\n" \
           "        command: [\"echo\", \"caf\\u00e9 \\U0001F600\"]\n"
    r = api.post(JOBS, text, content_type="application/yaml")
    assert r.status_code == 201, r.content
    assert r.json()["spec"]["template"]["spec"]["containers"][0]["command"][1] == "café 😀"
    big = endpoints(name="big", ips=[f"10.0.{i // 250}.{i % 250 + 1}" for i in range(3000)])
    assert api.post(ENDPOINTS, big).status_code == 201
    r = api.patch(f"{ENDPOINTS}/big", {"metadata": {"labels": {"n": str(2**62)}}})
    assert r.status_code == 200
    r = api.patch(f"{JOBS}/ok", '{"spec": {"backoffLimit": 3}}', content_type="application/strategic-merge-patch+json")
    assert r.status_code == 200 and r.json()["spec"]["backoffLimit"] == 3


def test_yaml_editor_shows_bounds_in_words(client, django_user_model):
    """The dashboard's YAML editor uses the same loader: the problem in words, not a 500."""
    from dashboard.web.forms import load_yaml
    from django.core.exceptions import ValidationError

    for text, words in [("a:\n" + "  " * 0 + "- " * 300 + "x", "nested too deeply"),
                        ("a: " + HUGE, "integer"), ("a: .nan", "NaN")]:
        with pytest.raises(ValidationError) as err:
            load_yaml(text)
        assert words in str(err.value), err.value

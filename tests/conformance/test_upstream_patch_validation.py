"""test/integration/apiserver/field_validation_test.go, testFieldValidationPatchTyped's JSON patch
cases, ported (upstream patches a Deployment; these patch a Job: `suspend` for `paused`, and no
imagePullPolicy operations, as a Job's template is immutable). kube's applyJSPatch decodes the
operations strictly (json patch unknown / duplicate fields, in document order), then the patched
object (its unknown fields): Strict answers both in one 422, Warn in Warning headers, in that order."""
from __future__ import annotations

import json
import re

import pytest

from .helpers import job_body

JSON_PATCH_BODY = """
[
    {"op": "add", "path": "/spec/unknown1", "value": "val1", "foo":"bar"},
    {"op": "add", "path": "/spec/unknown2", "path": "/spec/unknown3", "value": "val1"},
    {"op": "add", "path": "/spec/unknownDupe", "value": "valDupe"},
    {"op": "add", "path": "/spec/unknownDupe", "value": "valDupe2"},
    {"op": "add", "path": "/spec/suspend", "value": true},
    {"op": "add", "path": "/spec/suspend", "value": false},
    {"op": "add", "path": "/spec/template/spec/containers/0/unknownNested", "value": "val1"}
]
"""

EXPECTED = ['json patch unknown field "[0].foo"', 'json patch duplicate field "[1].path"',
            'unknown field "spec.template.spec.containers[0].unknownNested"', 'unknown field "spec.unknown1"',
            'unknown field "spec.unknown3"', 'unknown field "spec.unknownDupe"']


def warnings_of(headers: dict) -> list[str]:
    """The texts of `Warning: 299 - "..."` headers, unquoted."""
    text = headers.get("Warning") or headers.get("warning") or ""
    return [json.loads(f'"{m}"') for m in re.findall(r'299 - "((?:[^"\\]|\\.)*)"', text)]


@pytest.fixture
def job(ns, batch):
    batch.create_namespaced_job(ns, job_body("patched"))
    return f"/apis/batch/v1/namespaces/{ns}/jobs/patched"


def test_json_patch_strict_validation(job, raw, batch, ns):
    """json-patch-strict-validation: one 422 naming the patch's own problems first; nothing written."""
    status, _, body = raw("PATCH", job, JSON_PATCH_BODY, content_type="application/json-patch+json",
                          query=[("fieldValidation", "Strict")])
    assert status == 422, body
    assert body["message"].endswith("strict decoding error: " + ", ".join(EXPECTED)), body["message"]
    assert batch.read_namespaced_job("patched", ns).spec.suspend is not True


@pytest.mark.parametrize("query", [[("fieldValidation", "Warn")], []], ids=["warn-validation", "no-validation"])
def test_json_patch_warn_validation(job, raw, query):
    """json-patch-warn-validation and json-patch-no-validation (Warn is the default): the patch
    applies; each problem is a warning, in the same order."""
    status, headers, body = raw("PATCH", job, JSON_PATCH_BODY, content_type="application/json-patch+json",
                                query=query)
    assert status == 200, body
    assert warnings_of(headers) == EXPECTED
    assert body["spec"]["suspend"] is False and "unknown1" not in body["spec"]


def test_json_patch_ignore_validation(job, raw):
    """json-patch-ignore-validation: no warnings at all."""
    status, headers, body = raw("PATCH", job, JSON_PATCH_BODY, content_type="application/json-patch+json",
                                query=[("fieldValidation", "Ignore")])
    assert status == 200, body
    assert warnings_of(headers) == []


def test_json_patch_operation_fields_are_case_sensitive(job, raw):
    """sigs.k8s.io/json decodes the operations case-sensitively: "Value" is no field of an
    operation, though Go's plain decoder would have matched it."""
    ops = '[{"op": "replace", "path": "/spec/suspend", "value": true, "Value": false}]'
    status, headers, body = raw("PATCH", job, ops, content_type="application/json-patch+json",
                                query=[("fieldValidation", "Warn")])
    assert status == 200 and body["spec"]["suspend"] is True
    assert warnings_of(headers) == ['json patch unknown field "[0].Value"']


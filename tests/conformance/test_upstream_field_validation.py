"""test/e2e/apimachinery/field_validation.go, the typed-object tests, ported (upstream posts
Deployments; these post Jobs). The CRD tests are not applicable: kubedash serves no CRDs."""
from __future__ import annotations

import json

JOB_WITH_UNKNOWN_AND_DUPLICATE = """{
  "apiVersion": "batch/v1",
  "kind": "Job",
  "metadata": {"name": "%s", "labels": {"app": "job"}},
  "spec": {
    "unknownField": "foo",
    "parallelism": 1,
    "parallelism": 2,
    "template": {
      "metadata": {"labels": {"app": "job"}},
      "spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox", "unknownNested": "bar",
                        "imagePullPolicy": "Always", "imagePullPolicy": "Never"}]
      }
    }
  }
}"""


def test_detect_unknown_and_duplicate_fields_of_a_typed_object(ns, raw):
    """[sig-api-machinery] FieldValidation should detect unknown and duplicate fields of a typed object [Conformance]

    POST with fieldValidation=Strict: one error naming every unknown and repeated field;
    with Warn the object is created and each problem is a Warning header."""
    path = f"/apis/batch/v1/namespaces/{ns}/jobs"
    status, _, body = raw("POST", path, JOB_WITH_UNKNOWN_AND_DUPLICATE % "strict", query=[("fieldValidation", "Strict")])
    assert status == 400, body
    for problem in ('unknown field "spec.unknownField"', 'duplicate field "spec.parallelism"',
                    'unknown field "spec.template.spec.containers[0].unknownNested"',
                    'duplicate field "spec.template.spec.containers[0].imagePullPolicy"'):
        assert problem in body["message"], body["message"]
    status, headers, body = raw("POST", path, JOB_WITH_UNKNOWN_AND_DUPLICATE % "warn", query=[("fieldValidation", "Warn")])
    assert status == 201 and body["spec"]["parallelism"] == 2
    warning = headers.get("Warning", "")
    assert 'duplicate field \\"spec.parallelism\\"' in warning and 'unknown field \\"spec.unknownField\\"' in warning


def test_detect_unknown_metadata_fields_of_a_typed_object(ns, raw):
    """[sig-api-machinery] FieldValidation should detect unknown metadata fields of a typed object [Conformance]

    An unknown field inside metadata is reported with its metadata path under Strict."""
    body = json.loads(JOB_WITH_UNKNOWN_AND_DUPLICATE.replace('"unknownField": "foo",', "") % "meta")
    body["spec"]["template"]["spec"]["containers"][0].pop("unknownNested")
    body["metadata"]["unknownMeta"] = "foo"
    status, _, answer = raw("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body, query=[("fieldValidation", "Strict")])
    assert status == 400 and 'unknown field "metadata.unknownMeta"' in answer["message"]

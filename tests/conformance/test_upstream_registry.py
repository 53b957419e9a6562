"""The generic registry's write rules, ported from kube's own tests:

- test/integration/apiserver/apply/apply_test.go (TestCreateOnApplyFailsWithUID),
- staging/src/k8s.io/apiserver/pkg/registry/rest/update.go's DefaultUpdatedObjectInfo.Preconditions
  with the storage tests' UID preconditions (staging/src/k8s.io/apiserver/pkg/storage/testing/
  store_tests.go RunTestGuaranteedUpdate, "non-matching precondition"),
- pkg/registry/coordination/lease/strategy.go (AllowCreateOnUpdate) with the generic registry's
  TestStoreUpdate (create on update),
- staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation_test.go (TestInvalidDryRun,
  TestInvalidPatchOptions) and ValidateDeleteOptions / ValidateCreateOptions as the handlers answer
  them (test/integration/dryrun/dryrun_test.go sends only dryRun=All),
- test/e2e/apimachinery/apply.go ("should give up ownership of a field if forced applied by a
  controller": one cause per conflicting field, read from the Status's causes).

The official Python client where upstream uses client-go; its raw REST layer (`raw`) for the
bodies and options the typed API cannot express.
"""
from __future__ import annotations

import json

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from conformance.helpers import job_body, lease_body

APPLY = "application/apply-patch+yaml"


def _paths(ns):
    return {
        "Lease": f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
        "Endpoints": f"/api/v1/namespaces/{ns}/endpoints",
        "Job": f"/apis/batch/v1/namespaces/{ns}/jobs",
    }


def _bodies(api_client, name):
    endpoints = k8s.V1Endpoints(metadata=k8s.V1ObjectMeta(name=name), subsets=[k8s.V1EndpointSubset(
        addresses=[k8s.V1EndpointAddress(ip="10.0.0.1")], ports=[k8s.CoreV1EndpointPort(port=80)])])
    return {kind: api_client.sanitize_for_serialization(body) for kind, body in
            (("Lease", lease_body(name)), ("Endpoints", endpoints), ("Job", job_body(name)))}


def test_create_on_apply_fails_with_uid(raw, ns):
    """TestCreateOnApplyFailsWithUID (test/integration/apiserver/apply/apply_test.go): server-side
    apply creates a missing object, but not when the applied configuration names a uid: 409
    Conflict ("uid mismatch"), and nothing is created. Upstream applies a Pod; here a Lease."""
    path = _paths(ns)["Lease"]
    applied = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "with-uid", "uid": "88e00824-7f0e-11e8-94a1-c8d3ffb15800"},
               "spec": {"holderIdentity": "a"}}
    status, _, body = raw("PATCH", f"{path}/with-uid", json.dumps(applied), content_type=APPLY,
                          query=[("fieldManager", "apply_test")])
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on leases.coordination.k8s.io "with-uid": uid mismatch: '
                               'the provided object specified uid 88e00824-7f0e-11e8-94a1-c8d3ffb15800, and no '
                               'existing object was found')
    assert raw("GET", f"{path}/with-uid")[0] == 404
    del applied["metadata"]["uid"]   # without the uid the same apply creates it
    assert raw("PATCH", f"{path}/with-uid", json.dumps(applied), content_type=APPLY,
               query=[("fieldManager", "apply_test")])[0] == 201


@pytest.mark.parametrize("kind", ["Lease", "Endpoints", "Job"])
def test_update_with_other_uid_is_a_precondition_conflict(api_client, raw, ns, kind):
    """DefaultUpdatedObjectInfo.Preconditions (k8s.io/apiserver registry/rest/update.go): a PUT
    body's metadata.uid is a UID precondition; the storage's GuaranteedUpdate refuses a
    non-matching one (RunTestGuaranteedUpdate, "non-matching precondition") and the registry
    answers 409 Conflict. The matching uid updates; a PUT that creates (Lease, Endpoints) with
    a uid has no object to match it: 409 too."""
    path = _paths(ns)[kind]
    body = _bodies(api_client, "uid-check")[kind]
    status, _, created = raw("POST", path, body)
    assert status == 201
    stale = json.loads(json.dumps(created))
    stale["metadata"]["uid"] = "00000000-0000-0000-0000-000000000000"
    status, _, err = raw("PUT", f"{path}/uid-check", stale)
    assert status == 409 and err["reason"] == "Conflict", err
    assert "Precondition failed: UID in precondition: 00000000-0000-0000-0000-000000000000, UID in object meta: " \
        + created["metadata"]["uid"] in err["message"]
    assert err["details"]["name"] == "uid-check"
    assert raw("GET", f"{path}/uid-check")[2]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    created.setdefault("metadata", {}).setdefault("labels", {})["checked"] = "yes"
    status, _, updated = raw("PUT", f"{path}/uid-check", created)
    assert status == 200 and updated["metadata"]["labels"]["checked"] == "yes"
    if kind != "Job":   # Job has no create on update
        fresh = _bodies(api_client, "uid-fresh")[kind]
        fresh["metadata"]["uid"] = created["metadata"]["uid"]
        status, _, err = raw("PUT", f"{path}/uid-fresh", fresh)
        assert status == 409 and "UID in object meta: " in err["message"]
        assert raw("GET", f"{path}/uid-fresh")[0] == 404


def test_lease_update_creates_when_missing(leases, ns):
    """pkg/registry/coordination/lease/strategy.go: AllowCreateOnUpdate is true, so the generic
    registry's Update creates a missing Lease (TestStoreUpdate's create-on-update case): 201
    and a new object, which a second PUT then updates (with its resourceVersion: Lease does
    not allow unconditional updates)."""
    made = leases.replace_namespaced_lease_with_http_info("put-made", ns, lease_body("put-made"))
    assert made[1] == 201 and made[0].metadata.uid and made[0].spec.holder_identity == "holder"
    got = leases.read_namespaced_lease("put-made", ns)
    got.spec.holder_identity = "second"
    again = leases.replace_namespaced_lease_with_http_info("put-made", ns, got)
    assert again[1] == 200 and again[0].spec.holder_identity == "second"
    got.spec.holder_identity = "stale"
    with pytest.raises(ApiException) as err:
        leases.replace_namespaced_lease("put-made", ns, got)
    assert err.value.status == 409


def test_delete_options_validation(raw, leases, ns):
    """ValidateDeleteOptions (k8s.io/apimachinery meta/v1/validation), as the delete handler
    answers it: 422 Invalid for the DeleteOptions kind with one cause per problem. An unknown
    propagationPolicy; orphanDependents with propagationPolicy; dryRun other than All
    (TestInvalidDryRun); from the body, or from the query when there is no body."""
    leases.create_namespaced_lease(ns, lease_body("keep"))
    path = f"{_paths(ns)['Lease']}/keep"
    status, _, err = raw("DELETE", path, {"propagationPolicy": "Bogus"})
    assert status == 422 and err["reason"] == "Invalid"
    assert err["message"] == ('DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
                              '"Bogus": supported values: "Foreground", "Background", "Orphan", "nil"')
    assert err["details"] == {"name": "", "group": "meta.k8s.io", "kind": "DeleteOptions", "causes": [
        {"reason": "FieldValueNotSupported", "field": "propagationPolicy",
         "message": 'Unsupported value: "Bogus": supported values: "Foreground", "Background", "Orphan", "nil"'}]}
    status, _, err = raw("DELETE", path, {"orphanDependents": True, "propagationPolicy": "Background"})
    assert status == 422
    assert err["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "propagationPolicy",
                                         "message": 'Invalid value: "Background": orphanDependents and '
                                                    'deletionPropagation cannot be both set'}]
    status, _, err = raw("DELETE", path, {"dryRun": ["All", "Bogus"]})
    assert status == 422 and err["message"] == ('DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
                                                '[]string{"All", "Bogus"}: supported values: "All"')
    status, _, err = raw("DELETE", path, query=[("propagationPolicy", "Bogus"), ("dryRun", "Bogus")])
    assert status == 422 and [c["field"] for c in err["details"]["causes"]] == ["propagationPolicy", "dryRun"]
    assert leases.read_namespaced_lease("keep", ns).metadata.name == "keep"   # nothing was deleted
    status, _, done = raw("DELETE", path, {"orphanDependents": True})
    assert status == 200 and done["status"] == "Success"


@pytest.mark.parametrize("verb", ["POST", "PUT", "PATCH", "APPLY"])
def test_invalid_dry_run_is_422(raw, leases, ns, verb):
    """TestInvalidDryRun / TestInvalidPatchOptions (meta/v1/validation_test.go) as the create,
    update and patch handlers answer them: 422 Invalid for CreateOptions / UpdateOptions /
    PatchOptions ("dryRun: Unsupported value"), every bad option in the one Status, and nothing
    written."""
    leases.create_namespaced_lease(ns, lease_body("dry"))
    path = _paths(ns)["Lease"]
    current = raw("GET", f"{path}/dry")[2]
    query = [("dryRun", "Bogus"), ("fieldValidation", "Loud")]
    if verb == "POST":
        body, kind, target, ctype = dict(current, metadata={"name": "dry2"}), "CreateOptions", path, "application/json"
    elif verb == "PUT":
        body, kind, target, ctype = current, "UpdateOptions", f"{path}/dry", "application/json"
    elif verb == "PATCH":
        body, kind, target, ctype = {"spec": {"holderIdentity": "x"}}, "PatchOptions", f"{path}/dry", "application/merge-patch+json"
        query.append(("force", "true"))
    else:
        body, kind, target, ctype = json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                "metadata": {"name": "dry"}}), "PatchOptions", f"{path}/dry", APPLY
    status, _, err = raw(verb if verb != "APPLY" else "PATCH", target, body, content_type=ctype, query=query)
    assert status == 422 and err["reason"] == "Invalid", err
    assert err["details"]["kind"] == kind and err["details"]["group"] == "meta.k8s.io"
    fields = [c["field"] for c in err["details"]["causes"]]
    expected = {"PATCH": ["force", "dryRun", "fieldValidation"],
                "APPLY": ["fieldManager", "dryRun", "fieldValidation"]}.get(verb, ["dryRun", "fieldValidation"])
    assert fields == expected
    assert 'dryRun: Unsupported value: []string{"Bogus"}: supported values: "All"' in err["message"]
    assert err["message"].startswith(f'{kind}.meta.k8s.io "" is invalid: [')
    assert raw("GET", f"{path}/dry")[2]["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]
    assert raw("GET", f"{path}/dry2")[0] == 404


def test_apply_conflict_causes_name_their_reason(raw, leases, ns):
    """test/e2e/apimachinery/apply.go "should give up ownership of a field if forced applied by a
    controller": an apply that takes another manager's field fails with 409 Conflict and one
    cause per field, whose kind is in `reason` (client-go's StatusCause.Type is `json:"reason"`):
    FieldManagerConflict."""
    path = f"{_paths(ns)['Lease']}/owned"
    first = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "owned"},
             "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10}}
    assert raw("PATCH", path, json.dumps(first), content_type=APPLY, query=[("fieldManager", "alpha")])[0] == 201
    second = dict(first, spec={"holderIdentity": "b"})
    status, _, err = raw("PATCH", path, json.dumps(second), content_type=APPLY, query=[("fieldManager", "beta")])
    assert status == 409 and err["reason"] == "Conflict"
    assert err["details"]["causes"] == [{"reason": "FieldManagerConflict", "message": 'conflict with "alpha"',
                                         "field": ".spec.holderIdentity"}]
    status, _, forced = raw("PATCH", path, json.dumps(second), content_type=APPLY,
                            query=[("fieldManager", "beta"), ("force", "true")])
    assert status == 200 and forced["spec"]["holderIdentity"] == "b"

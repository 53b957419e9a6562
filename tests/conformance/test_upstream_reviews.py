"""The self reviews' upstream tests, ported: pkg/apis/authorization/validation/validation_test.go
(TestValidateSelfSAR), test/integration/auth/accessreview_test.go (TestSelfSubjectAccessReview),
pkg/registry/authorization/selfsubjectrulesreview/rest_test.go (TestCreate),
test/integration/auth/selfsubjectreview_test.go (TestGetsSelfAttributes) and
test/e2e/auth/selfsubjectreviews.go. Upstream's authorizer is a stub; kubedash's roles answer
here (an admin token, a viewer token)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from kubernetes import client as k8s

SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
SSRR = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
SSR = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


@pytest.fixture(scope="module")
def viewer_client(kube_server):
    """The Python client as a kubedash viewer (upstream's "dave": some requests denied)."""
    config = k8s.Configuration()
    config.host = kube_server.https_url
    config.ssl_ca_cert = kube_server.ca_file
    config.api_key = {"authorization": "Bearer " + kube_server.token("reviews-viewer", "viewer")}
    with k8s.ApiClient(config) as c:
        yield c


def test_validate_self_sar_neither_request(raw):
    """TestValidateSelfSAR "neither request": the review's REST validates before it answers (422);
    it names the decoded object's kind, which decoding leaves empty."""
    status, _, body = raw("POST", SSAR, {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                                         "spec": {}})
    assert status == 422 and body["reason"] == "Invalid", body
    assert body["message"] == ('.authorization.k8s.io "" is invalid: spec.resourceAttributes: Invalid value: "null": '
                               'exactly one of nonResourceAttributes or resourceAttributes must be specified')
    assert body["details"] == {"group": "authorization.k8s.io", "causes": [{
        "reason": "FieldValueInvalid", "field": "spec.resourceAttributes",
        "message": 'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified'}]}


def test_validate_self_sar_both_requests(raw):
    """TestValidateSelfSAR "both requests": the cause is on spec.nonResourceAttributes."""
    spec = {"resourceAttributes": {"verb": "get", "resource": "leases"},
            "nonResourceAttributes": {"verb": "get", "path": "/healthz"}}
    status, _, body = raw("POST", SSAR, {"spec": spec})
    assert status == 422, body
    [cause] = body["details"]["causes"]
    assert cause["field"] == "spec.nonResourceAttributes"
    assert cause["message"] == ('Invalid value: authorization.NonResourceAttributes{Path:"/healthz", Verb:"get"}: '
                                'cannot be specified in combination with resourceAttributes')
    assert body["message"] == '.authorization.k8s.io "" is invalid: spec.nonResourceAttributes: ' + cause["message"]


def test_validate_self_sar_metadata_must_be_empty(raw):
    """ValidateSelfSubjectAccessReview: metadata must be empty (managedFields aside), after the spec's
    errors; TestValidateLocalSAR's "name" case for the self review."""
    status, _, body = raw("POST", SSAR, {"metadata": {"name": "a"},
                                         "spec": {"resourceAttributes": {"verb": "get", "resource": "leases"}}})
    assert status == 422, body
    [cause] = body["details"]["causes"]
    assert cause["field"] == "metadata" and cause["message"].endswith(": must be empty")
    assert cause["message"].startswith('Invalid value: v1.ObjectMeta{Name:"a", ')
    status, _, body = raw("POST", SSAR, {"metadata": {"name": "a"}, "spec": {}})
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.resourceAttributes", "metadata"]
    # An empty metadata (nulls, empty maps) is empty.
    status, _, body = raw("POST", SSAR, {"metadata": {"creationTimestamp": None, "labels": {}},
                                         "spec": {"resourceAttributes": {"verb": "get", "resource": "leases"}}})
    assert status == 201, body


def test_self_subject_access_review(api_client, viewer_client):
    """TestSelfSubjectAccessReview: "simple allow" (an admin lists Jobs) and "simple deny" (a viewer
    may not delete them); the answer is the request object with its status, and the managedFields
    kube's create handler records (the manager is the User-Agent's name up to "/")."""
    review = k8s.V1SelfSubjectAccessReview(spec=k8s.V1SelfSubjectAccessReviewSpec(
        resource_attributes=k8s.V1ResourceAttributes(verb="list", group="batch", version="v1", resource="jobs")))
    allowed = k8s.AuthorizationV1Api(api_client).create_self_subject_access_review(review)
    assert allowed.status.allowed is True and allowed.status.reason
    assert allowed.spec.resource_attributes.resource == "jobs"
    review.spec.resource_attributes.verb = "delete"
    denied = k8s.AuthorizationV1Api(viewer_client).create_self_subject_access_review(review)
    assert denied.status.allowed is False
    [entry] = denied.metadata.managed_fields
    assert entry.manager == "OpenAPI-Generator" and entry.operation == "Update"
    assert entry.api_version == "authorization.k8s.io/v1" and entry.fields_type == "FieldsV1"
    assert entry.fields_v1 == {"f:spec": {"f:resourceAttributes": {
        ".": {}, "f:group": {}, "f:resource": {}, "f:verb": {}, "f:version": {}}}}
    assert abs(entry.time - datetime.now(timezone.utc)) < timedelta(minutes=5)
    assert denied.metadata.creation_timestamp is None and denied.metadata.name is None


def test_self_subject_access_review_field_manager(raw):
    """The create handler's manager: fieldManager when given."""
    status, _, body = raw("POST", SSAR, {"spec": {"nonResourceAttributes": {"verb": "get", "path": "/version"}}},
                          query=[("fieldManager", "can-i")])
    assert status == 201 and body["status"]["allowed"] is True
    assert [e["manager"] for e in body["metadata"]["managedFields"]] == ["can-i"]
    assert body["metadata"]["managedFields"][0]["fieldsV1"] == {
        "f:spec": {"f:nonResourceAttributes": {".": {}, "f:path": {}, "f:verb": {}}}}


def test_self_subject_rules_review_no_namespace(raw):
    """selfsubjectrulesreview TestCreate "no namespace": 400 BadRequest "no namespace on request"."""
    status, _, body = raw("POST", SSRR, {"spec": {}})
    assert status == 400 and body["reason"] == "BadRequest" and body["message"] == "no namespace on request", body


def test_self_subject_rules_review_answers_a_new_object(raw):
    """selfsubjectrulesreview TestCreate "resource": the answer is a new object, its status only
    (the request's spec and metadata are not echoed; no managedFields)."""
    status, _, body = raw("POST", SSRR, {"metadata": {"labels": {"a": "b"}}, "spec": {"namespace": "default"}},
                          query=[("fieldManager", "rules")])
    assert status == 201, body
    assert body["metadata"] == {"creationTimestamp": None} and body["spec"] == {}
    leases = next(r for r in body["status"]["resourceRules"] if r["apiGroups"] == ["coordination.k8s.io"])
    assert "delete" in leases["verbs"] and body["status"]["incomplete"] is False


def test_gets_self_attributes(raw, kube_server):
    """TestGetsSelfAttributes / e2e "should support SelfSubjectReview API operations": the identity
    asked as (impersonated, as upstream's e2e does: user, uid, groups, extra) comes back; the
    answer is a new object created now, with nothing of the request's."""
    headers = {"Impersonate-User": "jane-doe", "Impersonate-Uid": "uniq-id",
               "Impersonate-Group": "system:authenticated,developers",
               "Impersonate-Extra-Known-Languages": "python,javascript"}
    status, _, body = kube_server.request("POST", SSR, {"apiVersion": "authentication.k8s.io/v1",
                                                        "kind": "SelfSubjectReview",
                                                        "metadata": {"name": "mine", "labels": {"a": "b"}}},
                                          headers=headers)
    assert status == 201, body
    assert body["status"]["userInfo"] == {"username": "jane-doe", "uid": "uniq-id",
                                          "groups": ["system:authenticated", "developers"],
                                          "extra": {"known-languages": ["python", "javascript"]}}
    assert list(body["metadata"]) == ["creationTimestamp"]
    made = datetime.fromisoformat(body["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    assert abs(made - datetime.now(timezone.utc)) < timedelta(minutes=5)


def test_gets_self_attributes_typed_client(viewer_client):
    """TestGetsSelfAttributes "Username with groups": through the typed client (the viewer's token)."""
    res = k8s.AuthenticationV1Api(viewer_client).create_self_subject_review(k8s.V1SelfSubjectReview())
    assert res.status.user_info.username == "reviews-viewer"
    assert res.status.user_info.groups == ["kubedash:viewer", "system:authenticated"]
    assert res.metadata.creation_timestamp is not None

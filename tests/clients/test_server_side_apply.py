"""Server-side apply and managedFields against the live server, with real clients: kubectl 1.32
(`apply --server-side`), lightkube's Client.apply and the official Python client's patch with the
apply content type.

Where each expected managedFields value comes from (kube-apiserver 1.32):
- [docs] kubernetes.io/docs/reference/using-api/server-side-apply/ ("Field management"): an Apply
  entry lists exactly the fields of the applied configuration, map keys as `f:<key>` members
  (`f:labels: {f:test-label: {}}`), no "." for a struct that is only a parent.
- [tofieldset] sigs.k8s.io/structured-merge-diff typed/tofieldset.go: an item of an associative
  list is a member itself (`k:{"name":"c"}: {".": {}, ...}`), an atomic list is one leaf
  (Endpoints `subsets`), a set list holds `v:` items.
- [compare] typed/compare.go + merge/update.go (Updater.Update): an Update entry owns what the
  write added or modified; a map or struct that did not exist before is itself added (".": {}).
- [stripmeta] k8s.io/apimachinery/pkg/util/managedfields/internal/stripmeta.go: name, namespace,
  uid, resourceVersion, generation, creationTimestamp, apiVersion and kind are nobody's.
- [sort] internal/managedfields.go sortEncodedManagedFields: by operation (Apply before Update),
  then time, then manager, apiVersion, subresource.
- [conflict] internal/conflict.go NewConflictError: 409 Conflict, one FieldManagerConflict cause
  per field, message "Apply failed with N conflict(s): conflict with "m": .path".
- [reset] test/integration/apiserver/apply/apply_test.go TestClearManagedFieldsWithUpdate and
  internal/fieldmanager.go isResetManagedFields: `managedFields: [{}]` clears them.
- [errorsdontfail] apply_test.go TestErrorsDontFail: an entry that does not decode is ignored
  (the stored managedFields stay), the write succeeds.
"""
from __future__ import annotations

import json
import time

import pytest
import yaml

from page_helpers import form_data

NS = "ssa"
APPLY = "application/apply-patch+yaml"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
ENDPOINTS = f"/api/v1/namespaces/{NS}/endpoints"

JOB = {
    "apiVersion": "batch/v1", "kind": "Job",
    "metadata": {"name": "web", "namespace": NS, "labels": {"app": "web", "tier": "batch"}},
    "spec": {"backoffLimit": 3, "activeDeadlineSeconds": 600, "template": {"spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c", "echo hi"]}]}}},
}

# [docs] + [tofieldset] + [stripmeta]: what kubectl's apply of JOB records.
JOB_APPLIED_FIELDS = {
    "f:metadata": {"f:labels": {"f:app": {}, "f:tier": {}}},
    "f:spec": {"f:activeDeadlineSeconds": {}, "f:backoffLimit": {}, "f:template": {"f:spec": {
        "f:containers": {'k:{"name":"c"}': {".": {}, "f:command": {}, "f:image": {}, "f:name": {}}},
        "f:restartPolicy": {}}}},
}


def get(kube_server, path):
    status, _, body = kube_server.request("GET", path)
    assert status == 200, body
    return body


def entry(obj, manager, operation="Apply", subresource=None) -> dict | None:
    for e in obj["metadata"].get("managedFields", []):
        if e.get("manager") == manager and e["operation"] == operation and e.get("subresource") == subresource:
            return e
    return None


def apply_entry(manager, fields, api_version="batch/v1", subresource=None, operation="Apply"):
    e = {"manager": manager, "operation": operation, "apiVersion": api_version, "fieldsType": "FieldsV1",
         "fieldsV1": fields}
    if subresource:
        e["subresource"] = subresource
    return e


def without_times(obj):
    return [{k: v for k, v in e.items() if k != "time"} for e in obj["metadata"].get("managedFields", [])]


def rfc3339_now_ish(text):
    assert time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------------------------
# kubectl apply --server-side


def test_kubectl_server_side_apply_lifecycle(kubectl, kube_server):
    """create, unchanged re-apply, change, removal, and the managedFields of each step."""
    out = kubectl("apply", "--server-side", "-f", "-", stdin=JOB).stdout
    assert "serverside-applied" in out
    job = get(kube_server, f"{JOBS}/web")
    assert without_times(job) == [apply_entry("kubectl", JOB_APPLIED_FIELDS)]
    rfc3339_now_ish(job["metadata"]["managedFields"][0]["time"])
    # What the strategy adds (selector, controller labels) and defaults are nobody's: [stripmeta]
    # plus kube's field manager running before PrepareForCreate.
    assert job["spec"]["selector"] and job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"]
    rv = job["metadata"]["resourceVersion"]

    kubectl("apply", "--server-side", "-f", "-", stdin=JOB)
    assert get(kube_server, f"{JOBS}/web")["metadata"]["resourceVersion"] == rv   # no new revision

    changed = json.loads(json.dumps(JOB))
    changed["spec"]["backoffLimit"] = 5
    kubectl("apply", "--server-side", "-f", "-", stdin=changed)
    job = get(kube_server, f"{JOBS}/web")
    assert job["spec"]["backoffLimit"] == 5 and job["metadata"]["resourceVersion"] != rv
    assert without_times(job) == [apply_entry("kubectl", JOB_APPLIED_FIELDS)]

    # Omitting a label and a field the manager applied before removes them (nobody else owns them).
    removed = json.loads(json.dumps(changed))
    del removed["metadata"]["labels"]["tier"]
    del removed["spec"]["activeDeadlineSeconds"]
    kubectl("apply", "--server-side", "-f", "-", stdin=removed)
    job = get(kube_server, f"{JOBS}/web")
    assert "tier" not in job["metadata"]["labels"] and job["metadata"]["labels"]["app"] == "web"
    assert "activeDeadlineSeconds" not in job["spec"]
    expected = json.loads(json.dumps(JOB_APPLIED_FIELDS))
    del expected["f:metadata"]["f:labels"]["f:tier"]
    del expected["f:spec"]["f:activeDeadlineSeconds"]
    assert without_times(job) == [apply_entry("kubectl", expected)]


def test_kubectl_conflicts_shared_ownership_and_force(kubectl, kube_server):
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "owned", "namespace": NS},
             "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10}}
    kubectl("apply", "--server-side", "--field-manager=alpha", "-f", "-", stdin=lease)

    # A different value for alpha's field: 409, one cause per field [conflict].
    other = {**lease, "spec": {"holderIdentity": "b", "leaseDurationSeconds": 20}}
    proc = kubectl("apply", "--server-side", "--field-manager=beta", "-f", "-", stdin=other, check=False)
    assert proc.returncode != 0
    assert 'conflicts with "alpha"' in proc.stderr and ".spec.holderIdentity" in proc.stderr
    assert ".spec.leaseDurationSeconds" in proc.stderr
    status, _, body = kube_server.request("PATCH", f"{LEASES}/owned?fieldManager=beta", json.dumps(other).encode(),
                                          content_type=APPLY)
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"].startswith("Apply failed with 2 conflicts: conflicts with \"alpha\":")
    assert body["details"]["causes"] == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "alpha"', "field": ".spec.holderIdentity"},
        {"reason": "FieldManagerConflict", "message": 'conflict with "alpha"', "field": ".spec.leaseDurationSeconds"}]
    assert get(kube_server, f"{LEASES}/owned")["spec"]["holderIdentity"] == "a"   # nothing written

    # The same value is shared ownership, not a conflict.
    same = {**lease, "spec": {"holderIdentity": "a"}}
    kubectl("apply", "--server-side", "--field-manager=beta", "-f", "-", stdin=same)
    obj = get(kube_server, f"{LEASES}/owned")
    assert entry(obj, "alpha")["fieldsV1"] == {"f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}}}
    assert entry(obj, "beta")["fieldsV1"] == {"f:spec": {"f:holderIdentity": {}}}

    # --force-conflicts: beta takes the field, alpha keeps the rest.
    kubectl("apply", "--server-side", "--field-manager=beta", "--force-conflicts", "-f", "-",
            stdin={**lease, "spec": {"holderIdentity": "b"}})
    obj = get(kube_server, f"{LEASES}/owned")
    assert obj["spec"]["holderIdentity"] == "b"
    assert entry(obj, "alpha")["fieldsV1"] == {"f:spec": {"f:leaseDurationSeconds": {}}}
    assert entry(obj, "beta")["fieldsV1"] == {"f:spec": {"f:holderIdentity": {}}}
    # [sort]: both Apply entries; ordered by time then manager.
    names = [e["manager"] for e in obj["metadata"]["managedFields"]]
    times = [e["time"] for e in obj["metadata"]["managedFields"]]
    assert sorted(zip(times, names)) == list(zip(times, names))


def test_kubectl_status_apply(kubectl, kube_server):
    job = json.loads(json.dumps(JOB))
    job["metadata"]["name"] = "with-status"
    kubectl("apply", "--server-side", "-f", "-", stdin=job)
    status = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "with-status", "namespace": NS},
              "spec": {"backoffLimit": 9},   # ignored on /status (the status strategy's reset fields)
              "status": {"active": 1, "ready": 1, "startTime": "2026-01-01T00:00:00Z"}}
    kubectl("apply", "--server-side", "--subresource=status", "-f", "-", stdin=status)
    obj = get(kube_server, f"{JOBS}/with-status")
    assert obj["status"]["active"] == 1 and obj["spec"]["backoffLimit"] == 3
    assert entry(obj, "kubectl", subresource="status") | {"time": None} == {
        **apply_entry("kubectl", {"f:status": {"f:active": {}, "f:ready": {}, "f:startTime": {}}},
                      subresource="status"), "time": None}
    assert entry(obj, "kubectl")["fieldsV1"] == JOB_APPLIED_FIELDS


def test_kubectl_client_side_to_server_side_upgrade(kubectl, kube_server):
    """kubectl apply, then kubectl apply --server-side without a label: kubectl moves the
    kubectl-client-side-apply entry's fields to its Apply entry (csaupgrade), so the omitted
    label is removed and the applier owns the rest."""
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "upgraded", "namespace": NS, "labels": {"keep": "1", "drop": "1"}},
             "spec": {"holderIdentity": "csa", "leaseDurationSeconds": 10}}
    kubectl("apply", "-f", "-", stdin=lease)
    obj = get(kube_server, f"{LEASES}/upgraded")
    csa = entry(obj, "kubectl-client-side-apply", "Update")
    # [compare]: an Update that creates owns the new maps themselves (".") and every field set.
    assert csa["fieldsV1"] == {
        "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}},
                       "f:labels": {".": {}, "f:drop": {}, "f:keep": {}}},
        "f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}}}

    del lease["metadata"]["labels"]["drop"]
    kubectl("apply", "--server-side", "-f", "-", stdin=lease)
    obj = get(kube_server, f"{LEASES}/upgraded")
    assert obj["metadata"]["labels"] == {"keep": "1"}
    assert entry(obj, "kubectl-client-side-apply", "Update") is None
    applied = entry(obj, "kubectl")
    assert applied["fieldsV1"]["f:metadata"]["f:labels"] == {"f:keep": {}}
    assert applied["fieldsV1"]["f:spec"] == {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}}
    # kube's lastAppliedUpdater: kubectl's server-side apply keeps the client-side annotation in
    # step with what it applied, so a later client-side apply starts from it.
    last = json.loads(obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["metadata"]["labels"] == {"keep": "1"} and last["spec"]["holderIdentity"] == "csa"


def test_first_kubectl_server_side_apply_may_take_client_side_fields(kubectl, kube_server):
    """kube's lastAppliedManager: fields whose value still matches the last-applied annotation
    do not conflict for the "kubectl" manager (other managers still get the 409)."""
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "from-csa", "namespace": NS},
             "spec": {"holderIdentity": "csa", "leaseDurationSeconds": 10}}
    kubectl("apply", "-f", "-", stdin=lease)
    changed = json.dumps({**lease, "spec": {"holderIdentity": "ssa", "leaseDurationSeconds": 10}}).encode()
    status, _, err = kube_server.request("PATCH", f"{LEASES}/from-csa?fieldManager=someone", changed,
                                         content_type=APPLY)
    assert status == 409 and 'conflict with "kubectl-client-side-apply"' in err["message"]
    status, _, obj = kube_server.request("PATCH", f"{LEASES}/from-csa?fieldManager=kubectl", changed,
                                         content_type=APPLY)
    assert status == 200 and obj["spec"]["holderIdentity"] == "ssa"
    assert entry(obj, "kubectl")["fieldsV1"]["f:spec"] == {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}}
    # Forced on the conflicting field only: the equal one stays shared.
    assert entry(obj, "kubectl-client-side-apply", "Update")["fieldsV1"]["f:spec"] == {"f:leaseDurationSeconds": {}}


def test_kubectl_get_shows_managed_fields_as_stored(kubectl, kube_server):
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "shown", "namespace": NS},
             "spec": {"holderIdentity": "x"}}
    kubectl("apply", "--server-side", "--field-manager=shower", "-f", "-", stdin=lease)
    stored = get(kube_server, f"{LEASES}/shown")["metadata"]["managedFields"]
    shown = yaml.safe_load(kubectl("get", "lease", "shown", "-n", NS, "-o", "yaml", "--show-managed-fields").stdout)
    assert shown["metadata"]["managedFields"] == stored
    hidden = yaml.safe_load(kubectl("get", "lease", "shown", "-n", NS, "-o", "yaml").stdout)
    assert "managedFields" not in hidden["metadata"]


# ---------------------------------------------------------------------------------------------
# lightkube and the official client


@pytest.fixture(scope="module")
def lightkube_client(kubectl):
    from lightkube import Client, KubeConfig

    return Client(config=KubeConfig.from_file(str(kubectl.config)), field_manager="lightkube-test")


def test_lightkube_apply(lightkube_client, kube_server):
    from lightkube import ApiError
    from lightkube.models.coordination_v1 import LeaseSpec
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.coordination_v1 import Lease

    lease = Lease(metadata=ObjectMeta(name="lk", namespace=NS, labels={"via": "lightkube"}),
                  spec=LeaseSpec(holderIdentity="lk-holder", leaseDurationSeconds=30))
    made = lightkube_client.apply(lease)
    assert made.spec.holderIdentity == "lk-holder"
    obj = get(kube_server, f"{LEASES}/lk")
    assert without_times(obj) == [apply_entry("lightkube-test", {
        "f:metadata": {"f:labels": {"f:via": {}}},
        "f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}}}, api_version="coordination.k8s.io/v1")]
    rv = obj["metadata"]["resourceVersion"]
    assert lightkube_client.apply(lease).metadata.resourceVersion == rv        # unchanged: same revision

    rival = Lease(metadata=ObjectMeta(name="lk", namespace=NS), spec=LeaseSpec(holderIdentity="rival"))
    with pytest.raises(ApiError) as err:
        lightkube_client.apply(rival, field_manager="rival")
    assert err.value.status.code == 409
    assert err.value.status.details.causes[0].field == ".spec.holderIdentity"
    forced = lightkube_client.apply(rival, field_manager="rival", force=True)
    assert forced.spec.holderIdentity == "rival" and forced.spec.leaseDurationSeconds == 30


def test_official_client_apply_content_type(api_client, kube_server):
    from kubernetes import client as k8s

    api = k8s.CoreV1Api(api_client)
    body = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "py", "namespace": NS},
            "subsets": [{"addresses": [{"ip": "10.1.0.1"}], "ports": [{"port": 80, "name": "http"}]}]}
    made = api.patch_namespaced_endpoints("py", NS, body, field_manager="py-client",
                                          _content_type=APPLY)
    assert made.subsets[0].addresses[0].ip == "10.1.0.1"
    obj = get(kube_server, f"{ENDPOINTS}/py")
    # [tofieldset]: subsets is an atomic list (x-kubernetes-list-type: atomic): one leaf.
    assert without_times(obj) == [apply_entry("py-client", {"f:subsets": {}}, api_version="v1")]
    with pytest.raises(k8s.ApiException) as err:
        api.patch_namespaced_endpoints("py", NS, {**body, "subsets": []}, field_manager="other",
                                       _content_type=APPLY)
    assert err.value.status == 409 and json.loads(err.value.body)["details"]["causes"][0]["field"] == ".subsets"


# ---------------------------------------------------------------------------------------------
# Every write records its manager; the request's rules


def test_status_update_entry_has_subresource(kube_server):
    job = json.loads(json.dumps(JOB))
    job["metadata"]["name"] = "status-put"
    status, _, made = kube_server.request("POST", f"{JOBS}?fieldManager=maker", job)
    assert status == 201
    made["status"] = {"active": 2, "startTime": "2026-01-01T00:00:00Z"}
    made["spec"]["backoffLimit"] = 7          # ignored on /status, and not owned
    status, _, obj = kube_server.request("PUT", f"{JOBS}/status-put/status?fieldManager=job-controller", made)
    assert status == 200 and obj["spec"]["backoffLimit"] == 3
    e = entry(obj, "job-controller", "Update", subresource="status")
    assert e["fieldsV1"] == {"f:status": {"f:active": {}, "f:startTime": {}}}
    assert entry(obj, "maker", "Update")["fieldsV1"]["f:spec"]["f:backoffLimit"] == {}


def test_updates_record_update_entries_and_user_agent_manager(kube_server):
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "upd", "namespace": NS},
             "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10}}
    status, _, made = kube_server.request("POST", LEASES, lease, headers={"User-Agent": "my-agent/1.2 (linux)"})
    assert status == 201
    # [compare]: the creator owns every field it set; the manager is the User-Agent up to '/'.
    assert without_times(made) == [apply_entry("my-agent", {
        "f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}}},
        api_version="coordination.k8s.io/v1", operation="Update")]
    made["spec"]["holderIdentity"] = "b"
    made["metadata"]["labels"] = {"x": "1"}
    status, _, put = kube_server.request("PUT", f"{LEASES}/upd?fieldManager=renewer", made)
    assert status == 200
    assert without_times(put) == [
        apply_entry("my-agent", {"f:spec": {"f:leaseDurationSeconds": {}}},
                    api_version="coordination.k8s.io/v1", operation="Update"),
        apply_entry("renewer", {"f:metadata": {"f:labels": {".": {}, "f:x": {}}}, "f:spec": {"f:holderIdentity": {}}},
                    api_version="coordination.k8s.io/v1", operation="Update"),
    ]   # [sort]: same operation, my-agent's time is not later, and "my-agent" < "renewer"
    # A write that changes nothing changes no managedFields and no revision.
    status, _, again = kube_server.request("PUT", f"{LEASES}/upd?fieldManager=someone-else", put)
    assert again["metadata"]["resourceVersion"] == put["metadata"]["resourceVersion"]
    assert again["metadata"]["managedFields"] == put["metadata"]["managedFields"]


def test_update_entries_are_capped_at_ten(kube_server):
    """internal/capmanagers.go: more than 10 Update entries -> the oldest merge into
    "ancient-changes" (Apply entries are not counted)."""
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "many", "namespace": NS},
             "spec": {"holderIdentity": "a"}}
    _, _, obj = kube_server.request("POST", f"{LEASES}?fieldManager=writer-00", lease)
    for i in range(1, 11):
        obj["metadata"].setdefault("labels", {})[f"l{i}"] = "x"
        status, _, obj = kube_server.request("PUT", f"{LEASES}/many?fieldManager=writer-{i:02}", obj)
        assert status == 200
    managers = {e["manager"]: e for e in obj["metadata"]["managedFields"]}
    assert len(managers) == 10 and "ancient-changes" in managers
    merged = {f"writer-{i:02}" for i in range(11)} - set(managers)
    assert len(merged) == 2
    bucket = managers["ancient-changes"]["fieldsV1"]
    for name in merged:    # each merged writer's fields are in the bucket
        i = int(name[-2:])
        assert ("f:spec" in bucket) if i == 0 else (f"f:l{i}" in bucket["f:metadata"]["f:labels"])


def test_reset_and_undecodable_managed_fields(kube_server):
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "reset", "namespace": NS},
             "spec": {"holderIdentity": "a"}}
    _, _, made = kube_server.request("POST", f"{LEASES}?fieldManager=maker", lease)
    stored = made["metadata"]["managedFields"]
    # [errorsdontfail]: an entry kube cannot decode is ignored; the stored ones stay.
    bad = json.loads(json.dumps(made))
    bad["metadata"]["managedFields"] = [{"manager": "x", "operation": "Sideways", "apiVersion": "v1",
                                         "fieldsType": "FieldsV1", "fieldsV1": {}}]
    status, _, body = kube_server.request("PUT", f"{LEASES}/reset", bad)
    assert status == 200 and body["metadata"]["managedFields"] == stored
    # A managedFields of the wrong shape is a decode error (400) that says where.
    wrong = json.loads(json.dumps(made))
    wrong["metadata"]["managedFields"] = "all of them"
    status, _, body = kube_server.request("PUT", f"{LEASES}/reset", wrong)
    assert status == 400 and "managedFields" in body["message"]
    # [reset]: [{}] clears them.
    cleared = json.loads(json.dumps(made))
    cleared["metadata"]["managedFields"] = [{}]
    status, _, body = kube_server.request("PUT", f"{LEASES}/reset", cleared)
    assert status == 200 and "managedFields" not in body["metadata"]
    assert "managedFields" not in get(kube_server, f"{LEASES}/reset")["metadata"]


def test_apply_request_rules(kube_server):
    body = json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": "rules", "namespace": NS}, "spec": {"holderIdentity": "a"}}).encode()
    status, _, err = kube_server.request("PATCH", f"{LEASES}/rules", body, content_type=APPLY)
    assert status == 422 and err["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch')
    status, _, err = kube_server.request("PATCH", f"{LEASES}/rules?fieldManager={'m' * 129}", body, content_type=APPLY)
    assert status == 422 and "fieldManager: Too long: may not be more than 128 bytes" in err["message"]
    status, _, err = kube_server.request("PATCH", f"{LEASES}/rules?force=true&fieldManager=m",
                                         b'{"spec":{"holderIdentity":"b"}}',
                                         content_type="application/merge-patch+json")
    assert status == 422 and err["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch')
    other_ns = json.loads(body)
    other_ns["metadata"]["namespace"] = "elsewhere"
    status, _, err = kube_server.request("PATCH", f"{LEASES}/rules?fieldManager=m", json.dumps(other_ns).encode(),
                                         content_type=APPLY)
    assert status == 400 and err["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request")
    with_fields = json.loads(body)
    with_fields["metadata"]["managedFields"] = [{"manager": "m", "operation": "Apply"}]
    status, _, err = kube_server.request("PATCH", f"{LEASES}/rules?fieldManager=m", json.dumps(with_fields).encode(),
                                         content_type=APPLY)
    assert status == 400 and err["message"] == "metadata.managedFields must be nil"
    status, _, err = kube_server.request("GET", f"{LEASES}/rules")
    assert status == 404                              # none of these wrote anything
    # dryRun=All: the answer, nothing stored.
    status, _, made = kube_server.request("PATCH", f"{LEASES}/rules?fieldManager=m&dryRun=All", body,
                                          content_type=APPLY)
    assert status == 201 and made["metadata"]["managedFields"][0]["manager"] == "m"
    assert kube_server.request("GET", f"{LEASES}/rules")[0] == 404
    # fieldValidation=Strict refuses an unknown field in the applied configuration.
    unknown = json.loads(body)
    unknown["spec"]["holder"] = "typo"
    status, _, err = kube_server.request("PATCH", f"{LEASES}/rules?fieldManager=m&fieldValidation=Strict",
                                         json.dumps(unknown).encode(), content_type=APPLY)
    assert status == 400 and 'unknown field "spec.holder"' in err["message"]


def test_watch_and_table_carry_managed_fields(kube_server):
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "watched", "namespace": NS},
             "spec": {"holderIdentity": "a"}}
    start = get(kube_server, LEASES)["metadata"]["resourceVersion"]
    with kube_server.watch(f"{LEASES}?watch=true&resourceVersion={start}&fieldSelector=metadata.name=watched") as w:
        status, _, made = kube_server.request("PATCH", f"{LEASES}/watched?fieldManager=watcher",
                                              json.dumps(lease).encode(), content_type=APPLY)
        assert status == 201
        event = w.next(timeout=30)
    assert event["type"] == "ADDED"
    assert event["object"]["metadata"]["managedFields"] == made["metadata"]["managedFields"]
    status, _, table = kube_server.request("GET", f"{LEASES}?includeObject=Object&fieldSelector=metadata.name=watched",
                                           headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert status == 200
    assert table["rows"][0]["object"]["metadata"]["managedFields"] == made["metadata"]["managedFields"]
    # The default includeObject=Metadata rows carry PartialObjectMetadata: the whole metadata.
    status, _, table = kube_server.request("GET", f"{LEASES}?fieldSelector=metadata.name=watched",
                                           headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert table["rows"][0]["object"]["metadata"]["managedFields"] == made["metadata"]["managedFields"]


# ---------------------------------------------------------------------------------------------
# The dashboard's own writes (forms, YAML editor, domain actions) are "kubedash-web" Updates


def test_dashboard_actions_write_as_kubedash_web(api):
    """In process: a Job created over the API by a manager, then suspended from the dashboard
    (batch/actions.do_suspend_job, what the page's button calls): the suspend is the
    dashboard's Update, the creator keeps the rest."""
    from dashboard.batch.actions import do_suspend_job

    job = json.loads(json.dumps(JOB))
    job["metadata"]["namespace"] = "default"
    r = api.post("/apis/batch/v1/namespaces/default/jobs?fieldManager=creator", job)
    assert r.status_code == 201
    assert [e["manager"] for e in r.json()["metadata"]["managedFields"]] == ["creator"]
    result = do_suspend_job("default", "web", suspend=True)
    fields = {e["manager"]: e for e in result.object["metadata"]["managedFields"]}
    assert fields["kubedash-web"]["operation"] == "Update"
    assert fields["kubedash-web"]["fieldsV1"] == {"f:spec": {"f:suspend": {}}}
    assert "f:suspend" not in fields["creator"]["fieldsV1"]["f:spec"]
    assert "f:backoffLimit" in fields["creator"]["fieldsV1"]["f:spec"]


def test_form_and_yaml_editor_write_as_kubedash_web(api, login):
    """The edit form and the YAML editor (signed-in pages, Django's test client) save as the
    dashboard's Update manager; fields they did not touch stay the creator's."""
    r = api.post("/apis/coordination.k8s.io/v1/namespaces/default/leases?fieldManager=creator",
                 {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                  "metadata": {"name": "edited", "namespace": "default"},
                  "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10}})
    assert r.status_code == 201
    page = login("editor", "ssa-editor")

    data = form_data(page.get("/leases/default/edited/yaml/"))
    assert "managedFields" not in data["yaml"]          # the editor hides them (web/present.py)
    data["yaml"] = data["yaml"].replace("holderIdentity: a", "holderIdentity: b")
    assert page.post("/leases/default/edited/yaml/", data).status_code == 302
    obj = api.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/edited").json()
    managers = {e["manager"]: e for e in obj["metadata"]["managedFields"]}
    assert managers["kubedash-web"]["operation"] == "Update"
    assert managers["kubedash-web"]["fieldsV1"] == {"f:spec": {"f:holderIdentity": {}}}
    assert managers["creator"]["fieldsV1"] == {"f:spec": {"f:leaseDurationSeconds": {}}}

    data = form_data(page.get("/leases/default/edited/edit/"))
    data["duration"] = "30"
    assert page.post("/leases/default/edited/edit/", data).status_code == 302
    obj = api.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/edited").json()
    assert obj["spec"]["leaseDurationSeconds"] == 30
    assert [e["manager"] for e in obj["metadata"]["managedFields"]] == ["kubedash-web"]
    assert obj["metadata"]["managedFields"][0]["fieldsV1"] == {
        "f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}}}


# ---------------------------------------------------------------------------------------------
# The encoding of each list type, and the merge order


def test_set_and_multi_key_map_items_are_encoded_as_kube_does(api):
    """[tofieldset]: ObjectMeta.finalizers is listType=set (`v:` items, the value as JSON);
    container ports are a map keyed by containerPort+protocol (`k:` with both keys, sorted,
    the protocol's schema default TCP when omitted); env is keyed by name."""
    job = json.loads(json.dumps(JOB))
    job["metadata"].update(namespace="default", name="enc", finalizers=["example.com/keep"])
    job["spec"]["template"]["spec"]["containers"][0].update(
        ports=[{"containerPort": 10, "name": "http"}, {"containerPort": 9, "protocol": "UDP"}],
        env=[{"name": "A", "value": "1"}])
    r = api.patch("/apis/batch/v1/namespaces/default/jobs/enc?fieldManager=enc", json.dumps(job),
                  content_type=APPLY)
    assert r.status_code == 201, r.content
    fields = r.json()["metadata"]["managedFields"][0]["fieldsV1"]
    assert fields["f:metadata"]["f:finalizers"] == {'v:"example.com/keep"': {}}
    container = fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"c"}']
    assert container["f:ports"] == {
        'k:{"containerPort":9,"protocol":"UDP"}': {".": {}, "f:containerPort": {}, "f:protocol": {}},
        'k:{"containerPort":10,"protocol":"TCP"}': {".": {}, "f:containerPort": {}, "f:name": {}},
    }
    # Keys in PathElement order: key values compare as values (9 < 10), not as text.
    assert list(container["f:ports"]) == ['k:{"containerPort":9,"protocol":"UDP"}',
                                          'k:{"containerPort":10,"protocol":"TCP"}']
    assert container["f:env"] == {'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}}
    # Removing the finalizer lets the test namespace be cleaned up like any other object.
    job["metadata"]["finalizers"] = []
    r = api.patch("/apis/batch/v1/namespaces/default/jobs/enc?fieldManager=enc", json.dumps(job),
                  content_type=APPLY)
    assert r.status_code == 200 and "finalizers" not in r.json()["metadata"]
    assert "f:finalizers" not in r.json()["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"]


def test_associative_list_merge_order():
    """structured-merge-diff's mergingWalker.visitListItems: live-only items keep their place,
    items shared with the applied list follow the applied order, new ones come where applied:
    live [a, b, c] + applied [c, a] -> [b, c, a]; live [a, b] + applied [b, x] -> [a, b, x]."""
    from dashboard.kube import apply, schema

    container = schema.node("io.k8s.api.core.v1.Container")
    env = lambda *names: [{"name": n, "value": n} for n in names]   # noqa: E731
    merged = apply.merge({"name": "c", "env": env("a", "b", "c")}, {"name": "c", "env": env("c", "a")}, container)
    assert [e["name"] for e in merged["env"]] == ["b", "c", "a"]
    merged = apply.merge({"name": "c", "env": env("a", "b")}, {"name": "c", "env": env("b", "x")}, container)
    assert [e["name"] for e in merged["env"]] == ["a", "b", "x"]
    # An atomic list (args) is replaced whole.
    merged = apply.merge({"name": "c", "args": ["1", "2"]}, {"name": "c", "args": ["3"]}, container)
    assert merged["args"] == ["3"]

"""test/e2e/apps/job.go, the API-only parts, ported. kubedash runs no Job controller: where
upstream waits for pods or completion, the port writes the status a controller would."""
from __future__ import annotations

import datetime

import pytest
from kubernetes import client as k8s
from kubernetes import watch
from kubernetes.client.rest import ApiException

from conformance.helpers import job_body


def _now() -> datetime.datetime:
    # RFC 3339 seconds: "conversion over the wire cuts nanoseconds", as upstream notes.
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def _fmt(dt: datetime.datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_apply_changes_to_a_job_status(batch, api_client, ns, raw):
    """[sig-apps] Job should apply changes to a job status [Conformance]

    Merge-patch /status with an annotation and a custom condition; update /status adding a
    condition; read /status with a plain client (upstream: the dynamic client) and compare the
    uid. Adapted: the 'pods equal to parallelism' step writes what the controller would
    (status.active, startTime) by hand."""
    job = batch.create_namespaced_job(ns, job_body("suspend-false-to-true", parallelism=2, completions=4))
    batch.patch_namespaced_job_status(job.metadata.name, ns, {"status": {"active": 2, "startTime": _fmt(_now())}})

    now1 = _now()
    patched = batch.patch_namespaced_job_status(job.metadata.name, ns, {
        "metadata": {"annotations": {"patchedstatus": "true"}},
        "status": {"conditions": [{"type": "CustomConditionType", "status": "True", "lastTransitionTime": _fmt(now1)}]}})
    custom = [c for c in patched.status.conditions if c.type == "CustomConditionType"]
    assert custom and custom[0].last_transition_time == now1
    assert patched.metadata.annotations == {"patchedstatus": "true"}
    assert patched.spec.parallelism == 2 and patched.status.active == 2

    now2 = _now()
    current = batch.read_namespaced_job(job.metadata.name, ns)
    current.status.conditions.append(k8s.V1JobCondition(type="StatusUpdate", status="True", reason="E2E",
                                                        message="Set from an e2e test", last_transition_time=now2))
    updated = batch.replace_namespaced_job_status(job.metadata.name, ns, current)
    assert [c.type for c in updated.status.conditions] == ["CustomConditionType", "StatusUpdate"]
    assert updated.status.conditions[1].last_transition_time == now2
    assert updated.metadata.annotations == {"patchedstatus": "true"}

    status, _, body = raw("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/{job.metadata.name}/status")
    assert status == 200 and body["metadata"]["uid"] == job.metadata.uid


def test_manage_the_lifecycle_of_a_job(batch, ns):
    """[sig-apps] Job should manage the lifecycle of a job [Conformance]

    Create a suspended Job with a label; watch it; strategic-merge-patch a label; update an
    annotation; list by label; (adapted: the controller's completion written by hand through
    /status); delete the collection by label; see DELETED; the relist is empty."""
    name = "e2e-lifecycle"
    label = {"e2e-job-label": name}
    body = job_body(name, labels=label)
    body.spec.suspend = True
    created = batch.create_namespaced_job(ns, body)
    assert created.spec.suspend is True
    w = watch.Watch()
    events = w.stream(batch.list_namespaced_job, ns, label_selector=f"e2e-job-label={name}",
                      resource_version=created.metadata.resource_version, timeout_seconds=30)

    patched = batch.patch_namespaced_job(name, ns, {"metadata": {"labels": {name: "patched"}}})
    assert patched.metadata.labels[name] == "patched"
    ev = next(events)
    assert ev["type"] == "MODIFIED" and ev["object"].metadata.labels.get(name) == "patched"

    current = batch.read_namespaced_job(name, ns)
    current.metadata.annotations = {"updated": "true"}
    current.spec.suspend = False
    updated = batch.replace_namespaced_job(name, ns, current)
    assert updated.metadata.annotations["updated"] == "true" and updated.spec.suspend is False
    ev = next(events)
    assert ev["type"] == "MODIFIED" and ev["object"].metadata.annotations.get("updated") == "true"

    listed = batch.list_namespaced_job(ns, label_selector=f"e2e-job-label={name}")
    assert [j.metadata.name for j in listed.items] == [name]

    # What the Job controller writes when the pod succeeds.
    start = _now() - datetime.timedelta(seconds=10)
    done = _now()
    batch.patch_namespaced_job_status(name, ns, {"status": {
        "startTime": _fmt(start), "completionTime": _fmt(done), "succeeded": 1, "ready": 0, "terminating": 0,
        "uncountedTerminatedPods": {},
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "lastProbeTime": _fmt(done), "lastTransitionTime": _fmt(done)},
            {"type": "Complete", "status": "True", "lastProbeTime": _fmt(done), "lastTransitionTime": _fmt(done)}]}})
    assert next(events)["object"].status.succeeded == 1
    assert any(c.type == "Complete" and c.status == "True" for c in batch.read_namespaced_job(name, ns).status.conditions)

    batch.delete_collection_namespaced_job(ns, label_selector=f"e2e-job-label={name}")
    ev = next(events)
    assert ev["type"] == "DELETED" and ev["object"].metadata.name == name
    w.stop()
    assert batch.list_namespaced_job(ns, label_selector=f"e2e-job-label={name}").items == []


def test_delete_a_job(batch, ns):
    """[sig-apps] Job should delete a job [Conformance]

    Delete with propagationPolicy Background (what upstream's e2eresource.DeleteResourceAndWaitForGC
    uses) and see the Job gone. Adapted: no pods to wait for or garbage-collect."""
    batch.create_namespaced_job(ns, job_body("foo", parallelism=2, completions=4))
    batch.delete_namespaced_job("foo", ns, body=k8s.V1DeleteOptions(propagation_policy="Background"))
    with pytest.raises(ApiException) as err:
        batch.read_namespaced_job("foo", ns)
    assert err.value.status == 404

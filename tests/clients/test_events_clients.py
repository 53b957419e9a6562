"""Events with real clients against a live server: kubectl (get events in both groups, events
--for, describe of each kind) and the official Python client (CoreV1Api, EventsV1Api, and
client-go's correlator: create, then PATCH of count and lastTimestamp)."""
from __future__ import annotations

import datetime as dt

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException


NS = "evk"


def post_event(server, name, kind, obj, reason, message, type_="Normal", api_version="", count=1,
               ns=NS, minutes_ago=0, uid=""):
    when = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"kind": kind, "namespace": ns, "name": obj, "apiVersion": api_version, "uid": uid},
            "reason": reason, "message": message, "type": type_, "source": {"component": "test-controller"},
            "firstTimestamp": when, "lastTimestamp": when, "count": count}
    status, _, out = server.request("POST", f"/api/v1/namespaces/{ns}/events", body)
    assert status == 201, out
    return out


@pytest.fixture(scope="module")
def objects(kube_server):
    """A Job, a Lease and an Endpoints, and Events about each of them."""
    s = kube_server

    def create(path, body):
        status, _, created = s.request("POST", path, body)
        assert status == 201, created
        return created["metadata"]["uid"]

    lease = create(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
                   {"metadata": {"name": "lk"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10}})
    endpoints = create(f"/api/v1/namespaces/{NS}/endpoints", {"metadata": {"name": "ek"}, "subsets": [
        {"addresses": [{"ip": "10.9.0.1"}], "ports": [{"port": 80}]}]})
    job = create(f"/apis/batch/v1/namespaces/{NS}/jobs", {"metadata": {"name": "jk"}, "spec": {"template": {
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}})
    post_event(s, "jk.1", "Job", "jk", "SuccessfulCreate", "Created pod: jk-abcde", api_version="batch/v1",
               minutes_ago=3, uid=job)
    post_event(s, "jk.2", "Job", "jk", "BackoffLimitExceeded", "Job has reached the specified backoff limit",
               type_="Warning", api_version="batch/v1", count=2, uid=job)
    post_event(s, "lk.1", "Lease", "lk", "LeaderElection", "a became leader", api_version="coordination.k8s.io/v1",
               uid=lease)
    post_event(s, "ek.1", "Endpoints", "ek", "FailedToUpdateEndpoint", "Failed to update endpoint evk/ek",
               type_="Warning", api_version="v1", uid=endpoints)


def test_kubectl_get_events_both_groups(kubectl, objects):
    out = kubectl("get", "events", "-n", NS).stdout
    header, *rows = out.strip().splitlines()
    assert header.split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert any("BackoffLimitExceeded" in r and "job/jk" in r and "Warning" in r for r in rows)
    assert any("LeaderElection" in r and "lease/lk" in r for r in rows)
    wide = kubectl("get", "ev", "-n", NS, "-o", "wide").stdout
    assert "SUBOBJECT" in wide.splitlines()[0] and "test-controller" in wide
    v1 = kubectl("get", "events.events.k8s.io", "-n", NS, "-o", "json").stdout
    import json
    items = json.loads(v1)["items"]
    assert {i["apiVersion"] for i in items} == {"events.k8s.io/v1"}
    assert {i["regarding"]["name"] for i in items} == {"jk", "lk", "ek"}
    sel = kubectl("get", "events", "-n", NS, "--field-selector", "type=Warning", "-o", "name").stdout.split()
    assert sorted(sel) == ["event/ek.1", "event/jk.2"]
    sel = kubectl("get", "events.events.k8s.io", "-n", NS, "--field-selector", "regarding.kind=Lease",
                  "-o", "name").stdout.split()
    assert sel == ["event.events.k8s.io/lk.1"]


def test_kubectl_events_for(kubectl, objects):
    out = kubectl("events", "-n", NS, "--for", "job/jk").stdout
    lines = out.strip().splitlines()
    assert lines[0].split()[:4] == ["LAST", "SEEN", "TYPE", "REASON"]
    assert len(lines) == 3 and "SuccessfulCreate" in lines[1] and "BackoffLimitExceeded" in lines[2]
    warn = kubectl("events", "-n", NS, "--types", "Warning").stdout
    assert "FailedToUpdateEndpoint" in warn and "SuccessfulCreate" not in warn


@pytest.mark.parametrize("kind,name,reason", [("job", "jk", "BackoffLimitExceeded"), ("lease", "lk", "LeaderElection"),
                                              ("endpoints", "ek", "FailedToUpdateEndpoint")])
def test_kubectl_describe_shows_events(kubectl, objects, kind, name, reason):
    out = kubectl("describe", kind, name, "-n", NS).stdout
    events = out.split("Events:", 1)[1]
    assert "<none>" not in events.splitlines()[0]
    assert reason in events and "test-controller" in events


def test_python_client_core_and_events_v1(api_client):
    core, events = k8s.CoreV1Api(api_client), k8s.EventsV1Api(api_client)
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    body = k8s.CoreV1Event(
        metadata=k8s.V1ObjectMeta(name="py.1", namespace="evp"),
        involved_object=k8s.V1ObjectReference(kind="Job", namespace="evp", name="py-job", api_version="batch/v1"),
        reason="Completed", message="Job completed", type="Normal", count=1,
        source=k8s.V1EventSource(component="job-controller"), first_timestamp=now, last_timestamp=now)
    created = core.create_namespaced_event("evp", body)
    assert created.count == 1 and created.involved_object.name == "py-job"
    # client-go's correlator seeing it again: a strategic merge PATCH of count and lastTimestamp
    later = now + dt.timedelta(seconds=30)
    patched = core.patch_namespaced_event("py.1", "evp", {"count": 2, "lastTimestamp": later.isoformat()})
    assert patched.count == 2 and patched.last_timestamp == later and patched.first_timestamp == now
    assert int(patched.metadata.resource_version) > int(created.metadata.resource_version)
    listed = core.list_namespaced_event("evp", field_selector="involvedObject.name=py-job")
    assert [e.metadata.name for e in listed.items] == ["py.1"]
    # the new API: written once, read through both groups
    micro = dt.datetime.now(dt.timezone.utc)
    new = events.create_namespaced_event("evq", k8s.EventsV1Event(
        metadata=k8s.V1ObjectMeta(name="py.2", namespace="evq"), event_time=micro,
        regarding=k8s.V1ObjectReference(kind="Lease", namespace="evq", name="py-lease",
                                        api_version="coordination.k8s.io/v1"),
        reason="LeaderElection", note="me became leader", type="Normal", action="Elect",
        reporting_controller="example.com/elector", reporting_instance="me-1"))
    assert new.regarding.name == "py-lease" and new.event_time is not None
    as_core = core.read_namespaced_event("py.2", "evq")
    assert as_core.message == "me became leader" and as_core.reporting_component == "example.com/elector"
    series = events.patch_namespaced_event("py.2", "evq", {"series": {
        "count": 2, "lastObservedTime": micro.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}})
    assert series.series.count == 2
    found = events.list_namespaced_event("evq", field_selector="regarding.name=py-lease")
    assert [e.metadata.name for e in found.items] == ["py.2"]
    with pytest.raises(ApiException) as err:
        events.create_namespaced_event("evq", k8s.EventsV1Event(
            metadata=k8s.V1ObjectMeta(name="py.3"), event_time=micro, reason="X", type="Info", action="A",
            regarding=k8s.V1ObjectReference(kind="Lease", namespace="evq", name="py-lease"),
            reporting_controller="example.com/elector", reporting_instance="me-1"))
    assert err.value.status == 422 and "has invalid value: Info" in err.value.body
    events.delete_namespaced_event("py.2", "evq")
    with pytest.raises(ApiException) as err:
        core.read_namespaced_event("py.2", "evq")
    assert err.value.status == 404


def test_watch_events_v1(kube_server):
    s = kube_server
    status, _, lst = s.request("GET", "/apis/events.k8s.io/v1/namespaces/evw/events")
    with s.watch(f"/apis/events.k8s.io/v1/namespaces/evw/events?watch=true&resourceVersion="
                 f"{lst['metadata']['resourceVersion']}&fieldSelector=regarding.kind%3DJob") as stream:
        post_event(s, "w.1", "Lease", "l", "LeaderElection", "x", ns="evw")
        post_event(s, "w.2", "Job", "j", "Completed", "Job completed", ns="evw")
        ev = stream.next(timeout=15)
    assert ev["type"] == "ADDED" and ev["object"]["apiVersion"] == "events.k8s.io/v1"
    assert ev["object"]["metadata"]["name"] == "w.2" and ev["object"]["note"] == "Job completed"


SSA_EVENT = """apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: jk.ssa
  namespace: evk
regarding: {{kind: Job, name: jk, namespace: evk, apiVersion: batch/v1}}
note: {note}
reason: BackoffLimitExceeded
type: Warning
action: Failing
reportingController: example.com/job-checker
reportingInstance: checker-1
eventTime: "2026-01-02T03:04:05.000000Z"
series: {{count: {count}, lastObservedTime: "2026-01-02T03:05:05.000000Z"}}
"""


def test_server_side_apply_through_events_v1_records_its_field_names(kubectl, objects, kube_server, tmp_path):
    """managedFields record the version the client wrote through, in that version's field names
    (kube: an entry's apiVersion is the request's), and ownership holds across the versions."""
    path = tmp_path / "event.yaml"
    path.write_text(SSA_EVENT.format(note="first", count=2))
    kubectl("apply", "--server-side", "-f", str(path))
    status, _, got = kube_server.request("GET", f"/apis/events.k8s.io/v1/namespaces/{NS}/events/jk.ssa")
    assert status == 200, got
    [entry] = got["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("kubectl", "Apply", "events.k8s.io/v1")
    fields = entry["fieldsV1"]
    assert {"f:regarding", "f:note", "f:reportingController", "f:action", "f:eventTime"} <= set(fields)
    assert not {"f:involvedObject", "f:message", "f:reportingComponent"} & set(fields)
    assert fields["f:regarding"] == {}   # (an ObjectReference is an atomic struct: owned whole)
    # Applied again, seen once more (the series): still kubectl's alone.
    path.write_text(SSA_EVENT.format(note="first", count=3))
    kubectl("apply", "--server-side", "-f", str(path))
    status, _, core = kube_server.request("GET", f"/api/v1/namespaces/{NS}/events/jk.ssa")
    assert core["series"]["count"] == 3 and core["message"] == "first"
    # Read through core/v1 the entries are as recorded (kube does not convert managedFields).
    [entry] = core["metadata"]["managedFields"]
    assert entry["apiVersion"] == "events.k8s.io/v1" and "f:note" in entry["fieldsV1"]
    # Another manager applying the same field through core/v1 (`message`) conflicts with kubectl's `note`.
    other = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "jk.ssa", "namespace": NS},
             "message": "third", "involvedObject": {"kind": "Job", "name": "jk", "namespace": NS}}
    status, _, out = kube_server.request(
        "PATCH", f"/api/v1/namespaces/{NS}/events/jk.ssa?fieldManager=other", other,
        content_type="application/apply-patch+yaml")
    assert status == 409, out
    assert out["reason"] == "Conflict" and "kubectl" in out["message"]
    # An Update through core/v1 takes the field: recorded as `message` in a v1 entry; kubectl's
    # entry keeps its other fields, in its own version's names.
    status, _, out = kube_server.request(
        "PATCH", f"/api/v1/namespaces/{NS}/events/jk.ssa?fieldManager=editor", {"message": "fourth"},
        content_type="application/merge-patch+json")
    assert status == 200, out
    managers = {m["manager"]: m for m in out["metadata"]["managedFields"]}
    assert managers["editor"]["apiVersion"] == "v1" and set(managers["editor"]["fieldsV1"]) == {"f:message"}
    assert "f:note" not in managers["kubectl"]["fieldsV1"] and "f:regarding" in managers["kubectl"]["fieldsV1"]

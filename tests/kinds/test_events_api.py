"""Event through the REST API (full Django stack): one storage served as v1 and events.k8s.io/v1,
kube's validation by the version written through, field selectors, Tables, patches, TTL."""
import pytest

pytestmark = pytest.mark.django_db

CORE = "/api/v1/namespaces/ev/events"
V1 = "/apis/events.k8s.io/v1/namespaces/ev/events"
TABLE = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}


def core_event(name="job-a.1", kind="Job", obj="job-a", reason="SuccessfulCreate", type_="Normal", **extra):
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "ev"},
            "involvedObject": {"kind": kind, "namespace": "ev", "name": obj, "apiVersion": "batch/v1", "uid": "u-1"},
            "reason": reason, "message": f"Created pod: {obj}-x", "type": type_,
            "source": {"component": "job-controller"},
            "firstTimestamp": "2026-01-01T10:00:00Z", "lastTimestamp": "2026-01-01T10:00:00Z", "count": 1,
            **extra}


def v1_event(name="lease-a.1", reason="LeaderElection", **extra):
    return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": name, "namespace": "ev"},
            "regarding": {"kind": "Lease", "namespace": "ev", "name": "lease-a",
                          "apiVersion": "coordination.k8s.io/v1"},
            "reason": reason, "note": "me became leader", "type": "Normal", "action": "Elect",
            "reportingController": "kubedash.io/maintenance", "reportingInstance": "host_1",
            "eventTime": "2026-01-01T10:00:00.000000Z", **extra}


def test_one_storage_two_versions(api):
    r = api.post(CORE, core_event())
    assert r.status_code == 201, r.content
    core = r.json()
    assert core["reportingComponent"] == "" and core["involvedObject"]["kind"] == "Job"
    got = api.get(f"{V1}/job-a.1").json()
    assert got["apiVersion"] == "events.k8s.io/v1"
    assert got["regarding"] == core["involvedObject"] and got["note"] == core["message"]
    assert got["deprecatedSource"] == {"component": "job-controller"} and got["deprecatedCount"] == 1
    assert got["deprecatedLastTimestamp"] == "2026-01-01T10:00:00Z" and got["eventTime"] is None
    assert got["metadata"] == core["metadata"]
    r = api.post(V1, v1_event())
    assert r.status_code == 201, r.content
    assert r.json()["regarding"]["kind"] == "Lease" and "involvedObject" not in r.json()
    stored = api.get(f"{CORE}/lease-a.1").json()
    assert stored["apiVersion"] == "v1" and stored["reportingComponent"] == "kubedash.io/maintenance"
    assert stored["message"] == "me became leader" and stored["involvedObject"]["name"] == "lease-a"
    lst = api.get(V1).json()
    assert lst["kind"] == "EventList" and lst["apiVersion"] == "events.k8s.io/v1"
    assert sorted(i["metadata"]["name"] for i in lst["items"]) == ["job-a.1", "lease-a.1"]
    assert all("regarding" in i for i in lst["items"])


def test_field_selectors_both_versions(api):
    api.post(CORE, core_event())
    api.post(CORE, core_event("job-b.1", obj="job-b", reason="BackoffLimitExceeded", type_="Warning"))
    api.post(V1, v1_event())

    def names(path, selector):
        r = api.get(f"{path}?fieldSelector={selector}")
        assert r.status_code == 200, r.content
        return sorted(i["metadata"]["name"] for i in r.json()["items"])

    assert names(CORE, "involvedObject.kind=Job,involvedObject.name=job-b") == ["job-b.1"]
    assert names(CORE, "type=Warning") == ["job-b.1"]
    assert names(CORE, "reason!=LeaderElection") == ["job-a.1", "job-b.1"]
    assert names(CORE, "source=kubedash.io/maintenance") == ["lease-a.1"]   # (reportingController)
    assert names(CORE, "reportingComponent=kubedash.io/maintenance") == ["lease-a.1"]
    assert names(V1, "regarding.kind=Lease") == ["lease-a.1"]
    assert names(V1, "reportingController=kubedash.io/maintenance") == ["lease-a.1"]
    assert names("/api/v1/events", "involvedObject.uid=u-1") == ["job-a.1", "job-b.1"]
    r = api.get(f"{V1}?fieldSelector=involvedObject.kind=Job")
    assert r.status_code == 400 and "involvedObject.kind" in r.json()["message"]


def test_validation_by_version(api):
    # core/v1: the legacy rules only
    bad = core_event()
    bad["involvedObject"]["namespace"] = "other"
    r = api.post(CORE, bad)
    assert r.status_code == 422
    assert r.json()["details"]["causes"][0] == {
        "reason": "FieldValueInvalid", "field": "involvedObject.namespace",
        "message": 'Invalid value: "other": does not match event.namespace'}
    # an eventTime makes it a new-style Event: reportingController, reportingInstance, action, reason
    r = api.post(CORE, {**core_event(), "eventTime": "2026-01-01T10:00:00.000000Z"})
    assert r.status_code == 422
    fields = [c["field"] for c in r.json()["details"]["causes"]]
    # (as kube: Required, and IsQualifiedName's two complaints about an empty name)
    assert fields == ["reportingController"] * 3 + ["reportingInstance", "action"]
    # events.k8s.io/v1: strict on create
    r = api.post(V1, v1_event(deprecatedCount=3, type="Info"))
    assert r.status_code == 422
    causes = r.json()["details"]["causes"]
    assert [c["field"] for c in causes] == ["type", "count"]
    assert causes[0]["message"] == 'Invalid value: "": has invalid value: Info'
    body = v1_event()
    del body["eventTime"]
    r = api.post(V1, body)
    assert r.status_code == 422 and [c["field"] for c in r.json()["details"]["causes"]] == ["eventTime"]
    # ... and what an Event said is immutable through events.k8s.io/v1
    assert api.post(V1, v1_event()).status_code == 201
    r = api.patch(f"{V1}/lease-a.1", {"note": "changed"})
    assert r.status_code == 422
    assert r.json()["details"]["causes"][0]["field"] == "message"
    r = api.patch(f"{V1}/lease-a.1", {"series": {"count": 1, "lastObservedTime": "2026-01-01T10:01:00.000000Z"}})
    assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "series.count"
    r = api.patch(f"{V1}/lease-a.1", {"series": {"count": 2, "lastObservedTime": "2026-01-01T10:01:00.000000Z"}})
    assert r.status_code == 200, r.content
    assert r.json()["series"]["count"] == 2
    # the same change through core/v1 is allowed (kube keeps old clients working)
    r = api.patch(f"{CORE}/lease-a.1", {"message": "changed"})
    assert r.status_code == 200 and r.json()["message"] == "changed"


def test_correlator_patch_and_table(api):
    api.post(CORE, core_event())
    r = api.patch(f"{CORE}/job-a.1", {"count": 4, "lastTimestamp": "2026-01-01T10:05:00Z"},
                  content_type="application/strategic-merge-patch+json")
    assert r.status_code == 200, r.content
    assert r.json()["count"] == 4 and r.json()["firstTimestamp"] == "2026-01-01T10:00:00Z"
    t = api.get(CORE, headers=TABLE).json()
    assert [c["name"] for c in t["columnDefinitions"]] == [
        "Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen", "Count", "Name"]
    cells = t["rows"][0]["cells"]
    assert cells[1:7] == ["Normal", "SuccessfulCreate", "job/job-a", "", "job-controller", "Created pod: job-a-x"]
    assert cells[8:] == [4, "job-a.1"]
    assert api.get(V1, headers=TABLE).json()["rows"][0]["cells"][9] == "job-a.1"
    # PUT creates (AllowCreateOnUpdate), and DELETE through the other version
    r = api.put(f"{CORE}/job-c.1", core_event("job-c.1"))
    assert r.status_code == 201, r.content
    assert api.delete(f"{V1}/job-c.1").status_code == 200
    assert api.get(f"{CORE}/job-c.1").status_code == 404


def test_discovery_and_openapi(api):
    core = api.get("/api/v1").json()
    events = [r for r in core["resources"] if r["name"] == "events"]
    assert events and events[0]["shortNames"] == ["ev"] and events[0]["kind"] == "Event"
    group = api.get("/apis/events.k8s.io/v1").json()
    assert [r["name"] for r in group["resources"]] == ["events"]
    doc = api.get("/openapi/v3/apis/events.k8s.io/v1").json()
    assert "io.k8s.api.events.v1.Event" in doc["components"]["schemas"]
    assert "/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}" in doc["paths"]


def test_ttl_after_the_last_write(api, settings):
    from datetime import timedelta

    from dashboard.kube.expiry import expire
    from dashboard.kube.meta import now
    from dashboard.server.maintenance import run_jobs

    settings.KUBEDASH_EVENT_TTL_SECONDS = 600
    api.post(CORE, core_event())
    api.post(CORE, core_event("job-b.1", obj="job-b"))
    assert expire() == 0                                   # younger than the TTL
    later = now() + timedelta(seconds=601)
    assert expire(now=later) == 2
    assert api.get(CORE).json()["items"] == []
    # The maintenance leader's jobs run it; an event written within the TTL stays.
    settings.KUBEDASH_EVENT_TTL_SECONDS = 0
    api.post(CORE, core_event("job-c.1"))
    run_jobs()
    assert api.get(CORE).json()["items"] == []
    settings.KUBEDASH_EVENT_TTL_SECONDS = 600
    api.post(CORE, core_event("job-d.1"))
    run_jobs()
    assert [i["metadata"]["name"] for i in api.get(CORE).json()["items"]] == ["job-d.1"]


def test_the_maintenance_elector_records_leader_election_events(api):
    """client-go's resourcelock with an event recorder: LeaderElection on the Lease, through
    the store like any client's Events (so through the API and both versions)."""
    from dashboard.server.maintenance import Elector

    a, b = Elector(holder="host_1"), Elector(holder="host_2")
    a.lease_duration = b.lease_duration = 1
    a.step()
    assert a.leading
    b.step()
    assert not b.leading
    a.release()
    b.step()
    assert b.leading
    selector = "involvedObject.kind=Lease,involvedObject.name=kubedash-maintenance"
    items = api.get(f"/api/v1/namespaces/kube-system/events?fieldSelector={selector}").json()["items"]
    assert [(i["reason"], i["message"], i["type"]) for i in sorted(items, key=lambda i: i["metadata"]["name"])] == [
        ("LeaderElection", "host_1 became leader", "Normal"),
        ("LeaderElection", "host_1 stopped leading", "Normal"),
        ("LeaderElection", "host_2 became leader", "Normal")]
    lease = api.get("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kubedash-maintenance").json()
    assert {i["involvedObject"]["uid"] for i in items} == {lease["metadata"]["uid"]}
    assert all(i["source"] == {"component": "kubedash-maintenance"} and i["count"] == 1 for i in items)
    v1 = api.get("/apis/events.k8s.io/v1/namespaces/kube-system/events?fieldSelector="
                 "regarding.kind=Lease,reportingController=kubedash-maintenance").json()["items"]
    assert len(v1) == 3 and {i["regarding"]["name"] for i in v1} == {"kubedash-maintenance"}


def test_recorder_correlates_identical_events(api):
    """client-go's correlator: the same event again is a PATCH of count and lastTimestamp."""
    from dashboard.events.recorder import WARNING, Recorder

    def create(namespace, event):
        return api.post(f"/api/v1/namespaces/{namespace}/events", event).status_code == 201

    def patch(namespace, name, change):
        return api.patch(f"/api/v1/namespaces/{namespace}/events/{name}", change,
                         content_type="application/strategic-merge-patch+json").status_code == 200

    rec = Recorder("job-controller", "", create, patch)
    job = {"kind": "Job", "apiVersion": "batch/v1", "metadata": {"namespace": "ev", "name": "j", "uid": "u"}}
    for _ in range(3):
        assert rec.event(job, WARNING, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    assert rec.event(job, WARNING, "DeadlineExceeded", "Job was active longer than specified deadline")
    items = sorted(api.get(CORE).json()["items"], key=lambda i: i["reason"])
    assert [(i["reason"], i["count"]) for i in items] == [("BackoffLimitExceeded", 3), ("DeadlineExceeded", 1)]
    assert items[0]["lastTimestamp"] >= items[0]["firstTimestamp"]
    assert items[0]["metadata"]["name"].startswith("j.")
    # The event expired meanwhile (TTL): the recorder creates it anew.
    api.delete(f"{CORE}/{items[0]['metadata']['name']}")
    assert rec.event(job, WARNING, "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    assert sorted(i["count"] for i in api.get(CORE).json()["items"]) == [1, 1]


def test_deletecollection_through_events_k8s_io(api):
    api.post(CORE, core_event())
    api.post(CORE, core_event("job-b.1", obj="job-b"))
    api.post(V1, v1_event())
    r = api.delete(f"{V1}?fieldSelector=regarding.kind%3DJob")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["kind"] == "EventList" and body["apiVersion"] == "events.k8s.io/v1"
    assert sorted(i["metadata"]["name"] for i in body["items"]) == ["job-a.1", "job-b.1"]
    assert all("regarding" in i and "involvedObject" not in i for i in body["items"])
    assert [i["metadata"]["name"] for i in api.get(CORE).json()["items"]] == ["lease-a.1"]


def test_message_bounds_by_version(api):
    """kube bounds a new-style Event's message (events.k8s.io/v1 `note`, and a core/v1 Event with
    an eventTime) at 1 KiB with 422; an old-style core/v1 Event has no such rule in kube, and is
    stored with its message cut to the same 1 KiB (events/strategy.py `default`)."""
    from dashboard.events.strategy import NOTE_LIMIT

    long_note = "n" * (NOTE_LIMIT + 1)
    r = api.post(V1, v1_event(note=long_note))
    assert r.status_code == 422, r.content
    assert r.json()["details"]["causes"] == [{"reason": "FieldValueInvalid", "field": "message",
                                              "message": f'Invalid value: "": can have at most {NOTE_LIMIT} characters'}]
    assert api.post(V1, v1_event(note="n" * NOTE_LIMIT)).status_code == 201   # (the bound itself is fine)
    r = api.post(CORE, {**core_event("new-style.1"), "message": long_note, "eventTime": "2026-01-01T10:00:00.000000Z",
                        "reportingComponent": "example.com/ctl", "reportingInstance": "ctl-1", "action": "Create"})
    assert r.status_code == 422 and r.json()["details"]["causes"][0]["field"] == "message", r.content
    # Old style: 2 MiB accepted before; now stored as its first 1 KiB (UTF-8 bytes, as Go's len counts,
    # a character cut in two dropped), through either version's reads.
    r = api.post(CORE, {**core_event("old-style.1"), "message": "é" * (1024 * 1024)})
    assert r.status_code == 201, r.content
    assert r.json()["message"] == "é" * (NOTE_LIMIT // 2)
    assert api.get(f"{V1}/old-style.1").json()["note"] == "é" * (NOTE_LIMIT // 2)
    # ... and so is a longer message an update (the correlator's PATCH) brings.
    r = api.patch(f"{CORE}/old-style.1", {"message": "x" * 5000, "count": 2},
                  content_type="application/strategic-merge-patch+json")
    assert r.status_code == 200 and r.json()["message"] == "x" * NOTE_LIMIT and r.json()["count"] == 2


def test_an_event_with_a_finalizer_expires_at_its_ttl(tmp_path):
    """kube-apiserver stores an Event under an etcd lease of --event-ttl, which deletes the key
    whatever it holds: a finalizer does not keep an expired Event. Here the maintenance leader's
    TTL job deletes it outright (one DELETED event), not only marking its deletionTimestamp."""
    from conftest import FOLLOWER_ENV, served, server_env

    env = server_env(tmp_path, **FOLLOWER_ENV, KUBEDASH_EVENT_TTL_SECONDS="2", KUBEDASH_MAINTENANCE_INTERVAL="0.5")
    with served(tmp_path, env=env, tls=False) as server:
        held = core_event("held.1")
        held["metadata"]["finalizers"] = ["example.com/keep"]
        status, _, created = server.request("POST", CORE, held)
        assert status == 201, created
        rv = created["metadata"]["resourceVersion"]
        with server.watch(f"{CORE}?watch=1&resourceVersion={rv}") as stream:
            assert stream.status == 200
            event = stream.next(timeout=60)
        assert event["type"] == "DELETED" and event["object"]["metadata"]["name"] == "held.1", event
        assert event["object"]["metadata"]["finalizers"] == ["example.com/keep"]
        status, _, body = server.request("GET", f"{CORE}/held.1")
        assert status == 404, body

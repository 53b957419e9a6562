"""Events on the pages (dashboard/events/web.py through web.kinds.Timeline): an object's History
view is one timeline of its revisions and its Events, filterable (changes only, warnings only),
pushed live over the page's websocket; warnings counted on the overview."""
from __future__ import annotations

import re
from html import unescape

import pytest
from asgiref.sync import sync_to_async

from manifests import JOBS, job
from page_helpers import connect, pushed_until, receive_until


def text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html))).strip()


def timeline(html: str) -> list[str]:
    """The timeline's entries, newest first: revisions as "rev <event>", Events as their text."""
    out = []
    for attrs, body in re.findall(r'<li class="rev([^"]*)" id="[^"]+">(.*?)</li>', html, re.S):
        out.append(text(body) if "happening" in attrs else "rev " + text(body).split()[0])
    return out


def event(name, reason, message, type_="Normal", minutes_ago=0, count=1, obj="tl"):
    from datetime import datetime, timedelta, timezone

    when = (datetime.now(timezone.utc) - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Job", "namespace": "default", "name": obj, "apiVersion": "batch/v1"},
            "reason": reason, "message": message, "type": type_, "count": count,
            "source": {"component": "job-controller"}, "firstTimestamp": when, "lastTimestamp": when}


EVENTS = "/api/v1/namespaces/default/events"


@pytest.mark.django_db
def test_history_is_one_timeline_with_the_events(api, login):
    assert api.post(JOBS, job("tl")).status_code == 201
    assert api.post(EVENTS, event("tl.1", "SuccessfulCreate", "Created pod: tl-abcde")).status_code == 201
    r = api.patch(f"{JOBS}/tl/status", {"status": {"failed": 3}})
    assert r.status_code == 200, r.content
    assert api.post(EVENTS, event("tl.2", "BackoffLimitExceeded", "Job has reached the specified backoff limit",
                                  "Warning", count=2)).status_code == 201
    assert api.post(EVENTS, event("other.1", "Completed", "Job completed", obj="other")).status_code == 201
    c = login("viewer")
    html = c.get("/jobs/default/tl/history/").content.decode()
    got = timeline(html)
    assert got[0].startswith("Warning BackoffLimitExceeded") and "×2" in got[0] and "job-controller" in got[0]
    assert "Job has reached the specified backoff limit" in got[0]
    assert any(e.startswith("Normal SuccessfulCreate") and "Created pod: tl-abcde" in e for e in got)
    assert sum(e.startswith("rev ") for e in got) == 2 and not any("Job completed" in e for e in got)
    assert "History and events" in html
    warnings = timeline(c.get("/jobs/default/tl/history/?show=warnings").content.decode())
    assert len(warnings) == 1 and warnings[0].startswith("Warning BackoffLimitExceeded")
    changes = timeline(c.get("/jobs/default/tl/history/?show=changes").content.decode())
    assert changes == ["rev modified", "rev created"]
    page = c.get("/jobs/default/tl/history/?show=warnings").content.decode()
    assert '<a href="?show=warnings" aria-current="page">Warnings only</a>' in page
    assert "show=warnings" in re.search(r'ws-connect="([^"]+)"', page).group(1)   # live, filtered the same


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_events_reach_the_timeline_live():
    from dashboard.access.tokens import ensure_user
    from dashboard.batch.resource import JOBS as JOB_RES
    from dashboard.events.resource import EVENTS as EVENT_RES
    from dashboard.kube import store

    def create_job():
        return int(store.create(JOB_RES, "default", job("tl")).object["metadata"]["resourceVersion"])

    def record(name, reason, type_="Normal", count=1):
        body = event(name, reason, f"{reason} happened", type_, count=count)
        if count == 1:
            return store.create(EVENT_RES, "default", body).object["metadata"]["uid"]

        def change(obj):
            obj["count"] = count
            return obj
        return store.update(EVENT_RES, "default", name, change, is_patch=True).object["metadata"]["uid"]

    user = await sync_to_async(ensure_user)("tl-viewer", "viewer")
    rv = await sync_to_async(create_job)()
    comm, connected, _ = await connect(user, f"view=job&namespace=default&name=tl&tab=history&rv={rv}")
    assert connected
    try:
        uid = await sync_to_async(record)("tl.1", "BackoffLimitExceeded", "Warning")
        html = await receive_until(comm, f'id="event-{uid}"')
        assert 'hx-swap-oob="afterbegin:#history-entries"' in html and "BackoffLimitExceeded happened" in html
        # Seen again (the correlator's count + 1): the entry moves to the top with its count.
        await sync_to_async(record)("tl.1", "BackoffLimitExceeded", "Warning", count=2)
        html = await receive_until(comm, "×2")
        assert html.index(f'<li id="event-{uid}" hx-swap-oob="delete"></li>') < html.index("afterbegin")
    finally:
        await comm.disconnect()
    # A page filtered to the changes is pushed the revisions, not the Events.
    comm, connected, _ = await connect(user, f"view=job&namespace=default&name=tl&tab=history&show=changes&rv={rv}")
    assert connected

    def suspend():
        def change(obj):
            obj["spec"]["suspend"] = True
            return obj
        return int(store.update(JOB_RES, "default", "tl", change, is_patch=True).object["metadata"]["resourceVersion"])

    try:
        await sync_to_async(record)("tl.2", "Completed")
        new_rv = await sync_to_async(suspend)()
        seen = []
        while f'id="rev-{new_rv}"' not in "".join(seen):
            seen.append(await comm.receive_from(timeout=15))
        assert "Completed happened" not in "".join(seen) and "spec.suspend" in text("".join(seen))
    finally:
        await comm.disconnect()


@pytest.mark.django_db
def test_warnings_on_list_rows_and_the_overview(api, login):
    for name in ("w1", "w2", "ok"):
        assert api.post(JOBS, job(name)).status_code == 201
    api.post(EVENTS, event("w1.1", "BackoffLimitExceeded", "limit", "Warning", obj="w1", count=3))
    api.post(EVENTS, event("w2.1", "DeadlineExceeded", "deadline", "Warning", obj="w2"))
    api.post(EVENTS, event("w2.2", "Old", "an hour ago", "Warning", obj="ok", minutes_ago=61))
    api.post(EVENTS, event("ok.1", "Completed", "Job completed", obj="ok"))
    c = login("viewer")
    page = c.get("/jobs/").content.decode()
    rows = {m.group(1): text(m.group(0)) for m in re.finditer(r'<tr[^>]*id="job-default--(\w+)".*?</tr>', page, re.S)}
    assert "3 warnings" in rows["w1"] and "1 warning about w2" in rows["w2"] and "warning" not in rows["ok"]
    assert 'href="/jobs/default/w1/history/?show=warnings"' in page
    overview = c.get("/").content.decode()
    assert "2 jobs with warnings in the last hour" in text(overview)


@pytest.mark.django_db
def test_a_share_link_shows_the_timeline_of_its_objects_only(api, login):
    from django.test import Client

    from manifests import LEASES, lease

    team = LEASES.replace("/default/", "/team-e/")
    assert api.post(team, lease("web-1", ns="team-e", labels={"app": "web"})).status_code == 201
    assert api.post(team, lease("db-1", ns="team-e", labels={"app": "db"})).status_code == 201
    for obj, reason in (("web-1", "LeaderElection"), ("db-1", "SecretReason")):
        body = event(f"{obj}.1", reason, f"{reason} of {obj}", "Warning", obj=obj)
        body["metadata"]["namespace"] = body["involvedObject"]["namespace"] = "team-e"
        body["involvedObject"].update(kind="Lease", apiVersion="coordination.k8s.io/v1")
        assert api.post("/api/v1/namespaces/team-e/events", body).status_code == 201
    r = login("editor").post("/share/new/", {"kind": "Lease", "namespace": "team-e", "labelSelector": "app=web",
                                             "label": "on-call", "expiry": "1d"})
    token = re.search(r"/s/([A-Za-z0-9_\-]+)/", r.content.decode()).group(1)
    visitor = Client()
    assert visitor.get(f"/s/{token}/").status_code == 302
    html = visitor.get("/leases/team-e/web-1/history/?show=warnings").content.decode()
    assert "LeaderElection of web-1" in html and "SecretReason" not in html
    resp = visitor.get("/leases/team-e/db-1/history/")
    assert resp.status_code == 404 and b"SecretReason" not in resp.content
    # Events themselves are no page of their own, and the link reaches no API.
    assert visitor.get("/api/v1/namespaces/team-e/events").status_code in (401, 403)


@pytest.mark.django_db
def test_an_endpoints_timeline_shows_its_targets_probe_failures(api, login):
    """The kubelet reports a failed readiness probe on the Pod; the Endpoints that targets the
    Pod shows it among its own history (what the demo's kubelets record)."""
    from manifests import ENDPOINTS, endpoints

    body = endpoints("web", ips=("10.1.0.1",), not_ready=("10.1.0.2",))
    body["subsets"][0]["notReadyAddresses"][0]["targetRef"] = {"kind": "Pod", "namespace": "default",
                                                               "name": "web-abc12"}
    assert api.post(ENDPOINTS, body).status_code == 201
    probe = event("web-abc12.1", "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 503",
                  "Warning", obj="web-abc12")
    probe["involvedObject"].update(kind="Pod", apiVersion="v1")
    probe["source"] = {"component": "kubelet", "host": "node-a"}
    assert api.post(EVENTS, probe).status_code == 201
    other = event("web-zzz99.1", "Unhealthy", "not ours", "Warning", obj="web-zzz99")
    other["involvedObject"].update(kind="Pod", apiVersion="v1")
    assert api.post(EVENTS, other).status_code == 201
    got = timeline(login("viewer").get("/endpoints/default/web/history/").content.decode())
    assert got[0].startswith("Warning Unhealthy on Pod web-abc12") and "kubelet, node-a" in got[0]
    assert not any("not ours" in e for e in got)


@pytest.mark.django_db
def test_a_warning_pushes_only_its_rows_badge_on_a_paged_list(api):
    """live.render_changes on one page of several: a Warning about a row on the page re-renders
    that row with its badge (and no counts: nothing moved); one about a Job on another page is
    not announced as a new object, and adds no row."""
    import orjson

    from dashboard.kube.hub import LogEntry
    from dashboard.web import live
    from dashboard.web.live_page import PageSocket, PageView

    for name in ("pa", "pb", "pz"):
        assert api.post(JOBS, job(name)).status_code == 201
    made = []
    for name, about in (("pa.1", "pa"), ("pz.1", "pz")):
        r = api.post(EVENTS, event(name, "BackoffLimitExceeded", "backoff limit", "Warning", obj=about))
        assert r.status_code == 201, r.content
        made.append(r.json())
    socket = PageSocket(view=PageView.parse(b"view=jobs&namespace=default&rv=1&paged=1&first=default/pa&last=default/pb"),
                        shown=[("default", "pa"), ("default", "pb")], known={("default", "pa"), ("default", "pb")})
    pending = {("Event", "default", o["metadata"]["name"]): (
        "ADDED", LogEntry(int(o["metadata"]["resourceVersion"]), "Event", "default", o["metadata"]["name"], "ADDED",
                       orjson.dumps(o).decode())) for o in made}
    messages = live.render_changes(socket, pending)
    html = "".join(messages)
    assert 'id="job-default--pa"' in html and "1 warning" in html
    assert "job-default--pz" not in html and "new object" not in html and socket.announced == 0
    assert socket.shown == [("default", "pa"), ("default", "pb")] and ("default", "pz") not in socket.known
    assert 'id="list-totals"' not in html


def warned_rows(page: str) -> set[str]:
    return set(re.findall(r'<tr[^>]*id="job-([^"]+)"', page))


@pytest.mark.django_db
def test_the_overview_counts_existing_jobs_with_warnings_and_links_to_them(api, login):
    """Events outlive their objects: Warnings about a deleted Job count for nothing, and neither
    do those about Jobs outside the viewer's namespaces; the line links to the Jobs list filtered
    to those Jobs (?warnings=1h), which lists exactly them."""
    for name in ("gone", "here", "calm"):
        assert api.post(JOBS, job(name)).status_code == 201
    for i in range(3):
        api.post(EVENTS, event(f"gone.{i}", "BackoffLimitExceeded", "limit", "Warning", obj="gone"))
    api.post(EVENTS, event("here.1", "DeadlineExceeded", "deadline", "Warning", obj="here"))
    api.post(EVENTS, event("calm.1", "Completed", "Job completed", obj="calm"))
    elsewhere = event("far.1", "DeadlineExceeded", "deadline", "Warning", obj="far")
    elsewhere["metadata"]["namespace"] = elsewhere["involvedObject"]["namespace"] = "team-b"
    assert api.post("/apis/batch/v1/namespaces/team-b/jobs", job("far", ns="team-b")).status_code == 201
    assert api.post("/api/v1/namespaces/team-b/events", elsewhere).status_code == 201
    assert api.delete(f"{JOBS}/gone").status_code == 200

    limited = login("viewer", namespaces=["default"])
    overview = limited.get("/").content.decode()
    assert "1 job with warnings in the last hour" in text(overview), text(overview)
    assert 'href="/jobs/?warnings=1h"' in overview
    page = limited.get("/jobs/?warnings=1h")
    assert page.status_code == 200
    html = page.content.decode()
    assert warned_rows(html) == {"default--here"} and "1 job" in text(html)
    assert "warnings=1h" in re.search(r'ws-connect="([^"]+)"', html).group(1)   # live, filtered the same
    assert warned_rows(limited.get("/jobs/?warnings=1h&sort=-name").content.decode()) == {"default--here"}
    # Everyone's view: both existing Jobs with warnings; with the Overview's namespace kept.
    admin = login("admin")
    assert "2 jobs with warnings in the last hour" in text(admin.get("/").content.decode())
    assert warned_rows(admin.get("/jobs/?warnings=1h").content.decode()) == {"default--here", "team-b--far"}
    assert 'href="/jobs/?namespace=team-b&amp;warnings=1h"' in admin.get("/?namespace=team-b").content.decode()
    # One canonical address; a window that is not the filter's is said, not ignored.
    r = admin.get("/jobs/?warnings=1h&warnings=1h")
    assert r.status_code == 302 and r["Location"] == "/jobs/?warnings=1h"
    r = admin.get("/jobs/?warnings=2h")
    assert r.status_code == 400 and "is not a window of this list" in r.content.decode()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_the_live_overview_counts_only_existing_jobs_with_warnings():
    """The live push recounts with each Event: a Warning about a Job that does not exist (any
    more) adds nothing; one about an existing Job does (the sentinel)."""
    from dashboard.access.tokens import ensure_user
    from dashboard.batch.resource import JOBS as JOB_RES
    from dashboard.events.resource import EVENTS as EVENT_RES
    from dashboard.kube import store

    def setup():
        for name in ("lw1", "lw2"):
            store.create(JOB_RES, "default", job(name))
        store.create(EVENT_RES, "default", event("lw1.1", "DeadlineExceeded", "deadline", "Warning", obj="lw1"))
        return store.current_revision()

    def warn(name, about):
        made = store.create(EVENT_RES, "default", event(name, "BackoffLimitExceeded", "limit", "Warning", obj=about))
        return int(made.object["metadata"]["resourceVersion"])

    user = await sync_to_async(ensure_user)("lw-viewer", "viewer")
    rv = await sync_to_async(setup)()
    comm, connected, _ = await connect(user, f"view=overview&rv={rv}")
    assert connected
    try:
        await sync_to_async(warn)("ghost.1", "ghost")       # about no Job
        last = await sync_to_async(warn)("lw2.1", "lw2")    # the sentinel: the pushes up to its revision
        pushed = "".join(await pushed_until(comm, f'data-rv="{last}"'))
        lines = re.findall(r'<ul class="warnings-summary" id="overview-warnings".*?</ul>', pushed, re.S)
        assert lines and text(lines[-1]) == "2 jobs with warnings in the last hour", lines
    finally:
        await comm.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_a_live_warnings_list_keeps_to_its_jobs():
    """The Jobs list filtered to those with warnings: its rows change in place; a change to a
    Job without warnings is not pushed into it (the later change to a listed Job is the sentinel)."""
    from dashboard.access.tokens import ensure_user
    from dashboard.batch.resource import JOBS as JOB_RES
    from dashboard.events.resource import EVENTS as EVENT_RES
    from dashboard.kube import store

    def setup():
        for name in ("wl-warned", "wl-quiet"):
            store.create(JOB_RES, "default", job(name))
        store.create(EVENT_RES, "default", event("wl.1", "DeadlineExceeded", "deadline", "Warning", obj="wl-warned"))
        return store.current_revision()

    def label(name):
        def change(obj):
            obj["metadata"].setdefault("labels", {})["touched"] = "yes"
            return obj
        return store.update(JOB_RES, "default", name, change, is_patch=True).object["metadata"]["resourceVersion"]

    user = await sync_to_async(ensure_user)("wl-viewer", "viewer")
    rv = await sync_to_async(setup)()
    comm, connected, _ = await connect(user, f"view=jobs&warnings=1h&rv={rv}")
    assert connected
    try:
        await sync_to_async(label)("wl-quiet")
        await sync_to_async(label)("wl-warned")
        seen = []
        while 'id="job-default--wl-warned"' not in "".join(seen):
            seen.append(await comm.receive_from(timeout=15))
        assert "job-default--wl-quiet" not in "".join(seen)
        assert "new object" not in "".join(seen)
    finally:
        await comm.disconnect()

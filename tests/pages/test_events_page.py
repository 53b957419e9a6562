"""The Events page (/events/, events/web.py EVENT_PAGES: a read-only feed on the generic list
machinery) over HTTP against a real server: newest first, the lists' filters with type and
reason, the object each Event is about linked to its page, count / first / last seen, paged,
read only, in the menu, within the viewer's namespaces and the page's cluster; and live over
the page's websocket (issue 41, item 9)."""
from __future__ import annotations

import json
import re
import secrets
from datetime import datetime, timedelta, timezone
from html import unescape

import pytest

from page_helpers import SignedIn


@pytest.fixture(scope="module")
def admin(kube_server, login_user):
    return SignedIn(kube_server, *login_user)


@pytest.fixture(scope="module")
def team_viewer(kube_server):
    """A viewer limited to namespace "ev-team" (signed in), and a followed cluster "ev-prod"
    holding one Event, as its follower would have mirrored it."""
    kube_server.manage("shell", "-c", "\n".join([
        "from django.utils import timezone",
        "from dashboard.access.tokens import ensure_user",
        "from dashboard.access.models import Profile",
        "from dashboard.follow.models import Cluster",
        "from dashboard.kube import mirror, registry",
        "u = ensure_user('ev-viewer', 'viewer')",
        "u.set_password('pw-ev-viewer')",
        "u.save()",
        "Profile.objects.filter(user=u).update(namespaces=['ev-team'])",
        "Cluster.objects.create(name='ev-prod', server='https://ev-prod.example:6443', credentials=b'x',"
        " state=Cluster.LIVE, heartbeat_at=timezone.now(), last_event_at=timezone.now())",
        f"obj = {json.dumps(event('prod-only', 'ev-team', 'FromProd', 'seen in prod'))}",
        "obj['metadata'].update(uid='u-prod-1', resourceVersion='5', creationTimestamp='2026-01-02T03:04:05Z')",
        "mirror.mirror('ev-prod', [mirror.Mirrored(registry.by_kind('Event'), 'ev-team', 'prod-only', obj)])",
    ]))
    return SignedIn(kube_server, "ev-viewer", "pw-ev-viewer")


def event(name: str, ns: str, reason: str, message: str, type_: str = "Normal", minutes_ago: float = 0,
          count: int = 1, about=("Lease", "leader"), **meta) -> dict:
    when = datetime.now(timezone.utc) - timedelta(minutes=minutes_ago)
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": ns, **meta},
            "involvedObject": {"kind": about[0], "namespace": ns, "name": about[1]},
            "reason": reason, "message": message, "type": type_, "count": count,
            "source": {"component": "test-controller"},
            "firstTimestamp": (when - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "lastTimestamp": when.strftime("%Y-%m-%dT%H:%M:%SZ")}


def post(server, obj: dict) -> None:
    status, _, out = server.request("POST", f"/api/v1/namespaces/{obj['metadata']['namespace']}/events", obj)
    assert status == 201, out


def rows(resp) -> list[str]:
    """The Events a page shows, in page order."""
    return re.findall(r'<tr id="event-[^"]*--([^"]+)"', resp.text)


def fresh_ns(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def test_events_newest_first_with_their_object_counts_and_times(admin, kube_server):
    ns = fresh_ns("ev")
    post(kube_server, event("old", ns, "Elected", "became leader", minutes_ago=30))
    post(kube_server, event("new", ns, "BackOff", "back-off restarting", "Warning", minutes_ago=1, count=7,
                            about=("Job", "nightly")))
    post(kube_server, event("mid", ns, "Renewed", "renewed", minutes_ago=10, about=("Pod", "p-1")))
    r = admin.get(f"/events/?namespace={ns}")
    assert r.status_code == 200
    assert rows(r) == ["new", "mid", "old"]
    row = r.text[r.text.index(f'id="event-{ns}--new"'):]
    row = unescape(row[:row.index("</tr>")])
    assert f'<a href="/jobs/{ns}/nightly/">Job nightly</a>' in row      # the object, linked to its page
    assert "Warning" in row and "BackOff" in row and "back-off restarting" in row
    assert '<td class="num">7</td>' in row and " ago" in row and "data-abs" in row   # count, last / first seen
    pod = r.text[r.text.index(f'id="event-{ns}--mid"'):]
    assert "Pod p-1" in pod[:pod.index("</tr>")] and "/pods/" not in pod[:pod.index("</tr>")]   # no page: no link
    assert "3 events 1 warning 2 normal" in " ".join(unescape(re.sub(r"<[^>]+>", " ", r.text.split('id="list-totals"')[1][:600])).split())
    # Another order, and back: the default (newest first) needs no parameter.
    assert rows(admin.get(f"/events/?namespace={ns}&sort=namespace")) == ["mid", "new", "old"]
    assert rows(admin.get(f"/events/?namespace={ns}&sort=last_seen")) == ["old", "mid", "new"]
    moved = admin.get(f"/events/?namespace={ns}&sort=-last_seen", allow_redirects=False)
    assert moved.status_code == 302 and moved.headers["Location"] == f"/events/?namespace={ns}"


def test_the_lists_filters_type_and_reason_paged(admin, kube_server):
    ns = fresh_ns("ef")
    for i in range(3):
        post(kube_server, event(f"w{i}", ns, "BackOff", "again", "Warning", minutes_ago=i))
    post(kube_server, event("n0", ns, "Pulled", "pulled image", labels={"app": "web"}))
    assert rows(admin.get(f"/events/?namespace={ns}&type=Warning")) == ["w0", "w1", "w2"]
    assert rows(admin.get(f"/events/?namespace={ns}&type=Normal")) == ["n0"]
    assert rows(admin.get(f"/events/?namespace={ns}&reason=Pulled")) == ["n0"]
    assert rows(admin.get(f"/events/?namespace={ns}&reason=BackOff&q=w1")) == ["w1"]
    assert rows(admin.get(f"/events/?namespace={ns}&labelSelector=app%3Dweb")) == ["n0"]
    r = admin.get(f"/events/?namespace={ns}&type=Warning&limit=2")
    assert rows(r) == ["w0", "w1"]
    html = unescape(r.text)
    assert '<label for="f-type">Type</label>' in html and '<option value="Warning" selected>' in html
    assert '<label for="f-reason">Reason</label>' in html
    nxt = re.search(r'<a[^>]*href="(\?[^"]*page=2[^"]*)"', html).group(1)
    assert "type=Warning" in nxt and rows(admin.get("/events/" + nxt)) == ["w2"]
    bad = admin.get(f"/events/?namespace={ns}&type=Critical")
    assert bad.status_code == 400 and "Type: “Critical” is not one of Normal, Warning." in unescape(bad.text)


def test_read_only_and_in_the_menu(admin, kube_server):
    ns = fresh_ns("er")
    post(kube_server, event("e1", ns, "Elected", "became leader"))
    r = admin.get(f"/events/?namespace={ns}")
    # (the menu keeps the namespace chosen: issue 41, item 8)
    assert f'<a href="/events/?namespace={ns}" aria-current="page">Events</a>' in r.text
    assert '<a href="/events/">Events</a>' in admin.get("/").text
    assert "New event" not in r.text and "data-bulk-row" not in r.text and "Share this view" not in r.text
    assert admin.get("/events/new/").status_code == 404
    assert admin.get(f"/events/{ns}/e1/").status_code == 404


def test_a_limited_viewer_sees_their_namespaces_events_and_the_page_follows_its_cluster(team_viewer, kube_server):
    post(kube_server, event("ours", "ev-team", "Elected", "in our namespace"))
    post(kube_server, event("theirs", "ev-other", "Elected", "elsewhere"))
    assert "ours" in rows(team_viewer.get("/events/")) and "theirs" not in rows(team_viewer.get("/events/"))
    assert team_viewer.get("/events/?namespace=ev-other").status_code == 403
    prod = team_viewer.get("/events/?cluster=ev-prod")
    assert prod.status_code == 200 and rows(prod) == ["prod-only"]
    assert 'href="/leases/ev-team/leader/?cluster=ev-prod"' in prod.text   # the object, in that cluster
    assert team_viewer.get("/events/?cluster=nowhere").status_code == 404


def test_new_events_appear_on_top_live(admin, kube_server):
    ns = fresh_ns("el")
    post(kube_server, event("first", ns, "Elected", "became leader", minutes_ago=2))
    page = admin.socket(admin.get(f"/events/?namespace={ns}"))
    try:
        post(kube_server, event("second", ns, "BackOff", "backing off", "Warning"))
        pushed = page.wait_for(f'id="event-{ns}--second"')
        assert 'hx-swap-oob="afterbegin:#items"' in pushed and "backing off" in pushed
    finally:
        page.close()

"""Every page as of a past moment (`?at=`, issue 38; dashboard/web/timetravel.py, kube/asof.py):
a Lease whose holder changed twice, an Endpoints address turning not ready, a Job failing and a
Lease deleted, each shown as it was at three moments (before, between, after) on the lists, the
detail pages and the Overview; the rv: and time forms agreeing; write routes refusing `at`; a
share link keeping it; compaction keeping the pages' history while the API's old lists get 410;
and thinning keeping every holder change but renewals only once a minute."""
from __future__ import annotations

import contextvars
import http.client
import re
from datetime import timedelta
from html import unescape

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from dashboard.kube import asof, compaction, revlog, store
from dashboard.kube.models import Revision
from dashboard.kube.registry import by_kind
from manifests import endpoints, job, lease, micro
from page_helpers import create_link

pytestmark = [pytest.mark.portable, pytest.mark.django_db(transaction=True)]

NS = "tt"
STAMP = "2026-11-22T00:00:00Z"


def _status(kind: str) -> dict:
    return {"type": kind, "status": "True", "lastProbeTime": STAMP, "lastTransitionTime": STAMP}


def _set(kind: str, name: str, change, subresource: str = "") -> int:
    def fn(current):
        new = dict(current)
        change(new)
        return new
    return int(store.update(by_kind(kind), NS, name, fn, subresource=subresource).object["metadata"]["resourceVersion"])


def _holder(name):
    def change(obj):
        obj["spec"] = {**obj["spec"], "holderIdentity": name}
    return change


@pytest.fixture
def story():
    """Writes the story and returns its three moments' revisions: before (everything as first
    written), between (holder b, address not ready, job failed, lease gone) and after (holder c)."""
    store.create(by_kind("Lease"), NS, lease("leader", holder="node-a", ns=NS, duration=3600))
    store.create(by_kind("Endpoints"), NS, endpoints("web", ns=NS, ips=("10.0.0.1", "10.0.0.2")))
    store.create(by_kind("Job"), NS, job("batch", ns=NS))
    store.create(by_kind("Lease"), NS, lease("doomed", holder="node-x", ns=NS))
    before = store.current_revision()
    _set("Lease", "leader", _holder("node-b"))

    def not_ready(obj):
        obj["subsets"] = [{"addresses": [{"ip": "10.0.0.1"}], "notReadyAddresses": [{"ip": "10.0.0.2"}],
                           "ports": [{"port": 80}]}]
    _set("Endpoints", "web", not_ready)

    def failed(obj):
        obj["status"] = {"failed": 1, "startTime": STAMP, "conditions": [_status("FailureTarget"), _status("Failed")]}
    _set("Job", "batch", failed, subresource="status")
    store.delete(by_kind("Lease"), NS, "doomed")
    between = store.current_revision()
    _set("Lease", "leader", _holder("node-c"))
    return {"before": before, "between": between, "after": store.current_revision()}


def page(client, path: str, at: str = ""):
    joiner = "&" if "?" in path else "?"
    r = client.get(path + (f"{joiner}at={at}" if at else ""))
    body = b"".join(r.streaming_content) if r.streaming else r.content   # (an export streams)
    return r.status_code, unescape(body.decode())


def rows(html: str) -> set[str]:
    return set(re.findall(r'<(?:tr|article) id="[a-z]+-[^"]*--([^"]+)"', html))


def test_lists_details_and_overview_at_three_moments(story, login):
    client = login("admin")
    expect = {"before": ("node-a", {"leader", "doomed"}, False),
              "between": ("node-b", {"leader"}, True),
              "after": ("node-c", {"leader"}, True)}
    for moment, (holder, leases, failed) in expect.items():
        at = f"rv:{story[moment]}"
        code, html = page(client, f"/leases/?namespace={NS}", at)
        assert code == 200, html[:500]
        assert rows(html) == leases, (moment, rows(html))
        assert holder in html and "— not live" in html and "Back to now" in html
        assert "ws-connect" not in html   # no live socket
        code, html = page(client, f"/leases/{NS}/leader/", at)
        assert code == 200 and f"holderIdentity: {holder}" in html, moment
        if moment != "after":   # (its holder timeline too: nothing of what came later)
            assert "node-c" not in html, moment
        code, html = page(client, f"/endpoints/{NS}/web/", at)
        assert code == 200
        assert ("notReadyAddresses" in html) == failed, moment   # the address turned not ready with the failure
        code, html = page(client, f"/jobs/{NS}/batch/", at)
        assert code == 200 and ("type: Failed" in html) == failed, moment
        code, html = page(client, f"/jobs/?namespace={NS}&state=failed", at)
        assert code == 200 and rows(html) == ({"batch"} if failed else set()), moment
        code, html = page(client, f"/?namespace={NS}", at)
        assert code == 200 and "— not live" in html
        card = html[html.index(f'id="ns-{NS}"'):]
        card = card[:card.index("</article>")]
        assert f"{1 if failed else 0}\xa0failed" in card and f"{1 if failed else 0}\xa0not ready" in card, moment
        assert f"{1 if failed else 2}\xa0ready" in card, moment   # (10.0.0.2 turned not ready)
        # The list's state filters as of then: the not-ready Endpoints, the failed Job.
        assert rows(page(client, f"/endpoints/?namespace={NS}&state=not-ready", at)[1]) == ({"web"} if failed else set())
    # The deleted lease: present before, a "did not exist then" page between.
    assert page(client, f"/leases/{NS}/doomed/", f"rv:{story['before']}")[0] == 200
    code, html = page(client, f"/leases/{NS}/doomed/", f"rv:{story['between']}")
    assert code == 404 and "did not exist" in html
    # Live: no banner, the socket.
    code, html = page(client, f"/leases/?namespace={NS}")
    assert code == 200 and "not live" not in html and "ws-connect" in html


def test_time_and_revision_forms_agree(story, login):
    client = login("admin")
    for moment in ("before", "between"):
        written = asof.written_at(story[moment]).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        by_rv = page(client, f"/leases/?namespace={NS}", f"rv:{story[moment]}")[1]
        by_time = page(client, f"/leases/?namespace={NS}", written)[1]
        assert rows(by_rv) == rows(by_time)
        assert f"(revision {story[moment]})" in by_time


def test_bad_at_is_a_clear_400(story, login):
    client = login("admin")
    for bad, says in (("yesterday", "neither an RFC 3339 time"), ("rv:999999999", "has not been written"),
                      ("2999-01-01T00:00:00Z", "in the future")):
        code, text = page(client, "/leases/", bad)
        assert code == 400 and says in text, (bad, text)


def test_write_routes_refuse_at(story, login, api):
    client = login("admin")
    at = f"at=rv:{story['before']}"
    for path in (f"/leases/{NS}/leader/edit/?{at}", f"/leases/{NS}/leader/yaml/?{at}",
                 f"/leases/{NS}/leader/delete/?{at}", f"/leases/new/?{at}"):
        r = client.get(path)
        assert r.status_code == 400 and b"past moment" in r.content, path
    for path, data in ((f"/leases/{NS}/leader/delete/?{at}", {}), ("/leases/bulk/", {"at": f"rv:{story['before']}",
                       "action": "delete", "selected": f"{NS}/leader"}),
                       (f"/leases/{NS}/leader/release/?{at}", {}), (f"/leases/{NS}/doomed/restore/?{at}", {})):
        r = client.post(path, data)
        assert r.status_code == 400 and b"past moment" in r.content, path
    assert store.get(by_kind("Lease"), NS, "leader")["spec"]["holderIdentity"] == "node-c"   # nothing changed
    # The API ignores `at`, as any unknown parameter.
    r = api.patch(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/leader?at=rv:1",
                  {"spec": {"holderIdentity": "node-api"}})
    assert r.status_code == 200 and r.json()["spec"]["holderIdentity"] == "node-api"
    # And a past page offers no write button.
    html = page(client, f"/leases/{NS}/leader/", f"rv:{story['before']}")[1]
    assert "/edit/" not in html and 'action="/leases/bulk/' not in html


def test_share_this_view_keeps_at(story, login):
    client = login("admin")
    at = f"rv:{story['before']}"
    html = page(client, f"/leases/?namespace={NS}", at)[1]
    share = re.search(r'href="(/share/new/\?[^"]+)"', html).group(1)
    assert f"at={at.replace(':', '%3A')}" in share
    form = dict(re.findall(r'name="(\w+)" value="([^"]*)"', client.get(share).content.decode()))
    assert form["at"] == at   # the form carries it
    r, token = create_link(client, kind="Lease", namespace=NS, labelSelector="", at=at)
    assert token is not None, r.content.decode()[:2000]
    link = re.search(rf"(/s/{token}/\?[^\"<\s]+)", unescape(r.content.decode())).group(1)
    assert "at=rv" in link
    visitor = Client()
    landed = visitor.get(link)
    assert landed.status_code == 302 and "at=rv" in landed["Location"]
    code, html = page(visitor, landed["Location"])
    assert code == 200 and rows(html) == {"leader", "doomed"} and "— not live" in html


def test_history_window_survives_compaction_while_the_api_gets_410(story, login, api):
    client = login("admin")
    with override_settings(KUBEDASH_RETAIN_REVISIONS=0, KUBEDASH_RETAIN_SECONDS=0):
        call_command("compact", keep=0, keep_seconds=0)
    assert revlog.compacted_revision() == story["after"]
    # The API: an exact list at the old revision is gone.
    r = api.get(f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases?resourceVersion={story['before']}"
                "&resourceVersionMatch=Exact")
    assert r.status_code == 410 and r.json()["reason"] == "Expired"
    # The pages still travel back.
    code, html = page(client, f"/leases/?namespace={NS}", f"rv:{story['before']}")
    assert code == 200 and rows(html) == {"leader", "doomed"} and "node-a" in html


def test_past_the_history_window_the_pages_say_so(story, login):
    client = login("admin")
    written = asof.written_at(story["before"]).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    with override_settings(KUBEDASH_HISTORY_SECONDS=0):
        call_command("compact", keep=0, keep_seconds=0)
    assert revlog.history_horizon()[0] == story["after"]
    assert page(client, f"/leases/?namespace={NS}", written)[0] == 400
    code, text = page(client, f"/leases/?namespace={NS}", f"rv:{story['before']}")
    assert code == 400 and "before the history kubedash keeps" in text


def test_thinning_keeps_holder_changes_and_one_renewal_a_minute(db):
    res = by_kind("Lease")
    store.create(res, NS, lease("thin", holder="a", ns=NS))
    start = revlog.last_logged()
    t0 = asof.written_at(start)

    def renew(i):
        def change(obj):
            obj["spec"] = {**obj["spec"], "renewTime": micro(t0 + timedelta(seconds=10 * (i + 1)))}
        return change
    # 30 renewals 10 s apart (5 minutes), a holder change in the middle.
    for i in range(30):
        rv = _set("Lease", "thin", _holder("b") if i == 15 else renew(i))
        Revision.everywhere.filter(rv=rv).update(created=t0 + timedelta(seconds=10 * (i + 1)))
    holders_before = [o["spec"]["holderIdentity"] for _, o, _ in [(e, o, c) for e, o, c in
                                                                  revlog.history("Lease", NS, "thin", 100)]]
    removed = compaction.thin(start - 1, revlog.last_logged(), every=60)
    assert removed > 0
    kept = revlog.object_revisions("Lease", NS, "thin", 100)
    kept_times = sorted(created for _, _, _, created in kept)
    # Every holder change is kept...
    changes = [o["spec"]["holderIdentity"] for _, o, _ in revlog.history("Lease", NS, "thin", 100)]
    assert "b" in changes and changes[0] == "a"
    assert [h for i, h in enumerate(holders_before) if i == 0 or h != holders_before[i - 1]] == \
        [h for i, h in enumerate(changes) if i == 0 or h != changes[i - 1]]
    # ... and renewals at most once a minute (the newest kept too).
    gaps = [(b - a).total_seconds() for a, b in zip(kept_times, kept_times[1:])]
    assert len(kept) <= 2 + 300 // 60 + 2, len(kept)
    assert sum(1 for g in gaps if g < 60) <= 3, gaps   # (the holder change, the one after it, the newest)


def test_history_and_field_owners_as_of_then(story, login):
    client = login("admin")
    at = f"rv:{story['between']}"
    code, html = page(client, f"/leases/{NS}/leader/history/", at)
    assert code == 200 and "— not live" in html
    shown = {int(rv) for rv in re.findall(r'id="rev-(\d+)"', html)}
    assert shown and max(shown) <= story["between"] and story["after"] not in shown
    code, html = page(client, f"/leases/{NS}/leader/fields/", at)
    assert code == 200 and "node-b" in html and "node-c" not in html


def groups(html: str) -> dict[str, str]:
    """name -> what /changes/ says happened to it."""
    return {name: what for what, name in re.findall(
        r'<li class="change-group ev-([a-z-]+)" id="change-[a-z]+-[^"]*--([^"]+)"', html)}


def test_changes_lists_exactly_the_window(story, login):
    client = login("admin")
    code, html = page(client, f"/changes/?from=rv:{story['before']}&to=rv:{story['between']}")
    assert code == 200, html[:2000]
    assert groups(html) == {"leader": "changed", "web": "changed", "batch": "changed", "doomed": "deleted"}
    counts = re.findall(r"<li>(\d+ [^<]+)</li>", html)
    for said in ("1 lease changed holder", "1 job failed", "1 Endpoints object changed readiness", "1 lease deleted"):
        assert said in counts, counts
    # The diffs: the holder, the address, the job's condition.
    assert "spec.holderIdentity" in html and "node-a" in html and "node-b" in html
    assert "notReadyAddresses" in html and "Failed" in html
    # Links to the object at both ends.
    assert f'href="/leases/{NS}/leader/?at=rv%3A{story["before"]}"' in html
    # A window after it: only the second holder change; by kind and name; a window of nothing.
    later = page(client, f"/changes/?from=rv:{story['between']}")[1]
    assert groups(later) == {"leader": "changed"} and "node-c" in later
    assert groups(page(client, f"/changes/?from=rv:{story['before']}&to=rv:{story['between']}&kind=Job")[1]) \
        == {"batch": "changed"}
    assert groups(page(client, f"/changes/?from=rv:{story['after']}")[1]) == {}
    # Compare two revisions of one object (its History page's form).
    code, html = page(client, f"/changes/?from=rv:{story['before']}&to=rv:{story['after']}&kind=Lease&name=leader")
    assert groups(html) == {"leader": "changed"} and "node-a" in html and "node-c" in html and "node-b" not in html
    assert page(client, "/changes/?from=nonsense")[0] == 400


def test_changes_streams_its_rows_then_the_counts_and_pages(story, login, monkeypatch):
    """/changes/ is streamed: its head (the form) comes before any row, each row of the page as it
    is found, the counts and totals (of the whole window) last; page 2 holds the rest. Each
    piece may be read on another thread (the server's heavy child): no context spans two."""
    from dashboard.web import changes_views

    monkeypatch.setattr(changes_views, "PAGE", 2)
    client = login("admin")
    path = f"/changes/?from=rv:{story['before']}&to=rv:{story['between']}"
    r = client.get(path)
    assert r.status_code == 200 and r.streaming
    pieces, body = [], iter(r.streaming_content)
    while True:   # (each piece in a context of its own, as the heavy child's pool threads read them)
        try:
            pieces.append(contextvars.Context().run(next, body).decode())
        except StopIteration:
            break
    assert 'name="from"' in pieces[0] and "change-group" not in pieces[0]
    assert sum("change-group" in piece for piece in pieces) == 2 and "change-counts" in pieces[-1]
    first = unescape("".join(pieces))
    counts = re.findall(r"<li>(\d+ [^<]+)</li>", first)
    for said in ("1 lease changed holder", "1 job failed", "1 Endpoints object changed readiness", "1 lease deleted"):
        assert said in counts, counts   # (the whole window's, not the page's)
    assert "4 objects created, changed or deleted; objects 1–2 shown" in first
    nxt = re.search(r'href="(\?[^"]*page=2[^"]*)">Next page', first).group(1)
    second = page(client, f"/changes/{nxt}")[1]
    assert "Previous page" in second and "Next page" not in second
    assert len(groups(first)) == len(groups(second)) == 2
    assert {**groups(first), **groups(second)} == {"leader": "changed", "web": "changed", "batch": "changed",
                                                   "doomed": "deleted"}
    assert "Nothing was written in this window." in page(client, f"/changes/?from=rv:{story['after']}")[1]


def test_changes_streamed_through_the_real_server(kube_server):
    """Through `manage.py serve` (its lanes, the heavy child, whose pool threads read each piece
    in a context of their own): the page is sent in chunks, whole, and holds the change."""
    ns = "tt-changes"
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    status, _, made = kube_server.request("POST", path, lease("leader", holder="node-a", ns=ns, duration=3600))
    assert status == 201, made
    current = kube_server.request("GET", f"{path}/leader")[2]
    current["spec"]["holderIdentity"] = "node-b"
    assert kube_server.request("PUT", f"{path}/leader", current)[0] == 200
    # As a browser asks (a session, no bearer token: the pages' full middleware, the heavy child).
    conn = http.client.HTTPConnection("127.0.0.1", kube_server.http_port, timeout=30)
    conn.request("GET", f"/changes/?from=rv:{made['metadata']['resourceVersion']}&namespace={ns}",
                 headers={"Cookie": f"sessionid={kube_server.session('tt-changes', 'viewer')}", "Accept": "text/html"})
    response = conn.getresponse()
    text = unescape(response.read().decode())   # (a broken stream raises here: IncompleteRead)
    conn.close()
    assert response.status == 200, text[:300]
    assert response.getheader("Transfer-Encoding") == "chunked" and text.rstrip().endswith("</html>")
    assert groups(text) == {"leader": "changed"} and "1 lease changed holder" in text and "node-b" in text


def test_history_offers_comparing_two_revisions(story, login):
    client = login("admin")
    html = page(client, f"/leases/{NS}/leader/history/")[1]
    form = re.search(r'<form method="get" action="/changes/"[^>]*compare-revisions.*?</form>', html, re.S).group(0)
    options = re.findall(r'<option value="(rv:\d+)"', form)
    assert len(options) >= 6 and 'name="name" value="leader"' in form   # each select lists the revisions


def test_a_followed_cluster_travels_too(login):
    """A followed cluster's history is in the same log, under its cluster: ?cluster=prod&at= shows
    prod as of then, and the local pages at the same moment show only local objects."""
    from django.utils import timezone

    from dashboard.follow.models import Cluster
    from dashboard.kube import mirror as kmirror

    Cluster.objects.create(name="prod", server="https://prod.example:6443", credentials=b"x", state=Cluster.LIVE,
                           heartbeat_at=timezone.now(), last_event_at=timezone.now())

    def mirrored(holder: str, rv: int):
        obj = lease("prod-lease", holder=holder, ns="team-a")
        obj["metadata"].update(uid="u-1", creationTimestamp="2026-01-02T03:04:05Z", resourceVersion=str(rv))
        kmirror.mirror("prod", [kmirror.Mirrored(by_kind("Lease"), "team-a", "prod-lease", obj)])

    mirrored("prod-a", 100)
    then = store.current_revision()
    mirrored("prod-b", 101)
    store.create(by_kind("Lease"), NS, lease("local-one", ns=NS))
    client = login("admin")
    code, html = page(client, "/leases/?cluster=prod", f"rv:{then}")
    assert code == 200 and rows(html) == {"prod-lease"} and "prod-a" in html and "prod-b" not in html
    assert "cluster=prod" in re.search(r'href="([^"]*)" data-timebar-now', html).group(1)   # back to prod, now
    assert rows(page(client, "/leases/?cluster=prod")[1]) == {"prod-lease"}
    assert "prod-b" in page(client, "/leases/team-a/prod-lease/?cluster=prod")[1]
    assert "prod-a" in page(client, "/leases/team-a/prod-lease/?cluster=prod", f"rv:{then}")[1]
    assert rows(page(client, "/leases/", f"rv:{then}")[1]) == set()   # local: nothing yet then
    # Before kubedash followed prod: the page says so (no invented state).
    Cluster.objects.filter(name="prod").update(created=timezone.now())
    html = page(client, "/leases/?cluster=prod", f"rv:{then}")[1]
    assert "kubedash began following prod at" in html


def test_a_gap_in_following_is_marked_and_shows_nothing_as_current(login):
    """A followed cluster's spans not followed (between two FollowSpans): the time bar marks
    them, and a page as of a moment inside one says so and computes its states as last known
    (the Lease renewed just before the gap is held then, not guessed expired 30 s later)."""
    from django.utils import timezone

    from dashboard.follow.models import Cluster, FollowSpan
    from dashboard.kube import mirror as kmirror

    now = timezone.now()
    gap_from, gap_to = now - timedelta(seconds=120), now - timedelta(seconds=20)
    prod = Cluster.objects.create(name="prod", server="https://prod.example:6443", credentials=b"x",
                                  state=Cluster.LIVE, heartbeat_at=now, last_event_at=now,
                                  created=now - timedelta(seconds=300))
    FollowSpan.objects.create(cluster=prod, since=now - timedelta(seconds=290), until=gap_from)
    FollowSpan.objects.create(cluster=prod, since=gap_to, until=now)
    obj = lease("prod-lease", holder="prod-a", ns="team-a", duration=5)
    obj["spec"]["renewTime"] = micro(gap_from - timedelta(seconds=1))
    obj["metadata"].update(uid="u-1", creationTimestamp="2026-01-02T03:04:05Z", resourceVersion="100")
    kmirror.mirror("prod", [kmirror.Mirrored(by_kind("Lease"), "team-a", "prod-lease", obj)])
    Revision.everywhere.filter(cluster="prod").update(created=gap_from - timedelta(seconds=1))
    client = login("admin")
    live = page(client, "/leases/?cluster=prod")[1]
    marks = re.findall(r'class="timebar-gap"[^>]*data-gap-from="([^"]+)"><span class="vh">([^<]+)<', live)
    assert [text for _, text in marks] == [f"Not followed between {gap_from:%Y-%m-%d %H:%M:%S} UTC and "
                                           f"{gap_to:%Y-%m-%d %H:%M:%S} UTC"], marks
    inside = (gap_from + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    code, html = page(client, "/leases/?cluster=prod", inside)
    assert code == 200 and "Not followed between" in html and "no state is shown as current for that span" in html
    assert re.search(r'id="lease-team-a--prod-lease".*?data-state-label>held<', html, re.S), "guessed expired"
    # Inside a span: the bar marks the gap, the banner says nothing of it; the local pages have no gaps.
    followed = (gap_from - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    html = page(client, "/leases/?cluster=prod", followed)[1]
    assert "timebar-gap" in html and "no state is shown as current" not in html
    assert "timebar-gap" not in page(client, "/leases/")[1]
    # After the last span, while the cluster is not current: not followed until now.
    Cluster.objects.filter(pk=prod.pk).update(state=Cluster.STALE)
    FollowSpan.objects.filter(since=gap_to).update(until=now - timedelta(seconds=10))
    html = page(client, "/leases/?cluster=prod", (now - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))[1]
    assert "and now: no state is shown as current" in html


def test_compaction_prunes_follow_spans_before_the_history_cut(login):
    """When compaction cuts the pages' history, the FollowSpans that ended before the cut go
    (follow/models.py FollowSpan.prune), but a span straddling the cut stays, and so does the last
    one before it when none straddles: a page as of a moment in the gap after the cut still says
    when that gap began."""
    from django.utils import timezone

    from dashboard.follow.models import Cluster, FollowSpan

    now = timezone.now()
    days = [now - timedelta(days=d) for d in range(11)]   # (days[3]: 3 days ago)
    res = by_kind("Lease")
    store.create(res, NS, lease("old", holder="a", ns=NS))
    Revision.everywhere.filter(rv=revlog.last_logged()).update(created=days[3])
    store.create(res, NS, lease("new", holder="a", ns=NS))   # (written now)
    made = {"created": days[10], "credentials": b"x", "state": Cluster.LIVE, "heartbeat_at": now}
    prod = Cluster.objects.create(name="prod", server="https://prod.example:6443", **made)
    stage = Cluster.objects.create(name="stage", server="https://stage.example:6443", **made)
    spans = {
        "prod-oldest": (prod, days[9], days[8]), "prod-old": (prod, days[6], days[5]),
        "prod-straddles": (prod, days[4], days[1]), "prod-now": (prod, now - timedelta(hours=6), now),
        "stage-oldest": (stage, days[9], days[8]), "stage-last-before": (stage, days[6], days[5]),
        "stage-now": (stage, days[1], now),
    }
    ids = {label: FollowSpan.objects.create(cluster=c, since=a, until=b).pk for label, (c, a, b) in spans.items()}

    call_command("compact", keep=0, keep_seconds=0, history_seconds=2 * 24 * 3600)

    assert revlog.history_horizon()[1] == days[3]   # (the cut: when the newest revision before it was written)
    left = {label for label, pk in ids.items() if FollowSpan.objects.filter(pk=pk).exists()}
    assert left == {"prod-straddles", "prod-now", "stage-last-before", "stage-now"}, left
    # In stage's gap after the cut, the gap still begins where following stopped, not at `created`.
    assert stage.gap_at(days[2]) == (days[5], days[1])
    assert prod.gap_at(days[2]) is None
    # A later cut with nothing before it newer: no more go (the last one before the cut stays).
    assert FollowSpan.prune(days[3]) == 0


def test_a_page_as_of_then_has_the_heavy_lanes_pause_points(login, monkeypatch):
    """Filling the past's tables (asof._fill) and rendering a page's rows pause every
    yielding.ROWS rows: in the heavy child those are where its Pacer lets renewals go first
    (docs/BENCHMARKS.md, "Time travel under load"), as a long list's reading does."""
    from dashboard.kube import yielding

    res = by_kind("Lease")
    for i in range(300):
        store.create(res, NS, lease(f"many-{i:03d}", holder="a", ns=NS))
    then = f"rv:{store.current_revision()}"
    store.create(res, NS, lease("later", holder="a", ns=NS))
    where = []
    monkeypatch.setattr(yielding, "pause", lambda: where.append(_caller_outside(yielding.__file__)))
    with asof.pinned(asof.At(rv=int(then[3:]), moment=asof.written_at(int(then[3:])), asked=then)):
        pass
    assert "_fill" in where, where
    where.clear()
    code, html = page(login("admin"), f"/leases/?namespace={NS}&limit=500", then)
    assert code == 200 and len(rows(html)) == 300 and "later" not in rows(html)
    assert {"_fill", "page_context", "render"} <= set(where), where


def _caller_outside(path: str) -> str:
    """The name of the innermost function on the stack that is not in `path` (nor a generator
    expression's frame)."""
    import sys

    frame = sys._getframe(1)
    while frame.f_code.co_filename == path or frame.f_code.co_name.startswith("<"):
        frame = frame.f_back
    return frame.f_code.co_name


def test_a_page_in_thinned_time_says_so(story, login):
    client = login("admin")
    call_command("compact", keep=0, keep_seconds=0)
    html = page(client, f"/leases/?namespace={NS}", f"rv:{story['before']}")[1]
    assert "shown to the minute" in html
    assert "shown to the minute" not in page(client, f"/leases/?namespace={NS}")[1]


def test_events_list_travels(story, login):
    code, html = page(login("admin"), "/events/", f"rv:{story['before']}")
    assert code == 200 and "— not live" in html


def test_sorted_filtered_and_paged_lists_as_of_then(story, login):
    client = login("admin")
    at = f"rv:{story['before']}"
    store.create(by_kind("Lease"), NS, lease("zeta", holder="node-z", ns=NS))   # (after every moment here)
    # Sorted by holder, descending: then, node-x (doomed) before node-a (leader).
    html = page(client, f"/leases/?namespace={NS}&sort=-holder", at)[1]
    assert html.index(f'id="lease-{NS}--doomed"') < html.index(f'id="lease-{NS}--leader"') and "zeta" not in rows(html)
    # Paged one a page: the next page's link keeps `at`, and shows the same past.
    first = page(client, f"/leases/?namespace={NS}&limit=1", at)[1]
    assert rows(first) == {"doomed"}
    nxt = re.search(r'href="([^"]*)" rel="next"', first).group(1)
    assert "at=rv" in nxt
    second = client.get(f"/leases/{nxt}" if nxt.startswith("?") else nxt)
    assert second.status_code == 200 and rows(unescape(second.content.decode())) == {"leader"}
    assert "node-a" in second.content.decode()
    # A state filter: renewed a week ago, both leases had expired then already.
    assert rows(page(client, f"/leases/?namespace={NS}&state=expired", at)[1]) == {"leader", "doomed"}
    # A lease renewed an hour ago for 60 s: held, with its countdown, at 30 s after; expired now.
    hour_ago = asof.written_at(store.current_revision()) - timedelta(hours=1)
    obj = lease("clock", holder="node-t", ns=NS, duration=60)
    obj["spec"]["renewTime"] = micro(hour_ago)
    rv = int(store.create(by_kind("Lease"), NS, obj).object["metadata"]["resourceVersion"])
    Revision.everywhere.filter(rv=rv).update(created=hour_ago)
    then = (hour_ago + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    html = page(client, f"/leases/?namespace={NS}&state=held", then)[1]
    assert rows(html) == {"clock"} and re.search(r"expires in 3[01]s", html)
    assert rows(page(client, f"/leases/?namespace={NS}&state=expired")[1]) >= {"clock"}
    # The share form says the view is as of then.
    assert "(not live)" in page(client, f"/share/new/?kind=Lease&namespace={NS}&at={at}")[1]


def test_pages_that_do_not_travel_have_no_time_bar(story, login):
    client = login("admin")
    assert 'id="asof-banner"' not in page(client, "/search/?q=leader")[1]
    assert 'id="asof-banner"' in page(client, "/leases/")[1]


def test_exports_and_columns_travel_too(story, login):
    """A list's export (`?format=`) and chosen columns as of then: the file holds the objects as
    they were, not as they are."""
    import json as jsonlib

    client = login("admin")
    for moment, holder, names in (("before", "node-a", {"leader", "doomed"}), ("after", "node-c", {"leader"})):
        status, body = page(client, f"/leases/?namespace={NS}&format=json", f"rv:{story[moment]}")
        assert status == 200, body[:300]
        items = {o["metadata"]["name"]: o for o in jsonlib.loads(body)["items"]}
        assert set(items) == names and items["leader"]["spec"]["holderIdentity"] == holder, moment
        status, body = page(client, f"/leases/?namespace={NS}&format=csv&sort=name", f"rv:{story[moment]}")
        assert status == 200 and holder in body and ("doomed" in body) == ("doomed" in names), (moment, body[:300])
    status, body = page(client, f"/leases/?namespace={NS}&columns=name,holder", f"rv:{story['before']}")
    assert status == 200 and "node-a" in body and "node-c" not in body


def test_an_export_as_of_then_through_the_real_server(kube_server):
    """The export's body is sent by the server after the request's pinned block: through
    `manage.py serve` (its own threads and contexts, not the test client's), as of then too."""
    import json as jsonlib

    ns = "tt-live"
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    status, _, made = kube_server.request("POST", path, lease("leader", holder="node-a", ns=ns, duration=3600))
    assert status == 201, made
    before = made["metadata"]["resourceVersion"]
    kube_server.request("POST", path, lease("doomed", holder="node-x", ns=ns))
    current = kube_server.request("GET", f"{path}/leader")[2]
    current["spec"]["holderIdentity"] = "node-b"
    assert kube_server.request("PUT", f"{path}/leader", current)[0] == 200
    cookie = {"Cookie": f"sessionid={kube_server.session('tt-export', 'viewer')}"}
    for fmt in ("json", "csv"):
        status, headers, body = kube_server.request(
            "GET", f"/leases/?namespace={ns}&format={fmt}&at=rv:{before}", headers=cookie)
        text = body.decode() if isinstance(body, bytes) else jsonlib.dumps(body)
        assert status == 200, (fmt, text[:300])
        assert "node-a" in text and "node-b" not in text and "doomed" not in text, (fmt, text[:500])

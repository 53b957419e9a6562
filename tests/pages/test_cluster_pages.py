"""The pages of followed clusters (web/cluster_scope.py): `?cluster=` on every page and every
link, the header's selector and the overview's table across clusters, the stale banner, the
read-only pages and refused writes, share links pinned to a cluster, and the websocket following
the page's cluster. Django's test client and the real consumer (through the real ASGI stack
where a session matters)."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.utils import timezone

from manifests import endpoints, job, lease
from page_helpers import SHARE_TOKEN, connect, open_socket, push_with, pushed_until, receive_until

# CI runs this module again on PostgreSQL (.ci/run selects it by the marker).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.portable]

# ---------------------------------------------------------------------------------------------
# Fixtures and helpers


def upstream(obj: dict, rv: int, uid: str) -> dict:
    """An object as a followed cluster serves it (its own uid and resourceVersion)."""
    meta = obj["metadata"]
    meta.update(uid=uid, creationTimestamp="2026-01-02T03:04:05Z", resourceVersion=str(rv))
    return obj


def mirror(cluster: str, kind: str, obj: dict) -> None:
    from dashboard.kube import mirror as kmirror, registry

    meta = obj["metadata"]
    kmirror.mirror(cluster, [kmirror.Mirrored(registry.by_kind(kind), meta["namespace"], meta["name"], obj)])


def follow(name: str, **state):
    from dashboard.follow.models import Cluster

    fields = {"state": Cluster.LIVE, "heartbeat_at": timezone.now(), "last_event_at": timezone.now(), **state}
    return Cluster.objects.create(name=name, server=f"https://{name}.example:6443", credentials=b"x", **fields)


def local(kind: str, obj: dict) -> dict:
    from dashboard.kube import registry, store

    return store.create(registry.by_kind(kind), obj["metadata"]["namespace"], obj).object


@pytest.fixture
def world(transactional_db):
    """Local objects, a followed "prod" (a lease, endpoints, a job) and a followed "staging"."""
    local("Lease", lease("local-lease", holder="local-holder", ns="team-a"))
    follow("prod")
    follow("staging")
    mirror("prod", "Lease", upstream(lease("prod-lease", holder="prod-holder", ns="team-a"), 100, "u-1"))
    mirror("prod", "Lease", upstream(lease("prod-other", holder="prod-holder-2", ns="team-a"), 101, "u-2"))
    mirror("prod", "Endpoints", upstream(endpoints("prod-svc", ns="team-a", ips=("10.7.7.7",),
                                                   not_ready=("10.7.7.8",)), 102, "u-3"))
    mirror("prod", "Job", upstream(job("prod-job", ns="team-a", image="prod-image"), 103, "u-4"))
    mirror("staging", "Lease", upstream(lease("staging-lease", holder="staging-holder", ns="team-a"), 7, "u-5"))


PROD_SECRETS = ("prod-lease", "prod-holder", "prod-svc", "10.7.7.7", "prod-job")


def html(response) -> str:
    return response.content.decode()


def hrefs(page: str) -> list[str]:
    return [h.replace("&amp;", "&") for h in re.findall(r'(?:href|action)="([^"#]*)"', page)]


# ---------------------------------------------------------------------------------------------
# 1. ?cluster= on every page, and on every link


def test_pages_show_the_cluster_asked_for(world, login):
    c = login("admin")
    prod = html(c.get("/leases/?cluster=prod"))
    assert "prod-lease" in prod and "prod-holder" in prod and "local-lease" not in prod
    here = html(c.get("/leases/"))
    assert "local-lease" in here and "prod-lease" not in here and "staging-lease" not in here
    assert "staging-lease" in html(c.get("/leases/?cluster=staging"))
    detail = c.get("/leases/team-a/prod-lease/?cluster=prod")
    assert detail.status_code == 200 and "prod-holder" in html(detail)
    assert c.get("/leases/team-a/prod-lease/").status_code == 404   # not a local object
    for path in ("/endpoints/team-a/prod-svc/", "/jobs/team-a/prod-job/", "/leases/team-a/prod-lease/history/",
                 "/leases/team-a/prod-lease/fields/"):
        assert c.get(path + "?cluster=prod").status_code == 200, path
    download = c.get("/leases/team-a/prod-lease/?cluster=prod&download=yaml")
    assert "holderIdentity: prod-holder" in html(download)


def test_every_link_keeps_the_cluster(world, login):
    c = login("admin")
    pages = {
        "/?cluster=prod": ("/leases/?namespace=team-a&cluster=prod",),
        "/leases/?cluster=prod&limit=1": ("/leases/team-a/prod-lease/?cluster=prod",),
        "/endpoints/?cluster=prod": ("/endpoints/team-a/prod-svc/?cluster=prod", "?namespace=team-a&cluster=prod"),
        "/jobs/?cluster=prod": ("/jobs/team-a/prod-job/?cluster=prod",),
        "/leases/team-a/prod-lease/?cluster=prod": (
            "/leases/?cluster=prod", "/leases/?namespace=team-a&cluster=prod",
            "/leases/team-a/prod-lease/history/?cluster=prod", "/leases/team-a/prod-lease/fields/?cluster=prod",
            "/leases/team-a/prod-lease/?download=yaml&cluster=prod"),
        "/search/?q=prod&cluster=prod": ("/leases/team-a/prod-lease/?cluster=prod",
                                         "/jobs/team-a/prod-job/?cluster=prod"),
    }
    for url, expected in pages.items():
        page = html(c.get(url))
        links = hrefs(page)
        for want in expected:
            assert want in links, (url, want)
        # Nav links (overview, each kind) and every link to a page stay in prod.
        assert "/?cluster=prod" in links and "/jobs/?cluster=prod" in links, url
        # (the overview's table across clusters links to the other clusters on purpose, and the
        # selector's form posts its own choice)
        rest = re.sub(r'<section class="panel clusters-overview".*?</section>|<form[^>]*class="cluster-switch".*?</form>',
                      "", page, flags=re.S)
        for link in hrefs(rest):
            if link.startswith(("/leases", "/jobs", "/endpoints", "/search", "?")) or link == "/":
                assert "cluster=prod" in link or link.startswith("/search"), (url, link)
        # Forms that GET another page carry the cluster in a hidden field.
        assert page.count('<input type="hidden" name="cluster" value="prod">') >= 1, url
    # Paging: the next page of a prod list stays in prod.
    page = html(c.get("/leases/?cluster=prod&limit=1"))
    nxt = re.search(r'href="([^"]*)" rel="next"', page).group(1).replace("&amp;", "&")
    assert "cluster=prod" in nxt and "prod-other" in html(c.get("/leases/" + nxt))
    # Sorted views (typed rows) of prod: prod's rows.
    assert "prod-other" in html(c.get("/leases/?cluster=prod&sort=-name"))
    # Local pages keep their plain addresses.
    assert "cluster=" not in "".join(hrefs(html(c.get("/leases/"))))


def test_unknown_cluster_is_404_and_the_api_ignores_the_parameter(world, login, make_api):
    c = login("admin")
    r = c.get("/leases/?cluster=nowhere")
    assert r.status_code == 404 and "No followed cluster is called “nowhere”" in html(r)
    assert c.get("/leases/?cluster=Bad_Name!").status_code == 404
    assert c.get("/leases/?cluster=local").status_code == 200
    api = make_api("admin")
    listed = api.get("/apis/coordination.k8s.io/v1/leases?cluster=prod").json()
    assert [i["metadata"]["name"] for i in listed["items"]] == ["local-lease"]


# ---------------------------------------------------------------------------------------------
# A viewer limited to a cluster


def test_a_viewer_limited_to_staging_sees_nothing_of_prod(world, login):
    c = login("viewer", username="staging-only", clusters=["staging"])
    for url in ("/leases/?cluster=prod", "/leases/team-a/prod-lease/?cluster=prod", "/?cluster=prod",
                "/search/?q=prod&cluster=prod", "/jobs/?cluster=prod", "/leases/team-a/prod-lease/history/?cluster=prod",
                "/leases/?cluster=nowhere"):   # (a limited viewer learns no other cluster's name)
        r = c.get(url)
        assert r.status_code == 403, url
        assert not any(s in html(r) for s in PROD_SECRETS if s not in url), url
    # Local is not theirs either: a page without ?cluster= lands on their cluster instead.
    r = c.get("/leases/?namespace=team-a")
    assert r.status_code == 302 and r["Location"] == "/leases/?namespace=team-a&cluster=staging"
    assert c.get("/tokens/")["Location"] == "/tokens/?cluster=staging"
    assert c.get("/leases/?cluster=local").status_code == 403
    ok = html(c.get("/leases/?cluster=staging"))
    assert "staging-lease" in ok and not any(s in ok for s in PROD_SECRETS)
    found = html(c.get("/search/?q=lease&cluster=staging"))
    assert "staging-lease" in found and "prod-lease" not in found and "local-lease" not in found
    overview = html(c.get("/?cluster=staging"))
    assert 'id="cluster-staging"' in overview and 'id="cluster-prod"' not in overview
    assert 'id="cluster-local"' not in overview and "prod" not in overview
    assert "cluster-select" not in overview   # one cluster only: nothing to choose


@pytest.mark.asyncio
async def test_limited_viewer_websocket_refused_for_prod(world):
    from dashboard.access.models import Profile
    from dashboard.access.tokens import ensure_user

    user = await sync_to_async(ensure_user)("ws-staging", "viewer")
    await sync_to_async(Profile.objects.filter(user=user).update)(clusters=["staging"])
    for query in ("view=leases&cluster=prod", "view=overview&cluster=prod", "view=lease&namespace=team-a&"
                  "name=prod-lease&cluster=prod", "view=leases"):
        comm, ok, code = await connect(user, query)
        assert not ok and code == 4403, query
    comm, ok, _ = await connect(user, "view=leases&cluster=staging&rv=1")
    assert ok
    got = await comm.receive_from(timeout=5)   # the catch-up from rv 1: staging's objects only
    assert "staging-lease" in got and not any(s in got for s in PROD_SECRETS)
    await sync_to_async(mirror)("prod", "Lease", upstream(lease("prod-new", holder="prod-holder", ns="team-a"),
                                                          200, "u-9"))
    # Nothing of prod, in the rest of the catch-up nor of that prod write, up to a later staging
    # write's push.
    await sync_to_async(mirror)("staging", "Lease", upstream(lease("staging-lease", holder="staging-later",
                                                                   ns="team-a"), 8, "u-5"))
    for got in await pushed_until(comm, "staging-later"):
        assert not any(s in got for s in (*PROD_SECRETS, "prod-new")), got
    await comm.disconnect()


# ---------------------------------------------------------------------------------------------
# 2. The selector and the overview across clusters


def test_selector_lists_the_clusters_one_may_see(world, login):
    page = html(login("admin").get("/jobs/?cluster=prod"))
    select = page.split('id="cluster-select"')[1].split("</select>")[0]
    # ("*": every cluster at once, issue 40)
    assert re.findall(r'<option value="([^"]+)"', select) == ["local", "prod", "staging", "*"]
    assert '<option value="prod" selected>' in select
    assert '<label for="cluster-select">Cluster</label>' in page
    assert '<form method="get" action="/jobs/" class="cluster-switch"' in page   # the same page, in the chosen one
    limited = html(login("viewer", username="two", clusters=["local", "prod"]).get("/"))
    assert re.findall(r'<option value="([^"]+)"', limited.split('id="cluster-select"')[1].split("</select>")[0]) \
        == ["local", "prod", "*"]


def test_no_selector_without_followed_clusters(login):
    local("Lease", lease("only-local", ns="team-a"))
    page = html(login("admin").get("/leases/"))
    assert "cluster-select" not in page and "cluster-banner" not in page and "Clusters</h2>" not in html(
        login("admin").get("/"))


def test_overview_has_a_row_per_cluster(world, login):
    from dashboard.follow.models import Cluster

    Cluster.objects.filter(name="staging").update(state=Cluster.STALE, message="connection refused")
    page = html(login("admin").get("/"))
    table = page.split('id="cluster-rows"')[1].split("</tbody>")[0]
    rows = {m: table.split(f'id="cluster-{m}"')[1].split("</tr>")[0] for m in ("local", "prod", "staging")}
    assert 'href="/?cluster=prod"' in rows["prod"] and 'href="/"' in rows["local"]
    assert "live" in rows["prod"] and "stale" in rows["staging"]
    assert '<tr id="cluster-staging" class="is-stale" data-as-of="' in table and '<tr id="cluster-prod">' in table
    assert "not live: no word since" in rows["staging"] and "no word" not in rows["prod"]
    # Each kind's counts over the whole cluster, linking to that cluster's list.
    prod = rows["prod"]
    assert 'href="/leases/?cluster=prod">2<' in prod and 'href="/endpoints/?cluster=prod">1<' in prod
    assert "1&nbsp;ready" in prod and "1&nbsp;not ready" in prod          # Endpoints addresses
    assert 'href="/jobs/?cluster=prod">1<' in prod
    assert 'href="/leases/?cluster=staging">1<' in rows["staging"]
    assert 'href="/leases/">1<' in rows["local"]
    assert "data-ago-since" in prod   # time since the last event, ticking in live.js


# ---------------------------------------------------------------------------------------------
# 3. The stale banner


@pytest.mark.parametrize("state,text", [
    ({"state": "stale", "message": "dial tcp: connection refused"},
     "the watch is down — dial tcp: connection refused"),
    ({"state": "syncing", "message": "relisting after 410 Gone"}, "the watch is relisting — relisting after 410 Gone"),
    ({"heartbeat_at_age": 60}, "the watch has not confirmed it is up"),
    ({"state": "syncing", "heartbeat_at": None, "last_event_at": None}, "still syncing for the first time"),
])
def test_stale_banner(world, login, state, text):
    from dashboard.follow.models import Cluster

    age = state.pop("heartbeat_at_age", None)
    if age:
        state["heartbeat_at"] = timezone.now() - timedelta(seconds=age)
    Cluster.objects.filter(name="prod").update(**state)
    c = login("admin")
    for url in ("/leases/?cluster=prod", "/leases/team-a/prod-lease/?cluster=prod", "/?cluster=prod",
                "/search/?q=x&cluster=prod", "/leases/team-a/prod-lease/history/?cluster=prod"):
        page = html(c.get(url))
        banner = page.split('id="cluster-banner"')[1].split("</div>")[0]
        lead = ("Not live: prod is still syncing" if "first time" in text
                else "Not live: no word from prod since <time datetime=")
        assert 'role="status"' in banner and lead in banner, url
        assert text in banner and "data-ago-since" in banner and "data-as-of" in banner, url
        row = Cluster.objects.get(name="prod")
        if row.last_event_at is None:
            assert "No change read from it yet." in banner, url
        else:   # the time since the last change read upstream, ticking
            assert "The last change read from it: <time" in banner and banner.count("data-ago-since") == 2, url


def test_a_stale_clusters_states_are_as_of_its_last_word(world, login):
    """A Lease that had 5 s left when prod was last heard from: while prod is not current it is
    shown held as of then (a guess that it expired is not shown as a fact), on the list, the
    detail page and the Overview's clusters table; once prod is current again, it is expired."""
    from dashboard.follow.models import Cluster

    now = timezone.now()
    renewed = (now - timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    item = lease("silent-leader", holder="api-1", ns="team-a", duration=15)
    item["spec"]["renewTime"] = renewed
    mirror("prod", "Lease", upstream(item, 200, "u-41"))
    heard = now - timedelta(seconds=20)
    Cluster.objects.filter(name="prod").update(state=Cluster.STALE, heard_at=heard, heartbeat_at=heard,
                                               message="leases: no word from the API server for 60 s")
    c = login("admin")

    def state_of(url: str, marker: str) -> str:
        page = html(c.get(url))
        part = page.split(marker)[1]
        return re.search(r"data-state-label>([^<]*)<", part).group(1)

    row = 'id="lease-team-a--silent-leader"'
    assert state_of("/leases/?namespace=team-a&cluster=prod", row) == "held"
    detail = html(c.get("/leases/team-a/silent-leader/?cluster=prod"))
    assert re.search(r"data-state-label>held<", detail) and "expires in 5s" in detail
    banner = detail.split('id="cluster-banner"')[1].split("</div>")[0]
    assert "Not live: no word from prod since" in banner and "as of then" in banner
    overview = html(c.get("/"))
    prod_row = overview.split('id="cluster-prod"')[1].split("</tr>")[0]
    assert prod_row.startswith(' class="is-stale" data-as-of="') and "not live: no word since" in prod_row

    Cluster.objects.filter(name="prod").update(state=Cluster.LIVE, heard_at=timezone.now(),
                                               heartbeat_at=timezone.now(), message="")
    assert state_of("/leases/?namespace=team-a&cluster=prod", row) == "expired"


def test_no_banner_while_current_or_local(world, login):
    c = login("admin")
    page = html(c.get("/leases/?cluster=prod"))
    assert '<div id="cluster-banner"></div>' in page and "Not live" not in page
    assert "cluster-banner" not in html(c.get("/leases/"))


# ---------------------------------------------------------------------------------------------
# 4. Read-only


READ_ONLY = "prod is followed read-only: change it in the cluster itself."


def test_no_change_offered_for_followed_objects(world, login):
    c = login("admin")
    listing = html(c.get("/leases/?cluster=prod"))
    assert READ_ONLY in listing and "new-object" not in listing and "bulk-form" not in listing
    # No bulk bar: the list is not a bulk list (its row checkboxes are hidden, as for viewers).
    assert "data-bulk-all" not in listing and "leases-table bulk" not in listing
    for url in ("/leases/team-a/prod-lease/?cluster=prod", "/endpoints/team-a/prod-svc/?cluster=prod",
                "/jobs/team-a/prod-job/?cluster=prod"):
        page = html(c.get(url))
        assert READ_ONLY in page, url
        # The buttons are shown disabled, with why (issue 27: buttons follow permission).
        assert "<fieldset disabled" in page and f"Not available: {READ_ONLY}" in page, url
        for gone in ("/edit/", "/yaml/", "/delete/", "release/", "readiness/", "suspend/",
                     "edit-readiness"):
            assert gone not in page, (url, gone)
    # Local pages still offer them.
    assert "new-object" in html(c.get("/leases/")) and READ_ONLY not in html(c.get("/leases/"))


def test_writes_to_followed_objects_are_refused(world, login):
    from dashboard.kube import registry, store
    from dashboard.access import clusters

    def holder():
        with clusters.within("prod"):
            return store.get(registry.by_kind("Lease"), "team-a", "prod-lease")["spec"]["holderIdentity"]

    c = login("admin")
    base = "/leases/team-a/prod-lease/"
    attempts = [
        ("get", base + "edit/"), ("post", base + "edit/"), ("get", base + "yaml/"), ("post", base + "yaml/"),
        ("post", base + "delete/"), ("post", base + "release/"), ("get", "/leases/new/"), ("post", "/leases/new/"),
        ("post", "/leases/bulk/"), ("post", "/leases/bulk-undo/"), ("get", base + "actions/"),
        ("post", "/jobs/team-a/prod-job/suspend/"), ("post", "/endpoints/team-a/prod-svc/readiness/"),
    ]
    data = {"holder": "prod-holder", "selected": "team-a/prod-lease", "action": "delete", "confirm": "1",
            "suspend": "true", "ip": "10.7.7.7", "ready": "false", "name": "x", "namespace": "team-a",
            "yaml": "apiVersion: v1", "resourceVersion": "1"}
    for method, url in attempts:
        r = getattr(c, method)(url + "?cluster=prod", data if method == "post" else None)
        assert r.status_code == 405, (method, url, r.status_code)
        assert READ_ONLY in html(r), url
    assert holder() == "prod-holder"
    with clusters.within("prod"):
        assert store.get(registry.by_kind("Job"), "team-a", "prod-job")["spec"].get("suspend") in (None, False)


# ---------------------------------------------------------------------------------------------
# 5. Share links scoped to a cluster


def test_share_link_made_on_prod_shows_prod_only(world, login):
    from dashboard.access.models import ShareLink

    editor = login("editor", username="sharer")
    page = html(editor.get("/leases/?cluster=prod&namespace=team-a"))
    share = re.search(r'href="(/share/new/[^"]+)"', page).group(1).replace("&amp;", "&")
    assert "cluster=prod" in share
    form = html(editor.get(share))
    assert "of cluster prod" in form and 'action="/share/new/?cluster=prod"' in form
    r = editor.post("/share/new/?cluster=prod", {"kind": "Lease", "namespace": "team-a", "label": "prod on-call",
                                                 "expiry": "1d"})
    token = SHARE_TOKEN.search(html(r)).group(1)
    link = ShareLink.objects.get()
    assert link.cluster == "prod"
    listing = html(editor.get("/share/"))
    assert "<td>prod</td>" in listing and "of cluster prod" in listing

    visitor = Client()
    assert visitor.get(f"/s/{token}/").status_code == 302
    shown = html(visitor.get("/leases/?namespace=team-a"))
    assert "prod-lease" in shown and "local-lease" not in shown
    assert 'ws-connect="/ws/live/?view=leases&amp;namespace=team-a&amp;cluster=prod' in shown
    assert "cluster-select" not in shown   # pinned: nothing to choose
    assert "prod-holder" in html(visitor.get("/leases/team-a/prod-lease/?cluster=prod"))
    for url in ("/leases/?namespace=team-a&cluster=local", "/leases/?namespace=team-a&cluster=staging",
                "/leases/team-a/local-lease/?cluster=local"):
        r = visitor.get(url)
        assert r.status_code == 403 and "local-holder" not in html(r) and "staging" not in html(r).split(
            "<main")[1], url
    # A local link keeps showing local objects.
    r = editor.post("/share/new/", {"kind": "Lease", "namespace": "team-a", "label": "local", "expiry": "1d"})
    assert ShareLink.objects.get(label="local").cluster == "local"


def test_share_link_of_a_cluster_the_creator_may_no_longer_see_stops(world, login):
    from dashboard.access.models import Profile, ShareLink

    editor = login("editor", username="limited-sharer", clusters=["prod"])
    r = editor.post("/share/new/?cluster=prod", {"kind": "Lease", "namespace": "team-a", "label": "x", "expiry": "1d"})
    token = SHARE_TOKEN.search(html(r)).group(1)
    visitor = Client()
    visitor.get(f"/s/{token}/")
    assert "prod-lease" in html(visitor.get("/leases/?namespace=team-a"))
    Profile.objects.filter(user__username="limited-sharer").update(clusters=["staging"])
    assert visitor.get("/leases/?namespace=team-a").status_code == 410
    assert ShareLink.objects.count() == 1
    # And a limited editor may not share a cluster outside their list.
    assert editor.post("/share/new/?cluster=local", {"kind": "Lease", "namespace": "team-a", "label": "y",
                                                      "expiry": "1d"}).status_code == 403


@pytest.mark.asyncio
async def test_share_link_for_prod_is_live_and_cannot_see_local(world, login):
    editor = await sync_to_async(login)("editor", "ws-sharer")
    r = await sync_to_async(editor.post)("/share/new/?cluster=prod", {"kind": "Lease", "namespace": "team-a",
                                                                       "label": "x", "expiry": "1d"})
    token = SHARE_TOKEN.search(html(r)).group(1)
    visitor = Client()
    await sync_to_async(visitor.get)(f"/s/{token}/")
    page = html(await sync_to_async(visitor.get)("/leases/?namespace=team-a"))
    ws = re.search(r'ws-connect="/ws/live/\?([^"]+)"', page).group(1).replace("&amp;", "&")
    comm, ok, _ = await open_socket(visitor, ws)
    assert ok
    # A local write with the same namespace: never pushed to the prod page. The first message
    # is the later upstream write's (no refresh at connect, no push of the local write).
    await sync_to_async(local)("Lease", lease("local-new", holder="local-new-holder", ns="team-a"))
    await sync_to_async(mirror)("prod", "Lease", upstream(lease("prod-lease", holder="moved-upstream",
                                                                ns="team-a"), 150, "u-1"))
    pushed = await comm.receive_from(timeout=5)
    assert "local-new" not in pushed
    assert "moved-upstream" in pushed and 'href="/leases/team-a/prod-lease/?cluster=prod"' in pushed
    await comm.disconnect()
    for query in ("view=leases&namespace=team-a", "view=leases&namespace=team-a&cluster=local",
                  "view=leases&namespace=team-a&cluster=staging"):
        comm, ok, code = await open_socket(visitor, query)
        assert not ok and code == 4403, query


# ---------------------------------------------------------------------------------------------
# The websocket follows the page's cluster


@pytest.mark.asyncio
async def test_websocket_of_a_cluster_page(world, login):
    from dashboard.access.tokens import ensure_user
    from dashboard.kube import store

    user = await sync_to_async(ensure_user)("ws-admin", "admin")
    client = await sync_to_async(login)("admin", "ws-admin")
    page = html(await sync_to_async(client.get)("/leases/?cluster=prod"))
    query = re.search(r'ws-connect="/ws/live/\?([^"]+)"', page).group(1).replace("&amp;", "&")
    assert "cluster=prod" in query
    comm, ok, _ = await connect(user, query)
    assert ok
    # The first message is the upstream write's: no refresh at connect, no push of the local write.
    await sync_to_async(local)("Lease", lease("local-2", holder="local-2-holder", ns="team-a"))
    await sync_to_async(mirror)("prod", "Lease", upstream(lease("prod-new", holder="new-upstream", ns="team-a"),
                                                          300, "u-10"))
    pushed = await comm.receive_from(timeout=5)
    assert "local-2" not in pushed
    assert "new-upstream" in pushed and "/leases/team-a/prod-new/?cluster=prod" in pushed
    await comm.disconnect()
    # The overview and a detail page of prod.
    rv = await sync_to_async(store.current_revision)()
    comm, ok, _ = await connect(user, f"view=lease&namespace=team-a&name=prod-new&cluster=prod&rv={rv}")
    assert ok
    await sync_to_async(mirror)("prod", "Lease", upstream(lease("prod-new", holder="again", ns="team-a"),
                                                          301, "u-10"))
    assert "again" in await comm.receive_from(timeout=5)
    await comm.disconnect()
    comm, ok, code = await connect(user, "view=leases&cluster=nowhere")
    assert not ok and code == 4403
    comm, ok, code = await connect(user, "view=leases&cluster=Bad!")
    assert not ok and code == 4400


@pytest.mark.asyncio
async def test_websocket_pushes_the_banner_when_the_copy_goes_stale(world, monkeypatch):
    from dashboard.access.tokens import ensure_user
    from dashboard.follow.models import Cluster
    from dashboard.web import consumers

    monkeypatch.setattr(consumers, "BANNER_SECONDS", 0.1)
    user = await sync_to_async(ensure_user)("ws-banner", "viewer")
    comm, ok, _ = await connect(user, "view=leases&cluster=prod")
    assert ok
    # The page's banner starts from the state it reads at connect: a prod write's push says it
    # has (the socket's reads and renders take turns on one thread). A catch-up may come first.
    await sync_to_async(mirror)("prod", "Lease", upstream(lease("prod-read", holder="read", ns="team-a"), 400, "u-11"))
    await push_with(comm, "prod-read")
    await sync_to_async(Cluster.objects.filter(name="prod").update)(state="stale", message="watch failed: EOF")
    got = await receive_until(comm, "cluster-banner")
    assert 'hx-swap-oob="true"' in got and "no word from prod since" in got and "watch failed: EOF" in got
    await sync_to_async(Cluster.objects.filter(name="prod").update)(state="live", heartbeat_at=timezone.now())
    got = await comm.receive_from(timeout=5)
    assert got.count("cluster-banner") == 1 and "Not live" not in got
    await comm.disconnect()


# ---------------------------------------------------------------------------------------------
# The user admin: limits a user to clusters


def test_user_admin_limits_clusters(login):
    from dashboard.access.models import Profile
    from dashboard.web.admin import ProfileForm

    c = login("admin")
    user = Profile.objects.get(user__username="page-admin").user
    user.is_staff = True
    user.save()
    page = html(c.get(f"/admin/auth/user/{user.pk}/change/"))
    assert 'name="kube_profile-0-clusters"' in page
    form = ProfileForm(data={"role": "viewer", "namespaces": "", "clusters": "staging, prod"},
                       instance=Profile.objects.get(user=user))
    assert form.is_valid(), form.errors
    assert form.save().clusters == ["staging", "prod"]


@pytest.mark.asyncio
async def test_websocket_closes_when_the_viewer_loses_the_cluster(world):
    """Access re-checks (the hub's notices, in a fresh context) run about the page's cluster."""
    from dashboard.access.models import Profile
    from dashboard.access.tokens import ensure_user

    user = await sync_to_async(ensure_user)("ws-narrowed", "viewer")
    comm, ok, _ = await connect(user, "view=leases&cluster=prod")
    assert ok
    # (A catch-up from rv 0 may come first: a prod write's push comes after it.)
    await sync_to_async(mirror)("prod", "Lease", upstream(lease("prod-first", holder="first", ns="team-a"), 400, "u-11"))
    await push_with(comm, "prod-first")

    def narrow(clusters):
        profile = Profile.objects.get(user=user)
        profile.clusters = clusters
        profile.save()   # (signals: an access notice every open channel of the user re-checks)

    await sync_to_async(narrow)(["prod", "staging"])   # still allowed: re-rendered, still prod's rows
    refreshed = await comm.receive_from(timeout=5)
    assert "prod-lease" in refreshed and "local-lease" not in refreshed
    # (Under load an earlier notice - the user's creation - may be re-checked late: its re-render,
    # made while prod was still allowed, is taken here, up to a later prod write's push, before
    # prod is taken away.)
    await sync_to_async(mirror)("prod", "Lease", upstream(lease("prod-second", holder="second", ns="team-a"), 401, "u-12"))
    for got in await pushed_until(comm, "prod-second"):
        assert "local-lease" not in got
    await sync_to_async(narrow)(["staging"])
    while True:
        out = await comm.receive_output(timeout=5)
        if out["type"] == "websocket.close":
            assert out["code"] == 4403
            break
        assert not any(s in out.get("text", "") for s in PROD_SECRETS)


@pytest.mark.asyncio
async def test_overview_clusters_panel_and_totals_follow_writes_and_state(world, login, settings):
    """The Overview's clusters panel and totals are live: a local write pushes them with the
    namespace cards; a followed cluster's objects and state (no local event) come with the
    next heartbeat."""
    from dashboard.follow.models import Cluster

    settings.KUBEDASH_LIVE_HEARTBEAT_SECONDS = 0.3
    admin = await sync_to_async(login)("admin", "ov-admin")
    page = html(await sync_to_async(admin.get)("/"))
    ws = re.search(r'ws-connect="/ws/live/\?([^"]+)"', page).group(1).replace("&amp;", "&")
    comm, ok, _ = await open_socket(admin, ws)
    assert ok

    async def until(predicate, what):
        for _ in range(50):
            text = await comm.receive_from(timeout=5)
            if predicate(text):
                return text
        raise AssertionError(f"no push with {what}")

    await sync_to_async(local)("Lease", lease("local-two", holder="h2", ns="team-b"))
    pushed = await until(lambda t: 'id="overview-totals"' in t, "the totals")
    assert 'id="ns-team-b"' in pushed                            # the cards
    totals = pushed.split('id="overview-totals"')[1].split("</ul>")[0]
    assert '<span class="n">2</span><span class="l">leases</span>' in totals
    local_row = pushed.split('id="cluster-local"')[1].split("</tr>")[0]
    assert 'href="/leases/">2<' in local_row                    # the clusters panel, this cluster's row
    # Upstream writes and a follower's state: no local event, the next beat brings them.
    await sync_to_async(mirror)("prod", "Lease", upstream(lease("prod-third", holder="p3", ns="team-a"), 160, "u-9"))
    await sync_to_async(Cluster.objects.filter(name="staging").update)(state=Cluster.STALE, message="refused")
    panel = await until(lambda t: 'id="clusters-panel"' in t and 'href="/leases/?cluster=prod">3<' in t
                        and '<tr id="cluster-staging" class="is-stale" data-as-of=' in t, "prod's 3 leases and staging stale")
    assert 'hx-swap-oob="true"' in panel
    await comm.disconnect()

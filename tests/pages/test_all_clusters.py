"""Every cluster at once (issue 40, web/all_clusters.py): the Overview's `/?cluster=*` counts,
per cluster the viewer may see, the leases without a holder, the Endpoints not ready, the failed
Jobs and the Warning Events of the last hour, each linked to that cluster's filtered list; a stale
followed cluster's counts say "as of"; the page's socket (`/ws/clusters/`) pushes a change in a
followed cluster. Django's test client and the real consumers, followed clusters as their
follower leaves them (kube/mirror.py)."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone as tz

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.utils import timezone

from manifests import endpoints, job, lease

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.portable]

AT = "2026-11-22T00:00:00Z"


def upstream(obj: dict, rv: int) -> dict:
    obj["metadata"].update(uid=f"u-{obj['metadata']['name']}", creationTimestamp="2026-01-02T03:04:05Z",
                           resourceVersion=str(rv))
    return obj


def mirror(cluster: str, kind: str, obj: dict) -> None:
    from dashboard.kube import mirror as kmirror, registry

    meta = obj["metadata"]
    kmirror.mirror(cluster, [kmirror.Mirrored(registry.by_kind(kind), meta["namespace"], meta["name"], obj)])


def follow(name: str, **state):
    from dashboard.follow.models import Cluster

    fields = {"state": Cluster.LIVE, "heartbeat_at": timezone.now(), "last_event_at": timezone.now(), **state}
    return Cluster.objects.create(name=name, server=f"https://{name}.example:6443", credentials=b"x", **fields)


def failed_job(name: str, ns: str) -> dict:
    obj = job(name, ns=ns)
    obj["status"] = {"failed": 1, "startTime": AT, "conditions": [
        {"type": kind, "status": "True", "lastProbeTime": AT, "lastTransitionTime": AT}
        for kind in ("FailureTarget", "Failed")]}
    return obj


def warning(name: str, ns: str, minutes_ago: float) -> dict:
    when = datetime.now(tz.utc) - timedelta(minutes=minutes_ago)
    stamp = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"kind": "Lease", "namespace": ns, "name": "x"}, "reason": "BackOff",
            "message": "backing off", "type": "Warning", "count": 1, "source": {"component": "test"},
            "firstTimestamp": stamp, "lastTimestamp": stamp}


def local(kind: str, obj: dict) -> None:
    from dashboard.kube import registry, store

    store.create(registry.by_kind(kind), obj["metadata"]["namespace"], obj)


@pytest.fixture
def world(transactional_db):
    """local: 2 leases without holder, 1 held; 1 Endpoints not ready, 1 ready; 1 Warning Event of the
    last hour, 1 older, 1 Normal. prod: 1 lease without holder, 2 Endpoints not ready, 2 failed Jobs
    and 1 running, 1 Warning Event (in team-b). staging: nothing to look at."""
    for name, holder in (("free-1", ""), ("free-2", ""), ("held", "node-a")):
        local("Lease", lease(name, holder=holder, ns="team-a"))
    local("Endpoints", endpoints("svc-bad", ns="team-a", not_ready=("10.0.0.9",)))
    local("Endpoints", endpoints("svc-ok", ns="team-a"))
    local("Event", warning("w-new", "team-a", 5))
    local("Event", warning("w-old", "team-a", 90))
    local("Event", {**warning("n-new", "team-a", 5), "type": "Normal"})
    follow("prod")
    follow("staging")
    rv = iter(range(100, 200))
    mirror("prod", "Lease", upstream(lease("p-free", holder="", ns="team-a"), next(rv)))
    mirror("prod", "Lease", upstream(lease("p-held", holder="h", ns="team-a"), next(rv)))
    for name, ns in (("p-svc-1", "team-a"), ("p-svc-2", "team-b")):
        mirror("prod", "Endpoints", upstream(endpoints(name, ns=ns, not_ready=("10.7.7.8",)), next(rv)))
    for name, ns in (("p-fail-1", "team-a"), ("p-fail-2", "team-b")):
        mirror("prod", "Job", upstream(failed_job(name, ns), next(rv)))
    mirror("prod", "Job", upstream(job("p-run", ns="team-a"), next(rv)))
    mirror("prod", "Event", upstream(warning("p-warn", "team-b", 2), next(rv)))
    mirror("staging", "Lease", upstream(lease("s-held", holder="h", ns="team-a"), next(rv)))


def counts(page: str) -> dict[str, dict[str, int]]:
    """{cluster: {count key: n}} as the page's table shows them."""
    out = {}
    for name, row in re.findall(r'<tr id="all-([^"]+)"[^>]*>(.*?)</tr>', page, re.S):
        out[name] = {key: int(n) for key, n in re.findall(r'data-count="([^"]+)"><a [^>]*>(\d+)<', row)}
    return out


def links(page: str, cluster: str) -> list[str]:
    row = re.search(rf'<tr id="all-{cluster}"[^>]*>(.*?)</tr>', page, re.S).group(1)
    return [h.replace("&amp;", "&") for h in re.findall(r'data-count="[^"]+"><a href="([^"]+)"', row)]


def test_every_cluster_counted_exactly_and_linked(world, login):
    c = login("admin")
    r = c.get("/?cluster=*")
    assert r.status_code == 200
    page = r.content.decode()
    assert counts(page) == {
        "local": {"unheld": 2, "not_ready": 1, "failed": 0, "warnings": 1},
        "prod": {"unheld": 1, "not_ready": 2, "failed": 2, "warnings": 1},
        "staging": {"unheld": 0, "not_ready": 0, "failed": 0, "warnings": 0},
    }
    assert links(page, "local") == ["/leases/?state=unheld", "/endpoints/?state=not-ready", "/jobs/?state=failed",
                                    "/events/?type=Warning"]
    assert links(page, "prod") == ["/leases/?state=unheld&cluster=prod", "/endpoints/?state=not-ready&cluster=prod",
                                   "/jobs/?state=failed&cluster=prod", "/events/?type=Warning&cluster=prod"]
    # Each link shows exactly the objects counted.
    assert {"p-fail-1", "p-fail-2"} <= set(re.findall(r"p-[a-z]+-\d", c.get(links(page, "prod")[2]).content.decode()))
    assert "p-run" not in c.get(links(page, "prod")[2]).content.decode()
    # The page is reachable from the cluster switch: "All clusters", selected here, offered elsewhere.
    assert '<option value="*" selected>All clusters</option>' in page
    assert '<option value="*">All clusters</option>' in c.get("/").content.decode()
    # The page is live through its own socket.
    assert 'ws-connect="/ws/clusters/"' in page


def test_namespace_and_cluster_limits(world, login):
    limited = login("viewer", clusters=["prod"]).get("/?cluster=*").content.decode()
    assert set(counts(limited)) == {"prod"}
    in_team_a = login("viewer", namespaces=["team-a"]).get("/?cluster=*").content.decode()
    assert counts(in_team_a)["prod"] == {"unheld": 1, "not_ready": 1, "failed": 1, "warnings": 0}
    assert login("viewer", clusters=["nowhere"]).get("/?cluster=*").status_code == 403


def test_other_pages_go_to_the_all_clusters_overview(world, login):
    r = login("admin").get("/leases/team-a/held/?cluster=*")
    assert r.status_code == 302 and r["Location"] == "/?cluster=%2A"


def test_a_stale_cluster_says_as_of(world, login):
    from dashboard.follow.models import Cluster

    heard = timezone.now() - timedelta(minutes=10)
    Cluster.objects.filter(name="prod").update(state=Cluster.STALE, heartbeat_at=heard, last_event_at=heard,
                                               state_since=heard)
    page = login("admin").get("/?cluster=*").content.decode()
    row = re.search(r'<tr id="all-prod"([^>]*)>(.*?)</tr>', page, re.S)
    assert 'class="is-stale"' in row.group(1)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", row.group(2)))
    assert "stale" in text and "counts as of" in text and "not current" in text
    assert "as of" in re.search(r'data-count="unheld">(.*?)</td>', row.group(2), re.S).group(1)
    # The other clusters are current: no "as of".
    assert "as of" not in re.search(r'<tr id="all-staging"[^>]*>(.*?)</tr>', page, re.S).group(1)


async def socket(user) -> WebsocketCommunicator:
    from dashboard.web.all_clusters_socket import AllClustersConsumer

    comm = WebsocketCommunicator(AllClustersConsumer.as_asgi(), "/ws/clusters/?ready=1")
    comm.scope["user"] = user
    connected, _ = await comm.connect(timeout=10)
    assert connected
    return comm


async def until(comm, test, timeout: float = 15.0) -> str:
    """The first push whose panel passes `test` (beats and LIVE skipped)."""
    import asyncio

    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        msg = await comm.receive_from(timeout=max(deadline - asyncio.get_running_loop().time(), 0.01))
        if 'id="all-clusters"' in msg and test(msg):
            return msg


@pytest.mark.asyncio
async def test_a_change_in_a_followed_cluster_is_pushed(world):
    from dashboard.access.tokens import ensure_user

    user = await sync_to_async(ensure_user)("all-clusters-admin", "admin")
    comm = await socket(user)
    first = await until(comm, lambda m: True)
    assert counts(first)["prod"]["failed"] == 2 and 'hx-swap-oob="true"' in first
    await sync_to_async(mirror)("prod", "Job", upstream(failed_job("p-fail-3", "team-a"), 300))
    pushed = await until(comm, lambda m: counts(m)["prod"]["failed"] == 3)
    assert counts(pushed)["local"]["unheld"] == 2
    await comm.disconnect()


@pytest.mark.asyncio
async def test_a_cluster_limited_socket_sees_only_its_clusters(world):
    from dashboard.access.models import Profile
    from dashboard.access.tokens import ensure_user

    user = await sync_to_async(ensure_user)("all-clusters-staging", "viewer")
    await sync_to_async(lambda: Profile.objects.filter(user=user).update(clusters=["staging"]))()
    comm = await socket(user)
    first = await until(comm, lambda m: True)
    assert set(counts(first)) == {"staging"} and "p-free" not in first
    # A change in prod is not this viewer's: the next push (a change in staging) still shows staging alone.
    await sync_to_async(mirror)("prod", "Lease", upstream(lease("p-free-2", holder="", ns="team-a"), 301))
    await sync_to_async(mirror)("staging", "Lease", upstream(lease("s-free", holder="", ns="team-a"), 302))
    pushed = await until(comm, lambda m: counts(m)["staging"]["unheld"] == 1)
    assert set(counts(pushed)) == {"staging"}
    await comm.disconnect()


# ---------------------------------------------------------------------------------------------
# A kind's list across every cluster: `?cluster=*`


def listed(page: str) -> list[tuple[str, str, str]]:
    """(cluster, namespace, name) of the rows, in page order."""
    return [(c, ns, name) for c, ns, name in re.findall(
        r'<tr id="[^"]+" data-cluster="([^"]+)"[^>]*>\s*<td[^>]*><a[^>]*>[^<]*</a>.*?</td>\s*<td[^>]*>([^<]*)</td>\s*'
        r'<th scope="row"><a[^>]*>([^<]+)</a>', page, re.S)]


def test_a_list_across_clusters_with_a_cluster_column(world, login):
    c = login("admin")
    page = c.get("/leases/?cluster=*").content.decode()
    assert listed(page) == [("local", "team-a", "free-1"), ("local", "team-a", "free-2"), ("local", "team-a", "held"),
                            ("prod", "team-a", "p-free"), ("prod", "team-a", "p-held"),
                            ("staging", "team-a", "s-held")]
    assert '<th scope="col">Cluster</th>' in page and "6 leases" in page
    hrefs = [h.replace("&amp;", "&") for h in re.findall(r'href="([^"]+)"', page)]
    assert "/leases/team-a/p-free/?cluster=prod" in hrefs and "/leases/team-a/free-1/" in hrefs
    assert '<input type="hidden" name="cluster" value="*">' in page   # the filters keep every cluster
    assert "/jobs/?cluster=%2A" in hrefs   # and so does the menu
    # Filters, sort and paging.
    assert [r[2] for r in listed(c.get("/leases/?cluster=*&state=unheld").content.decode())] == \
        ["free-1", "free-2", "p-free"]
    for order in ("-cluster", "-namespace"):   # (the default order, reversed: the select calls it -namespace)
        assert [r[0] for r in listed(c.get(f"/leases/?cluster=*&sort={order}").content.decode())] == \
            ["staging", "prod", "prod", "local", "local", "local"]
    assert "Cluster, namespace ▲" in page
    by_holder = listed(c.get("/leases/?cluster=*&sort=holder").content.decode())
    assert [r[2] for r in by_holder][:3] == ["p-held", "s-held", "held"]   # "h", "h", "node-a"; no holder last
    first = c.get("/leases/?cluster=*&limit=4").content.decode()
    assert len(listed(first)) == 4 and "Rows <strong>1–4</strong> of <strong>6</strong>" in first
    second_url = re.search(r'href="([^"]+)" rel="next"', first).group(1).replace("&amp;", "&")
    assert "cluster=%2A" in second_url and "page=2" in second_url
    assert listed(c.get("/leases/" + second_url).content.decode()) == [("prod", "team-a", "p-held"), ("staging", "team-a", "s-held")]
    assert c.get("/leases/?cluster=*&sort=nonsense").status_code == 400


def test_a_limited_user_lists_only_their_clusters_and_namespaces(world, login):
    prod_only = login("viewer", clusters=["prod"]).get("/jobs/?cluster=*").content.decode()
    assert {r[0] for r in listed(prod_only)} == {"prod"} and len(listed(prod_only)) == 3
    team_b = login("viewer", namespaces=["team-b"])
    assert listed(team_b.get("/endpoints/?cluster=*").content.decode()) == [("prod", "team-b", "p-svc-2")]
    assert team_b.get("/endpoints/?cluster=*&namespace=team-a").status_code == 403


@pytest.mark.asyncio
async def test_a_list_across_clusters_is_live(world):
    from dashboard.access.tokens import ensure_user
    from dashboard.web.all_clusters_socket import AllClustersConsumer

    user = await sync_to_async(ensure_user)("all-clusters-lister", "viewer")
    comm = WebsocketCommunicator(AllClustersConsumer.as_asgi(), "/ws/clusters/?list=leases&state=unheld&ready=1")
    comm.scope["user"] = user
    assert (await comm.connect(timeout=10))[0]
    first = await comm.receive_from(timeout=10)
    assert [r[2] for r in listed(first)] == ["free-1", "free-2", "p-free"]
    await sync_to_async(mirror)("staging", "Lease", upstream(lease("s-free", holder="", ns="team-a"), 400))
    while True:
        msg = await comm.receive_from(timeout=10)
        if 'id="all-list"' in msg:
            break
    assert listed(msg)[-1] == ("staging", "team-a", "s-free") and "4 leases" in msg
    await comm.disconnect()


@pytest.mark.asyncio
async def test_a_cluster_turning_stale_is_pushed_without_a_write(world):
    from dashboard.access.tokens import ensure_user
    from dashboard.follow.models import Cluster

    user = await sync_to_async(ensure_user)("all-clusters-watcher", "viewer")
    comm = await socket(user)
    first = await until(comm, lambda m: True)
    assert 'class="is-stale"' not in first
    heard = timezone.now() - timedelta(minutes=5)
    await sync_to_async(Cluster.objects.filter(name="staging").update)(state=Cluster.STALE, heartbeat_at=heard,
                                                                       last_event_at=heard, state_since=heard)
    pushed = await until(comm, lambda m: 'id="all-staging" class="is-stale"' in m)
    assert "counts as of" in re.search(r'<tr id="all-staging".*?</tr>', pushed, re.S).group(0)
    assert 'id="all-prod" class="is-stale"' not in pushed
    await comm.disconnect()


def test_the_overview_links_to_every_cluster_at_once(world, login):
    page = login("admin").get("/").content.decode()
    assert '<a href="/?cluster=*">What needs a look in every cluster</a>' in page


def test_events_and_warnings_across_clusters(world, login):
    from dashboard.kube import registry, store

    ev = warning("w-free-1", "team-a", 3)
    ev["involvedObject"]["name"] = "free-1"
    store.create(registry.by_kind("Event"), "team-a", ev)
    c = login("admin")
    warned = listed(c.get("/leases/?cluster=*&warnings=1h").content.decode())
    assert warned == [("local", "team-a", "free-1")]
    page = c.get("/events/?cluster=*&type=Warning").content.decode()
    rows = re.findall(r'<tr id="[^"]+" data-cluster="([^"]+)">.*?<th scope="row">([^<]+)</th>', page, re.S)
    assert sorted(rows) == [("local", "w-free-1"), ("local", "w-new"), ("local", "w-old"), ("prod", "p-warn")]


def test_a_stale_clusters_rows_say_as_of_in_a_list(world, login):
    from dashboard.follow.models import Cluster

    heard = timezone.now() - timedelta(minutes=10)
    Cluster.objects.filter(name="prod").update(state=Cluster.STALE, heartbeat_at=heard, last_event_at=heard,
                                               state_since=heard)
    page = login("admin").get("/leases/?cluster=*").content.decode()
    assert len(listed(page)) == 6
    for name in ("p-free", "p-held"):
        row = re.search(rf'<tr id="lease-prod--team-a--{name}"([^>]*)>(.*?)</tr>', page, re.S)
        assert 'class="is-stale"' in row.group(1) and "not current: as of" in row.group(2)
    assert "not current" not in re.search(r'<tr id="lease-staging--team-a--s-held".*?</tr>', page, re.S).group(0)

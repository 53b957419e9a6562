"""Following a real cluster: a second kubedash server is the upstream (a real
Kubernetes-compatible API), the server under test follows it (`manage.py follow add`, the
maintenance leader's informers) and serves the copy under /clusters/prod, read-only."""
from __future__ import annotations

import re
import subprocess
import time
from datetime import UTC, datetime
from html import unescape

import pytest

from chromium import assert_not_reloaded, open_live
from conftest import FOLLOWER_ENV, eventually, require_kubectl, served, server_env

LEASES = "/apis/coordination.k8s.io/v1"
JOBS = "/apis/batch/v1"


def lease(name: str, holder: str, namespace: str = "team") -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}}


def set_holder(server, name: str, holder: str) -> None:
    """An upstream write: a merge patch of one Lease's holder."""
    status, _, body = server.request("PATCH", f"{LEASES}/namespaces/team/leases/{name}",
                                     {"spec": {"holderIdentity": holder}}, content_type="application/merge-patch+json")
    assert status == 200, body


def holders(server, prefix: str = "") -> dict:
    status, _, body = server.request("GET", f"{prefix}{LEASES}/namespaces/team/leases")
    assert status == 200, body
    return {item["metadata"]["name"]: item["spec"].get("holderIdentity") for item in body["items"]}


def shell(server, code: str) -> str:
    """The last line `manage.py shell -c code` printed on server."""
    return server.manage("shell", "-c", code).strip().splitlines()[-1]


def follow_state(server) -> str:
    return server.manage("follow", "list")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    """A second kubedash as the followed cluster (a test kills it and starts it again on its ports)."""
    with served(tmp_path_factory.mktemp("upstream")) as up:
        for i in range(30):
            status, _, body = up.request("POST", f"{LEASES}/namespaces/team/leases", lease(f"l{i:02d}", "a"))
            assert status == 201, body
        yield up


@pytest.fixture(scope="module")
def here(tmp_path_factory, upstream):
    """The server under test, following the upstream as "prod" through a viewer's kubeconfig."""
    data_dir = tmp_path_factory.mktemp("follower")
    with served(data_dir, env=server_env(data_dir, **FOLLOWER_ENV)) as server:
        kubeconfig = upstream.kubeconfig(data_dir / "prod.kubeconfig", "follower", "viewer")
        server.manage("follow", "add", "prod", "--kubeconfig", str(kubeconfig))
        yield server


def test_initial_sync_then_live_in_order(upstream, here):
    up = upstream
    eventually(lambda: holders(here, "/clusters/prod") == holders(up), 30, "the first sync")
    # Nothing of prod among the local objects, nothing local under prod.
    assert holders(here) == {}
    here.request("POST", f"{LEASES}/namespaces/team/leases", lease("local-only", "me"))
    assert "local-only" not in holders(here, "/clusters/prod")

    status, _, listed = here.request("GET", f"/clusters/prod{LEASES}/namespaces/team/leases")
    with here.watch(f"/clusters/prod{LEASES}/namespaces/team/leases?watch=1&resourceVersion="
                    f"{listed['metadata']['resourceVersion']}") as stream:
        for n in range(20):
            set_holder(up, "l00", f"h{n}")
        seen = []
        while len(seen) < 20:
            event = stream.next(timeout=15)
            assert event is not None
            assert event["type"] == "MODIFIED" and event["object"]["metadata"]["name"] == "l00"
            seen.append(event["object"]["spec"]["holderIdentity"])
        assert seen == [f"h{n}" for n in range(20)]   # every upstream write, once, in order
    assert "live" in follow_state(here)


def test_metrics_say_the_cluster_is_followed(here):
    status, _, body = here.request("GET", "/metrics")
    text = body.decode() if isinstance(body, bytes) else str(body)
    assert status == 200
    assert 'kubedash_follow_live{cluster="prod"} 1.0' in text
    changes = [line for line in text.splitlines() if line.startswith('kubedash_follow_changes_total{cluster="prod"}')]
    assert changes and float(changes[0].split()[-1]) >= 30   # the first sync, then the 20 writes


def test_upstream_deletes_propagate(upstream, here):
    up = upstream
    status, _, _ = up.request("DELETE", f"{LEASES}/namespaces/team/leases/l01")
    assert status == 200
    eventually(lambda: "l01" not in holders(here, "/clusters/prod"), 15, "the delete to arrive")
    assert holders(here, "/clusters/prod") == holders(up)


def test_events_about_the_followed_kinds_are_followed(upstream, here):
    """Events come along for the three kinds (field-selected by involvedObject.kind upstream,
    so a Pod's are not copied), and leave when upstream deletes them (its TTL)."""
    up = upstream

    def event(name, kind, obj, reason, type_="Normal"):
        body = {"metadata": {"name": name}, "involvedObject": {"kind": kind, "namespace": "team", "name": obj},
                "reason": reason, "message": f"{reason} of {obj}", "type": type_, "count": 1,
                "source": {"component": "job-controller"}}
        status, _, out = up.request("POST", "/api/v1/namespaces/team/events", body)
        assert status == 201, out

    job = {"metadata": {"name": "batch-1"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    assert up.request("POST", f"{JOBS}/namespaces/team/jobs", job)[0] == 201
    event("batch-1.1", "Job", "batch-1", "BackoffLimitExceeded", "Warning")
    event("l00.1", "Lease", "l00", "LeaderElection")
    event("batch-1-abcde.1", "Pod", "batch-1-abcde", "Pulled")

    def copied():
        status, _, body = here.request("GET", "/clusters/prod/api/v1/namespaces/team/events")
        assert status == 200, body
        return sorted(i["metadata"]["name"] for i in body["items"])

    eventually(lambda: copied() == ["batch-1.1", "l00.1"], 20, "the Job's and the Lease's events")
    status, _, body = here.request("GET", "/clusters/prod/apis/events.k8s.io/v1/namespaces/team/events"
                                          "?fieldSelector=regarding.kind%3DJob")
    assert [(i["reason"], i["type"]) for i in body["items"]] == [("BackoffLimitExceeded", "Warning")]
    # On the local pages: the Job's timeline in prod shows why it failed.
    import http.client

    from conftest import log_in_form

    shell(here, "from dashboard.access.tokens import ensure_user\n"
                "u = ensure_user('prod-viewer', 'viewer'); u.set_password('pw-prod-viewer'); u.save()\nprint(1)")
    conn = http.client.HTTPConnection("127.0.0.1", here.http_port, timeout=30)
    cookie = log_in_form(conn, here.http_url, "prod-viewer", "pw-prod-viewer")
    conn.request("GET", "/jobs/team/batch-1/history/?cluster=prod&show=warnings", headers={"Cookie": cookie})
    resp = conn.getresponse()
    page = resp.read().decode()
    conn.close()
    assert resp.status == 200, page[:500]
    assert "BackoffLimitExceeded" in page and "BackoffLimitExceeded of batch-1" in page
    assert up.request("DELETE", "/api/v1/namespaces/team/events/batch-1.1")[0] == 200
    eventually(lambda: copied() == ["l00.1"], 20, "the upstream deletion")
    assert "live" in follow_state(here)


def test_a_followed_clusters_warning_pushes_its_row_badge_and_nothing_local_does(upstream, here):
    """A Jobs page of the followed cluster: a Warning Event recorded upstream (mirrored here)
    re-renders that Job's row with its badge; a local Warning about a local Job of the same
    namespace and name is not that cluster's and pushes nothing there."""
    import http.client

    import websocket  # websocket-client (a dependency of the kubernetes client)

    from conftest import log_in_form

    up = upstream
    job = {"metadata": {"name": "badge-1"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}
    assert up.request("POST", f"{JOBS}/namespaces/team/jobs", job)[0] == 201
    assert here.request("POST", f"{JOBS}/namespaces/team/jobs", job)[0] == 201   # a local namesake

    def copied():
        return here.request("GET", "/clusters/prod/apis/batch/v1/namespaces/team/jobs/badge-1")[0] == 200

    eventually(copied, 20, "the Job to be copied")
    shell(here, "from dashboard.access.tokens import ensure_user\n"
                "u = ensure_user('badge-viewer', 'viewer'); u.set_password('pw-badge-viewer'); u.save()\nprint(1)")
    conn = http.client.HTTPConnection("127.0.0.1", here.http_port, timeout=30)
    cookie = log_in_form(conn, here.http_url, "badge-viewer", "pw-badge-viewer")
    conn.close()
    ws = websocket.create_connection(f"ws://127.0.0.1:{here.http_port}/ws/live/?view=jobs&namespace=team"
                                     "&cluster=prod&rv=0", cookie=cookie, origin=here.http_url, timeout=5)

    def warning(server, name):
        body = {"metadata": {"name": name}, "involvedObject": {"kind": "Job", "namespace": "team", "name": "badge-1"},
                "reason": "BackoffLimitExceeded", "message": "backoff limit", "type": "Warning", "count": 1,
                "source": {"component": "job-controller"},
                "firstTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "lastTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        status, _, out = server.request("POST", "/api/v1/namespaces/team/events", body)
        assert status == 201, out

    def pushed_until(needle: str) -> list[str]:
        """The messages pushed up to and including the first with `needle`."""
        got, deadline = [], time.monotonic() + 30
        while not got or needle not in got[-1]:
            assert time.monotonic() < deadline, f"no push with {needle!r}: {got}"
            try:
                message = ws.recv()
            except websocket.WebSocketTimeoutException:
                continue
            if message == "beat":
                ws.send("pong")   # (the page's heartbeat answer: a silent page is closed)
            else:
                got.append(message)
        return got

    try:
        pushed_until("badge-1")   # the page's first refresh (it connected with no revision): the row
        warning(here, "badge-1.local")
        # The local Warning is not prod's: nothing about badge-1 up to a later upstream write's push.
        assert up.request("POST", f"{JOBS}/namespaces/team/jobs", dict(job, metadata={"name": "later"}))[0] == 201
        *before, later = pushed_until("job-team--later")
        assert not [m for m in before if "badge-1" in m] and "warnings-badge" not in later, before
        warning(up, "badge-1.up")
        badge = pushed_until("warnings-badge")[-1]
        assert "badge-1" in badge and "1 warning" in badge and "cluster=prod" in badge, badge
    finally:
        ws.close()


def test_followed_cluster_is_read_only_through_the_api(here):
    for method, path in [("POST", f"{LEASES}/namespaces/team/leases"),
                         ("PUT", f"{LEASES}/namespaces/team/leases/l00"),
                         ("PATCH", f"{LEASES}/namespaces/team/leases/l00"),
                         ("DELETE", f"{LEASES}/namespaces/team/leases/l00"),
                         ("DELETE", f"{LEASES}/namespaces/team/leases")]:
        status, headers, body = here.request(method, f"/clusters/prod{path}", lease("l00", "x"))
        assert status == 405, (method, path, body)
        assert body["kind"] == "Status" and body["reason"] == "MethodNotAllowed"
        assert "read-only" in body["message"]
    assert holders(here, "/clusters/prod")["l00"] == "h19"   # nothing written
    status, _, body = here.request("GET", f"/clusters/nope{LEASES}/leases")
    assert status == 404 and body["reason"] == "NotFound" and "not followed" in body["message"]
    # Names are not probed anonymously: without valid credentials, 401 whether followed or not.
    for name in ("nope", "prod"):
        status, _, body = here.request("GET", f"/clusters/{name}{LEASES}/leases", token="not-a-token")
        assert status == 401 and body["reason"] == "Unauthorized", (name, body)
    # Discovery and Tables answer under the prefix as at the root.
    status, _, body = here.request("GET", "/clusters/prod/apis")
    assert status == 200 and any(g["name"] == "coordination.k8s.io" for g in body["groups"])
    status, _, body = here.request("GET", f"/clusters/prod{LEASES}/namespaces/team/leases",
                                   headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    assert status == 200 and body["kind"] == "Table" and len(body["rows"]) == len(holders(here, "/clusters/prod"))


def _anonymous(server, path: str, authorization: str | None) -> tuple[int, dict]:
    import http.client

    import orjson

    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    conn.request("GET", path, headers={"Authorization": authorization} if authorization else {})
    resp = conn.getresponse()
    body = orjson.loads(resp.read())
    conn.close()
    return resp.status, body


def test_followed_names_cannot_be_told_apart_without_credentials(here):
    """Issue 43: /clusters/<followed>/version, api, apis, api/v1 and openapi/v3 answered 200
    anonymously while an unknown name answered 401. Now every path of every name (local too) is
    the same 401 without valid credentials, discovery and /version included."""
    for authorization in (None, "Bearer not-a-token"):
        answers = {}
        for name in ("prod", "nope", "local"):
            for path in ("/version", "/api", "/apis", "/api/v1", "/openapi/v3", f"{LEASES}/leases"):
                status, body = _anonymous(here, f"/clusters/{name}{path}", authorization)
                answers[name, path] = (status, body["reason"], body["message"])
        assert set(answers.values()) == {(401, "Unauthorized", "Unauthorized")}, answers
    status, body = _anonymous(here, "/clusters/prod/version", f"Bearer {here.admin_token}")
    assert status == 200 and "gitVersion" in body


def test_a_viewer_limited_to_local_sees_nothing_of_prod(here):
    token = shell(here, "from dashboard.access.models import Profile\n"
                        "from dashboard.access.tokens import issue_token\n"
                        "token = issue_token('local-viewer', 'viewer')\n"
                        "Profile.objects.filter(user__username='local-viewer').update(clusters=['local'])\n"
                        "print(token)\n")
    # Issue 29: a followed cluster this user may not see answers as one that is not followed
    # (404, the same Status), discovery included: names cannot be told apart by probing.
    _, _, unknown = here.request("GET", f"/clusters/nope{LEASES}/leases", token=token)
    for path in (f"{LEASES}/leases", "/apis", "/api"):
        status, _, body = here.request("GET", f"/clusters/prod{path}", token=token)
        assert status == 404 and body["reason"] == unknown["reason"] == "NotFound", (path, body)
        assert body["message"] == unknown["message"].replace('"nope"', '"prod"'), body
    status, _, body = here.request("GET", f"{LEASES}/leases", token=token)
    assert status == 200 and "local-only" in {i["metadata"]["name"] for i in body["items"]}
    assert not {i["metadata"]["name"] for i in body["items"]} & set(holders(here, "/clusters/prod"))


def test_kubectl_watch_through_the_cluster_path(upstream, here, tmp_path):
    kubectl = require_kubectl()
    config = here.kubeconfig(tmp_path / "kc", "kubectl-user", "viewer")
    server = f"{here.https_url}/clusters/prod"
    proc = subprocess.Popen([kubectl, "--kubeconfig", str(config), "--server", server, "get", "leases", "-A",
                             "-w", "--output-watch-events"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        assert "NAMESPACE" in first or "EVENT" in first, first + proc.stderr.read(2000) if proc.poll() else first
        set_holder(upstream, "l05", "kubectl-saw-me")
        deadline = time.monotonic() + 20
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "l05" in line and "MODIFIED" in line:
                break
        assert any("l05" in line and "MODIFIED" in line for line in lines), lines
    finally:
        proc.kill()
        proc.wait()
    # kubectl's writes through the prefix are refused with the Status message.
    out = subprocess.run([kubectl, "--kubeconfig", str(config), "--server", server, "delete", "lease", "l05",
                          "-n", "team"], capture_output=True, text=True)
    assert out.returncode != 0 and "read-only" in out.stderr


@pytest.mark.slow
def test_restart_and_compaction_upstream_converge(upstream, here):
    """Kill the upstream: prod is reported stale. While it is down its log is changed and
    compacted past what the follower saw; started again, the follower's resume gets 410,
    it relists and the copy converges, nothing missing or extra."""
    upstream.kill()
    eventually(lambda: "stale" in follow_state(here), 30, "prod to be reported stale")
    script = (
        "from dashboard.kube import registry, store\n"
        "res = registry.lookup('coordination.k8s.io', 'v1', 'leases')\n"
        "store.delete(res, 'team', 'l02')\n"
        "store.delete(res, 'team', 'l03')\n"
        "for i in range(5):\n"
        "    store.create(res, 'team', {'metadata': {'name': f'new{i}'}, 'spec': {'holderIdentity': 'b'}})\n"
        "def change(obj):\n"
        "    obj['spec']['holderIdentity'] = 'changed-offline'\n"
        "    return obj\n"
        "store.update(res, 'team', 'l04', change, is_patch=True)\n")
    upstream.manage("shell", "-c", script)
    upstream.manage("compact", "--keep", "0", "--keep-seconds", "0")
    upstream.start()
    expected = holders(upstream)
    assert "l02" not in expected and expected["new4"] == "b" and expected["l04"] == "changed-offline"
    eventually(lambda: holders(here, "/clusters/prod") == expected, 60, "the copy to converge after the relist")
    eventually(lambda: "live" in follow_state(here), 30, "prod to be live again")


def test_a_gap_in_following_is_marked_on_the_time_bar(upstream, here):
    """While the upstream is down kubedash is not following prod: once it is live again the span
    is recorded (follow.models.FollowSpan, by the follower), the time bar of prod's pages marks
    it, and a page as of a moment inside it says "not followed between …", nothing as current."""
    eventually(lambda: "live" in follow_state(here), 60, "prod to be live")
    known = holders(here, "/clusters/prod")   # (what prod held before the gap; earlier tests change it)
    killed = datetime.now(UTC)
    upstream.kill()
    eventually(lambda: "stale" in follow_state(here), 30, "prod to be reported stale")
    stale = datetime.now(UTC)
    upstream.start()
    eventually(lambda: "live" in follow_state(here), 60, "prod to be live again")
    cookie = {"Cookie": f"sessionid={here.session('gap-viewer', 'viewer')}"}

    def page(path: str) -> str:
        status, _, body = here.request("GET", path, headers=cookie)
        assert status == 200, (path, status)
        return unescape(body.decode())

    clock = "%Y-%m-%d %H:%M:%S UTC"
    gaps = [(datetime.strptime(a, clock).replace(tzinfo=UTC), datetime.strptime(b, clock).replace(tzinfo=UTC))
            for a, b in re.findall(r'<span class="vh">Not followed between ([^<]+?) and ([^<]+?)</span>',
                                   page("/leases/?namespace=team&cluster=prod"))]
    assert any(a <= killed and b >= stale for a, b in gaps), (killed, stale, gaps)
    html = page(f"/leases/?namespace=team&cluster=prod&at={stale.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}")
    assert "— not live" in html and "Not followed between" in html and "no state is shown as current" in html
    shown = set(re.findall(r">(l\d\d|new\d)<", html))   # (the rows' name links)
    assert shown == set(known), (sorted(shown), sorted(known))   # (prod as last known, before the gap)


def test_one_process_follows(here):
    """The server under test runs two workers; only the maintenance leader follows."""
    log = (here.data_dir / "server.log").read_text()
    assert log.count("follow: following prod") == 1, log[-3000:]


@pytest.mark.slow
def test_share_link_for_prod_is_live_and_read_only(upstream, here, chromium):
    """A share link made for the followed cluster, opened in Chromium by someone without an
    account: prod's Leases, changed live by upstream writes, nothing local, nothing to change."""
    from playwright.sync_api import expect

    token = shell(here, "from dashboard.access.tokens import ensure_user\n"
                        "from dashboard.web.share import create_link\n"
                        "link, token = create_link(ensure_user('sharer', 'editor'), kind='Lease', namespace='team',\n"
                        "                          label_selector='', label='prod leaders', expiry='1h',\n"
                        "                          cluster='prod')\n"
                        "print(token)\n")
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.goto(f"{here.http_url}/s/{token}/")
        open_live(page, page.url)
        items = page.locator("#items")
        expect(items).to_contain_text("l06")
        expect(items).not_to_contain_text("local-only")
        set_holder(upstream, "l06", "seen-through-the-link")
        expect(items).to_contain_text("seen-through-the-link")
        assert_not_reloaded(page)
        expect(page.locator("a.new-object")).to_have_count(0)
        response = page.goto(f"{here.http_url}/leases/?namespace=team&cluster=local")
        assert response.status == 403
    finally:
        context.close()


@pytest.mark.slow
def test_all_clusters_overview_counts_exactly_and_follows_a_change(upstream, here):
    """The all-clusters overview (`/?cluster=*`, issue 40) of the local store and prod, a real
    followed kubedash: each count equals what the cluster's API lists (whatever the module's other
    tests left there), and an upstream Lease losing its holder is pushed on the page's socket."""
    import http.client
    import re
    from datetime import datetime, timedelta, timezone

    import websocket  # websocket-client (a dependency of the kubernetes client)

    from conftest import log_in_form

    up = upstream
    eventually(lambda: holders(here, "/clusters/prod") == holders(up), 30, "prod to be in sync")
    hour_ago = datetime.now(timezone.utc) - timedelta(hours=1)

    def expected(server, prefix: str = "") -> dict:
        def items(path):
            status, _, body = server.request("GET", f"{prefix}{path}")
            assert status == 200, body
            return body["items"]

        def recent(event):
            seen = event.get("lastTimestamp") or event.get("eventTime") or ""
            return bool(seen) and datetime.fromisoformat(seen.replace("Z", "+00:00")) > hour_ago

        return {"unheld": sum(not (i.get("spec") or {}).get("holderIdentity") for i in items(f"{LEASES}/leases")),
                "not_ready": sum(any(s.get("notReadyAddresses") for s in i.get("subsets") or ())
                                 for i in items("/api/v1/endpoints")),
                "failed": sum(any(c["type"] == "Failed" and c["status"] == "True"
                                  for c in (i.get("status") or {}).get("conditions") or ())
                              for i in items(f"{JOBS}/jobs")),
                "warnings": sum(e.get("type") == "Warning" and recent(e) for e in items("/api/v1/events"))}

    shell(here, "from dashboard.access.tokens import ensure_user\n"
                "u = ensure_user('all-viewer', 'viewer'); u.set_password('pw-all-viewer'); u.save()\nprint(1)")
    conn = http.client.HTTPConnection("127.0.0.1", here.http_port, timeout=30)
    cookie = log_in_form(conn, here.http_url, "all-viewer", "pw-all-viewer")
    conn.request("GET", "/?cluster=*", headers={"Cookie": cookie})
    page = conn.getresponse().read().decode()
    conn.close()

    def counts(html: str, cluster: str) -> dict:
        row = re.search(rf'<tr id="all-{cluster}"[^>]*>(.*?)</tr>', html, re.S).group(1)
        return {k: int(n) for k, n in re.findall(r'data-count="([^"]+)"><a [^>]*>(\d+)<', row)}

    assert counts(page, "local") == expected(here)
    prod = expected(up)
    assert counts(page, "prod") == prod

    ws = websocket.create_connection(f"ws://127.0.0.1:{here.http_port}/ws/clusters/", cookie=cookie,
                                     origin=here.http_url, timeout=5)
    try:
        holder_of = holders(up)
        name = next(n for n, h in sorted(holder_of.items()) if h)
        set_holder(up, name, "")
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, "no push with prod's new count"
            try:
                message = ws.recv()
            except websocket.WebSocketTimeoutException:
                continue
            if message == "beat":
                ws.send("pong")
            elif 'id="all-prod"' in message and counts(message, "prod")["unheld"] == prod["unheld"] + 1:
                break
    finally:
        ws.close()


def test_remove_forgets_everything_of_the_cluster(upstream, here):
    """`follow remove`: prod's objects go (as DELETED revisions), its API answers 404, and
    upstream writes afterwards bring nothing back (the follower stops, and a write it had in
    flight is refused under the write lock)."""
    # A second follower of the same upstream: it shows when an upstream write has reached here.
    kubeconfig = upstream.kubeconfig(here.data_dir / "copy.kubeconfig", "follower", "viewer")
    here.manage("follow", "add", "copy", "--kubeconfig", str(kubeconfig))
    eventually(lambda: holders(here, "/clusters/copy") == holders(upstream), 30, "the second follower's sync")
    here.manage("follow", "remove", "prod")
    status, _, body = here.request("GET", f"/clusters/prod{LEASES}/leases")
    eventually(lambda: here.request("GET", f"/clusters/prod{LEASES}/leases")[0] == 404, 5, "prod's API to go")
    eventually(lambda: "follow: stopped following prod" in (here.data_dir / "server.log").read_text(), 20,
               "prod's follower to stop")
    upstream.request("POST", f"{LEASES}/namespaces/team/leases", lease("after-remove", "x"))
    eventually(lambda: "after-remove" in holders(here, "/clusters/copy"), 20, "the write to reach the other follower")
    left = shell(here, "from dashboard.coordination.models import Lease\n"
                       "print(Lease.everywhere.filter(cluster='prod').count())\n")
    assert left == "0"
    assert "local-only" in holders(here)   # the local store is untouched
    here.manage("follow", "remove", "copy")

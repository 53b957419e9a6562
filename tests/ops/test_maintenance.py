"""Once-per-deployment work and graceful shutdown, with two app processes on PostgreSQL + Redis.

- dashboard.server.maintenance: the processes elect one leader through the Lease
  kube-system/kubedash-maintenance (client-go semantics); only the leader compacts and
  cleans up; kill it (SIGKILL) and the other takes over once the lease runs out.
- dashboard.server.shutdown: SIGTERM drains a process: writes in flight are finished and
  answered, watches end cleanly and resume on the other process from their last
  resourceVersion without a gap, page websockets close with 1012, the Lease is released.

Short lease timings come from the environment (KUBEDASH_MAINTENANCE_*).
"""
from __future__ import annotations

import http.client
import re
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest

from conftest import ROOT, eventually, require_kubectl, sample, scrape, served_pair
from manifests import lease

LEASE_SECONDS = 4
# Maintenance on (off in other tests: conftest.server_env), with short lease timings.
TIMINGS = dict(KUBEDASH_MAINTENANCE="1", KUBEDASH_MAINTENANCE_LEASE_SECONDS=str(LEASE_SECONDS),
               KUBEDASH_MAINTENANCE_RENEW_DEADLINE="3", KUBEDASH_MAINTENANCE_RETRY_PERIOD="0.5",
               KUBEDASH_MAINTENANCE_INTERVAL="0.5", KUBEDASH_WATCH_POLL_SECONDS="30")
MAINTENANCE = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kubedash-maintenance"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    # A short retention, so that compaction has something to drop within the test.
    # (and no pages' history beyond the watch window, issue 38: what is superseded goes at once)
    with served_pair(tmp_path_factory, "postgres", **TIMINGS, KUBEDASH_RETAIN_REVISIONS="20",
                     KUBEDASH_RETAIN_SECONDS="0", KUBEDASH_HISTORY_SECONDS="0") as servers:
        yield servers


def holder_of(server) -> dict | None:
    status, _, body = server.request("GET", MAINTENANCE)
    return body["spec"] if status == 200 else None


def leader_and_follower(servers):
    spec = eventually(lambda: (s := holder_of(servers.a)) and s.get("holderIdentity") and s, 60, "a leader")
    pid = int(spec["holderIdentity"].rsplit("_", 1)[1])
    leader = next(s for s in servers if s.proc.pid == pid)
    follower = next(s for s in servers if s is not leader)
    return leader, follower, spec


# --- the maintenance leader -----------------------------------------------------------------

@pytest.mark.postgres
def test_the_lease_is_an_ordinary_lease_with_client_go_fields(pair):
    leader, follower, spec = leader_and_follower(pair)
    assert spec["holderIdentity"] == f"{socket.gethostname()}_{leader.proc.pid}"
    assert spec["leaseDurationSeconds"] == LEASE_SECONDS
    assert MICRO_TIME.match(spec["acquireTime"]) and MICRO_TIME.match(spec["renewTime"])
    # Listed with the other Leases, through either process.
    status, _, body = follower.request("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases")
    assert status == 200 and "kubedash-maintenance" in [i["metadata"]["name"] for i in body["items"]]
    # Renewals are writes like any other: a watch sees them.
    rv = body["metadata"]["resourceVersion"]
    with follower.watch(f"{MAINTENANCE.rsplit('/', 1)[0]}?watch=true&resourceVersion={rv}"
                        "&fieldSelector=metadata.name%3Dkubedash-maintenance") as stream:
        event = stream.next(timeout=30)
    assert event["type"] == "MODIFIED" and event["object"]["spec"]["holderIdentity"] == spec["holderIdentity"]
    assert event["object"]["spec"]["renewTime"] > spec["renewTime"]


@pytest.mark.postgres
def test_the_leader_records_leader_election_events_on_its_lease(pair):
    """As client-go's resourcelock with an event recorder: a LeaderElection Event on the Lease,
    through the API like any client's, readable through both Event groups."""
    leader, follower, spec = leader_and_follower(pair)
    path = ("/api/v1/namespaces/kube-system/events?fieldSelector="
            "involvedObject.kind%3DLease,involvedObject.name%3Dkubedash-maintenance,reason%3DLeaderElection")
    items = eventually(lambda: [i for i in follower.request("GET", path)[2]["items"]
                              if i["message"] == f"{spec['holderIdentity']} became leader"], 30, "the event")
    assert items[0]["type"] == "Normal" and items[0]["source"] == {"component": "kubedash-maintenance"}
    lease = follower.request("GET", MAINTENANCE)[2]
    assert items[0]["involvedObject"]["uid"] == lease["metadata"]["uid"]
    status, _, v1 = leader.request("GET", "/apis/events.k8s.io/v1/namespaces/kube-system/events"
                                          "?fieldSelector=regarding.name%3Dkubedash-maintenance")
    assert status == 200 and any(e["note"] == items[0]["message"] for e in v1["items"])


@pytest.mark.postgres
def test_exactly_one_process_does_the_maintenance(pair):
    leader, follower, _ = leader_and_follower(pair)
    eventually(lambda: sample(scrape(leader), "kubedash_maintenance_runs_total", job="compaction") >= 2, 60,
             "the leader to compact")
    for _ in range(3):   # over several of the leader's rounds, the follower never ran a job
        runs = sample(scrape(leader), "kubedash_maintenance_runs_total", job="compaction")
        eventually(lambda runs=runs: sample(scrape(leader), "kubedash_maintenance_runs_total", job="compaction")
                   > runs, 60, "the leader's next round")
        follower_text, leader_text = scrape(follower), scrape(leader)
        assert sample(leader_text, "kubedash_maintenance_leader") == 1
        assert sample(follower_text, "kubedash_maintenance_leader") == 0
        for job in ("compaction", "share_links", "tokens", "sessions"):
            assert sample(follower_text, "kubedash_maintenance_runs_total", job=job) == 0


@pytest.mark.postgres
def test_compaction_runs_on_the_leader(pair):
    leader, _, _ = leader_and_follower(pair)
    ns = "compact-" + uuid.uuid4().hex[:6]
    # Superseded history beyond the pair's retention (KUBEDASH_RETAIN_REVISIONS below).
    path = LEASES.format(ns=ns)
    assert leader.request("POST", path, lease("c", ns=ns))[0] == 201
    for i in range(5):
        assert leader.request("PATCH", path + "/c", {"spec": {"holderIdentity": f"h{i}"}},
                              content_type="application/merge-patch+json")[0] == 200
    written = int(leader.request("GET", path + "/c")[2]["metadata"]["resourceVersion"])
    # The leader compacts past these writes; the horizon is the same whichever process says it.
    eventually(lambda: sample(scrape(leader), "kubedash_revision_compacted") >= written, 60, "compaction")
    assert sample(scrape(leader), "kubedash_maintenance_removed_total", job="compaction") > 0


@pytest.mark.postgres
def test_killing_the_leader_hands_over_within_the_lease_duration(pair):
    leader, follower, spec = leader_and_follower(pair)
    transitions = spec.get("leaseTransitions", 0)
    runs_before = sample(scrape(follower), "kubedash_maintenance_runs_total", job="compaction")
    assert runs_before == 0
    killed_at = time.monotonic()
    leader.proc.send_signal(signal.SIGKILL)
    leader.proc.wait(10)
    new = eventually(lambda: (s := holder_of(follower)) and s.get("holderIdentity") != spec["holderIdentity"] and s,
                   LEASE_SECONDS + 30, "the follower to take over")
    took = time.monotonic() - killed_at
    assert new["holderIdentity"] == f"{socket.gethostname()}_{follower.proc.pid}"
    assert new["leaseTransitions"] == transitions + 1
    assert new["acquireTime"] > spec["acquireTime"]
    # client-go's rule: not before the lease could have run out (the follower last saw it
    # renewed at most a retry period before the kill), printed for the record.
    print(f"takeover {took:.2f}s after SIGKILL (lease {LEASE_SECONDS}s)")
    assert took >= LEASE_SECONDS - 1.5
    eventually(lambda: sample(scrape(follower), "kubedash_maintenance_runs_total", job="compaction") > 0, 30,
             "the new leader to compact")


# --- graceful shutdown ----------------------------------------------------------------------

def session_cookie(server) -> str:
    out = server.manage("shell", "-c", (
        "from django.contrib.sessions.backends.db import SessionStore;"
        "from dashboard.access.tokens import ensure_user;"
        "u = ensure_user('pager', 'admin');"
        "s = SessionStore();"
        "s['_auth_user_id'] = str(u.pk);"
        "s['_auth_user_backend'] = 'django.contrib.auth.backends.ModelBackend';"
        "s['_auth_user_hash'] = u.get_session_auth_hash();"
        "s.create();"
        "print('KEY=' + s.session_key)"))
    return out.strip().splitlines()[-1].split("=", 1)[1]


class Writer(threading.Thread):
    """Creates Leases through `first` until stopped; on a refused connection (the server has
    stopped listening), goes on through `second`, as a load balancer would send it."""

    def __init__(self, first, second, ns: str, prefix: str):
        super().__init__(daemon=True)
        self.targets = [first, second]
        self.ns, self.prefix = ns, prefix
        self.acked: list[str] = []
        self.failed: list[str] = []
        self.stop = threading.Event()

    def run(self):
        i = 0
        while not self.stop.is_set():
            name = f"{self.prefix}-{i}"
            i += 1
            try:
                status, _, body = self.targets[0].request("POST", LEASES.format(ns=self.ns), lease(name, ns=self.ns))
            except (OSError, http.client.HTTPException):
                self.failed.append(name)   # unanswered: it may or may not have been stored
                self.targets = self.targets[1:] or self.targets
                continue
            if status == 201:
                self.acked.append(name)
            else:
                raise AssertionError((status, body))


@pytest.mark.slow
@pytest.mark.postgres
def test_sigterm_drains_no_acknowledged_write_lost_watch_resumes_elsewhere(tmp_path_factory, tmp_path):
    import websocket

    kubectl = require_kubectl()
    with served_pair(tmp_path_factory, "postgres", **TIMINGS) as (a, b):
        ns = "drain-" + uuid.uuid4().hex[:6]
        status, _, body = a.request("GET", LEASES.format(ns=ns))
        start_rv = body["metadata"]["resourceVersion"]
        stream = a.watch(LEASES.format(ns=ns) + f"?watch=true&resourceVersion={start_rv}")
        assert stream.status == 200
        cookie = f"sessionid={session_cookie(a)}"
        close_frames = []

        def read_page():
            # recv_frame: the raw frames (recv_data would answer the close, racing the exit).
            try:
                while True:
                    frame = page.recv_frame()
                    if frame.opcode == websocket.ABNF.OPCODE_CLOSE:
                        close_frames.append(frame.data)
                        return
            except Exception:
                return

        # `kubectl get -w` on the draining process: its watch ends cleanly, kubectl exits 0.
        kube_watch = subprocess.Popen([kubectl, "--kubeconfig", str(a.kubeconfig(tmp_path / "kc")), "get", "leases",
                                       "-n", ns, "-w"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        writers = [Writer(a, b, ns, f"w{k}") for k in range(3)]
        for w in writers:
            w.start()
        eventually(lambda: sum(len(w.acked) for w in writers) >= 30, 60, "writes to be acknowledged")
        # kubectl's watch is open (beside the test's own) before the signal: a kubectl still
        # starting would find the port closed, which is not what this test is about.
        watches = dict(component="apiserver", group="coordination.k8s.io", version="v1", resource="leases",
                       subresource="", scope="namespace", verb="WATCH")
        eventually(lambda: sample(scrape(a), "apiserver_longrunning_requests", **watches) >= 2, 60, "kubectl's watch")
        # The page socket opens just before the signal: on a saturated machine a socket idle for
        # seconds can be closed 1011 by a Redis read timeout in channels_redis (not ours to test).
        page = websocket.create_connection(f"ws://127.0.0.1:{a.http_port}/ws/live/?view=leases", cookie=cookie,
                                           origin=f"http://127.0.0.1:{a.http_port}", timeout=30)
        page_reader = threading.Thread(target=read_page, daemon=True)
        page_reader.start()
        seen: list[dict] = []

        def read_until_end():
            while True:
                ev = stream.next(timeout=60)
                if ev is None:
                    return   # a clean end of the stream (not a reset)
                seen.append(ev)

        a.proc.send_signal(signal.SIGTERM)
        read_until_end()
        # The page socket was told "service restart": live.js reconnects on 1012.
        page_reader.join(30)
        assert close_frames, "the page socket was dropped without a close frame"
        assert int.from_bytes(close_frames[0][:2], "big") == 1012
        assert a.proc.wait(60) == 0
        out, err = kube_watch.communicate(timeout=60)
        assert kube_watch.returncode == 0 and err == "", err
        assert "w0-0" in out
        eventually(lambda: sum(len(w.acked) for w in writers) >= 60, 60, "writes through the other process")
        for w in writers:
            w.stop.set()
        for w in writers:
            w.join(30)
        # Resume on the other process from the last resourceVersion the stream delivered.
        last_rv = seen[-1]["object"]["metadata"]["resourceVersion"] if seen else start_rv
        acked = {n for w in writers for n in w.acked}
        status, _, listed = b.request("GET", LEASES.format(ns=ns))
        stored = {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in listed["items"]}
        assert acked <= set(stored), f"acknowledged writes lost: {sorted(acked - set(stored))[:5]}"
        later = sum(1 for rv in stored.values() if int(rv) > int(last_rv))
        with b.watch(LEASES.format(ns=ns) + f"?watch=true&resourceVersion={last_rv}") as resumed:
            assert resumed.status == 200
            seen += resumed.events(later, timeout=30)
        names = [e["object"]["metadata"]["name"] for e in seen]
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in seen]
        assert all(e["type"] == "ADDED" for e in seen)
        assert rvs == sorted(rvs) and len(set(names)) == len(names), "a duplicate or out-of-order event"
        assert set(names) == set(stored), f"gap: missing {sorted(set(stored) - set(names))[:5]}"
        # The drained process gave up the maintenance Lease: the other holds it by now.
        spec = eventually(lambda: (s := holder_of(b)) and s.get("holderIdentity", "").endswith(f"_{b.proc.pid}") and s,
                        LEASE_SECONDS + 30, "the other process to hold the lease")
        assert spec["holderIdentity"] == f"{socket.gethostname()}_{b.proc.pid}"
        page.close()
        stream.close()


def test_live_js_reconnects_on_service_restart():
    """The code a drained process closes page sockets with is one live.js retries on."""
    text = (ROOT / "dashboard" / "web" / "static" / "kubedash" / "live.js").read_text()
    from dashboard.server.shutdown import SERVICE_RESTART

    assert SERVICE_RESTART == 1012 and SERVICE_RESTART < 4000   # >= 4000: "refused, don't retry"
    assert re.search(r"\[1006, 1011, 1012, 1013\]", text)


# --- what the jobs remove ---------------------------------------------------------------------

def test_jobs_remove_only_what_stopped_working_long_ago(db):
    from datetime import timedelta

    from django.utils import timezone

    from dashboard.access.models import ApiToken, ShareLink
    from dashboard.access.tokens import ensure_user
    from dashboard.server import maintenance

    user = ensure_user("maint-owner", "admin")
    now, old = timezone.now(), timezone.now() - maintenance.SHARE_LINK_RETENTION - timedelta(days=1)

    def link(name, **fields):
        return ShareLink.objects.create(token_hash=name, label=name, kind="Lease", creator=user,
                                        **{"expires": now + timedelta(days=1), **fields})

    def token(name, **fields):
        return ApiToken.objects.create(user=user, name=name, token_hash=name, **fields)

    link("live")
    link("expired-lately", expires=now - timedelta(days=1))
    link("expired-long-ago", expires=old)
    link("revoked-long-ago", revoked_at=old)
    token("forever")
    token("expired-lately", expires=now - timedelta(days=1))
    token("expired-long-ago", expires=old)
    token("revoked", revoked=True)
    assert maintenance.purge_share_links() == 2
    assert maintenance.purge_tokens() == 1
    assert sorted(ShareLink.objects.values_list("label", flat=True)) == ["expired-lately", "live"]
    assert sorted(ApiToken.objects.values_list("name", flat=True)) == ["expired-lately", "forever", "revoked"]

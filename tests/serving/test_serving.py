"""Serving: lanes (a renewal is answered while the expensive lane is full; a full lane answers
429 with Retry-After), worker processes (the supervisor replaces a killed worker and no
acknowledged write is lost), and live pages across processes (a page websocket on one process
is pushed a write taken by another, on SQLite with no Redis).

All against real `manage.py serve` processes; no timing assertions.
"""
from __future__ import annotations

import collections
import os
import signal
import threading
import time
import uuid

import orjson
import pytest

from conftest import LiveServer, child_pids, eventually, sample, scrape, served, served_pair, server_env
from manifests import job, lease

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def post_many(server: LiveServer, path: str, bodies: list[dict], threads: int = 4) -> None:
    chunks = [bodies[i::threads] for i in range(threads)]

    def run(chunk):
        for body in chunk:
            status, _, out = server.request("POST", path, body)
            assert status == 201, out

    workers = [threading.Thread(target=run, args=(chunk,)) for chunk in chunks]
    for w in workers:
        w.start()
    for w in workers:
        w.join(300)


# ---------------------------------------------------------------------------------------------
# Lanes


@pytest.fixture(scope="module")
def narrow_lanes(tmp_path_factory):
    """One worker whose expensive lane holds one request running and one waiting."""
    data_dir = tmp_path_factory.mktemp("kubedash-lanes")
    env = server_env(data_dir, KUBEDASH_EXPENSIVE_LANE_THREADS="1", KUBEDASH_EXPENSIVE_LANE_QUEUE="1")
    with served(data_dir, "--workers", "1", env=env) as server:
        yield server


def test_a_full_expensive_lane_answers_429_and_renewals_still_go_through(narrow_lanes):
    server = narrow_lanes
    ns = "lanes-" + uuid.uuid4().hex[:6]
    post_many(server, JOBS.format(ns=ns), [job(f"j{i}", ns=ns) for i in range(300)])
    status, _, held = server.request("POST", LEASES.format(ns=ns), lease("leader", ns=ns))
    assert status == 201, held

    # Eight clients loop unpaged Table lists: far more than the lane's two places.
    stopping = threading.Event()
    full = threading.Event()
    answers: list[tuple[int, dict, object]] = []

    def hammer():
        while not stopping.is_set():
            status, headers, body = server.request("GET", "/apis/batch/v1/jobs", headers={"Accept": TABLE})
            answers.append((status, headers, body if status != 200 else None))
            if status == 429:
                full.set()

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    renewals = []
    try:
        assert full.wait(120), "the expensive lane never filled up"
        for i in range(20):
            held["spec"]["holderIdentity"] = f"holder-{i}"
            status, _, out = server.request("PUT", f"{LEASES.format(ns=ns)}/leader", held)
            renewals.append(status)
            if status == 200:
                held = out
        # Still saturated after the renewals: they were answered while the lane was full.
        seen = len(answers)
        while not any(a[0] == 429 for a in answers[seen:]):
            time.sleep(0.05)
    finally:
        stopping.set()
        for t in threads:
            t.join(60)

    assert renewals == [200] * 20
    assert {a[0] for a in answers} <= {200, 429}
    status, headers, body = next(a for a in answers if a[0] == 429)
    assert headers["Retry-After"] == "1"
    assert headers["Content-Type"] == "application/json"
    assert body["kind"] == "Status" and body["code"] == 429 and body["reason"] == "TooManyRequests"
    assert body["details"]["retryAfterSeconds"] == 1


def test_small_pages_and_single_objects_are_not_the_expensive_lane(narrow_lanes):
    """While the expensive lane is full, a small page of a list, a GET, a create and
    discovery are still answered (they are on the fast lane)."""
    server = narrow_lanes
    ns = "lanes-small-" + uuid.uuid4().hex[:6]
    stopping = threading.Event()
    full = threading.Event()

    def hammer():
        while not stopping.is_set():
            status, _, _ = server.request("GET", "/apis/batch/v1/jobs", headers={"Accept": TABLE})
            if status == 429:
                full.set()

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    try:
        assert full.wait(120)
        assert server.request("POST", LEASES.format(ns=ns), lease("a", ns=ns))[0] == 201
        assert server.request("GET", f"{LEASES.format(ns=ns)}/a")[0] == 200
        assert server.request("GET", "/apis/batch/v1/jobs?limit=50")[0] == 200
        assert server.request("GET", "/apis/coordination.k8s.io/v1")[0] == 200
        assert server.request("GET", "/readyz", token="-")[0] == 200
    finally:
        stopping.set()
        for t in threads:
            t.join(60)


# ---------------------------------------------------------------------------------------------
# The fast lane on the event loop (SQLite): answered there when it cannot wait, else on the thread


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory):
    with served(tmp_path_factory.mktemp("kubedash-inline"), "--workers", "1") as server:
        yield server


def logged_lanes(server: LiveServer, method: str, path: str) -> list[str]:
    """The lane of each request the server's JSON request log recorded for method + path."""
    lanes = []
    for line in server.log().splitlines():
        if line.startswith("{"):
            entry = orjson.loads(line)
            if entry.get("method") == method and entry.get("path") == path:
                lanes.append(entry["lane"])
    return lanes


def renew(server: LiveServer, path: str, held: dict, holder: str):
    held["spec"]["holderIdentity"] = holder
    return server.request("PUT", path, held)


def test_renewals_and_reads_of_one_object_are_answered_on_the_event_loop(one_worker):
    server = one_worker
    ns = "inline-" + uuid.uuid4().hex[:6]
    path = f"{LEASES.format(ns=ns)}/leader"
    status, _, held = server.request("POST", LEASES.format(ns=ns), lease("leader", ns=ns))
    assert status == 201, held
    for i in range(3):
        status, _, held = renew(server, path, held, f"h{i}")
        assert status == 200, held
    status, _, got = server.request("GET", path)
    assert status == 200 and got["spec"]["holderIdentity"] == "h2"
    assert logged_lanes(server, "PUT", path) == ["fast-loop"] * 3
    assert logged_lanes(server, "GET", path) == ["fast-loop"]


def test_event_writes_take_the_background_lane_on_the_loop(one_worker):
    """Event writes (both groups) are the background lane's, answered on the loop like a
    renewal; reading an Event is the fast lane's."""
    server = one_worker
    ns = "bg-" + uuid.uuid4().hex[:6]
    events = f"/api/v1/namespaces/{ns}/events"
    body = {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Job", "name": "j", "namespace": ns},
            "reason": "SuccessfulCreate", "message": "Created pod: j-1", "type": "Normal", "count": 1}
    status, _, out = server.request("POST", events, body)
    assert status == 201, out
    status, _, out = server.request("PATCH", f"{events}/e1", {"count": 2}, content_type="application/merge-patch+json")
    assert status == 200 and out["count"] == 2, out
    v1 = f"/apis/events.k8s.io/v1/namespaces/{ns}/events/e1"
    status, _, out = server.request("PATCH", v1, {"metadata": {"labels": {"seen": "twice"}}},
                                    content_type="application/merge-patch+json")
    assert status == 200 and out["deprecatedCount"] == 2, out
    status, _, out = server.request("GET", f"{events}/e1")
    assert status == 200 and out["metadata"]["labels"] == {"seen": "twice"}, out
    assert logged_lanes(server, "POST", events) == ["background-loop"]
    assert logged_lanes(server, "PATCH", f"{events}/e1") == ["background-loop"]
    assert logged_lanes(server, "PATCH", v1) == ["background-loop"]
    assert logged_lanes(server, "GET", f"{events}/e1") == ["fast-loop"]


def test_event_writes_over_the_budget_are_answered_429_with_retry_after(tmp_path):
    """Events have a budget of their own per process (KUBEDASH_EVENT_WRITES_PER_SECOND, burst
    KUBEDASH_EVENT_WRITE_BURST): beyond it an Event write is answered 429 TooManyRequests with
    Retry-After and writes nothing, while a Lease write beside it goes through; once the bucket
    refills, Events are taken again."""
    env = server_env(tmp_path, KUBEDASH_EVENT_WRITES_PER_SECOND="0.5", KUBEDASH_EVENT_WRITE_BURST="3")
    with served(tmp_path, "--workers", "1", env=env, tls=False) as server:
        ns = "budget-" + uuid.uuid4().hex[:6]
        events = f"/api/v1/namespaces/{ns}/events"

        def event(name: str) -> dict:
            return {"metadata": {"name": name}, "involvedObject": {"kind": "Job", "name": "j", "namespace": ns},
                    "reason": "SuccessfulCreate", "message": "Created pod: j-1", "type": "Normal", "count": 1}

        answers = [server.request("POST", events, event(f"e{i}")) for i in range(4)]
        assert [status for status, _, _ in answers[:3]] == [201, 201, 201], answers
        status, headers, body = answers[3]
        assert status == 429 and headers.get("Retry-After") == "1", (status, headers, body)
        assert body["kind"] == "Status" and body["reason"] == "TooManyRequests", body
        assert body["details"]["retryAfterSeconds"] == 1 and "KUBEDASH_EVENT_WRITES_PER_SECOND" in body["message"]
        status, _, out = server.request("POST", LEASES.format(ns=ns), lease("beside", ns=ns))
        assert status == 201, out   # (not an Event: no budget of the Events')
        assert server.request("GET", f"{events}/e3")[0] == 404   # the refused write wrote nothing
        status, headers, body = server.request("PATCH", f"{events}/e0", {"count": 2},
                                               content_type="application/merge-patch+json")
        assert status == 429 and headers.get("Retry-After") == "1", body   # (every Event write counts)
        eventually(lambda: server.request("POST", events, event("e3"))[0] == 201, what="the budget to refill")
        assert sample(scrape(server), "kubedash_event_writes_refused_total") >= 2


def test_a_background_write_yields_to_fast_requests_within_its_bound(monkeypatch, settings):
    """yield_to_fast on a made-up clock: it goes once no fast request started for QUIET_SECONDS;
    while they keep starting it waits, but never past KUBEDASH_BACKGROUND_YIELD_MS."""
    import asyncio

    from dashboard.server import lanes as lanes_module

    settings.KUBEDASH_BACKGROUND_YIELD_MS = 50
    clock = [1000.0]
    slept = []
    monkeypatch.setattr(lanes_module.time, "monotonic", lambda: clock[0])
    lane_set = lanes_module.Lanes()

    async def fake_sleep(seconds, renewals_meanwhile):
        slept.append(seconds)
        clock[0] += seconds
        if renewals_meanwhile:
            lane_set.fast_started()   # another renewal started just as the wait ended

    def run(renewals_meanwhile: bool) -> float:
        slept.clear()
        monkeypatch.setattr(lanes_module.asyncio, "sleep", lambda s: fake_sleep(s, renewals_meanwhile))
        start = clock[0]
        asyncio.run(lane_set.yield_to_fast())
        return clock[0] - start

    assert run(False) == 0 and slept == []              # no fast request yet: at once
    lane_set.fast_started()
    assert run(False) == pytest.approx(lanes_module.QUIET_SECONDS)   # one just started: it goes first
    lane_set.fast_started()
    assert run(True) == pytest.approx(0.050)            # renewals back to back: the bound
    assert max(slept) <= lanes_module.QUIET_SECONDS + 1e-9   # (looking again after each quiet window)
    clock[0] += 1
    assert run(True) == 0                               # long quiet: at once


def test_a_long_list_pauses_for_fast_requests_on_the_expensive_lane_only(monkeypatch, settings):
    """pause_for_fast (kube/yielding.py's pause point) on a made-up clock: on an expensive lane's
    thread it sleeps while fast requests keep coming, PAUSE_SECONDS at most; on any other
    thread (the loop, the fast lane's small lists) it never waits."""
    from dashboard.kube import yielding
    from dashboard.server import lanes as lanes_module

    clock = [500.0]
    slept = []

    def fake_sleep(seconds):
        slept.append(seconds)
        clock[0] += seconds
        lane_set.fast_started()   # renewals keep coming

    monkeypatch.setattr(lanes_module.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(lanes_module.time, "sleep", fake_sleep)
    monkeypatch.setattr(yielding, "pause", yielding.pause)   # (put back after the test)
    lane_set = lanes_module.Lanes()
    assert yielding.pause == lane_set.pause_for_fast   # installed: kube's lists and Tables call it

    def paused_on(thread_name: str) -> float:
        slept.clear()
        lane_set.fast_started()
        box = []
        worker = threading.Thread(target=lambda: box.append(yielding.every(yielding.ROWS)), name=thread_name)
        worker.start()
        worker.join()
        return sum(slept)

    assert paused_on("lane-expensive_0") == pytest.approx(lanes_module.PAUSE_SECONDS)
    assert paused_on("lane-fast_0") == 0
    assert paused_on("MainThread") == 0
    slept.clear()
    yielding.every(yielding.ROWS + 1)   # not a pause point
    assert slept == []


def test_buffered_answers_say_their_length(one_worker):
    """A buffered response is sent with Content-Length (not chunked), as kube-apiserver sends it."""
    import http.client

    server = one_worker
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    try:
        # (a page of a list: a whole list is streamed, chunked: tests/test_list_stream.py)
        for path, headers in (("/apis/coordination.k8s.io/v1/leases?limit=500", {}), ("/version", {}),
                              ("/apis/coordination.k8s.io/v1/namespaces/x/leases/missing", {}),
                              # a gzipped page: Django's GZipMiddleware has set the length already
                              ("/accounts/login/", {"Accept-Encoding": "gzip"})):
            conn.request("GET", path, headers={"Authorization": f"Bearer {server.admin_token}", **headers})
            resp = conn.getresponse()
            body = resp.read()
            assert resp.getheader("Transfer-Encoding") is None, (path, resp.getheaders())
            lengths = resp.msg.get_all("Content-Length")
            assert len(lengths) == 1 and int(lengths[0]) == len(body) > 0, (path, lengths)
        assert resp.getheader("Content-Encoding") == "gzip"
    finally:
        conn.close()


def _in_background(fn):
    result = {}
    thread = threading.Thread(target=lambda: result.update(answer=fn()), daemon=True)
    thread.start()
    return thread, result


def test_the_loop_never_waits_for_sqlites_lock(one_worker):
    """Another connection holds SQLite's write lock: a renewal waits for it on the lane's
    thread while the loop goes on answering reads; once the lock is free the renewal is done."""
    import sqlite3

    server = one_worker
    ns = "inline-busy-" + uuid.uuid4().hex[:6]
    path = f"{LEASES.format(ns=ns)}/leader"
    status, _, held = server.request("POST", LEASES.format(ns=ns), lease("leader", ns=ns))
    assert status == 201, held
    other = sqlite3.connect(server.data_dir / "kubedash.sqlite3", isolation_level=None, timeout=30)
    other.execute("BEGIN IMMEDIATE")
    try:
        put, result = _in_background(lambda: renew(server, path, held, "while-locked"))
        for _ in range(3):   # (a wait by design: the loop looks again for a few ms, then hands the
            put.join(0.5)    # renewal to the lane's thread; it must be there before the lock is let go)
        assert put.is_alive(), f"the renewal did not wait for the lock: {result}"
        status, _, got = server.request("GET", path)
        assert status == 200 and got["spec"]["holderIdentity"] == "node-a", got   # not yet renewed
        assert put.is_alive(), "the read was answered only after the renewal: the loop waited"
    finally:
        other.execute("ROLLBACK")
        other.close()
    put.join(30)
    status, _, out = result["answer"]
    assert status == 200 and out["spec"]["holderIdentity"] == "while-locked", out
    assert logged_lanes(server, "PUT", path) == ["fast"]
    assert logged_lanes(server, "GET", path) == ["fast-loop"]


def test_a_write_waits_for_its_turn_on_the_thread_not_on_the_loop(one_worker):
    """Another writer has the writers' turn (the lock file): the renewal takes the thread and
    waits there; reads are still answered on the loop."""
    import fcntl

    server = one_worker
    ns = "inline-turn-" + uuid.uuid4().hex[:6]
    path = f"{LEASES.format(ns=ns)}/leader"
    status, _, held = server.request("POST", LEASES.format(ns=ns), lease("leader", ns=ns))
    assert status == 201, held
    fd = os.open(server.data_dir / "kubedash.sqlite3-writers", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        put, result = _in_background(lambda: renew(server, path, held, "after-turn"))
        for _ in range(3):   # (a wait by design, as above: the renewal on the thread, waiting)
            put.join(0.5)
        assert put.is_alive(), f"the renewal did not wait for its turn: {result}"
        status, _, _ = server.request("GET", path)
        assert status == 200
        assert put.is_alive(), "the read was answered only after the renewal: the loop waited"
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    put.join(30)
    status, _, out = result["answer"]
    assert status == 200 and out["spec"]["holderIdentity"] == "after-turn", out
    assert logged_lanes(server, "PUT", path) == ["fast"]


# ---------------------------------------------------------------------------------------------
# Workers


@pytest.mark.slow
def test_killed_worker_is_replaced_and_no_acknowledged_write_is_lost(tmp_path_factory):
    with served(tmp_path_factory.mktemp("kubedash-workers"), "--workers", "2") as server:
        deadline = time.monotonic() + 60
        while len(child_pids(server.proc.pid)) < 2:
            assert time.monotonic() < deadline, "the supervisor did not start two workers"
            time.sleep(0.1)
        before = child_pids(server.proc.pid)
        ns = "kill-" + uuid.uuid4().hex[:6]
        token = server.admin_token
        acknowledged: list[str] = []
        stopping = threading.Event()
        lock = threading.Lock()

        def writer(label: str):
            serial = 0
            while not stopping.is_set():
                serial += 1
                name = f"{label}-{serial}"
                try:
                    status, _, _ = server.request("POST", LEASES.format(ns=ns), lease(name, ns=ns), token=token)
                except OSError:
                    continue  # the worker died with this request: not acknowledged
                if status == 201:
                    with lock:
                        acknowledged.append(name)

        threads = [threading.Thread(target=writer, args=(f"w{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        while len(acknowledged) < 40:
            time.sleep(0.05)
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        # A replacement appears, and writes keep being acknowledged.
        while True:
            now = child_pids(server.proc.pid)
            if len(now) == 2 and victim not in now:
                break
            assert time.monotonic() < deadline + 60, f"worker {victim} was not replaced ({now})"
            time.sleep(0.1)
        mark = len(acknowledged)
        while len(acknowledged) < mark + 40:
            time.sleep(0.05)
        stopping.set()
        for t in threads:
            t.join(60)

        status, _, body = server.request("GET", LEASES.format(ns=ns))
        assert status == 200
        stored = {item["metadata"]["name"] for item in body["items"]}
        assert set(acknowledged) <= stored
        assert child_pids(server.proc.pid) - before, "no new worker"
    assert server.proc.returncode == 0
    assert not child_pids(server.proc.pid)


@pytest.mark.slow
def test_workers_share_the_https_port(tmp_path_factory):
    """kubectl's listener works through the workers: TLS on the adopted socket."""
    import ssl
    import http.client

    with served(tmp_path_factory.mktemp("kubedash-workers-tls"), "--workers", "2") as server:
        port = int(server.https_url.rsplit(":", 1)[1])
        context = ssl.create_default_context(cafile=server.ca_file)
        for _ in range(6):  # fresh connections: the kernel spreads them over the workers
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
            conn.request("GET", "/apis/coordination.k8s.io/v1/leases",
                         headers={"Authorization": f"Bearer {server.admin_token}"})
            resp = conn.getresponse()
            assert resp.status == 200, resp.read()
            resp.read()
            conn.close()


@pytest.mark.slow
def test_a_burst_of_connections_is_spread_over_the_workers(tmp_path_factory):
    """A client pool opens its connections at once (wrk, client-go): they do not all land on
    the worker that woke first. The request log names the worker (pid) that answered."""
    import socket

    with served(tmp_path_factory.mktemp("kubedash-workers-spread"), "--workers", "2") as server:
        server.request("GET", "/healthz")
        token = server.admin_token
        socks = [socket.socket() for _ in range(16)]
        for sock in socks:
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", server.http_port))   # all 16 in flight at once
        paths = []
        for i, sock in enumerate(socks):
            sock.setblocking(True)
            sock.settimeout(30)
            path = f"/apis/coordination.k8s.io/v1/namespaces/spread/leases/conn-{i}"
            paths.append(path)
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
        for sock in socks:
            assert b" 404 " in sock.recv(65536).split(b"\r\n", 1)[0]
            sock.close()
        pids = {}
        for line in server.log().splitlines():
            if line.startswith("{"):
                entry = orjson.loads(line)
                if entry.get("path") in paths:
                    pids[entry["path"]] = entry["pid"]
        assert len(pids) == 16, pids
        per_worker = sorted(collections.Counter(pids.values()).values())
        assert len(per_worker) == 2 and per_worker[0] >= 3, f"connections per worker: {per_worker}"


# ---------------------------------------------------------------------------------------------
# Live pages across processes (SQLite, no Redis)


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """Two single-worker servers on one SQLite database; no Redis, a 30 s safety poll."""
    with served_pair(tmp_path_factory, "sqlite", KUBEDASH_WATCH_POLL_SECONDS="30") as servers:
        yield servers


def test_page_websocket_on_one_process_is_pushed_a_write_taken_by_another(two_processes):
    import websocket  # websocket-client (a dependency of the kubernetes client)

    a, b = two_processes
    session = a.session()
    ns = "pages-" + uuid.uuid4().hex[:6]
    ws = websocket.create_connection(f"ws://127.0.0.1:{a.http_port}/ws/live/?view=leases&namespace={ns}&rv=0",
                                     cookie=f"sessionid={session}", origin=a.http_url, timeout=30)
    try:
        status, _, _ = b.request("POST", LEASES.format(ns=ns), lease("pushed-across", ns=ns))
        assert status == 201
        deadline = time.monotonic() + 20
        while True:
            assert time.monotonic() < deadline, "no push for the write taken by the other process"
            message = ws.recv()
            if "pushed-across" in message:
                break
    finally:
        ws.close()


def test_revoking_a_share_link_in_another_process_closes_its_socket(two_processes):
    import websocket

    a, b = two_processes
    ns = "share-" + uuid.uuid4().hex[:6]
    script = f"""
from datetime import timedelta
from django.utils import timezone
from dashboard.access.models import ShareLink, hash_token
from dashboard.access.tokens import ensure_user
user = ensure_user("sharer", "admin")
link = ShareLink.objects.create(token_hash=hash_token("tok-{ns}"), label="t", kind="Lease", namespace="{ns}",
                                label_selector="", creator=user, expires=timezone.now() + timedelta(hours=1))
print(link.pk)
"""
    link_id = a.manage("shell", "-c", script).strip().splitlines()[-1]
    # Open the link on A: the share session, then its page socket.
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", a.http_port, timeout=30)
    conn.request("GET", f"/s/tok-{ns}/")
    resp = conn.getresponse()
    resp.read()
    cookie = resp.getheader("Set-Cookie", "")
    session = cookie.split("sessionid=", 1)[1].split(";", 1)[0] if "sessionid=" in cookie else ""
    assert session, f"share link landing answered {resp.status} without a session"
    ws = websocket.create_connection(f"ws://127.0.0.1:{a.http_port}/ws/live/?view=leases&namespace={ns}&rv=0",
                                     cookie=f"sessionid={session}", origin=a.http_url, timeout=30)
    try:
        # Revoke in a third process (the function the page's revoke button calls).
        b.manage("shell", "-c", f"from dashboard.access.models import ShareLink; from dashboard.web.share import revoke; "
                                f"revoke(ShareLink.objects.get(pk={link_id}))")
        deadline = time.monotonic() + 20
        closed = False
        while time.monotonic() < deadline:
            try:
                opcode, data = ws.recv_data()
            except (websocket.WebSocketConnectionClosedException, ConnectionResetError):
                closed = True  # the server closed the socket (a reset when our close reply crossed it)
                break
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                closed = True
                assert int.from_bytes(data[:2], "big") == 4403
                break
        assert closed, "the share socket on A stayed open after the link was revoked elsewhere"
    finally:
        ws.close()


def test_start_up_objects_are_kept_out_of_garbage_collection():
    """serve's ready(): Django, the URL patterns and every kind's compiled schema are frozen
    (gc.freeze) so full collections walk only what requests create."""
    import gc

    from dashboard.kube import registry, schema
    from dashboard.server.management.commands.serve import freeze_startup_objects

    gc.unfreeze()
    try:
        freeze_startup_objects()
        assert gc.get_freeze_count() > 10_000
        assert all(res.definition in schema._compiled for res in registry.all_resources())
    finally:
        gc.unfreeze()

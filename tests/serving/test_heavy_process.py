"""The expensive lane's work in a child process at a lower OS priority (server/heavy.py): big lists,
Tables and pages are answered by the child (the request log says "expensive-process"), a streamed
list arrives whole, errors are still Statuses, a killed child is replaced, and the child goes
when its server does. Against a real `manage.py serve`; no timing assertions.
"""
from __future__ import annotations

import contextlib
import gzip
import os
import signal
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import orjson
import pytest

import pg_support
from conftest import served, server_env
from manifests import job

from .test_serving import JOBS, TABLE, post_many

ALL_JOBS = "/apis/batch/v1/jobs"


def heavy_children(pid: int) -> list[int]:
    """(Started by whichever thread of the server: each task lists its own children.)"""
    found = [int(c) for task in Path(f"/proc/{pid}/task").iterdir() for c in (task / "children").read_text().split()]
    return [c for c in found if b"dashboard.server.heavy" in Path(f"/proc/{c}/cmdline").read_bytes()]


def nice_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def autogroup_of(pid: int) -> tuple[str, int] | None:
    """(the scheduling group, its nice) from /proc/PID/autogroup; None on a kernel without autogroups."""
    try:
        group, _, nice = Path(f"/proc/{pid}/autogroup").read_text().split()
    except (OSError, ValueError):
        return None
    return group, int(nice)


def logged(server, method: str, path: str, at_least: int = 1) -> list[dict]:
    """The request log's entries for method + path, once it has at_least of them (a streamed
    response's line is written once its stream is closed, after the client has it all)."""
    deadline = time.monotonic() + 10
    while len(entries := _logged(server, method, path)) < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    return entries


def _logged(server, method: str, path: str) -> list[dict]:
    entries = []
    for line in server.log().splitlines():
        if line.startswith("{"):
            entry = orjson.loads(line)
            if entry.get("method") == method and entry.get("path") == path:
                entries.append(entry)
    return entries


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def heavy(request, tmp_path_factory):
    """One worker with its child, on SQLite or on PostgreSQL (where the child holds connections
    of its own: docs/OPERATIONS.md)."""
    data_dir = tmp_path_factory.mktemp("kubedash-heavy")
    env, dbname = server_env(data_dir, KUBEDASH_HEAVY_PROCESS="1"), None
    if request.param == "postgres":
        pg_support.require_postgres()
        dbname = pg_support.create_database()
        env["DATABASE_URL"] = pg_support.pg_url(dbname)
    try:
        with served(data_dir, "--workers", "1", env=env) as server:
            yield server
    finally:
        if dbname:
            pg_support.drop_database(dbname)


def test_tables_and_lists_are_answered_by_a_niced_child(heavy):
    server = heavy
    ns = "heavy-" + uuid.uuid4().hex[:6]
    post_many(server, JOBS.format(ns=ns), [job(f"j{i}", ns=ns) for i in range(30)])
    status, _, table = server.request("GET", JOBS.format(ns=ns), headers={"Accept": TABLE})
    assert status == 200, table
    assert table["kind"] == "Table" and sorted(r["cells"][0] for r in table["rows"]) == sorted(f"j{i}" for i in range(30))
    # The whole list (streamed) holds what a page of it does.
    status, _, whole = server.request("GET", ALL_JOBS)
    assert status == 200, whole
    status, _, page = server.request("GET", f"{ALL_JOBS}?limit=500")
    assert status == 200 and not page["metadata"].get("continue")
    assert whole["items"] == page["items"] and len(whole["items"]) >= 30
    assert [e["lane"] for e in logged(server, "GET", JOBS.format(ns=ns))] == ["expensive-process"]
    # (the page: the fast lane's, on the loop on SQLite, its threads on PostgreSQL)
    lanes_ = sorted(e["lane"] for e in logged(server, "GET", ALL_JOBS, 2))
    assert lanes_[0] == "expensive-process" and lanes_[1] in ("fast", "fast-loop"), lanes_
    assert all(e["user"] for e in logged(server, "GET", ALL_JOBS, 2))   # the child's record came back
    [child] = heavy_children(server.proc.pid)
    # (KUBEDASH_HEAVY_NICE: nice steps, or SCHED_IDLE)
    assert nice_of(child) > nice_of(server.proc.pid) or os.sched_getscheduler(child) == os.SCHED_IDLE
    # In its server's session: where the kernel groups tasks by session (autogroups), a nice value
    # ranks a task only within its group; in a session of its own the child took as much CPU as
    # the server (issue 42). (Its own process group: a terminal's Ctrl-C is the server's.)
    if (ours := autogroup_of(server.proc.pid)) and (its := autogroup_of(child)):
        assert its == ours
    assert os.getpgid(child) == child != os.getpgid(server.proc.pid)


def test_whole_lists_are_gzipped_for_clients_that_ask(heavy):
    """A whole list (streamed from the child) comes gzipped to a client that accepts gzip, as
    kube-apiserver's does (client-go asks by default): the same Table, a fraction of the bytes
    through the serving process (issue 42); to other clients, and for pages, as before."""
    server = heavy
    ns = "gz-" + uuid.uuid4().hex[:6]
    post_many(server, JOBS.format(ns=ns), [job(f"j{i}", ns=ns) for i in range(40)])
    gz_status, gz_headers, packed = server.request("GET", JOBS.format(ns=ns),
                                                   headers={"Accept": TABLE, "Accept-Encoding": "gzip"})
    assert gz_status == 200 and gz_headers.get("Content-Encoding") == "gzip", gz_headers
    assert "Accept-Encoding" in gz_headers.get("Vary", "")
    status, headers, plain = server.request("GET", JOBS.format(ns=ns), headers={"Accept": TABLE})
    assert status == 200 and "Content-Encoding" not in headers
    unpacked = orjson.loads(gzip.decompress(packed))
    assert unpacked["kind"] == "Table" and len(packed) < len(orjson.dumps(plain)) / 4
    assert [r["cells"][0] for r in unpacked["rows"]] == [r["cells"][0] for r in plain["rows"]]
    assert logged(server, "GET", JOBS.format(ns=ns), 2)[0]["lane"] == "expensive-process"
    # JSON lists too; a page (the fast lane) is not compressed
    status, headers, packed = server.request("GET", ALL_JOBS, headers={"Accept-Encoding": "gzip"})
    assert status == 200 and headers.get("Content-Encoding") == "gzip"
    assert len(orjson.loads(gzip.decompress(packed))["items"]) >= 40
    status, headers, page = server.request("GET", f"{JOBS.format(ns=ns)}?limit=10", headers={"Accept-Encoding": "gzip"})
    assert status == 200 and "Content-Encoding" not in headers and len(page["items"]) == 10
    # an error is a plain Status, whatever the client accepts
    status, headers, body = server.request("GET", f"{ALL_JOBS}?labelSelector=a%20in%20(", headers={"Accept-Encoding": "gzip"})
    assert status == 400 and body["kind"] == "Status" and "Content-Encoding" not in headers


def test_errors_and_pages_from_the_child(heavy):
    server = heavy
    status, _, body = server.request("GET", f"{ALL_JOBS}?labelSelector=a%20in%20(")
    assert status == 400 and body["kind"] == "Status", body
    status, _, body = server.request("GET", f"{ALL_JOBS}?labelSelector=x", token="not-a-token")
    assert status == 401 and body["kind"] == "Status", body
    status, headers, body = server.request("GET", "/accounts/login/", token="-")
    assert status == 200 and b"<form" in body
    assert logged(server, "GET", "/accounts/login/")[-1]["lane"] == "expensive-process"


def test_metrics_are_the_serving_process_own(heavy):
    """/metrics (the expensive lane's, like every non-API path) is answered by the serving process:
    its registry counts the requests it served, and the lane records it in-process."""
    server = heavy
    for _ in range(2):
        status, _, _ = server.request("GET", "/version")
        assert status == 200
    status, _, text = server.request("GET", "/metrics")
    assert status == 200 and b'apiserver_request_total{' in text and b'verb="GET"' in text
    assert logged(server, "GET", "/metrics")[-1]["lane"] == "expensive"


@contextlib.contextmanager
def writers_lock_held(server):
    """Another session holds the writers' lock: SQLite's write lock, or PostgreSQL's revision lock."""
    url = server.env.get("DATABASE_URL")
    if url:
        import psycopg

        with psycopg.connect(url) as conn:   # (in a transaction: held until the rollback)
            conn.execute("SELECT pg_advisory_xact_lock(7411)")
            try:
                yield
            finally:
                conn.rollback()
        return
    other = sqlite3.connect(server.data_dir / "kubedash.sqlite3", isolation_level=None, timeout=30)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_the_child_pauses_while_the_fast_lane_is_busy(heavy):
    """heavy_child.Pacer: while the fast lane is busy (here a write waits for the writers' lock,
    held from outside: the lane holds it the whole time), the Table's work in the child pauses;
    its log line says for how long ("paced"), and the serving process's metrics count it. With
    the lane idle it runs straight through."""
    server = heavy
    ns = "paced-" + uuid.uuid4().hex[:6]
    path = JOBS.format(ns=ns)
    post_many(server, path, [job(f"j{i}", ns=ns) for i in range(300)])   # (a pause point every 256 rows)

    def table() -> None:
        status, _, body = server.request("GET", path, headers={"Accept": TABLE})
        assert status == 200 and body["kind"] == "Table" and len(body["rows"]) == 300, body

    time.sleep(0.5)   # (a wait by design: the POSTs kept the fast lane busy; heavy.FastLoad's share decays in ~0.1 s)
    table()
    [quiet] = logged(server, "GET", path)
    assert quiet["lane"] == "expensive-process" and "paced" not in quiet, quiet

    answered = {}
    with writers_lock_held(server):
        patch = threading.Thread(target=lambda: answered.update(patch=server.request(
            "PATCH", f"{path}/j0", {"metadata": {"labels": {"held": "yes"}}},
            content_type="application/merge-patch+json")))
        patch.start()
        patch.join(1)   # (a wait by design: the write waits with the fast lane busy; FastLoad's share nears 1 in ~0.3 s)
        assert patch.is_alive(), answered
        table()
    patch.join(30)
    assert answered["patch"][0] == 200, answered
    [_, paced] = logged(server, "GET", path, 2)
    assert paced["lane"] == "expensive-process" and paced.get("paced", 0) > 0, paced
    status, _, text = server.request("GET", "/metrics")
    counted = [line for line in text.decode().splitlines() if line.startswith("kubedash_heavy_paced_seconds_total ")]
    assert status == 200 and counted and float(counted[0].split()[1]) > 0, counted


def test_a_killed_child_is_replaced(heavy):
    server = heavy
    [child] = heavy_children(server.proc.pid)
    os.kill(child, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists() and Path(f"/proc/{child}/stat").read_text().split(")")[1].split()[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    status, _, table = server.request("GET", ALL_JOBS, headers={"Accept": TABLE})
    assert status == 200 and table["kind"] == "Table", table
    [replacement] = heavy_children(server.proc.pid)
    assert replacement != child


@pytest.mark.slow
def test_the_child_goes_with_its_server(tmp_path_factory):
    with served(tmp_path_factory.mktemp("kubedash-heavy-stop"), "--workers", "1") as server:
        status, _, _ = server.request("GET", ALL_JOBS)
        assert status == 200
        [child] = heavy_children(server.proc.pid)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{child}").exists():
        assert time.monotonic() < deadline, "the heavy child outlived its server"
        time.sleep(0.1)


def pg_connections_of(pid: int) -> int:
    """TCP connections to PostgreSQL (port 5432) that process pid holds: its socket inodes in
    /proc/net/tcp."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[2].endswith(":1538") and fields[9] in inodes:   # (remote port 5432)
                count += 1
    return count


@pytest.mark.slow
@pytest.mark.postgres
def test_streams_beyond_the_lane_threads_share_the_child_connections(tmp_path_factory):
    """On PostgreSQL the child is on by default, and however many whole lists stream at once it
    holds at most KUBEDASH_EXPENSIVE_LANE_THREADS database connections (their pieces take turns
    on its pool): clients that read slowly keep the lane's 2 threads + 4 queued admitted
    streams in flight, the rest are answered 429 with Retry-After, and every admitted list
    arrives whole."""
    pg_support.require_postgres()
    import http.client
    import socket

    data_dir = tmp_path_factory.mktemp("kubedash-heavy-pg")
    env = server_env(data_dir)
    env.pop("KUBEDASH_HEAVY_PROCESS", None)   # (PostgreSQL's default)
    env.update(KUBEDASH_EXPENSIVE_LANE_THREADS="2", KUBEDASH_EXPENSIVE_LANE_QUEUE="4",
               KUBEDASH_LIST_STREAM_BATCH="10")   # (many pieces a list)
    dbname = pg_support.create_database("kubedash_heavypg")
    env["DATABASE_URL"] = pg_support.pg_url(dbname)
    socks = []
    try:
        with served(data_dir, "--workers", "1", env=env) as server, contextlib.ExitStack() as closing:
            ns = "streams-" + uuid.uuid4().hex[:6]
            # ~8 MB a list: more than the sockets and the stream's backlog hold for a client not reading.
            bodies = [job(f"j{i:03}", ns=ns) for i in range(150)]
            for body in bodies:
                body["metadata"]["annotations"] = {"pad": "x" * 50_000}
            post_many(server, JOBS.format(ns=ns), bodies)
            status, _, _ = server.request("GET", ALL_JOBS)   # (the child is started)
            assert status == 200
            [child] = heavy_children(server.proc.pid)
            request = (f"GET {JOBS.format(ns=ns)} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.admin_token}\r\n"
                       "Connection: close\r\n\r\n").encode()
            for _ in range(9):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)   # (a slow reader: a small window)
                sock.connect((server.host, server.http_port))
                sock.sendall(request)
                socks.append(closing.enter_context(sock))
            # Every admitted stream has started (the child has sent headers and pieces) and waits on
            # its client; meanwhile the child never holds more than the pool's connections (a sampling
            # window by design: the bound holds the whole time the streams are in flight).
            most, deadline = 0, time.monotonic() + 4
            while time.monotonic() < deadline:
                most = max(most, pg_connections_of(child))
                time.sleep(0.05)
            with pg_support.connect() as conn:
                total = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (dbname,)).fetchone()[0]
            assert 1 <= most <= 2, most
            assert total <= 14, total   # docs/OPERATIONS.md: a worker's bound, child included
            answers = []
            for sock in socks:
                resp = http.client.HTTPResponse(sock)
                resp.begin()
                answers.append((resp.status, resp.getheader("Retry-After"), orjson.loads(resp.read())))
            assert sorted(status for status, _, _ in answers) == [200] * 6 + [429] * 3, [a[0] for a in answers]
            for status, retry_after, body in answers:
                if status == 429:
                    assert retry_after and body["kind"] == "Status" and body["code"] == 429, body
                else:
                    assert [item["metadata"]["name"] for item in body["items"]] == [b["metadata"]["name"] for b in bodies]
    finally:
        pg_support.drop_database(dbname)

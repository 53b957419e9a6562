"""PostgreSQL's group commit (kube/storage/postgresql.py, KUBEDASH_GROUP_COMMIT=1; the procedure
kube_write of migrations 0006 and 0008) through two real server processes.

Writers on both processes at once, some of them with a stale resourceVersion or racing for one
object: each gets its own right answer (200 with its own revision, or 409), the revisions in the
log are dense and in the order the answers give, and a watch sees every accepted write once, in
revision order. The first part holds the revision lock from the test while the writes arrive,
so every write queues, and the first to get the lock commits them all, the other process's
too (/metrics counts the writes handed over).
"""
from __future__ import annotations

import os
import random
import re
import signal
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

import pg_support
from conftest import LiveServer, child_pids, migrate, running, server_env, served_pair
from manifests import collection, make, write

pytestmark = pytest.mark.postgres   # (and Redis)

REVISION_LOCK = 7411   # dashboard/kube/storage/postgresql.py


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    with served_pair(tmp_path_factory, "postgres", KUBEDASH_GROUP_COMMIT="1") as servers:
        yield servers


def metric(server, name: str) -> float:
    status, _, text = server.request("GET", "/metrics")
    assert status == 200
    text = text.decode() if isinstance(text, bytes) else str(text)
    found = re.findall(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found[0]) if found else 0.0


def handed(server) -> float:
    """Updates this process's writers handed to another session, which committed them."""
    return metric(server, 'kubedash_group_commit_total{what="handed"}')


def put(server, obj: dict, tag: str):
    """PUT obj (at the resourceVersion it holds) with one more label; (status, answer)."""
    body = {**obj, "metadata": {**obj["metadata"], "labels": {**(obj["metadata"].get("labels") or {}), tag: "x"}}}
    m = body["metadata"]
    status, _, out = server.request("PUT", collection("Lease", m["namespace"]) + f"/{m['name']}", body)
    return status, out


def rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


def lock_waiters(conn, mode: str = "") -> int:
    """Sessions waiting for the revision lock (in this mode: ShareLock, ExclusiveLock)."""
    return conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s "
                        "AND NOT granted AND mode LIKE %s", (REVISION_LOCK, mode or "%")).fetchone()[0]


def queued(conn) -> int:
    """Updates queued for the lock's next holder."""
    return conn.execute("SELECT count(*) FROM kube_write_queue WHERE NOT done").fetchone()[0]


def wait_until(check, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def test_concurrent_writers_each_get_their_own_answer_in_dense_revision_order(pair):
    a, b = pair.a, pair.b
    ns = f"group-{uuid.uuid4().hex[:6]}"
    names = [f"own-{i}" for i in range(8)] + ["contested"]
    objs = {name: write(a, "POST", "Lease", ns, name, make("Lease", ns, name)) for name in names}
    start = max(rv(o) for o in objs.values())
    watch = a.watch(collection("Lease", ns) + f"?watch=1&resourceVersion={start}")
    handed_before = handed(a) + handed(b)
    accepted: list[dict] = []
    refused = 0

    # 1. The revision lock held by the test: every write queues its update and waits for the
    # lock; the first to get it commits the queue, both processes' writes, in one transaction.
    # a: own-0, own-1 and the contested Lease twice (its four fast-lane connections); b: own-2 and
    # the contested Lease: of the three PUTs of "contested" at one resourceVersion exactly one is
    # accepted.
    work = [(a, "own-0"), (a, "own-1"), (a, "contested"), (a, "contested"), (b, "own-2"), (b, "contested")]
    with pg_support.connect(pair.dbname) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (REVISION_LOCK,))
        with ThreadPoolExecutor(len(work)) as pool:
            futures = [pool.submit(put, server, objs[name], f"held-{i}") for i, (server, name) in enumerate(work)]
            wait_until(lambda: lock_waiters(holder) == len(work) and queued(holder) == len(work),
                       "every write queued, its writer waiting for the lock")
            # (no convoy: they wait to be woken together, not for the lock one after another)
            assert lock_waiters(holder, "ShareLock") == len(work)
            holder.execute("SELECT pg_advisory_unlock(%s)", (REVISION_LOCK,))
            answers = [f.result() for f in futures]
    for (_, name), (status, out) in zip(work, answers):
        if name == "contested":
            assert status in (200, 409), out
        else:
            assert status == 200, out
    contested = [out for (_, name), (status, out) in zip(work, answers) if name == "contested" and status == 200]
    assert len(contested) == 1, answers
    refused += sum(1 for status, _ in answers if status == 409)
    assert all(out["reason"] == "Conflict" for status, out in answers if status == 409)
    accepted += [out for status, out in answers if status == 200]
    # Five of the six were committed by the first writer to get the lock; a contested write that
    # lost reads again and writes (or is refused) by itself.
    assert handed(a) + handed(b) - handed_before >= len(work) - 1, "the queue was not committed by one holder"
    with pg_support.connect(pair.dbname) as conn:
        assert conn.execute("SELECT count(*) FROM kube_write_queue").fetchone()[0] == 0, "a queue row left behind"

    # 2. Free running: eight writers on both processes renew their own Leases in turns; two more
    # race for the contested one, each PUTting the object it last saw (stale once the other won).
    lock = threading.Lock()

    def renew(name: str, server_first) -> None:
        current = dict(objs[name]) if name != "contested" else None
        for turn in range(12):
            server = (a, b)[(turn + server_first) % 2]
            status, out = put(server, current or latest["contested"], f"w{server_first}-t{turn}")
            with lock:
                if status == 200:
                    accepted.append(out)
                    if name == "contested":
                        latest["contested"] = out
                else:
                    assert status == 409 and out["reason"] == "Conflict", out
                    nonlocal_refused[0] += 1
            if name != "contested":
                assert status == 200, out
                current = out

    latest = {"contested": contested[0]}
    for out in accepted:   # (own-0..2 were renewed in part 1)
        objs[out["metadata"]["name"]] = out
    nonlocal_refused = [0]
    writers = [(name, i % 2) for i, name in enumerate(names[:8])] + [("contested", 0), ("contested", 1)]
    with ThreadPoolExecutor(len(writers)) as pool:
        for f in [pool.submit(renew, name, first) for name, first in writers]:
            f.result()
    refused += nonlocal_refused[0]
    assert refused >= 2

    # Every accepted write has its own revision; the log after start holds exactly those, dense.
    revisions = sorted(rv(out) for out in accepted)
    assert len(set(revisions)) == len(revisions)
    logged = [r for (r,) in pair.query("SELECT rv FROM kube_revision WHERE rv > %s ORDER BY rv", (start,))]
    assert logged == revisions == list(range(start + 1, start + 1 + len(revisions)))
    # Each object's final state carries every label its accepted writes added.
    for name in names:
        status, _, final = a.request("GET", collection("Lease", ns) + f"/{name}")
        assert status == 200
        tags = {tag for out in accepted if out["metadata"]["name"] == name for tag in out["metadata"]["labels"]}
        assert tags <= set(final["metadata"]["labels"]), name

    # The watch saw each of them once, in revision order, as the writer was answered.
    with watch:
        events = watch.events(len(revisions), timeout=30)
    assert [e["type"] for e in events] == ["MODIFIED"] * len(revisions)
    assert [rv(e["object"]) for e in events] == revisions
    by_rv = {rv(out): out for out in accepted}
    assert all(e["object"]["metadata"]["labels"] == by_rv[rv(e["object"])]["metadata"]["labels"] for e in events)


def test_a_queued_update_that_raises_fails_alone(pair):
    """kube_write itself: of three updates queued while the lock is held, the one that raises
    is answered "failed" (its owner runs it again alone, postgresql.py) and the two others are
    committed, each with its own answer, by whichever of the three got the lock first."""
    with pg_support.connect(pair.dbname) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS queue_probe (x int)")
    statements = ["WITH i AS (INSERT INTO queue_probe VALUES (1) RETURNING x) SELECT x::bigint, 1 FROM i",
                  "SELECT (1 / 0)::bigint, 1",
                  "WITH i AS (INSERT INTO queue_probe VALUES (3) RETURNING x) SELECT x::bigint, 1 FROM i"]

    def call(statement: str):
        with pg_support.connect(pair.dbname) as conn:
            return conn.execute("CALL kube_write(%s, NULL, NULL)", (statement,)).fetchone()

    with pg_support.connect(pair.dbname) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (REVISION_LOCK,))
        with ThreadPoolExecutor(len(statements)) as pool:
            futures = [pool.submit(call, statement) for statement in statements]
            wait_until(lambda: queued(holder) == len(statements), "the three queued")
            holder.execute("SELECT pg_advisory_unlock(%s)", (REVISION_LOCK,))
            answers = [f.result() for f in futures]
        assert answers[1] == (None, "failed")
        assert [answers[0][0], answers[2][0]] == [1, 3]
        # (the first to hold the lock ran all three, the failing one's owner perhaps)
        assert {answers[0][1], answers[2][1]} <= {"own", "handed"} and "handed" in (answers[0][1], answers[2][1])
        assert sorted(x for (x,) in holder.execute("SELECT x FROM queue_probe")) == [1, 3]
        assert holder.execute("SELECT count(*) FROM kube_write_queue").fetchone()[0] == 0


@pytest.mark.slow
def test_a_worker_killed_mid_renewals_loses_no_acknowledged_write(tmp_path):
    """Two workers on one database, eight clients adding a label to their own Lease by merge
    patch (one-message updates, grouped); one worker is killed (SIGKILL) mid-way: every
    acknowledged label is stored, and the log's revisions stay dense."""
    pg_support.require_postgres()
    pg_support.require_redis()
    dbname = pg_support.create_database()
    try:
        env = server_env(tmp_path, DATABASE_URL=pg_support.pg_url(dbname),
                         REDIS_URL=pg_support.redis_url(random.randint(1, 15)), KUBEDASH_GROUP_COMMIT="1")
        server = LiveServer(tmp_path, "--workers", "2", env=env, label="killed")
        migrate(server.env)
        with running(server):
            wait_until(lambda: len(child_pids(server.proc.pid)) == 2, "two workers")
            before = child_pids(server.proc.pid)
            ns = f"killed-{uuid.uuid4().hex[:6]}"
            for i in range(8):
                write(server, "POST", "Lease", ns, f"w{i}", make("Lease", ns, f"w{i}"))
            acknowledged: dict[str, list[str]] = {f"w{i}": [] for i in range(8)}
            stopping = threading.Event()

            def writer(name: str) -> None:
                serial = 0
                while not stopping.is_set():
                    serial += 1
                    tag = f"s{serial}"
                    try:
                        status, _, _ = server.request("PATCH", collection("Lease", ns) + f"/{name}",
                                                      {"metadata": {"labels": {tag: "x"}}},
                                                      content_type="application/merge-patch+json")
                    except OSError:
                        continue   # the worker died with this request: not acknowledged
                    if status == 200:
                        acknowledged[name].append(tag)

            def count() -> int:
                return sum(len(tags) for tags in acknowledged.values())

            threads = [threading.Thread(target=writer, args=(name,)) for name in acknowledged]
            for t in threads:
                t.start()
            try:
                wait_until(lambda: count() >= 80, "writes acknowledged before the kill")
                victim = min(before)
                os.kill(victim, signal.SIGKILL)
                wait_until(lambda: len(child_pids(server.proc.pid)) == 2 and victim not in child_pids(server.proc.pid),
                           "the killed worker replaced", timeout=60)
                mark = count()
                wait_until(lambda: count() >= mark + 80, "writes acknowledged after the kill", timeout=60)
            finally:
                stopping.set()
                for t in threads:
                    t.join(60)
            for name, tags in acknowledged.items():
                status, _, final = server.request("GET", collection("Lease", ns) + f"/{name}")
                assert status == 200
                assert set(tags) <= set(final["metadata"].get("labels") or {}), f"{name}: an acknowledged write was lost"
        with pg_support.connect(dbname) as conn:
            logged = [r for (r,) in conn.execute("SELECT rv FROM kube_revision ORDER BY rv").fetchall()]
        assert logged == list(range(logged[0], logged[0] + len(logged)))
    finally:
        pg_support.drop_database(dbname)

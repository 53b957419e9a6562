"""Two `manage.py serve` processes on one database: every process's watches see every write.

Each process has its own watch hub, following the revision log. Two setups:
- embedded (SQLite, no Redis): a write committed by one process bumps SQLite's data_version,
  which the other process's hub polls every few ms; the same as two workers of one server;
- scaled (PostgreSQL + Redis): the other process learns of it from Redis pub/sub.
Either way it then reads the new revisions from the database. The safety poll is set to 30 s
here, so an event that arrives within seconds was woken by data_version or Redis.

The scaled setup needs PostgreSQL (127.0.0.1:5432, trust auth as `postgres`) and Redis
(127.0.0.1:6379): its tests skip without them, and fail in CI (CI set), where they must run.
"""
from __future__ import annotations

import math
import random
import socket
import threading
import time
import uuid

import orjson
import pytest

import pg_support
from conftest import LiveServer, served_pair
from manifests import PATHS, collection, make, write

POLL_SECONDS = 30      # the hub's safety poll: far longer than any wait below
ARRIVAL_BUDGET = 5.0   # "arrived because Redis woke the hub", not a latency requirement
POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)
PGBOUNCER = pytest.param("pgbouncer", marks=pytest.mark.postgres)


# ---------------------------------------------------------------------------------------------
# Fixtures: a fresh database, two servers on it


@pytest.fixture(scope="module", params=["sqlite", POSTGRES, PGBOUNCER])
def scaled(request, tmp_path_factory):
    """A ServerPair: two single-worker servers on SQLite (no Redis), on PostgreSQL + Redis, or on
    PostgreSQL through PgBouncer in transaction pooling mode (KUBEDASH_PGBOUNCER=1) + Redis."""
    poll = {"KUBEDASH_WATCH_POLL_SECONDS": str(POLL_SECONDS)}
    if request.param != "pgbouncer":
        with served_pair(tmp_path_factory, request.param, **poll) as pair:
            yield pair
        return
    pg_support.require_postgres()
    bouncer = pg_support.PgBouncer()
    try:
        with served_pair(tmp_path_factory, "postgres", bouncer=bouncer, **poll) as pair:
            yield pair
            for server in pair:   # an error the clients did not see (a lost cursor) shows here
                assert "Traceback" not in server.log(), server.log()[-3000:]
    finally:
        bouncer.stop()


# ---------------------------------------------------------------------------------------------
# Helpers


class Recorder:
    """Reads a watch in a thread, stamping each event with its arrival time (monotonic)."""

    def __init__(self, server: LiveServer, path: str):
        self.path = path
        self.stream = server.watch(path)
        assert self.stream.status == 200, (path, self.stream.status)
        self.events: list[tuple[float, dict]] = []
        self.error: BaseException | None = None
        self.done = False
        self._stopping = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True, name=f"watch {path}")
        self._thread.start()

    def _read(self) -> None:
        try:
            while True:
                ev = self.stream.next(timeout=POLL_SECONDS * 4)
                if ev is None:
                    break
                arrived = time.monotonic()
                with self._cond:
                    self.events.append((arrived, ev))
                    self._cond.notify_all()
        except BaseException as err:  # noqa: BLE001 - reported by the test, not lost in a thread
            if not self._stopping:
                self.error = err
        finally:
            with self._cond:
                self.done = True
                self._cond.notify_all()

    def wait_for(self, done, timeout: float) -> float | None:
        """Arrival time of the first event for which done(index, event) holds, or None."""
        end = time.monotonic() + timeout
        with self._cond:
            checked = 0
            while True:
                for index in range(checked, len(self.events)):
                    arrived, ev = self.events[index]
                    if done(index, ev):
                        return arrived
                checked = len(self.events)
                left = end - time.monotonic()
                if left <= 0 or self.done:
                    return None
                self._cond.wait(left)

    def wait_for_rv(self, rv: int, timeout: float) -> float | None:
        return self.wait_for(lambda _, ev: rv_of(ev) >= rv, timeout)

    def wait_for_count(self, count: int, timeout: float) -> float | None:
        return self.wait_for(lambda index, _: index + 1 >= count, timeout)

    def received(self) -> list[dict]:
        with self._cond:
            return [ev for _, ev in self.events]

    def stop(self) -> None:
        self._stopping = True
        try:
            self.stream.conn.sock.shutdown(socket.SHUT_RDWR)  # unblocks the reader's readline
        except OSError:
            pass
        self._thread.join(10)
        self.stream.close()


def rv_of(ev: dict) -> int:
    return int(ev["object"]["metadata"]["resourceVersion"])


def key_of(obj: dict) -> tuple[str, str]:
    return obj["metadata"]["namespace"], obj["metadata"]["name"]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


# ---------------------------------------------------------------------------------------------
# Tests


def test_watch_on_one_process_sees_writes_on_the_other(scaled, capsys, record_property):
    a, b = scaled.a, scaled.b
    ns = "mp-" + uuid.uuid4().hex[:8]
    rng = random.Random(7)
    rec = Recorder(a, f"{collection('Lease', ns)}?watch=true")
    expected, latencies, live, serial = [], [], [], 0
    try:
        for i in range(51):
            if i == 50:  # a last create closes the sequence: a duplicate would come before it
                name, method, body, type_ = "sentinel", "POST", make("Lease", ns, "sentinel"), "ADDED"
            elif not live or i % 3 == 0:
                serial += 1
                name, method, body, type_ = f"l{serial}", "POST", make("Lease", ns, f"l{serial}"), "ADDED"
                live.append(name)
            elif i % 3 == 1:
                name, method, body, type_ = rng.choice(live), "PATCH", {"spec": {"holderIdentity": f"h{i}"}}, "MODIFIED"
            else:
                name, method, body, type_ = live.pop(rng.randrange(len(live))), "DELETE", None, "DELETED"
            out = write(b, method, "Lease", ns, name, body)
            answered = time.monotonic()
            expected.append((type_, name))
            # A DELETE answers with a Status (no resourceVersion): wait for the i-th event instead.
            arrived = rec.wait_for_count(len(expected), ARRIVAL_BUDGET)
            assert arrived is not None, (f"write #{i} ({method} {name}) on B did not reach the watch on A within "
                                         f"{ARRIVAL_BUDGET}s (safety poll {POLL_SECONDS}s: Redis wake-up lost?); "
                                         f"error={rec.error!r}, received {len(rec.received())}")
            if method != "DELETE":
                assert rv_of(rec.received()[len(expected) - 1]) == int(out["metadata"]["resourceVersion"])
            if i < 50:
                latencies.append(max(0.0, arrived - answered))  # 0: it arrived before B's answer did
    finally:
        rec.stop()
    events = rec.received()
    assert [(ev["type"], ev["object"]["metadata"]["name"]) for ev in events] == expected
    log = scaled.query("SELECT rv, type, name FROM kube_revision WHERE kind = 'Lease' AND namespace = %s "
                       "ORDER BY rv", (ns,))
    # Every write, in revision order, exactly once: the event stream is the log of the namespace.
    assert [(rv_of(ev), ev["type"], ev["object"]["metadata"]["name"]) for ev in events] == [tuple(r) for r in log]
    p50, p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
    record_property("cross_process_watch_p50_ms", round(p50 * 1000, 2))
    record_property("cross_process_watch_p99_ms", round(p99 * 1000, 2))
    with capsys.disabled():
        print(f"\n[multiprocess {scaled.backend}] B write -> A watch event, {len(latencies)} writes: "
              f"p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms")


WRITES_PER_THREAD = 50
THREADS_PER_PROCESS = 4


def _writer(server: LiveServer, label: str, namespaces: list[str], counts: dict, barrier: threading.Barrier) -> None:
    """Creates, patches and deletes a mix of kinds under its own names (so no 409s)."""
    rng = random.Random(label)
    live: list[tuple[str, str, str]] = []
    serial = 0
    barrier.wait()
    for i in range(WRITES_PER_THREAD):
        roll = rng.random()
        if len(live) < 2 or roll < 0.45:
            serial += 1
            kind, ns, name = rng.choice(list(PATHS)), rng.choice(namespaces), f"{label}-{serial}"
            write(server, "POST", kind, ns, name, make(kind, ns, name))
            live.append((kind, ns, name))
        elif roll < 0.8:
            kind, ns, name = rng.choice(live)
            # A fresh label value each time: a no-op patch would write no revision.
            write(server, "PATCH", kind, ns, name, {"metadata": {"labels": {"step": f"{label}-{i}"}}})
        else:
            kind, ns, name = live.pop(rng.randrange(len(live)))
            write(server, "DELETE", kind, ns, name)
        counts[kind] = counts.get(kind, 0) + 1


def _items(server: LiveServer, kind: str) -> tuple[int, dict]:
    status, _, body = server.request("GET", collection(kind))
    assert status == 200, body
    return int(body["metadata"]["resourceVersion"]), {key_of(obj): _plain(obj) for obj in body["items"]}


def _plain(obj: dict) -> dict:
    # Lists may leave out each item's kind/apiVersion; everything else must be identical.
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def test_concurrent_writers_on_both_processes_watchers_see_every_revision_in_order(scaled, capsys):
    a, b = scaled.a, scaled.b
    tag = uuid.uuid4().hex[:6]
    namespaces = [f"mpc-{tag}-{i}" for i in range(3)]

    # The stale lists and the revisions the watches start from, before any write.
    stale = {kind: _items(a, kind) for kind in PATHS}
    plan = [("Lease", a), ("Lease", a), ("Lease", b), ("Job", b), ("Endpoints", a)]
    recorders = [(kind, server, Recorder(server, f"{collection(kind)}?watch=true&resourceVersion={stale[kind][0]}"))
                 for kind, server in plan]
    try:
        barrier = threading.Barrier(2 * THREADS_PER_PROCESS)
        counts: list[dict] = []
        errors: list[BaseException] = []

        def run(server, label):
            mine: dict = {}
            counts.append(mine)
            try:
                _writer(server, label, namespaces, mine, barrier)
            except BaseException as err:  # noqa: BLE001 - re-raised below in the test's thread
                errors.append(err)
                barrier.abort()

        threads = [threading.Thread(target=run, args=(server, f"{tag}{p}{t}"))
                   for p, server in (("a", a), ("b", b)) for t in range(THREADS_PER_PROCESS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(300)
        assert not errors, errors[0]
        assert not any(thread.is_alive() for thread in threads), "writers did not finish"

        # One last write per kind: each watcher must reach it, and nothing may follow it.
        final = {kind: int(write(a, "POST", kind, namespaces[0], f"{tag}-end", make(kind, namespaces[0], f"{tag}-end"))
                           ["metadata"]["resourceVersion"]) for kind in PATHS}
        for kind, server, rec in recorders:
            assert rec.wait_for_rv(final[kind], ARRIVAL_BUDGET) is not None, \
                (f"{kind} watcher on {server.http_url} did not reach rv {final[kind]}; error={rec.error!r}; "
                 f"received {len(rec.received())}, last rv {rv_of(rec.received()[-1]) if rec.received() else None}")
    finally:
        for _, _, rec in recorders:
            rec.stop()

    # The revision log, read straight from PostgreSQL.
    start = min(rv for rv, _ in stale.values())
    rows = scaled.query("SELECT rv, kind, type, namespace, name FROM kube_revision WHERE rv > %s ORDER BY rv",
                        (start,))
    rvs = [row[0] for row in rows]
    assert rvs == list(range(start + 1, start + 1 + len(rvs))), "the revision log has gaps"
    for kind in PATHS:
        written = sum(c.get(kind, 0) for c in counts) + 1
        assert sum(1 for row in rows if row[1] == kind) == written, f"{kind}: a write left no revision"

    for kind, server, rec in recorders:
        log = [(row[0], row[2], row[3], row[4]) for row in rows if row[1] == kind and row[0] > stale[kind][0]]
        events = rec.received()
        seen = [(rv_of(ev), ev["type"], *key_of(ev["object"])) for ev in events]
        where = f"{kind} watcher on {server.http_url}"
        assert len(seen) == len(set(seen)), f"{where}: an event came twice"
        assert [s[0] for s in seen] == sorted(s[0] for s in seen), f"{where}: events out of order"
        assert seen == log, f"{where}: events differ from the revision log"

        # A stale list plus the events after it is the fresh list.
        state = dict(stale[kind][1])
        for ev in events:
            if ev["type"] == "DELETED":
                state.pop(key_of(ev["object"]), None)
            else:
                state[key_of(ev["object"])] = _plain(ev["object"])
        fresh_rv, fresh = _items(server, kind)
        assert fresh_rv >= final[kind]
        assert state == fresh, f"{where}: stale list + events != fresh list"

    with capsys.disabled():
        print(f"\n[multiprocess {scaled.backend}] {len(rows)} revisions from {2 * THREADS_PER_PROCESS} writers on "
              f"2 processes; {len(recorders)} watchers each saw every revision of its kind in order")


def test_writers_racing_on_one_object_lose_no_write(scaled):
    """Writers on both processes change one Lease at once. Every merge patch lands (on
    PostgreSQL an update is computed outside the revision lock and written only if the object
    is still the one it read, else computed again: storage/postgresql.py); of PUTs that all name the same
    resourceVersion exactly one wins and the others get 409, as kube's storage answers."""
    a, b = scaled.a, scaled.b
    ns, name = f"race-{uuid.uuid4().hex[:6]}", "contended"
    created = write(a, "POST", "Lease", ns, name, make("Lease", ns, name))
    per_thread, errors = 6, []

    def patcher(server, label):
        try:
            for i in range(per_thread):
                write(server, "PATCH", "Lease", ns, name, {"metadata": {"labels": {f"{label}-{i}": "x"}}})
        except BaseException as err:  # noqa: BLE001 - re-raised below in the test's thread
            errors.append(err)

    threads = [threading.Thread(target=patcher, args=(server, f"{p}{t}"))
               for p, server in (("a", a), ("b", b)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors[0]
    status, _, patched = a.request("GET", collection("Lease", ns) + f"/{name}")
    assert status == 200, patched
    wanted = {f"{p}{t}-{i}" for p in "ab" for t in range(4) for i in range(per_thread)}
    assert wanted <= set(patched["metadata"]["labels"]), "a patch was lost"

    # Eight PUTs of the object as read, each with another holder: one wins.
    answers: list[int] = []

    def putter(server, holder):
        body = {**patched, "spec": {**patched["spec"], "holderIdentity": holder}}
        answers.append(server.request("PUT", collection("Lease", ns) + f"/{name}", body)[0])

    threads = [threading.Thread(target=putter, args=(server, f"holder-{i}"))
               for i, server in enumerate([a, b] * 4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(answers) == [200] + [409] * 7, answers

    # One revision per write that succeeded, in the object's own order.
    rows = scaled.query("SELECT rv, type FROM kube_revision WHERE kind = 'Lease' AND namespace = %s "
                        "AND name = %s ORDER BY rv", (ns, name))
    assert [t for _, t in rows] == ["ADDED"] + ["MODIFIED"] * (len(wanted) + 1)
    assert rows[0][0] == int(created["metadata"]["resourceVersion"])


@pytest.mark.parametrize("scaled", [POSTGRES], indirect=True)   # it counts PostgreSQL connections
def test_finished_requests_do_not_keep_database_connections(scaled):
    """Each ASGI request runs its sync code in a thread of its own: a persistent connection
    (CONN_MAX_AGE > 0) would stay open per finished request until garbage collection, and a
    busy server would run PostgreSQL out of connections ("too many clients")."""
    a, b, dbname = scaled.a, scaled.b, scaled.dbname

    def reads(server):
        for _ in range(25):
            status, _, body = server.request("GET", collection("Lease"))
            assert status == 200, body

    threads = [threading.Thread(target=reads, args=(server,)) for server in (a, b) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    with pg_support.connect(dbname) as conn:
        # Ours, and the servers' long-lived ones: per process one per lane thread (fast 4 on
        # PostgreSQL and its watch starts' 1, expensive 2, live pages 1), the watch hub's and
        # asgiref's default thread's (docs/OPERATIONS.md, "PgBouncer and connection counts").
        open_now = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (dbname,)).fetchone()[0]
    assert open_now <= 1 + 2 * 10, (f"{open_now} connections to the database after 200 finished requests: "
                            f"requests keep their connections (set CONN_MAX_AGE=0 under ASGI)")


@pytest.mark.slow
@pytest.mark.parametrize("scaled", [POSTGRES, PGBOUNCER], indirect=True)
def test_lists_on_both_processes_while_writing(scaled):
    """Whole lists (read in chunks: a server-side cursor unless KUBEDASH_PGBOUNCER), pages with
    continue tokens and Tables, from both processes at once while both write: each is a
    consistent snapshot with every object in it. Through PgBouncer's transaction pooling a
    cursor or prepared statement left on one server connection would break the next query."""
    ns = f"lists-{uuid.uuid4().hex[:6]}"
    count = 2100   # more than one chunk of lists.py's iterator (2,000 rows)
    for start in range(0, count, 30):
        _bulk_create(scaled, ns, start, min(start + 30, count))
    failures: list = []
    stop = threading.Event()

    def writer(server, prefix):
        i = 0
        while not stop.is_set():
            # (another namespace: a write to the listed one makes a whole list read again)
            write(server, "POST", "Lease", ns + "-w", "", make("Lease", ns + "-w", f"{prefix}-{i}"))
            i += 1
            time.sleep(0.01)

    def lister(server):
        try:
            for _ in range(2):
                status, _, out = server.request("GET", collection("Lease", ns))
                assert status == 200, out
                names = {item["metadata"]["name"] for item in out["items"]}
                assert {f"bulk-{i}" for i in range(count)} <= names, "a whole list lost objects"
                items, token = [], ""
                while True:   # the same list in pages of 700
                    status, _, page = server.request(
                        "GET", collection("Lease", ns) + "?limit=700" + (f"&continue={token}" if token else ""))
                    assert status == 200, page
                    items += page["items"]
                    token = page["metadata"].get("continue", "")
                    if not token:
                        break
                keys = [key_of(item) for item in items]
                assert keys == sorted(set(keys)), "pages overlap or are out of order"
                assert {f"bulk-{i}" for i in range(count)} <= {k[1] for k in keys}
                status, _, table = server.request("GET", collection("Lease", ns), headers={
                    "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
                assert status == 200 and len(table["rows"]) >= count, table if status != 200 else len(table["rows"])
        except BaseException as err:  # noqa: BLE001 - reported below
            failures.append(err)

    writers = [threading.Thread(target=writer, args=(server, f"w{n}")) for n, server in enumerate((scaled.a, scaled.b))]
    listers = [threading.Thread(target=lister, args=(server,)) for server in (scaled.a, scaled.b) for _ in range(2)]
    for thread in writers + listers:
        thread.start()
    for thread in listers:
        thread.join(300)
    stop.set()
    for thread in writers:
        thread.join(60)
    assert not failures, failures[0]


def _bulk_create(scaled, ns: str, start: int, end: int) -> None:
    threads = [threading.Thread(target=lambda i=i: write(scaled.a if i % 2 else scaled.b, "POST", "Lease", ns, "",
                                                         make("Lease", ns, f"bulk-{i}")))
               for i in range(start, end)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)


@pytest.mark.parametrize("scaled", [POSTGRES], indirect=True)
def test_connections_the_server_closed_are_opened_again(scaled):
    """The health check asks the socket instead of the server (kube/postgresql/base.py): a
    connection PostgreSQL has closed since its last request must still be found out, so the
    next requests on every lane thread get a fresh one, never an error."""
    ns = f"reopen-{uuid.uuid4().hex[:6]}"
    for server in (scaled.a, scaled.b):
        write(server, "POST", "Lease", ns, f"l-{server.http_port}", make("Lease", ns, f"l-{server.http_port}"))
    with pg_support.connect() as conn:
        # (with a timeout it waits until each has exited, so its socket is closed before we go on)
        ended = conn.execute("SELECT bool_and(pg_terminate_backend(pid, 10000)), count(*) FROM pg_stat_activity "
                             "WHERE datname = %s AND pid <> pg_backend_pid()", (scaled.dbname,)).fetchone()
    assert ended[0] and ended[1] > 0, ended
    for i in range(12):
        for server in (scaled.a, scaled.b):
            name = f"l-{server.http_port}"
            write(server, "PATCH", "Lease", ns, name, {"metadata": {"labels": {"step": str(i)}}})
            status, _, body = server.request("GET", collection("Lease", ns) + f"/{name}")
            assert status == 200, body


def test_a_request_waiting_for_postgresql_holds_up_no_other(scaled):
    """On PostgreSQL the fast lane's requests run on the event loop, each in a greenlet whose
    round trips the loop waits for (server/green.py). One that waits for the database, here a
    write for the revision lock another session holds, must not stop the loop: the same
    process answers reads and health checks meanwhile, and the write goes through once the
    lock is let go, answered on the loop (its request log line says lane fast-loop)."""
    if scaled.backend != "postgres":
        pytest.skip("SQLite's loop never waits: a write that would is run again on the lane's thread")
    ns = f"held-{uuid.uuid4().hex[:6]}"
    server = scaled.a
    for name in ("waits", "reads"):
        write(server, "POST", "Lease", ns, name, make("Lease", ns, name))
    answered = {}
    with pg_support.connect(scaled.dbname, autocommit=False) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(7411)")
        patch = threading.Thread(target=lambda: answered.update(
            patch=write(server, "PATCH", "Lease", ns, "waits", {"metadata": {"labels": {"waited": "yes"}}})))
        patch.start()
        deadline = time.monotonic() + 20
        while not scaled.query("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"):
            assert time.monotonic() < deadline, "the write never waited for the revision lock"
            time.sleep(0.05)
        for _ in range(5):
            status, _, body = server.request("GET", collection("Lease", ns) + "/reads")
            assert status == 200, body
            assert server.request("GET", "/healthz")[0] == 200
        assert patch.is_alive() and not answered, "the write did not wait for the lock"
        holder.rollback()
    patch.join(30)
    assert answered["patch"]["metadata"]["labels"] == {"waited": "yes"}
    log = server.log()
    lanes = {orjson.loads(line)["lane"] for line in log.splitlines()
             if line.startswith("{") and '"method":"PATCH"' in line and f"/{ns}/leases/waits" in line}
    assert lanes == {"fast-loop"}, lanes


def test_a_write_whose_database_connection_breaks_is_answered_503_with_retry_after(scaled):
    """The database session of a write is ended under it (a failover, a restart, an operator's
    pg_terminate_backend): the answer is a 503 ServiceUnavailable Status with Retry-After, which
    client-go retries, saying the write may or may not have been made; not a 500 claiming it was
    not. The process reconnects for the next request."""
    if scaled.backend == "sqlite":
        pytest.skip("SQLite has no connection to lose")
    ns = f"lost-{uuid.uuid4().hex[:6]}"
    server = scaled.a
    path = collection("Lease", ns) + "/cut"
    write(server, "POST", "Lease", ns, "cut", make("Lease", ns, "cut"))
    answered = {}
    with pg_support.connect(scaled.dbname, autocommit=False) as holder:
        holder.execute("SELECT pg_advisory_xact_lock(7411)")   # (the write waits for it, mid-statement)
        patch = threading.Thread(target=lambda: answered.update(patch=server.request(
            "PATCH", path, {"metadata": {"labels": {"cut": "yes"}}}, content_type="application/merge-patch+json")))
        patch.start()
        deadline = time.monotonic() + 20
        while not scaled.query("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"):
            assert time.monotonic() < deadline, "the write never waited for the revision lock"
            time.sleep(0.05)
        patch.join(30)
        holder.rollback()
    status, headers, body = answered["patch"]
    assert status == 503 and body["kind"] == "Status" and body["reason"] == "ServiceUnavailable", (status, body)
    assert headers.get("Retry-After") == "1" and "may or may not have been applied" in body["message"], (headers, body)
    status, _, lease = server.request("GET", path)   # (a new connection)
    assert status == 200 and "cut" not in (lease["metadata"].get("labels") or {}), lease
    assert write(server, "PATCH", "Lease", ns, "cut", {"metadata": {"labels": {"cut": "again"}}})["metadata"]["labels"] == {"cut": "again"}


def _unconfirmed_written(server: LiveServer) -> float:
    """kubedash_unconfirmed_writes_total{outcome="written"} on the server's /metrics."""
    status, _, body = server.request("GET", "/metrics")
    assert status == 200, body
    text = body.decode() if isinstance(body, bytes) else str(body)
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith('kubedash_unconfirmed_writes_total{outcome="written"}'))


def test_an_update_before_its_token_is_checked_checks_it_in_its_own_write(scaled):
    """On PostgreSQL a renewal by a token this process checked a moment ago is written without
    checking it first: the one-statement write checks it itself (kube/views.py
    _unconfirmed_write). So revoking the token, or demoting its user, ends its writes at
    once: the next one is answered 401 / 403 and writes nothing."""
    if scaled.backend != "postgres":
        pytest.skip("SQLite checks every token before the write (its write is not one statement)")
    ns = f"unchecked-{uuid.uuid4().hex[:6]}"
    server = scaled.a
    user = f"renewer-{uuid.uuid4().hex[:6]}"
    token = server.token(user, "editor")
    path = collection("Lease", ns) + "/leader"
    write(server, "POST", "Lease", ns, "leader", make("Lease", ns, "leader"))

    def renew(holder: str):   # (read with the admin's token: only the write uses the renewer's)
        status, _, current = server.request("GET", path)
        assert status == 200, current
        current["spec"]["holderIdentity"] = holder
        return server.request("PUT", path, current, token=token)

    before = _unconfirmed_written(server)
    for i in range(3):   # (the first checks the token the usual way; the next ones need not)
        status, _, body = renew(f"holder-{i}")
        assert status == 200, body
    assert _unconfirmed_written(server) >= before + 2

    def stored() -> tuple[str, str]:
        status, _, obj = server.request("GET", path)
        return obj["metadata"]["resourceVersion"], obj["spec"]["holderIdentity"]

    def refused_and_not_written(change_sql: str, status_wanted: int) -> None:
        scaled.query(change_sql + " WHERE user_id = (SELECT id FROM auth_user WHERE username = %s) RETURNING 1", (user,))
        kept = stored()
        status, _, body = renew("refused")
        assert status == status_wanted, body
        assert stored() == kept

    assert stored()[1] == "holder-2"
    refused_and_not_written("UPDATE access_profile SET role = 'viewer'", 403)
    scaled.query("UPDATE access_profile SET role = 'editor' WHERE user_id = "
                 "(SELECT id FROM auth_user WHERE username = %s) RETURNING 1", (user,))
    assert renew("editor-again")[0] == 200
    assert renew("editor-once-more")[0] == 200
    refused_and_not_written("UPDATE access_apitoken SET revoked = true", 401)

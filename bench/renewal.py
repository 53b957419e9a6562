"""Renewal benchmark, in-process (issue 10): CPU of a Lease renewal through the server's handler.

    .venv/bin/python bench/renewal.py [--renewals 3000] [--profile] [--database postgres://USER@HOST:PORT/]

Makes a throw-away SQLite database (or, with --database, a fresh PostgreSQL one, dropped after) (temp data dir, migrated) with an admin token and one Lease,
then drives `dashboard.server.handlers`' API handler exactly as a worker does for a bearer-token
request (Django's WSGI handler with the API middleware, direct dispatch, the store), with no
server and no sockets:
  ceiling: GET /healthz through the same handler (Django's resolver, a view that does nothing);
  renewal: PUT of the Lease with the resourceVersion of the previous answer and a new renewTime.
Prints the CPU per request of each (process CPU clock) and the renewal's ratio to the ceiling.
What the server adds on top (Daphne, Twisted, the loop) is bench/api.py's to measure.
`--profile` prints cProfile's top functions for the renewals instead. On PostgreSQL it also
times the update's read against the update cache's lookup that replaces it (kube/storage/objcache.py).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import _fresh_postgres  # noqa: E402
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/renew-0"


def setup(data_dir: str, database_url: str = ""):
    os.environ.update(KUBEDASH_DATA_DIR=data_dir, DJANGO_SETTINGS_MODULE="dashboard.settings",
                      KUBEDASH_REQUEST_LOG="0")
    os.environ.pop("DATABASE_URL", None)
    if database_url:
        os.environ["DATABASE_URL"] = database_url
    os.environ.pop("REDIS_URL", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    out = StringIO()
    call_command("issue_token", "bench", "--role", "admin", stdout=out)
    return out.getvalue().strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--renewals", type=int, default=3000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--database", default="", metavar="URL",
                        help="postgres://USER@HOST:PORT/ : a fresh database on that server (default: SQLite)")
    args = parser.parse_args()
    drop = None
    if args.database:
        url, admin = _fresh_postgres(args.database)
        drop = (admin, url.rsplit("/", 1)[1])
    try:
        return run(args, setup(tempfile.mkdtemp(prefix="kubedash-renewal-"), url if drop else ""))
    finally:
        if drop is not None:
            from django.db import connections

            connections.close_all()
            import psycopg

            with psycopg.connect(drop[0], autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{drop[1]}" WITH (FORCE)')


def run(args, token: str) -> int:

    import orjson

    from dashboard.server.handlers import APIWSGIHandler, respond, wsgi_environ

    api = APIWSGIHandler()

    def call(method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        scope = {"type": "http", "method": method, "path": path, "query_string": b"",
                 "headers": [(b"authorization", f"Bearer {token}".encode()), (b"content-type", b"application/json"),
                             (b"host", b"127.0.0.1")],
                 "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 40000)}
        status, _, content = respond(api, wsgi_environ(scope, body))
        return status, content

    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "renew-0", "namespace": "kube-node-lease"},
             "spec": {"holderIdentity": "node-0", "leaseDurationSeconds": 40,
                      "renewTime": "2026-11-25T10:00:00.000000Z"}}
    status, last = call("POST", LEASE.rsplit("/", 1)[0], orjson.dumps(lease))
    assert status == 201, last
    state = {"last": last}

    def renew(i: int) -> None:
        body = re.sub(rb'"renewTime":"[^"]*"', b'"renewTime":"2026-11-25T10:%02d:%02d.%06dZ"'
                      % (i // 60 % 60, i % 60, i % 1000000), state["last"])
        status, content = call("PUT", LEASE, body)
        assert status == 200, content
        state["last"] = content

    def healthz(_: int) -> None:
        status, content = call("GET", "/healthz")
        assert status == 200, content

    n = args.renewals
    for i in range(300):   # warm up: imports, caches, the connection
        renew(i)
        healthz(i)
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(lambda: [renew(300 + i) for i in range(n)])
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
        return 0

    def cpu_per_call(fn, offset: int) -> float:
        started = time.process_time()
        for i in range(n):
            fn(offset + i)
        return (time.process_time() - started) / n

    held = lock_held_seconds() if args.database else None
    ceiling = cpu_per_call(healthz, 0)
    renewal = cpu_per_call(renew, 300)
    backend = "PostgreSQL" if args.database else "SQLite"
    print(f"kubedash in-process renewal benchmark (no server: the server's API handler, {backend})")
    print(f"requests of each: {n}")
    print(f"ceiling: GET /healthz        {ceiling * 1e6:7.0f} us CPU")
    print(f"renewal: PUT of one Lease    {renewal * 1e6:7.0f} us CPU   ({renewal / ceiling:.2f}x the ceiling)")
    if held is not None:
        started = time.monotonic()
        for i in range(n):
            renew(2 * n + 300 + i)
        wall = (time.monotonic() - started) / n
        held_sorted = sorted(held)
        median = held_sorted[len(held_sorted) // 2]
        print(f"renewal wall time            {wall * 1e6:7.0f} us; the revision lock is held from "
              f"pg_advisory_xact_lock to COMMIT for a median {median * 1e6:.0f} us "
              f"(p90 {held_sorted[int(len(held_sorted) * 0.9)] * 1e6:.0f} us)")
        print(f"write ceiling of the whole deployment, whatever the processes: 1 / held = {1 / median:.0f} writes/s")
        read_vs_cache(n)
    return 0


def read_vs_cache(n: int) -> None:
    """PostgreSQL: what objcache saves a renewal, the update's read (the backend's load) against the
    cache lookup that replaces it (objcache.lookup, decoding the cached text), interleaved in 5 rounds."""
    import statistics

    from dashboard.kube import registry, storage
    from dashboard.kube.storage import objcache

    res = registry.lookup("coordination.k8s.io", "v1", "leases")
    ns, name = LEASE.split("/")[-3], LEASE.split("/")[-1]
    db, key = storage.backend(), storage.Key(res, ns, name)
    rv = db.load(key)[1]["metadata"]["resourceVersion"]
    if objcache.lookup(res, ns, name, rv)[1] is None:
        print("update cache: off (KUBEDASH_UPDATE_CACHE=0)")
        return
    figures: dict[str, list[tuple[float, float]]] = {"read": [], "cached": []}
    tries = (("read", lambda: db.load(key)), ("cached", lambda: objcache.lookup(res, ns, name, rv)))
    for _ in range(5):
        for label, fn in tries:
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(n // 5):
                fn()
            figures[label].append(((time.process_time() - cpu) / (n // 5), (time.perf_counter() - wall) / (n // 5)))
    (read_cpu, read_wall), (hit_cpu, hit_wall) = (
        (statistics.median(c for c, _ in v), statistics.median(w for _, w in v)) for v in figures.values())
    print(f"update cache: the read {read_cpu * 1e6:.0f} us CPU, {read_wall * 1e6:.0f} us wall; a hit instead "
          f"{hit_cpu * 1e6:.0f} us CPU, {hit_wall * 1e6:.0f} us wall (medians of 5 interleaved rounds)")


def lock_held_seconds() -> list[float]:
    """PostgreSQL: times the revision lock's critical section of every write from now on: from
    the lock statement's answer (the backend's lock) to the commit's end (revision_committed,
    sent on commit). An update computed outside the lock (the backend's conditional message,
    _log_if_unchanged) takes the lock, writes and commits in one message: its whole round trip
    is timed (more than the section, never less)."""
    from dashboard.kube import storage

    held: list[float] = []
    taken = {}
    db = storage.backend()
    lock, conditional = db.lock, db._log_if_unchanged

    def timed_lock() -> None:
        lock()
        taken["at"] = time.perf_counter()

    def timed_conditional(*args, **kwargs):
        taken["at"] = time.perf_counter()
        return conditional(*args, **kwargs)

    def committed(**_) -> None:
        if "at" in taken:
            held.append(time.perf_counter() - taken.pop("at"))

    db.lock, db._log_if_unchanged = timed_lock, timed_conditional   # (this process's backend, for the run)
    storage.revision_committed.connect(committed, weak=False)
    return held


if __name__ == "__main__":
    sys.exit(main())

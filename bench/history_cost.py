"""History cost benchmark (issue 38): what the pages' history costs on disk and in page time.

    .venv/bin/python bench/history_cost.py [--leases 1000] [--jobs 1000] [--minutes 60]
                                           [--renew-seconds 2] [--back-minutes 30]
                                           [--database postgres://…] [--no-align]

Builds a throw-away database (SQLite in a temp dir, or a fresh PostgreSQL database on the
server --database names), creates the Leases and Jobs through the store, then writes `--minutes`
of simulated history straight into the revision log (each Lease renewed every --renew-seconds,
each Job's status.succeeded stepping once a minute; the objects' real JSON with only those
fields, resourceVersion and managedFields' time changed; write times spread over the simulated
window, so compaction and thinning see the ages they would), and measures:

  1. history bytes: the log's rows and object bytes (and SQLite's file after VACUUM / PostgreSQL's
     pg_total_relation_size, with the indexes' share), scaled from the simulated window to a day:
     before thinning, after thinning alone (compaction.thin), and after compaction with a watch
     window of 0 (everything past it thinned, the kept revisions stored as deltas: kube/delta.py),
     and after packing (kube/pack.py: each object's kept revisions of a whole hour in one row),
     against the issue's target of 200 MB a day. The simulated window ends at the start of the
     current hour (--no-align: now) and one write follows it now, so its hours are whole and
     packed (with --minutes 60, exactly the hour a day repeats 24 times);
  2. the Leases list of all of them as of --back-minutes ago (?at=) against the live list, in
     the same run (Django's test client in this process: the page's own work, no server);
  3. /changes/ over the whole simulated window (streamed): time to its first byte, to its first
     row and to the whole answer, against the live Leases list in the same run (the ceiling).

Renewal throughput while someone scrubs the time bar, and the list as of 6 hours back:
bench/timetravel.py.
Only 127.0.0.1 / the given database are touched; everything is bounded by the arguments.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, _fresh_postgres, machine  # noqa: E402


def setup(database: str) -> tuple[str, Path, str]:
    """(database URL, data dir, the PostgreSQL server's admin URL to drop it from: "" on SQLite)."""
    data = Path(tempfile.mkdtemp(prefix="kubedash-history-bench-"))
    url, admin = _fresh_postgres(database) if database else (f"sqlite:///{data}/kubedash.sqlite3", "")
    env = dict(os.environ, DATABASE_URL=url, KUBEDASH_DATA_DIR=str(data), DJANGO_SETTINGS_MODULE="dashboard.settings",
               ALLOWED_HOSTS="testserver",   # (Django's test client, in this process)
               KUBEDASH_HISTORY_PACK_SECONDS="0")   # (packed by the bench itself, after measuring the deltas)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django
    django.setup()
    return url, data, admin


def drop(url: str, admin: str) -> None:
    """Drop the run's PostgreSQL database (after closing this process's connections to it)."""
    from django.db import connections
    import psycopg

    connections.close_all()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}"')


def micro(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def log_size() -> dict:
    """The log's rows, object text bytes, and disk bytes (the table and its indexes; of those, the
    indexes' where the database tells: PostgreSQL, or SQLite built with dbstat); the packs' rows,
    revisions, blob bytes and disk bytes (the pack table and its indexes)."""
    from django.db import connection
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(object)), 0) FROM kube_revision")
        rows, text = cursor.fetchone()
        cursor.execute("SELECT COUNT(*), COALESCE(SUM(count), 0), COALESCE(SUM(LENGTH(entries) + LENGTH(texts)), 0) "
                       "FROM kube_revision_pack")
        packs, packed, blobs = cursor.fetchone()
        if connection.vendor == "sqlite":
            cursor.execute("SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name = 'kube_revision_pack' OR name IN "
                           "(SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'kube_revision_pack')")
            pack_disk = cursor.fetchone()[0]
        else:
            cursor.execute("SELECT pg_total_relation_size('kube_revision_pack')")
            pack_disk = cursor.fetchone()[0]
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA page_count")
            pages = cursor.fetchone()[0]
            cursor.execute("PRAGMA page_size")
            disk = pages * cursor.fetchone()[0]
            try:
                cursor.execute("SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN "
                               "(SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'kube_revision')")
                indexes = cursor.fetchone()[0]
            except Exception:   # (no dbstat in this SQLite)
                indexes = None
        else:
            cursor.execute("SELECT pg_total_relation_size('kube_revision'), pg_indexes_size('kube_revision')")
            disk, indexes = cursor.fetchone()
    return {"rows": rows, "text": text, "disk": disk, "indexes": indexes, "packs": packs, "packed": packed,
            "blobs": blobs, "pack_disk": pack_disk}


def vacuum() -> None:
    from django.db import connection
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("VACUUM")
        else:
            cursor.execute("VACUUM FULL kube_revision")
            cursor.execute("VACUUM FULL kube_revision_pack")


def simulate(leases: int, jobs: int, minutes: int, renew_seconds: int, align: bool = False) -> tuple[datetime, datetime]:
    """Create the objects, then log `minutes` of renewals and Job progress ending now (align: at
    the start of this hour)."""
    import orjson
    from django.db import connection

    from dashboard.kube import store
    from dashboard.kube.registry import by_kind
    from dashboard.kube.storage import rows

    lease_res, job_res = by_kind("Lease"), by_kind("Job")
    end = datetime.now(timezone.utc)
    if align:
        end = end.replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(minutes=minutes)
    objects = {}
    for i in range(leases):
        obj = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": f"node-{i:05d}", "namespace": "kube-node-lease"},
               "spec": {"holderIdentity": f"node-{i:05d}", "leaseDurationSeconds": 40, "renewTime": micro(start)}}
        objects[("Lease", f"node-{i:05d}")] = store.create(lease_res, "kube-node-lease", obj).object
    for i in range(jobs):
        obj = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"job-{i:05d}", "namespace": "batch"},
               "spec": {"completions": 1000, "parallelism": 10, "template": {"spec": {"restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}}}}
        objects[("Job", f"job-{i:05d}")] = store.create(job_res, "batch", obj).object
    rv = store.current_revision()
    from dashboard.kube.models import Revision
    Revision.everywhere.filter(rv__lte=rv).update(created=start)   # (created at the window's start)
    batch, last = [], {}
    tick = 0
    moment = start
    while moment < end:
        for key, obj in objects.items():
            kind, name = key
            if kind == "Lease":
                obj["spec"]["renewTime"] = micro(moment)
            elif tick % max(60 // renew_seconds, 1) == 0:
                obj["status"] = {**(obj.get("status") or {}), "succeeded": tick // max(60 // renew_seconds, 1),
                                 "active": 10, "ready": 10}
            else:
                continue
            for entry in obj["metadata"].get("managedFields") or ():
                entry["time"] = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
            rv += 1
            obj["metadata"]["resourceVersion"] = str(rv)
            ns = obj["metadata"]["namespace"]
            batch.append((rv, "local", kind, ns, name, "MODIFIED", orjson.dumps(obj).decode(),
                          connection.ops.adapt_datetimefield_value(moment), ""))
            last[key] = rv
            if len(batch) >= 2000:
                rows.insert_many(rows.INSERT_REVISION_HEAD, batch)
                batch.clear()
        tick += 1
        moment += timedelta(seconds=renew_seconds)
    rows.insert_many(rows.INSERT_REVISION_HEAD, batch)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE kube_revision_counter SET value = %s WHERE id = 1", [rv])
        for (kind, name), top in last.items():
            table = (lease_res if kind == "Lease" else job_res).model._meta.db_table
            cursor.execute(f"UPDATE {table} SET resource_version = %s WHERE name = %s", [top, name])
    if align:   # (a write now: the compaction point's hour is this one, the simulated ones are whole)
        def renew(obj):
            obj["spec"]["renewTime"] = micro(datetime.now(timezone.utc))
            return obj
        store.update(lease_res, "kube-node-lease", "node-00000", renew)
    return start, end


def timed(fn, repeat: int = 3) -> float:
    """The best of `repeat` runs of fn() (a page: it must answer 200), in seconds."""
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        response = fn()
        best = min(best, time.perf_counter() - began)
        assert response.status_code == 200, (response.status_code, response.get("Location"), response.content[:300])
    return best


def streamed(client, path: str, repeat: int = 3) -> tuple[float, float, float]:
    """The best (first byte, first row, whole answer) of `repeat` GETs of a streamed page, in
    seconds (Django's test client in this process: each piece as the page's generator makes it)."""
    best = (float("inf"),) * 3
    for _ in range(repeat):
        began = time.perf_counter()
        response = client.get(path)
        assert response.status_code == 200 and response.streaming, (response.status_code, path)
        first_byte = first_row = None
        for piece in response.streaming_content:
            now = time.perf_counter() - began
            first_byte = first_byte if first_byte is not None else now
            if first_row is None and b'class="change-group' in piece:
                first_row = now
        whole = time.perf_counter() - began
        assert first_row is not None, "no row: nothing changed in the window?"
        best = tuple(min(a, b) for a, b in zip(best, (first_byte, first_row, whole)))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--leases", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--renew-seconds", type=int, default=2)
    parser.add_argument("--back-minutes", type=int, default=30)
    parser.add_argument("--database", default="", help="a PostgreSQL server URL (default: SQLite in a temp dir)")
    parser.add_argument("--no-align", dest="align", action="store_false",
                        help="end the simulated window now, not at the start of this hour (nothing is packed)")
    args = parser.parse_args()
    url, data, admin = setup(args.database)
    try:
        from django.test import Client

        from dashboard.access.tokens import ensure_user
        from dashboard.kube import compaction

        print(f"# history cost: {args.leases} Leases renewing every {args.renew_seconds} s, {args.jobs} Jobs "
              f"stepping once a minute, {args.minutes} simulated minutes; {url.split('@')[-1]}")
        print(f"# {machine()}")
        began = time.perf_counter()
        start, end = simulate(args.leases, args.jobs, args.minutes, args.renew_seconds, args.align)
        print(f"simulated in {time.perf_counter() - began:.1f} s")
        per_day = 24 * 60 / args.minutes
        before = log_size()
        client = Client()
        client.force_login(ensure_user("bench-admin", "admin"))
        at = (end - timedelta(minutes=args.back_minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
        limit = max(args.leases, 1)
        live = timed(lambda: client.get(f"/leases/?namespace=kube-node-lease&limit={limit}"))
        past = timed(lambda: client.get(f"/leases/?namespace=kube-node-lease&limit={limit}&at={at}"))
        changes = streamed(client, f"/changes/?from={start.strftime('%Y-%m-%dT%H:%M:%SZ')}")
        print(f"Leases list ({limit}): live {live * 1000:.0f} ms, as of {args.back_minutes} min back "
              f"{past * 1000:.0f} ms ({past / live:.2f}x)", flush=True)   # (now: thinning a long run takes minutes)
        print(f"/changes/ over {args.minutes} min (streamed): first byte {changes[0] * 1000:.0f} ms, first row "
              f"{changes[1] * 1000:.0f} ms ({changes[1] / live:.2f}x the live list; target <= 300 ms), whole answer "
              f"{changes[2] * 1000:.0f} ms ({changes[2] / live:.2f}x)", flush=True)
        from dashboard.kube import store
        began = time.perf_counter()
        removed = compaction.thin(0, store.current_revision())   # (thinning alone, as before deltas)
        thin_seconds = time.perf_counter() - began
        vacuum()
        thinned = log_size()
        began = time.perf_counter()
        compaction.compact(keep=0, keep_seconds=0)   # (thinning again finds nothing: the deltas)
        compact_seconds = time.perf_counter() - began
        vacuum()
        after = log_size()
        from django.db import connection
        with connection.cursor() as cursor:   # (the deltas' figures, before packing takes them)
            cursor.execute("SELECT SUM(CASE WHEN object LIKE %s THEN 1 ELSE 0 END), "
                           "SUM(CASE WHEN object LIKE %s THEN LENGTH(object) ELSE 0 END), COUNT(*), "
                           "COUNT(DISTINCT kind || '/' || namespace || '/' || name) FROM kube_revision", ["=%", "=%"])
            n_delta, delta_text, n_rows, keys = cursor.fetchone()
        past_thinned = timed(lambda: client.get(f"/leases/?namespace=kube-node-lease&limit={limit}&at={at}"))
        live_after = timed(lambda: client.get(f"/leases/?namespace=kube-node-lease&limit={limit}"))
        began = time.perf_counter()
        held = compaction.pack_spans(3600)
        pack_seconds = time.perf_counter() - began
        vacuum()
        packed = log_size()
        past_packed = timed(lambda: client.get(f"/leases/?namespace=kube-node-lease&limit={limit}&at={at}"))
        live_packed = timed(lambda: client.get(f"/leases/?namespace=kube-node-lease&limit={limit}"))
        changes_packed = streamed(client, f"/changes/?from={start.strftime('%Y-%m-%dT%H:%M:%SZ')}")
        mb = 1024 * 1024
        print(f"{'':30}{'rows':>12}{'JSON MB':>10}{'disk MB':>10}{'of it index':>13}{'B/row':>8}"
              f"{'disk MB/day':>13}")
        for label, size in (("before thinning", before), ("after thinning", thinned),
                            ("after thinning + deltas", after)):
            index = "?" if size["indexes"] is None else f"{size['indexes'] / mb:.1f}"
            print(f"{label:30}{size['rows']:>12,}{size['text'] / mb:>10.1f}{size['disk'] / mb:>10.1f}{index:>13}"
                  f"{size['disk'] / max(size['rows'], 1):>8.0f}{size['disk'] / mb * per_day:>13.0f}")
        ceiling = 200
        # The window's full revisions (each key's creation and head, a keyframe every 6 h) weigh far
        # more in 10 simulated minutes than in a day: the steady state per day, from the measured
        # parts: every kept revision's row cost (disk less text), plus the texts of a day's deltas
        # and of 2 + 4 full texts per key (head, creation, keyframes), scaled from this window.
        n_delta, delta_text = n_delta or 0, delta_text or 0
        full_text = (after["text"] - delta_text) / max(n_rows - n_delta, 1)
        per_row = (after["disk"] - after["text"]) / max(n_rows, 1)
        kept_a_day = (n_rows - keys) * per_day   # (the window's creations are not a day's load)
        steady = kept_a_day * (per_row + delta_text / max(n_delta, 1)) + keys * 6 * full_text
        print(f"deltas: {n_delta:,} of {n_rows:,} rows, {delta_text / max(n_delta, 1):.0f} B of text each "
              f"(full texts {full_text:.0f} B); row cost beside its text {per_row:.0f} B")
        print(f"steady state a day: {kept_a_day:,.0f} kept revisions x ({per_row:.0f} + "
              f"{delta_text / max(n_delta, 1):.0f}) B + {keys:,} keys x 6 full texts = {steady / mb:.0f} MB "
              f"= {steady / mb / ceiling:.2f}x the target (of it rows without their text: "
              f"{kept_a_day * per_row / mb:.0f} MB)")
        print(f"after thinning + deltas: {after['disk'] / mb * per_day:.0f} MB a day = "
              f"{after['disk'] / mb * per_day / ceiling:.2f}x the target's {ceiling} MB "
              f"(thinning alone {thinned['disk'] / mb * per_day / ceiling:.2f}x)")
        print(f"thinning removed {removed:,} revisions in {thin_seconds:.1f} s; compaction (deltas) "
              f"{compact_seconds:.1f} s")
        print(f"Leases list ({limit}): live {live * 1000:.0f} ms, as of {args.back_minutes} min back "
              f"{past * 1000:.0f} ms ({past / live:.2f}x); after thinning + deltas: live {live_after * 1000:.0f} ms, "
              f"as of then {past_thinned * 1000:.0f} ms ({past_thinned / live_after:.2f}x)")
        print("(per day: the simulated window's bytes scaled to 24 h; past the watch window only the thinned "
              "figure applies)")
        # Packed: the kept revisions of each whole hour in one row per object. What a day adds is
        # the pack table's growth (24 such hours; with --minutes < 60 an upper bound: a shorter
        # pack carries its first text over fewer revisions); what stays in the log is the same
        # few rows per object every day (its creation and its newest revision, and the deltas
        # of the hour still filling), not a day's cost.
        pack_day = packed["pack_disk"] / mb * per_day
        log_disk = packed["disk"] - (packed["pack_disk"] if connection.vendor == "sqlite" else 0)   # (SQLite: the file)
        print(f"after packing ({held:,} revisions into {packed['packs']:,} packs in {pack_seconds:.1f} s): log "
              f"{packed['rows']:,} rows {log_disk / mb:.1f} MB on disk; packs {packed['packed']:,} revisions, "
              f"{packed['blobs'] / mb:.2f} MB of blobs ({packed['blobs'] / max(packed['packed'], 1):.0f} B a "
              f"revision), {packed['pack_disk'] / mb:.2f} MB on disk with their indexes "
              f"({packed['pack_disk'] / max(packed['packed'], 1):.0f} B a revision)")
        print(f"steady state a day, packed: {pack_day:.0f} MB = {pack_day / ceiling:.2f}x the target's {ceiling} MB "
              f"({'PASS' if pack_day <= ceiling else 'MISS'}); the log's rows besides: {log_disk / mb:.1f} MB "
              f"for {keys:,} objects, the same every day")
        print(f"Leases list ({limit}) after packing: live {live_packed * 1000:.0f} ms, as of {args.back_minutes} min "
              f"back {past_packed * 1000:.0f} ms ({past_packed / live_packed:.2f}x); /changes/ over the window: first "
              f"row {changes_packed[1] * 1000:.0f} ms, whole answer {changes_packed[2] * 1000:.0f} ms")
        return 0
    finally:
        if admin:
            drop(url, admin)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

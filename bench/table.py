"""Table benchmark (issue 10): server CPU of the Table list of N Jobs, in-process.

    .venv/bin/python bench/table.py [--jobs 3000] [--runs 15]
    .venv/bin/py-spy record -r 500 -f raw -o /tmp/table.txt -- .venv/bin/python bench/table.py --runs 60

Makes a throw-away SQLite database (temp data dir, migrated), creates N Jobs with status
(half finished, with start and completion times) through the API, then times, with the
process's CPU clock, the whole Django request (middleware, auth, store, encoding) for:
  ceiling: the JSON list of the same N Jobs (the same rows read, no Table building);
  Table:   the same list as a meta.k8s.io Table (what `kubectl get jobs -A` asks for).
Prints the median CPU ms of each and the Table's ratio to the ceiling. No server, no sockets:
the figure is the request's own CPU, undisturbed by other load on the machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io"
TARGET_TABLE_MS = 40.0


def setup(data_dir: str) -> None:
    os.environ.update(KUBEDASH_DATA_DIR=data_dir, DJANGO_SETTINGS_MODULE="dashboard.settings")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def seed(client, token: str, count: int) -> None:
    import orjson

    for i in range(count):
        ns = f"bench-{i % 10}"
        body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"job-{i}", "namespace": ns,
                                                                       "labels": {"app": f"a{i % 7}"}},
                "spec": {"completions": 3, "parallelism": 1,
                         "template": {"spec": {"restartPolicy": "Never",
                                               "containers": [{"name": "main", "image": "busybox",
                                                               "command": ["true"]}]}}}}
        r = client.post(f"/apis/batch/v1/namespaces/{ns}/jobs", orjson.dumps(body), content_type="application/json",
                        HTTP_AUTHORIZATION=f"Bearer {token}")
        assert r.status_code == 201, r.content
        if i % 2:
            status = {"status": {"startTime": "2026-11-22T03:51:45Z", "completionTime": "2026-11-22T03:52:10Z",
                                 "succeeded": 3, "conditions": [
                                     {"type": "SuccessCriteriaMet", "status": "True",
                                      "lastProbeTime": "2026-11-22T03:52:10Z",
                                      "lastTransitionTime": "2026-11-22T03:52:10Z"},
                                     {"type": "Complete", "status": "True",
                                      "lastProbeTime": "2026-11-22T03:52:10Z",
                                      "lastTransitionTime": "2026-11-22T03:52:10Z"}]}}
            r = client.patch(f"/apis/batch/v1/namespaces/{ns}/jobs/job-{i}/status", orjson.dumps(status),
                             content_type="application/merge-patch+json", HTTP_AUTHORIZATION=f"Bearer {token}")
            assert r.status_code == 200, r.content


def time_request(client, token: str, accept: str, runs: int) -> tuple[list[float], int]:
    times, size = [], 0
    for _ in range(runs + 1):
        start = time.process_time()
        r = client.get("/apis/batch/v1/jobs", HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_ACCEPT=accept)
        times.append((time.process_time() - start) * 1000)
        assert r.status_code == 200, r.content[:300]
        size = len(r.content)
    return times[1:], size   # the first run warms caches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kubedash-bench-table-") as data_dir:
        setup(data_dir)
        from django.test import Client

        from dashboard.access.tokens import issue_token

        token = issue_token("bench", "admin")
        client = Client(HTTP_HOST="localhost")
        started = time.monotonic()
        seed(client, token, args.jobs)
        print(f"seeded {args.jobs} Jobs in {time.monotonic() - started:.1f} s")
        ceiling, json_size = time_request(client, token, "application/json", args.runs)
        table, table_size = time_request(client, token, TABLE_ACCEPT, args.runs)
    c, t = statistics.median(ceiling), statistics.median(table)
    print(f"{'request':<34} {'median CPU ms':>14} {'min':>8} {'max':>8} {'bytes':>10}")
    print(f"{'ceiling: JSON list of the Jobs':<34} {c:>14.1f} {min(ceiling):>8.1f} {max(ceiling):>8.1f} {json_size:>10}")
    print(f"{'Table list of the Jobs':<34} {t:>14.1f} {min(table):>8.1f} {max(table):>8.1f} {table_size:>10}")
    print(f"Table / ceiling: {t / c:.2f}x;  target: Table <= {TARGET_TABLE_MS:.0f} ms CPU: "
          f"{'PASS' if t <= TARGET_TABLE_MS else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

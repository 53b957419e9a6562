"""Server-side apply benchmark (issue 13): apply vs a plain PUT of the same object, CPU per request.

    .venv/bin/python bench/apply.py [--requests 2000] [--quick] [--profile apply.txt]

Starts a throw-away server (one process, its own SQLite database), then, one keep-alive
connection, sends --requests requests of each kind (in 5 interleaved rounds) and reads the
server's CPU time (user + system, /proc) before and after each batch:
  0. ceiling: GET /healthz (the same Daphne + Django stack);
  1. Lease renewal by PUT: the previous answer with a new spec.renewTime (what client-go's
     leader election sends; it now also updates the renewer's managedFields entry);
  2. Lease renewal by apply: an apply patch of holder, duration and a new renewTime;
  3. unchanged Job by PUT: the stored Job sent back (a no-op: no new revision);
  4. unchanged Job by apply: the same applied configuration again (a no-op too).
Prints CPU ms per request and each one's ratio to the ceiling, then the targets (apply <= 2x
the PUT of the same object) with PASS/MISS. `--profile FILE` samples the server with py-spy
during one more apply-renewal run and prints where the time goes.

Traffic goes only to 127.0.0.1.
"""
from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BenchServer, categorise, find_pyspy, machine, print_targets, read_collapsed  # noqa: E402

NS = "bench-apply"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
APPLY = "application/apply-patch+yaml"
MAX_RATIO = 2.0
ROUNDS = 5

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "", "namespace": NS, "labels": {"app": "bench"}},
       "spec": {"backoffLimit": 3, "parallelism": 2, "completions": 4, "template": {"spec": {
           "restartPolicy": "Never",
           "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "echo hi"],
                           "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                           "ports": [{"containerPort": 8080, "name": "http"}]}]}}}}


def lease(name: str, renew: str) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": NS},
            "spec": {"holderIdentity": "bench-holder", "leaseDurationSeconds": 15, "renewTime": renew}}


class Conn:
    def __init__(self, server: BenchServer):
        self.c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        self.headers = {"Authorization": f"Bearer {server.token}", "User-Agent": "bench-apply/1.0"}

    def send(self, method: str, path: str, body: bytes | None = None, ctype: str = "application/json") -> tuple[int, dict]:
        headers = dict(self.headers)
        if body is not None:
            headers["Content-Type"] = ctype
        self.c.request(method, path, body=body, headers=headers)
        r = self.c.getresponse()
        raw = r.read()
        return r.status, (json.loads(raw) if raw[:1] == b"{" else {})


class Renewals:
    """renewTime values one microsecond apart, as a renewing holder would send."""

    def __init__(self):
        self.t = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def next(self) -> str:
        self.t += timedelta(microseconds=1)
        return self.t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def measure(server: BenchServer, n: int, step) -> float:
    """CPU ms per request of n calls of step(i) (each one request)."""
    before = server.cpu_seconds()
    for i in range(n):
        step(i)
    return 1000 * (server.cpu_seconds() - before) / n


def scenarios(server: BenchServer, n: int) -> dict[str, float]:
    conn = Conn(server)
    clock = Renewals()
    ok = lambda status, what: status in (200, 201) or sys.exit(f"{what}: HTTP {status}")  # noqa: E731

    # Seed: one Lease and one Job per way of writing, made the way they will be written.
    status, put_lease = conn.send("POST", LEASES + "?fieldManager=bench-renewer",
                                  json.dumps(lease("by-put", clock.next())).encode())
    ok(status, "create lease")
    ok(conn.send("PATCH", LEASES + "/by-apply?fieldManager=bench-renewer", json.dumps(
        lease("by-apply", clock.next())).encode(), APPLY)[0], "apply lease")
    status, put_job = conn.send("POST", JOBS + "?fieldManager=bench", json.dumps(
        {**JOB, "metadata": {**JOB["metadata"], "name": "by-put"}}).encode())
    ok(status, "create job")
    job_config = json.dumps({**JOB, "metadata": {**JOB["metadata"], "name": "by-apply"}}).encode()
    ok(conn.send("PATCH", JOBS + "/by-apply?fieldManager=bench", job_config, APPLY)[0], "apply job")
    put_job_body = json.dumps(put_job).encode()

    state = {"lease": put_lease}

    def renew_put(_):
        obj = state["lease"]
        obj["spec"]["renewTime"] = clock.next()
        status, state["lease"] = conn.send("PUT", LEASES + "/by-put", json.dumps(obj).encode())
        ok(status, "renew by PUT")

    def renew_apply(_):
        body = json.dumps(lease("by-apply", clock.next())).encode()
        ok(conn.send("PATCH", LEASES + "/by-apply?fieldManager=bench-renewer", body, APPLY)[0], "renew by apply")

    def job_put(_):
        ok(conn.send("PUT", JOBS + "/by-put", put_job_body)[0], "job PUT")

    def job_apply(_):
        ok(conn.send("PATCH", JOBS + "/by-apply?fieldManager=bench", job_config, APPLY)[0], "job apply")

    def healthz(_):
        ok(conn.send("GET", "/healthz")[0], "healthz")

    steps = [("ceiling GET /healthz", healthz), ("Lease renewal, PUT", renew_put),
             ("Lease renewal, apply", renew_apply), ("unchanged Job, PUT", job_put),
             ("unchanged Job, apply", job_apply)]
    for _, step in steps:
        measure(server, max(n // 10, 20), step)          # warm-up (lazy imports, caches)
    # Interleaved rounds: a burst of load from elsewhere on the machine lands on every scenario alike.
    out = dict.fromkeys((name for name, _ in steps), 0.0)
    rounds = ROUNDS
    for _ in range(rounds):
        for name, step in steps:
            out[name] += measure(server, n // rounds, step) / rounds
    # The unchanged writes must really be no-ops (no new revision) for the comparison to mean it.
    rv_before = conn.send("GET", JOBS + "/by-apply")[1]["metadata"]["resourceVersion"]
    job_apply(0)
    assert conn.send("GET", JOBS + "/by-apply")[1]["metadata"]["resourceVersion"] == rv_before
    out["_renew_apply"] = renew_apply
    return out


def profile(server: BenchServer, step, n: int, path: Path) -> None:
    pyspy = find_pyspy()
    if not pyspy:
        print("\n(py-spy not found: pip install py-spy, or the bench extra)")
        return
    raw = path.with_suffix(".raw")
    spy = subprocess.Popen([pyspy, "record", "--pid", str(server.proc.pid), "--format", "raw", "--rate", "250",
                            "--output", str(raw), "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    for i in range(n):
        step(i)
    spy.terminate()
    spy.wait(timeout=30)
    if not raw.exists():
        print("\n(py-spy recorded nothing: it may need ptrace permission)")
        return
    cats = [("managed fields", ("managed_fields.py",)), ("apply merge", ("kube/apply.py",)),
            ("store", ("kube/store.py", "kube/storage/")), ("schema decode", ("kube/schema.py",)), ("codec", ("kube/codec.py",)),
            ("views", ("kube/views.py",)), ("django / drf", ("django/", "rest_framework/")),
            ("daphne / twisted", ("daphne/", "twisted/"))]
    tally: Counter = Counter()
    for frames, count in read_collapsed(raw):
        tally[categorise(frames, cats)] += count
    total = sum(tally.values()) or 1
    lines = [f"{label:<20} {100 * c / total:5.1f}%" for label, c in tally.most_common()]
    path.write_text("\n".join(lines) + "\n")
    print("\n== profile: Lease renewal by apply ==")
    print("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="300 requests per scenario")
    parser.add_argument("--profile", type=Path)
    args = parser.parse_args()
    n = 300 if args.quick else args.requests
    print(f"# bench/apply.py — {machine()}; {n} sequential requests per scenario, one keep-alive connection")
    with tempfile.TemporaryDirectory(prefix="kd-bench-apply-") as tmp:
        server = BenchServer(Path(tmp))
        server.start()
        try:
            results = scenarios(server, n)
            renew_apply = results.pop("_renew_apply")
            ceiling = results["ceiling GET /healthz"]
            print(f"\n{'scenario':<26} {'CPU ms/req':>10} {'x ceiling':>10}")
            for name, ms in results.items():
                print(f"{name:<26} {ms:>10.3f} {ms / ceiling if ceiling else 0:>10.2f}")
            renew = results["Lease renewal, apply"] / results["Lease renewal, PUT"]
            job = results["unchanged Job, apply"] / results["unchanged Job, PUT"]
            missed = print_targets([
                (f"Lease renewal: apply / PUT CPU <= {MAX_RATIO}", f"{renew:.2f}x", renew <= MAX_RATIO),
                (f"unchanged Job: apply / PUT CPU <= {MAX_RATIO}", f"{job:.2f}x", job <= MAX_RATIO),
            ], 44, 8)
            if args.profile:
                profile(server, renew_apply, n, args.profile)
        finally:
            server.stop()
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

"""A 10,000-object list: the server's peak RSS growth, time to first byte and total time,
streamed (issue 28: kube/views.py stream_list) against built whole (KUBEDASH_STREAM_LISTS=0,
what every list did before), in the same run, on the same database.

    .venv/bin/python bench/lists.py [--objects 10000] [--rounds 9] [--database postgres://…]

Two servers (one process each, one per mode) on the same data are warmed with one list each;
then each round asks them in turn (an A/B under the same load): for each request it resets
the peak RSS (`/proc/PID/clear_refs` 5) of the serving process and its children (the heavy
child builds lists when KUBEDASH_HEAVY_PROCESS is on), lists every Lease (JSON, then as a
Table) and sums each one's peak (VmHWM) minus its RSS before; CPU is summed alike. Time to first byte is to the first byte of
the body; the server's CPU time is a mean (/proc counts it in clock ticks). Ceilings: `GET /version` on the same server (its TTFB, its growth), and a streamed
list's total time at most 1.1x the list built whole (exit status 1 if not).
"""
from __future__ import annotations

import argparse
import http.client
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BenchServer, add_backend_arguments, backend_name, machine, proc_cpu_seconds  # noqa: E402

LEASES = "/apis/coordination.k8s.io/v1/namespaces/bench/leases"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def seed(port: int, token: str, count: int) -> None:
    import orjson

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    for i in range(count):
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": f"lease-{i:05}", "namespace": "bench",
                             "labels": {"app": "bench", "shard": str(i % 16)},
                             "annotations": {"note": "x" * 64}},
                "spec": {"holderIdentity": f"node-{i % 50}", "leaseDurationSeconds": 15,
                         "renewTime": "2026-11-22T03:00:00.000000Z", "leaseTransitions": i % 7}}
        conn.request("POST", LEASES, body=orjson.dumps(body), headers=headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status != 201:
            raise SystemExit(f"seeding: {resp.status}")
    conn.close()


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def with_children(pid: int) -> list[int]:
    """The serving process and its children (the heavy child that builds lists and Tables
    when KUBEDASH_HEAVY_PROCESS is on): the list's memory and CPU are in either."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            pids += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return pids


def one(port: int, token: str, pid: int, path: str, accept: str | None) -> tuple[float, float, int, int, float]:
    """(seconds to the body's first byte, seconds to the last, body bytes, peak RSS growth KiB,
    the server's CPU seconds), both summed over the serving process and its children."""
    pids = with_children(pid)
    for p in pids:
        Path(f"/proc/{p}/clear_refs").write_text("5")   # VmHWM := the current RSS
    before = {p: status_kb(p, "VmRSS") for p in pids}
    cpu = sum(proc_cpu_seconds(p) for p in pids)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Authorization": f"Bearer {token}"}
    if accept:
        headers["Accept"] = accept
    started = time.perf_counter()
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    first = resp.read(1)
    ttfb = time.perf_counter() - started
    rest = resp.read()
    total = time.perf_counter() - started
    cpu = sum(proc_cpu_seconds(p) for p in pids) - cpu
    conn.close()
    if resp.status != 200 or not first:
        raise SystemExit(f"GET {path}: {resp.status}")
    time.sleep(0.05)
    return ttfb, total, 1 + len(rest), sum(status_kb(p, "VmHWM") - before[p] for p in pids), cpu


def measure(servers: dict[str, BenchServer], rounds: int) -> dict:
    """{mode: {case: [samples]}}, the modes' servers asked in turn within each round (an A/B on
    the same load)."""
    cases = {"version": ("/version", None), "list JSON": (LEASES, None), "list Table": (LEASES, TABLE)}
    for server in servers.values():   # warm: imports, caches, the Table's cached rows
        for path, accept in cases.values():
            one(server.port, server.token, server.serving_pids()[0], path, accept)
    out = {mode: {name: [] for name in cases} for mode in servers}
    for _ in range(rounds):
        for name, (path, accept) in cases.items():
            for mode, server in servers.items():
                out[mode][name].append(one(server.port, server.token, server.serving_pids()[0], path, accept))
    return out


class SameDatabase(BenchServer):
    """A second server on `first`'s database and token (no migrate, no token of its own)."""

    def __init__(self, first: BenchServer, **env: str):
        super().__init__(first.data_dir)
        self.first = first
        self.env = {**first.env, **env}

    def prepare(self) -> None:
        self.token = self.first.token


CEILING = 1.1   # streamed total time / built-whole total time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=9)
    add_backend_arguments(parser)
    args = parser.parse_args()
    print(f"# bench/lists.py: {args.objects} Leases, {args.rounds} rounds, {backend_name(args.database, args.redis)}")
    print(f"# {machine()}; load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        whole = BenchServer(Path(tmp), database=args.database, redis=args.redis)
        whole.env["KUBEDASH_STREAM_LISTS"] = "0"
        streamed = SameDatabase(whole, KUBEDASH_STREAM_LISTS="1")
        servers = {"built whole": whole, "streamed": streamed}
        try:
            whole.start()
            seed(whole.port, whole.token, args.objects)
            streamed.start()
            results = measure(servers, args.rounds)
        finally:
            streamed.stop()
            whole.stop()   # (last: it drops a PostgreSQL database)
    print(f"# load average at end: {os.getloadavg()[0]:.2f}\n")

    def median(mode: str, name: str, field: int) -> float:
        return statistics.median(s[field] for s in results[mode][name])

    print(f"{'mode':<12} {'request':<11} {'TTFB ms':>8} {'total ms':>9} {'CPU ms':>7} {'MB':>6} {'peak RSS +MiB':>14}")
    for mode, cases in results.items():
        for name, samples in cases.items():
            print(f"{mode:<12} {name:<11} {median(mode, name, 0) * 1000:8.1f} {median(mode, name, 1) * 1000:9.1f} {statistics.mean(s[4] for s in samples) * 1000:7.1f} "
                  f"{samples[0][2] / 1e6:6.2f} {median(mode, name, 3) / 1024:14.1f}")
    print()
    version = median("streamed", "version", 0) * 1000
    missed = 0
    for name in ("list JSON", "list Table"):
        whole_rss, streamed_rss = (median(m, name, 3) / 1024 for m in results)
        whole_ttfb, streamed_ttfb = (median(m, name, 0) * 1000 for m in results)
        whole_total, streamed_total = (median(m, name, 1) * 1000 for m in results)
        ratio = streamed_total / whole_total
        missed += ratio > CEILING
        print(f"{name}: peak RSS growth {streamed_rss:.1f} MiB streamed vs {whole_rss:.1f} MiB built whole; "
              f"TTFB {streamed_ttfb:.1f} ms streamed vs {whole_ttfb:.1f} ms built whole, ceiling GET /version "
              f"{version:.1f} ms ({streamed_ttfb / version if version else float('nan'):.1f}x the ceiling); "
              f"total {streamed_total:.1f} ms streamed vs {whole_total:.1f} ms built whole: "
              f"{ratio:.2f}x (ceiling {CEILING}x) {'PASS' if ratio <= CEILING else 'MISS'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

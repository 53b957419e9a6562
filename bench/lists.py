"""A 10,000-object list: the server's peak RSS growth and time to first byte, streamed (issue 28:
kube/views.py stream_list) against built whole (KUBEDASH_STREAM_LISTS=0, what every list did
before), in the same run, on the same database.

    .venv/bin/python bench/lists.py [--objects 10000] [--rounds 5] [--database postgres://…]

For each mode the server (one process) is started on the same data, warmed with one list, then
each round resets the process's peak RSS (`/proc/PID/clear_refs` 5), lists every Lease (JSON,
then as a Table) and reads the peak (VmHWM) minus the RSS before. Time to first byte is to the
first byte of the body. The ceiling: `GET /version` on the same server (its TTFB, its growth).
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

from common import BenchServer, add_backend_arguments, backend_name, machine  # noqa: E402

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


def one(port: int, token: str, pid: int, path: str, accept: str | None) -> tuple[float, float, int, int]:
    """(seconds to the body's first byte, seconds to the last, body bytes, peak RSS growth KiB)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")   # VmHWM := the current RSS
    before = status_kb(pid, "VmRSS")
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
    conn.close()
    if resp.status != 200 or not first:
        raise SystemExit(f"GET {path}: {resp.status}")
    time.sleep(0.05)
    return ttfb, total, 1 + len(rest), status_kb(pid, "VmHWM") - before


def measure(server: BenchServer, rounds: int) -> dict:
    pid = server.serving_pids()[0]
    cases = {"version": ("/version", None), "list JSON": (LEASES, None), "list Table": (LEASES, TABLE)}
    for path, accept in cases.values():   # warm: imports, caches, the Table's cached rows
        one(server.port, server.token, pid, path, accept)
    out = {name: [] for name in cases}
    for _ in range(rounds):
        for name, (path, accept) in cases.items():
            out[name].append(one(server.port, server.token, pid, path, accept))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=5)
    add_backend_arguments(parser)
    args = parser.parse_args()
    print(f"# bench/lists.py: {args.objects} Leases, {args.rounds} rounds, {backend_name(args.database, args.redis)}")
    print(f"# {machine()}; load average at start: {os.getloadavg()[0]:.2f}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        server = BenchServer(Path(tmp), database=args.database, redis=args.redis)
        try:
            for mode in ("built whole", "streamed"):
                server.env["KUBEDASH_STREAM_LISTS"] = "1" if mode == "streamed" else "0"
                server.start()
                if mode == "built whole":
                    seed(server.port, server.token, args.objects)
                results[mode] = measure(server, args.rounds)
                server.proc.terminate()   # (not stop(): the next mode lists the same database)
                server.proc.wait(15)
        finally:
            server.stop()
    print(f"# load average at end: {os.getloadavg()[0]:.2f}\n")
    print(f"{'mode':<12} {'request':<11} {'TTFB ms':>8} {'total ms':>9} {'MB':>6} {'peak RSS +MiB':>14}")
    for mode, cases in results.items():
        for name, samples in cases.items():
            ttfb = statistics.median(s[0] for s in samples) * 1000
            total = statistics.median(s[1] for s in samples) * 1000
            size = samples[0][2] / 1e6
            peak = statistics.median(s[3] for s in samples) / 1024
            print(f"{mode:<12} {name:<11} {ttfb:8.1f} {total:9.1f} {size:6.2f} {peak:14.1f}")
    print()
    for name in ("list JSON", "list Table"):
        whole, streamed = (statistics.median(s[3] for s in results[m][name]) / 1024 for m in results)
        t_whole, t_streamed = (statistics.median(s[0] for s in results[m][name]) * 1000 for m in results)
        version = statistics.median(s[0] for s in results["streamed"]["version"]) * 1000
        print(f"{name}: peak RSS growth {streamed:.1f} MiB streamed vs {whole:.1f} MiB built whole "
              f"({streamed / whole if whole else float('nan'):.2f}x); TTFB {t_streamed:.1f} ms streamed vs "
              f"{t_whole:.1f} ms built whole, ceiling GET /version {version:.1f} ms "
              f"({t_streamed / version if version else float('nan'):.1f}x the ceiling)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

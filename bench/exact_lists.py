"""Lists at a resourceVersion (kube/lists.py, exact snapshots) in the common case, nothing written
since the snapshot: a page of 500 Leases at resourceVersion=R&resourceVersionMatch=Exact, and
the whole list walked by continue tokens, against the same page "most recent" (no
resourceVersion: the ceiling, same server, same run), optionally A/B against another checkout.

    .venv/bin/python bench/exact_lists.py [--objects 3000] [--rounds 9] [--base /path/to/checkout]

--base: a second server runs that checkout's code on its own copy of the same data, and the
rounds ask the two in turn (A B, B A, ...: the same load for both). Prints each request's median and
spread (min-max) in ms, the exact page's ratio to the most-recent page (ceiling 1.1x, exit 1 if
above), and with --base each figure's ratio this/base.
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

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BenchServer, machine  # noqa: E402
from lists import LEASES, seed  # noqa: E402

CEILING = 1.1   # exact page / most-recent page
PAGE = 500


def get(conn: http.client.HTTPConnection, token: str, path: str) -> dict:
    conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    resp = conn.getresponse()
    body = resp.read()
    if resp.status != 200:
        raise SystemExit(f"GET {path}: {resp.status} {body[:300]!r}")
    return orjson.loads(body)


def one_round(server: BenchServer) -> dict[str, float]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        out = {}
        t = time.perf_counter()
        recent = get(conn, server.token, f"{LEASES}?limit={PAGE}")
        out["most-recent page"] = time.perf_counter() - t
        rv = recent["metadata"]["resourceVersion"]
        t = time.perf_counter()
        get(conn, server.token, f"{LEASES}?limit={PAGE}&resourceVersion={rv}&resourceVersionMatch=Exact")
        out["exact page"] = time.perf_counter() - t
        t = time.perf_counter()
        page = get(conn, server.token, f"{LEASES}?limit={PAGE}&resourceVersion={rv}&resourceVersionMatch=Exact")
        while page["metadata"].get("continue"):
            page = get(conn, server.token, f"{LEASES}?limit={PAGE}&continue={page['metadata']['continue']}")
        out["exact walk"] = time.perf_counter() - t
        return out
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--base", type=Path, default=None, help="another checkout to A/B against")
    args = parser.parse_args()
    print(f"# bench/exact_lists.py: {args.objects} Leases, pages of {PAGE}, {args.rounds} rounds"
          + (f", A/B against {args.base}" if args.base else ""))
    print(f"# {machine()}; load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        servers = {"this": BenchServer(Path(tmp) / "this")}
        if args.base:
            servers["base"] = BenchServer(Path(tmp) / "base", root=args.base.resolve())
        results: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
        try:
            for server in servers.values():
                server.data_dir.mkdir()
                server.start()
                seed(server.port, server.token, args.objects)
                one_round(server)   # warm-up
            for i in range(args.rounds):
                # (A B, then B A: neither always asked first)
                for name, server in (list(servers.items()) if i % 2 == 0 else list(servers.items())[::-1]):
                    results[name].append(one_round(server))
        finally:
            for server in servers.values():
                server.stop()
    print(f"# load average at end: {os.getloadavg()[0]:.2f}\n")

    def median(name: str, what: str) -> float:
        return statistics.median(r[what] for r in results[name]) * 1000

    print(f"{'code':<5} {'request':<17} {'median ms':>9} {'min-max ms':>14}" + ("  this/base" if args.base else ""))
    for name in servers:
        for what in results[name][0]:
            values = [r[what] * 1000 for r in results[name]]
            ab = f"  {median('this', what) / median('base', what):9.2f}x" if args.base and name == "this" else ""
            print(f"{name:<5} {what:<17} {median(name, what):9.1f} {min(values):6.1f}-{max(values):<7.1f}{ab}")
    ratio = median("this", "exact page") / median("this", "most-recent page")
    print(f"\nexact page / most-recent page: {ratio:.2f}x (ceiling {CEILING}x) {'PASS' if ratio <= CEILING else 'MISS'}")
    if args.base:
        base = median("base", "exact page") / median("base", "most-recent page")
        print(f"base's exact page / most-recent page: {base:.2f}x")
    return 1 if ratio > CEILING else 0


if __name__ == "__main__":
    sys.exit(main())

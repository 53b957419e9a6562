"""A list page's export (issue 40: web/export.py, `?format=csv`) of 10,000 Leases against the
same list as JSON through the API, in the same run on the same server.

    .venv/bin/python bench/export.py [--objects 10000] [--rounds 7] [--database postgres://…]

One server (one process) is seeded through the API and warmed with one request of each case;
then each round asks, in turn: the Leases list page's CSV export (a signed-in viewer's session,
the whole namespace), its JSON export, and the API's list (an admin token, JSON). Time to first
byte is to the first byte of the body. Ceilings, from the same run: the CSV export's first byte
within 100 ms, and its whole within 2x the API's JSON list (exit status 1 if either is missed).
Also reported: the server's CPU seconds per request (its processes', the heavy lane's child
included), which a loaded machine distorts less than the wall-clock times.
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

from common import add_backend_arguments, backend_name, machine  # noqa: E402
from lists import LEASES, seed  # noqa: E402
from pages import Server, log_in  # noqa: E402

TTFB_CEILING_MS = 100
TOTAL_CEILING = 2.0   # CSV export total / the API's JSON list total


def one(port: int, path: str, headers: dict, server=None) -> tuple[float, float, int, float]:
    """(seconds to the body's first byte, seconds to its last, body bytes, the server's CPU
    seconds meanwhile: 0 without `server`)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    cpu = server.cpu_seconds() if server else 0.0
    started = time.perf_counter()
    conn.request("GET", path, headers=headers)   # (http.client asks for no compression)
    resp = conn.getresponse()
    first = resp.read(1)
    ttfb = time.perf_counter() - started
    rest = resp.read()
    total = time.perf_counter() - started
    cpu = server.cpu_seconds() - cpu if server else 0.0
    conn.close()
    if resp.status != 200 or not first:
        raise SystemExit(f"GET {path}: {resp.status} {rest[:300]!r}")
    return ttfb, total, 1 + len(rest), cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=7)
    add_backend_arguments(parser)
    args = parser.parse_args()
    print(f"# bench/export.py: {args.objects} Leases, {args.rounds} rounds, {backend_name(args.database, args.redis)}")
    print(f"# {machine()}; load average at start: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp), database=args.database, redis=args.redis)
        try:
            server.start()
            seed(server.port, server.token, args.objects)
            cookie = {"Cookie": log_in(server.port)}
            cases = {"CSV export": ("/leases/?namespace=bench&format=csv", cookie),
                     "JSON export": ("/leases/?namespace=bench&format=json", cookie),
                     "API JSON list": (LEASES, {"Authorization": f"Bearer {server.token}"})}
            for path, headers in cases.values():   # warm: imports, templates, caches
                one(server.port, path, headers)
            results = {name: [] for name in cases}
            for _ in range(args.rounds):
                for name, (path, headers) in cases.items():
                    results[name].append(one(server.port, path, headers, server))
        finally:
            server.stop()
    print(f"# load average at end: {os.getloadavg()[0]:.2f}\n")

    def median(name: str, field: int) -> float:
        return statistics.median(s[field] for s in results[name])

    print(f"{'request':<14} {'TTFB ms':>8} {'total ms':>9} {'MB':>6} {'CPU ms':>7}")
    for name, samples in results.items():
        print(f"{name:<14} {median(name, 0) * 1000:8.1f} {median(name, 1) * 1000:9.1f} {samples[0][2] / 1e6:6.2f} "
              f"{median(name, 3) * 1000:7.1f}")
    ttfb = median("CSV export", 0) * 1000
    ratio = median("CSV export", 1) / median("API JSON list", 1)
    print(f"\nCSV export first byte: {ttfb:.1f} ms (ceiling {TTFB_CEILING_MS} ms) "
          f"{'PASS' if ttfb <= TTFB_CEILING_MS else 'MISS'}")
    print(f"CSV export whole: {ratio:.2f}x the API's JSON list (ceiling {TOTAL_CEILING}x) "
          f"{'PASS' if ratio <= TOTAL_CEILING else 'MISS'}")
    print(f"CSV export server CPU: {median('CSV export', 3) / median('API JSON list', 3):.2f}x the API's JSON list's "
          "(reported)")
    return 0 if ttfb <= TTFB_CEILING_MS and ratio <= TOTAL_CEILING else 1


if __name__ == "__main__":
    sys.exit(main())

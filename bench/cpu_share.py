"""Does the fast lane win the CPU, in every run? (issue 28, task E)

    .venv/bin/python bench/cpu_share.py [--runs 5] [--duration 5] [--slices 1] [--jobs 3000]
                                        [--connections 4] [--flood 80] [--modes old new]
                                        [--database postgres://USER@HOST:PORT/]
                                        [--ref PATH --modes new@ref new]

One throw-away server per mode (one worker, SQLite like bench/api.py, or --database's PostgreSQL), seeded with Leases and
--jobs Jobs. Modes: `old` serves heavy requests in the worker's own threads
(KUBEDASH_HEAVY_PROCESS=0), `new` in the worker's heavy child process at a lower OS priority
(KUBEDASH_HEAVY_PROCESS=1; `new:N`: at nice N); a mode ending `@ref` is served from the
checkout at --ref (an A/B run against older code: `git archive <commit> | tar -x -C PATH`). Then --runs rounds, the modes interleaved within each round so
both see the same machine: wrk's kubelet-style renewals (bench/lease_renew.lua) alone, then
while one client loops Table lists of every Job (bench/api.py's scenario_renew_under_tables).
With --slices N each run's two sides are measured as N alternating pairs of shorter wrk runs
(other work on a shared machine then weighs on both sides alike). Prints every run's ratio (renewals under the Tables / alone) and the worst, against
LOADED_MIN_RATIO; then, once per mode, the renewals while --flood clients loop those Tables
(429s honoured: a client answered 429 waits its Retry-After, as client-go does).
Traffic goes only to 127.0.0.1; every phase is bounded.
"""
from __future__ import annotations

import argparse
import http.client
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import (ALL_JOBS, LOADED_MAX_P99_RATIO, LOADED_MIN_RATIO, RENEW_NS, TABLE_ACCEPT,  # noqa: E402
                 WRK_MISSING, TableLoop, run_wrk, scenario_renew, scenario_renew_under_tables,
                 seed_jobs, seed_leases)
from common import BenchServer, add_backend_arguments, backend_name, machine, print_targets, proc_cpu_seconds  # noqa: E402

def mode_env(mode: str) -> dict:
    """old: heavy work in the worker's threads; new: in its child process; new:N at nice N."""
    if mode == "old":
        return {"KUBEDASH_HEAVY_PROCESS": "0"}
    name, _, nice = mode.partition(":")
    if name != "new" or not ((nice or "0").isdigit() or nice == "idle"):
        raise SystemExit(f"unknown mode {mode!r}: old, new or new:N (N: KUBEDASH_HEAVY_NICE, a number or idle)")
    return {"KUBEDASH_HEAVY_PROCESS": "1", **({"KUBEDASH_HEAVY_NICE": nice} if nice else {})}


class PoliteTableLoop(TableLoop):
    """A TableLoop that, answered 429, waits the Retry-After it was given (client-go does)."""

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.server.token}", "Accept": TABLE_ACCEPT}
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=120)
        try:
            while not self.stopping.is_set():
                started = time.perf_counter()
                conn.request("GET", ALL_JOBS, headers=headers)
                response = conn.getresponse()
                response.read()
                if response.status == 200:
                    self.times.append(time.perf_counter() - started)
                elif response.status == 429 and response.getheader("Retry-After"):
                    self.rejected += 1
                    self.stopping.wait(float(response.getheader("Retry-After")))
                else:
                    self.failed = f"Table list answered {response.status}"
                    return
        except (OSError, http.client.HTTPException) as err:
            self.failed = f"Table list failed: {err!r}"
        finally:
            conn.close()


def sliced(wrk: str, server: BenchServer, connections: int, duration: float, slices: int):
    """Renewals alone, then under the Table loop, in `slices` alternating pairs of duration/slices
    seconds each: other work on a shared machine comes and goes in seconds, and so weighs on
    both sides alike. Returns (alone, loaded) summed over the slices (rate: renewals over the
    summed time; p99: the worst slice's; other CPU: the mean), and the Tables answered."""
    parts: dict[str, list] = {"alone": [], "loaded": []}
    lists = 0
    for _ in range(slices):
        parts["alone"].append(scenario_renew(wrk, server, connections, duration / slices))
        result, loop = scenario_renew_under_tables(wrk, server, connections, duration / slices)
        parts["loaded"].append(result)
        lists += len(loop.times)
    merged = []
    for results in parts.values():
        seconds = [r.extra["duration_us"] / 1e6 for r in results]
        first = results[0]
        first.rate = sum(r.rate * s for r, s in zip(results, seconds)) / sum(seconds)
        first.p99_ms = max(r.p99_ms for r in results)
        first.other_cpu = sum(r.other_cpu for r in results) / len(results)
        merged.append(first)
    return merged[0], merged[1], lists


def flood(wrk: str, server: BenchServer, clients: int, connections: int, duration: float):
    loops = [PoliteTableLoop(server) for _ in range(clients)]
    for loop in loops:
        loop.start()
    time.sleep(1.0)
    try:
        result = scenario_renew(wrk, server, connections, duration)
    finally:
        for loop in loops:
            loop.stopping.set()
        for loop in loops:
            loop.join(120)
    failed = [loop.failed for loop in loops if loop.failed]
    return result, sum(len(loop.times) for loop in loops), sum(loop.rejected for loop in loops), failed


def relay_cost(server: BenchServer, seconds: float) -> tuple[float, int]:
    """The serving process's own CPU (not its heavy child's) while one client loops Tables for
    `seconds`, no renewals: what relaying (or, in `old`, serving) one Table costs the process the
    renewals need. Returns (CPU ms a Table, Tables answered)."""
    pid = server.serving_pids()[0]
    loop = TableLoop(server)
    before = proc_cpu_seconds(pid)
    loop.start()
    time.sleep(seconds)
    loop.stopping.set()
    loop.join()
    used = proc_cpu_seconds(pid) - before
    return (1000 * used / len(loop.times) if loop.times else float("nan")), len(loop.times)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="rounds of (alone, under Tables) per mode (default 5)")
    parser.add_argument("--duration", type=float, default=5, help="seconds per wrk run (default 5)")
    parser.add_argument("--connections", type=int, default=4, help="renewing connections (default 4)")
    parser.add_argument("--jobs", type=int, default=3000, help="Jobs in the Table lists (default 3000)")
    parser.add_argument("--slices", type=int, default=1,
                        help="measure each run's alone/under-Tables pair as this many alternating slices "
                             "(default 1: one wrk run each)")
    parser.add_argument("--flood", type=int, default=80, help="Table clients in the flood case, 0: none (default 80)")
    parser.add_argument("--modes", nargs="+", default=["old", "new"],
                        help="old, new, new:N (heavy child at nice N), any of them @ref (served from --ref); "
                             "default: old new")
    add_backend_arguments(parser)
    parser.add_argument("--relay-rounds", type=int, default=3,
                        help="rounds measuring the serving process's CPU a Table, 0: none (default 3)")
    parser.add_argument("--ref", type=Path, help="another kubedash checkout, for the modes ending @ref")
    args = parser.parse_args(argv)
    wrk = shutil.which("wrk")
    if wrk is None:
        print(WRK_MISSING, file=sys.stderr)
        return 2
    c, duration = args.connections, args.duration
    print(f"kubedash CPU-share benchmark  {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}")
    print(f"machine: {machine()}; one worker, {backend_name(args.database, args.redis)}; {args.runs} rounds of wrk runs of {duration:g} s "
          f"({args.slices} alternating slice(s) each), "
          f"{c} renewing connections; Table loop over {args.jobs} Jobs; modes {args.modes}; load {loadavg()}\n")
    servers: dict[str, BenchServer] = {}
    dirs = []
    try:
        for mode in args.modes:
            data_dir = Path(tempfile.mkdtemp(prefix=f"kubedash-bench-cpu-{mode.replace(':', '').replace('@', '-')}-"))
            dirs.append(data_dir)
            name, at, _ = mode.partition("@")
            if at and not args.ref:
                raise SystemExit(f"mode {mode!r} needs --ref PATH")
            server = BenchServer(data_dir, database=args.database, redis=args.redis,
                                 root=args.ref.resolve() if at else None)
            server.env.update(mode_env(name))
            server.start()
            servers[mode] = server
            seed_leases(server, RENEW_NS, [f"renew-{i}" for i in range(c)])
            seconds = seed_jobs(server, args.jobs)
            print(f"[{mode}] server pid {server.proc.pid}: seeded {args.jobs} Jobs in {seconds:.1f} s")
            run_wrk(wrk, server, "/healthz", 2, 1)   # warm up
            scenario_renew(wrk, server, 2, 1)
            scenario_renew_under_tables(wrk, server, 2, 1)

        ratios: dict[str, list[float]] = {m: [] for m in args.modes}
        p99s: dict[str, list[tuple[float, float]]] = {m: [] for m in args.modes}
        # other CPU: cores used by processes other than the server and wrk (other helpers, the
        # Table client) during the renewals alone / under the Tables.
        print(f"\n{'run':>3} {'mode':<8} {'alone/s':>8} {'p99 ms':>7} {'Tables/s':>9} {'p99 ms':>7} "
              f"{'ratio':>6} {'lists':>6} {'other CPU':>11} {'load':>15}")
        for run in range(1, args.runs + 1):
            for mode, server in servers.items():
                alone, loaded, lists = sliced(wrk, server, c, duration, args.slices)
                ratio = loaded.rate / alone.rate if alone.rate else 0.0
                ratios[mode].append(ratio)
                p99s[mode].append((alone.p99_ms, loaded.p99_ms))
                print(f"{run:>3} {mode:<8} {alone.rate:>8.0f} {alone.p99_ms:>7.1f} {loaded.rate:>9.0f} "
                      f"{loaded.p99_ms:>7.1f} {ratio:>6.2f} {lists:>6} "
                      f"{alone.other_cpu:>5.2f}/{loaded.other_cpu:<5.2f} {loadavg():>15}", flush=True)

        if args.relay_rounds:
            print(f"\nthe serving process's CPU a Table (one client looping Tables, no renewals; {args.relay_rounds} "
                  f"alternating rounds of {duration:g} s):")
            costs: dict[str, list[tuple[float, int]]] = {m: [] for m in args.modes}
            for _ in range(args.relay_rounds):
                for mode, server in servers.items():
                    costs[mode].append(relay_cost(server, duration))
            for mode in args.modes:
                print(f"{mode:<8} " + "  ".join(f"{ms:6.2f} ms ({n} Tables)" for ms, n in costs[mode])
                      + f"   load {loadavg()}")

        floods = {}
        if args.flood:
            print(f"\nrenewals while {args.flood} clients loop Table lists of {args.jobs} Jobs (Retry-After honoured):")
            print(f"{'mode':<8} {'alone/s':>8} {'p99 ms':>7} {'flood/s':>8} {'p99 ms':>7} {'max ms':>7} "
                  f"{'ratio':>6} {'lists':>6} {'429s':>6} {'load':>15}")
            for mode, server in servers.items():
                alone = scenario_renew(wrk, server, c, duration)
                loaded, lists, rejected, failed = flood(wrk, server, args.flood, c, duration)
                ratio = loaded.rate / alone.rate if alone.rate else 0.0
                floods[mode] = (ratio, alone, loaded)
                print(f"{mode:<8} {alone.rate:>8.0f} {alone.p99_ms:>7.1f} {loaded.rate:>8.0f} {loaded.p99_ms:>7.1f} "
                      f"{loaded.extra.get('lat_max_us', 0) / 1000:>7.0f} {ratio:>6.2f} {lists:>6} {rejected:>6} "
                      f"{loadavg():>15}", flush=True)
                if failed:
                    print(f"     {len(failed)} clients failed, e.g. {failed[0]}")

        targets = []
        for mode in args.modes:
            worst = min(ratios[mode])
            targets.append((f"[{mode}] renew under Tables >= {LOADED_MIN_RATIO} x alone, worst of {args.runs}",
                            f"{worst:.2f} (" + ", ".join(f"{r:.2f}" for r in ratios[mode]) + ")",
                            worst >= LOADED_MIN_RATIO))
            worst_p99 = max(loaded / alone if alone else 0 for alone, loaded in p99s[mode])
            targets.append((f"[{mode}] p99 under Tables <= {LOADED_MAX_P99_RATIO:g} x alone, worst",
                            f"{worst_p99:.2f}", worst_p99 <= LOADED_MAX_P99_RATIO))
            if mode in floods:
                ratio, alone, loaded = floods[mode]
                targets.append((f"[{mode}] renew under {args.flood} Table clients (reported)",
                                f"{ratio:.2f}, p99 {loaded.p99_ms:.0f} ms", None))
        print_targets(targets, 58, 40)
        print(f"load at the end: {loadavg()}")
    finally:
        for server in servers.values():
            server.stop()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

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
import gzip
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import (ALL_JOBS, LOADED_MAX_P99_RATIO, LOADED_MIN_RATIO, RENEW_NS, TABLE_ACCEPT,  # noqa: E402
                 WRK_MISSING, TableLoop, run_wrk, scenario_renew, scenario_renew_under_tables,
                 seed_jobs, seed_leases)
from common import (BenchServer, add_backend_arguments, backend_name, child_pids, machine, print_targets,  # noqa: E402
                    proc_cpu_seconds)

# Issue 42: renewals while 80 well-behaved clients loop Tables keep at least half their rate, p99
# at most 3x (one Table loop: LOADED_MIN_RATIO, LOADED_MAX_P99_RATIO).
FLOOD_MIN_RATIO = 0.5
FLOOD_MAX_P99_RATIO = 3.0


def mode_env(mode: str) -> dict:
    """old: heavy work in the worker's threads; new: in its child process; new:N at nice N."""
    if mode == "old":
        return {"KUBEDASH_HEAVY_PROCESS": "0"}
    name, _, nice = mode.partition(":")
    if name != "new" or not ((nice or "0").isdigit() or nice == "idle"):
        raise SystemExit(f"unknown mode {mode!r}: old, new or new:N (N: KUBEDASH_HEAVY_NICE, a number or idle)")
    return {"KUBEDASH_HEAVY_PROCESS": "1", **({"KUBEDASH_HEAVY_NICE": nice} if nice else {})}


class PoliteTableLoop(TableLoop):
    """A TableLoop that, answered 429, waits the Retry-After it was given (client-go does), and
    counts the Retry-After values it was given."""

    def __init__(self, server, gzip_ok: bool = False):
        super().__init__(server)
        self.retry_afters: Counter = Counter()
        self.gzip_ok = gzip_ok   # (client-go's default: Accept-Encoding gzip, the body decompressed)

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.server.token}", "Accept": TABLE_ACCEPT,
                   **({"Accept-Encoding": "gzip"} if self.gzip_ok else {})}
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=120)
        try:
            while not self.stopping.is_set():
                started = time.perf_counter()
                conn.request("GET", ALL_JOBS, headers=headers)
                response = conn.getresponse()
                body = response.read()
                if response.getheader("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if response.status == 200:
                    self.times.append(time.perf_counter() - started)
                elif response.status == 429 and response.getheader("Retry-After"):
                    self.rejected += 1
                    self.retry_afters[response.getheader("Retry-After")] += 1
                    self.stopping.wait(float(response.getheader("Retry-After")))
                else:
                    self.failed = f"Table list answered {response.status}"
                    return
        except (OSError, http.client.HTTPException) as err:
            self.failed = f"Table list failed: {err!r}"
        finally:
            conn.close()


# How long a stopping flood waits for its clients' lists in flight: up to 64 are queued at the
# server, and a paced child on a busy machine takes seconds each; they are not counted.
DRAIN_SECONDS = 2.0


class Target:
    """Where flood clients send their Table lists: a port and a token (a BenchServer has both)."""

    def __init__(self, port: int, token: str):
        self.port, self.token = port, token


def flood_client(port: int, token: str, clients: int, gzip_ok: bool) -> int:
    """One flood client PROCESS (ProcessFlood starts it): `clients` PoliteTableLoops against
    127.0.0.1:port until its stdin closes, then one JSON line of what they got."""
    loops = [PoliteTableLoop(Target(port, token), gzip_ok) for _ in range(clients)]
    for loop in loops:
        loop.start()
    sys.stdin.read()   # (the parent closes it: stop)
    for loop in loops:
        loop.stopping.set()
    deadline = time.monotonic() + DRAIN_SECONDS
    for loop in loops:   # (a list still queued at the server is not waited for: the process exits)
        loop.join(max(0.0, deadline - time.monotonic()))
    retry_afters = sum((loop.retry_afters for loop in loops), Counter())
    print(json.dumps({"lists": sum(len(loop.times) for loop in loops),
                      "rejected": sum(loop.rejected for loop in loops),
                      "retry_afters": dict(retry_afters),
                      "failed": [loop.failed for loop in loops if loop.failed]}), flush=True)
    return 0


class ProcessFlood:
    """`clients` Table clients spread over `processes` client processes (each its own GIL: the
    load 80 real clients make, which threads in this one process cannot: issue 42), or, with
    processes 0, as threads in this process (the harness before issue 42)."""

    def __init__(self, target: Target, clients: int, processes: int, gzip_ok: bool = False):
        self.target, self.clients, self.processes, self.gzip_ok = target, clients, processes, gzip_ok
        self.procs: list[subprocess.Popen] = []
        self.loops: list[PoliteTableLoop] = []

    def start(self) -> None:
        if not self.processes:
            self.loops = [PoliteTableLoop(self.target, self.gzip_ok) for _ in range(self.clients)]
            for loop in self.loops:
                loop.start()
            return
        shares = [self.clients // self.processes + (i < self.clients % self.processes) for i in range(self.processes)]
        self.procs = [subprocess.Popen([sys.executable, __file__, "--flood-client",
                                        f"{self.target.port},{self.target.token},{n},{int(self.gzip_ok)}"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                      for n in shares if n]

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs] or [os.getpid()]

    def stop(self) -> tuple[int, int, Counter, list[str]]:
        """(Tables answered 200, answers 429, the Retry-After values given, failures)."""
        if not self.processes:
            for loop in self.loops:
                loop.stopping.set()
            deadline = time.monotonic() + DRAIN_SECONDS
            for loop in self.loops:   # (daemon threads: one still waiting for its list is left behind)
                loop.join(max(0.0, deadline - time.monotonic()))
            return (sum(len(loop.times) for loop in self.loops), sum(loop.rejected for loop in self.loops),
                    sum((loop.retry_afters for loop in self.loops), Counter()),
                    [loop.failed for loop in self.loops if loop.failed])
        lists = rejected = 0
        retry_afters: Counter = Counter()
        failed: list[str] = []
        for proc in self.procs:
            out, _ = proc.communicate("", timeout=180)
            line = (out.strip().splitlines() or ["{}"])[-1]
            got = json.loads(line) if line.startswith("{") else {"failed": [f"client process exited {proc.returncode}"]}
            lists += got.get("lists", 0)
            rejected += got.get("rejected", 0)
            retry_afters.update(got.get("retry_afters", {}))
            failed += got.get("failed", [])
        return lists, rejected, retry_afters, failed


# ---------------------------------------------------------------------------------------------
# The control: the same clients, a server that costs nothing


STATIC_SERVER = r"""
import asyncio, os, sys, time
body = open(sys.argv[1], "rb").read()
rate = float(sys.argv[2])
encoding = b"Content-Encoding: %s\r\n" % sys.argv[3].encode() if sys.argv[3] else b""
head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n" % (encoding, len(body))
os.setpriority(os.PRIO_PROCESS, 0, 19)
next_at = [time.monotonic()]
class Static(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buf = transport, b""
    def data_received(self, data):
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            _, self.buf = self.buf.split(b"\r\n\r\n", 1)
            # at most `rate` answers a second in all: the Tables/s the flood got
            at = max(next_at[0], time.monotonic()); next_at[0] = at + 1 / rate
            asyncio.get_running_loop().call_at(at, self.answer)
    def answer(self):
        if not self.transport.is_closing():
            self.transport.write(head); self.transport.write(body)
async def main():
    server = await asyncio.get_running_loop().create_server(Static, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()
asyncio.run(main())
"""


class StaticServer:
    """The control's server: answers every GET with the same bytes (a real Table, fetched once),
    at most `rate` answers a second, at nice 19: the flood clients receive what they received
    from kubedash, and kubedash does none of the work."""

    def __init__(self, body: bytes, encoding: str, rate: float, work_dir: Path):
        path = work_dir / "table.json"
        path.write_bytes(body)
        self.proc = subprocess.Popen([sys.executable, "-c", STATIC_SERVER, str(path), repr(max(rate, 0.1)), encoding],
                                     stdout=subprocess.PIPE, text=True)
        self.port = int(self.proc.stdout.readline())

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def table_bytes(server: BenchServer, gzip_ok: bool) -> tuple[bytes, str]:
    """A Table of every Job as the server sends it: (the body, its Content-Encoding or "")."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
    try:
        conn.request("GET", ALL_JOBS, headers={"Authorization": f"Bearer {server.token}", "Accept": TABLE_ACCEPT,
                                               **({"Accept-Encoding": "gzip"} if gzip_ok else {})})
        response = conn.getresponse()
        return response.read(), response.getheader("Content-Encoding") or ""
    finally:
        conn.close()


def server_roles(server: BenchServer) -> dict[str, list[int]]:
    """The server's processes by role: the serving processes (workers, or the one process), their
    heavy children, and the supervisor (with workers)."""
    serving = server.serving_pids()
    roles = {"serving": serving, "heavy": [c for pid in serving for c in child_pids(pid)]}
    if server.workers > 1:
        roles["supervisor"] = [server.proc.pid]
    return roles


def cpu_of(groups: dict[str, list[int]]) -> dict[str, float]:
    return {name: sum(proc_cpu_seconds(pid) for pid in pids) for name, pids in groups.items()}


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


def flood(wrk: str, server: BenchServer, clients: int, processes: int, connections: int, duration: float,
          target: Target | None = None, gzip_ok: bool = False):
    """Renewals while `clients` loop Tables (429s honoured) from `processes` client processes
    (0: threads here), against the server or, for the control, `target` (the static server).
    Returns (wrk's Result, lists, 429s, Retry-After values, failures, CPU seconds a second by
    role: serving / heavy / supervisor / clients)."""
    load = ProcessFlood(target or Target(server.port, server.token), clients, processes, gzip_ok)
    load.start()
    time.sleep(1.0)
    groups = {**server_roles(server), "clients": load.pids()}
    before, wall = cpu_of(groups), time.monotonic()
    try:
        result = scenario_renew(wrk, server, connections, duration)
    finally:
        wall = time.monotonic() - wall
        after = cpu_of(groups)
        lists, rejected, retry_afters, failed = load.stop()
    cores = {name: (after[name] - before[name]) / wall for name in groups}
    return result, lists, rejected, retry_afters, failed, cores


def relay_cost(server: BenchServer, seconds: float, gzip_ok: bool = False) -> tuple[float, int]:
    """The serving process's own CPU (not its heavy child's) while one client loops Tables for
    `seconds`, no renewals: what relaying (or, in `old`, serving) one Table costs the process the
    renewals need; `gzip_ok`: the client accepts gzip (client-go's default). Returns (CPU ms a
    Table, Tables answered)."""
    pids = server.serving_pids()   # (with workers, any of them may take a Table)
    loop = PoliteTableLoop(server, gzip_ok)
    before = sum(proc_cpu_seconds(pid) for pid in pids)
    loop.start()
    time.sleep(seconds)
    loop.stopping.set()
    loop.join()
    used = sum(proc_cpu_seconds(pid) for pid in pids) - before
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
    parser.add_argument("--flood-processes", type=int, default=0,
                        help="client processes the flood's clients are spread over (issue 42: 4); 0: threads of "
                             "this process, whose GIL caps the load they make (default 0)")
    parser.add_argument("--flood-rounds", type=int, default=1,
                        help="rounds of (alone, flood[, control]) per mode, interleaved (default 1)")
    parser.add_argument("--control", action="store_true",
                        help="also run the flood's clients against a static server answering the same Table bytes "
                             "at the rate the flood got (nice 19): what the clients alone cost the renewals")
    parser.add_argument("--workers", default="1",
                        help="serve's --workers: a number, or auto for serve's own default (the number of cores; "
                             "issue 42's harness); default 1")
    parser.add_argument("--flood-gzip", action=argparse.BooleanOptionalAction, default=True,
                        help="the flood's clients accept gzip and decompress, as client-go does (default); "
                             "--no-flood-gzip: identity, as before issue 42")
    parser.add_argument("--flood-client", help=argparse.SUPPRESS)   # (PORT,TOKEN,N: one flood client process)
    parser.add_argument("--modes", nargs="+", default=["old", "new"],
                        help="old, new, new:N (heavy child at nice N), any of them @ref (served from --ref); "
                             "default: old new")
    add_backend_arguments(parser)
    parser.add_argument("--relay-rounds", type=int, default=3,
                        help="rounds measuring the serving process's CPU a Table, 0: none (default 3)")
    parser.add_argument("--ref", type=Path, help="another kubedash checkout, for the modes ending @ref")
    args = parser.parse_args(argv)
    if args.flood_client:
        port, token, clients, gzip_ok = args.flood_client.split(",")
        return flood_client(int(port), token, int(clients), gzip_ok == "1")
    workers = (os.cpu_count() or 1) if args.workers == "auto" else int(args.workers)
    wrk = shutil.which("wrk")
    if wrk is None:
        print(WRK_MISSING, file=sys.stderr)
        return 2
    c, duration = args.connections, args.duration
    print(f"kubedash CPU-share benchmark  {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}")
    print(f"machine: {machine()}; {workers} worker(s), {backend_name(args.database, args.redis)}; {args.runs} rounds of wrk runs of {duration:g} s "
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
            server = BenchServer(data_dir, workers=workers, database=args.database, redis=args.redis,
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
            costs: dict[tuple[str, bool], list[tuple[float, int]]] = {}
            for _ in range(args.relay_rounds):
                for mode, server in servers.items():
                    for gzip_ok in (False, True):
                        costs.setdefault((mode, gzip_ok), []).append(relay_cost(server, duration, gzip_ok))
            for (mode, gzip_ok), measured in costs.items():
                print(f"{mode:<8} {'gzip' if gzip_ok else 'identity':<8} "
                      + "  ".join(f"{ms:6.2f} ms ({n} Tables)" for ms, n in measured) + f"   load {loadavg()}")

        floods = {}
        if args.flood:
            where = (f"{args.flood_processes} client processes" if args.flood_processes else "threads of one process") \
                + (", Accept-Encoding gzip" if args.flood_gzip else ", identity")
            print(f"\nrenewals while {args.flood} clients ({where}) loop Table lists of {args.jobs} Jobs "
                  f"(Retry-After honoured); cores: CPU seconds a second of the serving process(es) / heavy "
                  f"child(ren) / flood clients / wrk; control: the same clients against a static server of the "
                  f"same bytes at the flood's rate:")
            print(f"{'mode':<8} {'side':<8} {'renew/s':>8} {'p99 ms':>7} {'max ms':>7} {'ratio':>6} {'lists':>6} "
                  f"{'429s':>6} {'Retry-After':>12} {'cores serve/heavy/clients/wrk':>30} {'load':>15}")
            statics: dict[str, StaticServer] = {}
            for _ in range(args.flood_rounds):
                for mode, server in servers.items():
                    alone = scenario_renew(wrk, server, c, duration)
                    print(f"{mode:<8} {'alone':<8} {alone.rate:>8.0f} {alone.p99_ms:>7.1f} "
                          f"{alone.extra.get('lat_max_us', 0) / 1000:>7.0f} {1:>6.2f} {'':>6} {'':>6} {'':>12} "
                          f"{'':>30} {loadavg():>15}", flush=True)
                    sides = [("flood", None)]
                    if args.control:
                        sides.append(("control", "static"))
                    for side, kind in sides:
                        target = None
                        if kind:
                            rate = floods[mode][-1][2] / (duration + 1) if floods.get(mode) else 20.0
                            if mode in statics:
                                statics[mode].stop()
                            statics[mode] = StaticServer(*table_bytes(server, args.flood_gzip), rate, dirs[0])
                            target = Target(statics[mode].port, server.token)
                        loaded, lists, rejected, retry_afters, failed, cores = flood(
                            wrk, server, args.flood, args.flood_processes, c, duration, target, args.flood_gzip)
                        ratio = loaded.rate / alone.rate if alone.rate else 0.0
                        if side == "flood":
                            floods.setdefault(mode, []).append((ratio, alone, lists, loaded))
                        else:
                            floods[mode][-1] += (ratio,)
                        shown = ",".join(f"{k}s:{v}" for k, v in sorted(retry_afters.items())) or "-"
                        split = (f"{cores['serving']:.2f}/{cores['heavy']:.2f}/{cores['clients']:.2f}/"
                                 f"{loaded.extra.get('wrk_cpu', 0):.2f}")
                        print(f"{mode:<8} {side:<8} {loaded.rate:>8.0f} {loaded.p99_ms:>7.1f} "
                              f"{loaded.extra.get('lat_max_us', 0) / 1000:>7.0f} {ratio:>6.2f} {lists:>6} "
                              f"{rejected:>6} {shown:>12} {split:>30} {loadavg():>15}", flush=True)
                        if failed:
                            print(f"     {len(failed)} clients failed, e.g. {failed[0]}")
            for static in statics.values():
                static.stop()

        targets = []
        for mode in args.modes if args.runs else ():
            worst = min(ratios[mode])
            targets.append((f"[{mode}] renew under Tables >= {LOADED_MIN_RATIO} x alone, worst of {args.runs}",
                            f"{worst:.2f} (" + ", ".join(f"{r:.2f}" for r in ratios[mode]) + ")",
                            worst >= LOADED_MIN_RATIO))
            worst_p99 = max(loaded / alone if alone else 0 for alone, loaded in p99s[mode])
            targets.append((f"[{mode}] p99 under Tables <= {LOADED_MAX_P99_RATIO:g} x alone, worst",
                            f"{worst_p99:.2f}", worst_p99 <= LOADED_MAX_P99_RATIO))
        for mode in args.modes:
            if mode in floods:
                worst_flood = min(f[0] for f in floods[mode])
                worst_flood_p99 = max(f[3].p99_ms / f[1].p99_ms if f[1].p99_ms else 0 for f in floods[mode])
                targets.append((f"[{mode}] renew under {args.flood} Table clients >= {FLOOD_MIN_RATIO} x alone, worst",
                                ", ".join(f"{f[0]:.2f}" for f in floods[mode]), worst_flood >= FLOOD_MIN_RATIO))
                targets.append((f"[{mode}] p99 under {args.flood} Table clients <= {FLOOD_MAX_P99_RATIO:g} x alone, worst",
                                f"{worst_flood_p99:.2f}", worst_flood_p99 <= FLOOD_MAX_P99_RATIO))
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

"""PostgreSQL benchmark (issue 28): the production backend against the embedded one, same run.

    .venv/bin/python bench/postgres.py --database postgres://postgres@127.0.0.1:5432/
                                       [--duration 10] [--connections 4] [--jobs 3000]
                                       [--processes 1 2 4] [--writers 16] [--env NAME=VALUE ...]
                                       [--capacity-rounds 3] [--compare NAME=VALUE ...]
                                       [--own-postgres [--pg-cpus 1] [--app-cpus 0]]

Starts throw-away servers (bench/common.py's BenchServer, wrk's lease_renew.lua as in bench/api.py):
  1. SQLite, one worker: Lease renewals alone (the ceiling the issue compares against);
  2. PostgreSQL, one worker: renewals alone (x SQLite's), then the same renewals while one client
     loops Table lists of --jobs Jobs (x renewals alone, p99 against alone's p99);
     1 and 2 run on both servers at once, interleaved in --rounds rounds (medians reported), so
     load from elsewhere on a shared machine falls on both alike; each round also renews on both
     beside a SCHED_IDLE busy loop per CPU (bench/api.py's idle spinners: work that takes only
     CPU nothing else wants, the best any heavy work could yield), the machine's own ceiling
     for renewals under heavy work, against which the Table run is also shown;
  3. write capacity: PostgreSQL with --processes app processes (`serve --workers N`), --writers
     wrk connections each renewing its own Lease: renewals (= writes) per second, x one process's,
     how much of the run the revision lock was held (pg_locks sampled every 10 ms) and what the
     server's sessions waited for (pg_stat_activity); then SQLite at the default worker count,
     the same round's ceiling. --capacity-rounds rounds (medians); --compare NAME=VALUE runs each
     process count also with those settings, interleaved A B / B A (e.g. KUBEDASH_GROUP_COMMIT=1
     against --env KUBEDASH_GROUP_COMMIT=0).
--own-postgres: instead of the machine's PostgreSQL service (--database then only names where its
settings are read from), a throw-away cluster of the same major version with the service's
durability and memory settings (OwnCluster.COPIED), in a temporary directory on the service's
disk, on a free port, started under `taskset -c --pg-cpus`; the benchmark itself, and so the app
processes and wrk it starts, runs on --app-cpus (issue 42: PostgreSQL on a core of its own).
Prints each figure against its ceiling and the issue's targets. `--env` passes settings to every
server (e.g. KUBEDASH_FAST_LANE_THREADS=1 to compare against the single fast-lane thread).
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import statistics
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import (RENEW_NS, WRK_MISSING, Result, fmt_ratio, print_results, scenario_renew,  # noqa: E402
                 scenario_renew_beside_idle_spinners, scenario_renew_under_tables, seed_jobs, seed_leases)
from common import BenchServer, free_port, machine, metric_lines, print_targets  # noqa: E402

LOADED_MIN_RATIO = 0.8        # renewals under the Table loop / alone (issue 28, PostgreSQL too)
LOADED_MAX_P99_RATIO = 2.0
PG_MIN_RATIO = 0.7            # PostgreSQL renewals / SQLite's, same run


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


class OwnCluster:
    """A throw-away PostgreSQL cluster (initdb, pg_ctl) as the service's user, pinned to cpus, with
    the service's settings that bear on a write's cost (read from `source`, the service's URL)."""

    COPIED = ("fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "wal_level", "wal_buffers",
              "shared_buffers", "max_connections", "commit_delay", "commit_siblings", "max_wal_size",
              "checkpoint_timeout", "work_mem", "wal_writer_delay", "huge_pages")
    USER = "postgres"   # initdb and the server refuse to run as root

    def __init__(self, source: str, cpus: str):
        import psycopg

        with psycopg.connect(source, autocommit=True) as conn:
            self.version = conn.execute("SHOW server_version_num").fetchone()[0][:2]
            self.settings = dict(conn.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)",
                                              [list(self.COPIED)]).fetchall())
            self.service_dir = conn.execute("SHOW data_directory").fetchone()[0]
        found = glob.glob(f"/usr/lib/postgresql/{self.version}/bin/initdb")
        if not found:
            raise SystemExit(f"--own-postgres: no initdb for PostgreSQL {self.version} in /usr/lib/postgresql")
        self.bin = Path(found[0]).parent
        self.cpus, self.port = cpus, free_port()
        # The service's disk (the WAL flush's cost is the disk's), not a tmpfs /tmp.
        parent = Path(self.service_dir).parent if os.access(Path(self.service_dir).parent, os.W_OK) else None
        self.dir = Path(tempfile.mkdtemp(prefix="kubedash-bench-pgcluster-", dir=parent))
        self.url = f"postgres://{self.USER}@127.0.0.1:{self.port}/"

    def _as_user(self, *cmd: str) -> list[str]:
        return ["runuser", "-u", self.USER, "--", *cmd] if os.geteuid() == 0 else list(cmd)

    def start(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.dir, self.USER)
        data = self.dir / "data"
        subprocess.run(self._as_user(str(self.bin / "initdb"), "-D", str(data), "-U", self.USER, "--auth=trust",
                                     "--no-instructions"), check=True, capture_output=True)
        options = " ".join([f"-p {self.port}", "-c listen_addresses=127.0.0.1", f"-c unix_socket_directories={self.dir}",
                            *(f"-c {name}={value}" for name, value in sorted(self.settings.items()))])
        subprocess.run(["taskset", "-c", self.cpus,
                        *self._as_user(str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.dir / "log"), "-w",
                                       "-o", options, "start")], check=True, capture_output=True)

    def stop(self) -> None:
        subprocess.run(self._as_user(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "immediate",
                                     "-w", "stop"), capture_output=True)
        shutil.rmtree(self.dir, ignore_errors=True)

    def describe(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in sorted(self.settings.items()))
        return f"own PostgreSQL {self.version} cluster on port {self.port} (CPUs {self.cpus}; {shown})"


def server(args, workers: int = 1, database: str = "") -> BenchServer:
    s = BenchServer(Path(tempfile.mkdtemp(prefix="kubedash-bench-pg-")), workers=workers, database=database)
    s.env.update(args.env)
    s.start()
    return s


def stop(s: BenchServer) -> None:
    s.stop()
    shutil.rmtree(s.data_dir, ignore_errors=True)


def median_result(results: list[Result]) -> Result:
    """The run of median rate, with the median p50 and p99 of all runs."""
    ordered = sorted(results, key=lambda r: r.rate)
    middle = ordered[len(ordered) // 2]
    return Result(middle.scenario, middle.connections, middle.rate,
                  statistics.median(r.p50_ms for r in results), statistics.median(r.p99_ms for r in results),
                  sum(r.non_2xx for r in results), sum(r.errors for r in results), middle.cpu,
                  other_cpu=middle.other_cpu)


class LockSampler(threading.Thread):
    """Samples pg_locks every 10 ms for the revision lock (advisory key 7411, kube/storage/postgresql.py) in the
    server's database: the share of samples where it is held (the lock's utilisation: near
    100% means the lock is the ceiling) and the mean number of writers waiting for it."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.stopping = url, threading.Event()
        self.samples = self.held = self.waiting = 0
        self.waits: dict[str, int] = {}   # the server's sessions by what they wait for ("CPU": active, none)
        self.failed = ""

    def run(self) -> None:
        try:
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                while not self.stopping.wait(0.01):
                    granted, waiting = conn.execute(
                        "SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted) FROM pg_locks "
                        "WHERE locktype = 'advisory' AND objid = 7411 AND classid = 0 "
                        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())").fetchone()
                    self.samples += 1
                    self.held += 1 if granted else 0
                    self.waiting += waiting
                    for (what,) in conn.execute(
                            "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') FROM pg_stat_activity "
                            "WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()"):
                        self.waits[what] = self.waits.get(what, 0) + 1
        except Exception as err:  # noqa: BLE001 - a probe: report it, never fail the benchmark
            self.failed = repr(err)

    def summary(self) -> str:
        if not self.samples:
            return f"revision lock: no samples ({self.failed or 'none taken'})"
        waits = ", ".join(f"{what} {n / self.samples:.2f}"
                          for what, n in sorted(self.waits.items(), key=lambda kv: -kv[1])[:5])
        return (f"revision lock held in {100 * self.held / self.samples:.0f}% of {self.samples} samples, "
                f"{self.waiting / self.samples:.2f} writers waiting on average; active sessions on average "
                f"by wait: {waits or 'none'}")


def write_capacity(args, wrk: str) -> dict:
    """Part 3: per round, each process count (and --compare's variant beside it, interleaved),
    then SQLite at the default worker count as the same round's ceiling; medians of the rounds.
    Answers {n: Result} (the base settings' medians, ratios x 1 process) and "sqlite"."""
    variants = {"base": dict(args.env)}
    if args.compare:
        variants["compare"] = {**args.env, **args.compare}
    runs: dict[tuple, list[Result]] = {}
    default = os.cpu_count() or 1
    print(f"\nwrite capacity: {args.writers} connections renewing their own Lease; {args.capacity_rounds} "
          f"round(s); variants {variants}")
    for round_ in range(args.capacity_rounds):
        order = list(variants) if round_ % 2 == 0 else list(reversed(variants))   # (A B, then B A)
        for n in args.processes:
            for variant in order:
                runs.setdefault((variant, n), []).append(capacity_run(args, wrk, variants[variant], n, args.database,
                                                                      f"PostgreSQL {variant}: {n} process(es)"))
        runs.setdefault(("sqlite", default), []).append(
            capacity_run(args, wrk, dict(args.env), default, "", f"SQLite: {default} process(es)"))
    print(f"\nmedians of {args.capacity_rounds} round(s) (x the same variant's 1 process; SQLite x itself):")
    medians = {key: median_result(results) for key, results in runs.items()}
    for (variant, _), r in medians.items():
        one = medians.get((variant, 1)) if variant != "sqlite" else r
        r.ratio = r.rate / one.rate if one is not None and one.rate else None
    print_results(list(medians.values()))
    if args.compare:
        for n in args.processes:
            a, b = medians[("base", n)], medians[("compare", n)]
            pairs = [f"{x.rate:.0f}/{y.rate:.0f}" for x, y in zip(runs[("base", n)], runs[("compare", n)])]
            print(f"  {n} process(es): compare x base {fmt_ratio(b.rate / a.rate if a.rate else None)} "
                  f"(rounds, base/compare writes/s: {', '.join(pairs)})")
    chosen = "compare" if args.compare else "base"
    answer: dict = {n: medians[(chosen, n)] for n in args.processes}
    answer["sqlite"] = medians[("sqlite", default)]
    return answer


def capacity_run(args, wrk: str, env: dict, n: int, database: str, name: str) -> Result:
    s = BenchServer(Path(tempfile.mkdtemp(prefix="kubedash-bench-pg-")), workers=n, database=database)
    s.env.update(env)
    s.start()
    sampler = LockSampler(s.env["DATABASE_URL"]) if database else None
    try:
        seed_leases(s, RENEW_NS, [f"renew-{i}" for i in range(args.writers)])
        scenario_renew(wrk, s, args.writers, 1)   # warm up every path
        if sampler is not None:
            sampler.start()
        before = group_commits(s) if database else {}
        r = scenario_renew(wrk, s, args.writers, args.duration)
        r.scenario = name
        print_results([r], header=False)
        if database:
            after = group_commits(s)
            print("  group commit: " + (", ".join(f"{what} {after[what] - before.get(what, 0):.0f}" for what in after)
                                        or "no updates through it (off)"))
        if sampler is not None:
            sampler.stopping.set()
            sampler.join(5)
            print(f"  {sampler.summary()}")
        print(f"  (load average {load_average()})")
        return r
    finally:
        if sampler is not None:
            sampler.stopping.set()
        stop(s)


def group_commits(s: BenchServer) -> dict[str, float]:
    """kubedash_group_commit_total by who committed (own, handed, failed), summed over the server's
    processes (/metrics)."""
    counts: dict[str, float] = {}
    for line in metric_lines(s):
        if line.startswith("kubedash_group_commit_total{"):
            what = line.split('what="', 1)[1].split('"', 1)[0]
            counts[what] = counts.get(what, 0) + float(line.rsplit(" ", 1)[1])
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", required=True, metavar="URL", help="postgres://USER@HOST:PORT/ (a fresh "
                        "database is created on that server per server started, and dropped)")
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--connections", type=int, default=4, help="renewing connections (default 4)")
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--writers", type=int, default=16, help="renewing connections in the capacity runs")
    parser.add_argument("--env", nargs="*", default=[], metavar="NAME=VALUE")
    parser.add_argument("--skip", nargs="*", default=[], choices=["loaded", "capacity"])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the first part (default 3)")
    parser.add_argument("--compare", nargs="*", default=[], metavar="NAME=VALUE", help="write capacity: also "
                        "run with these settings added, interleaved (an A/B; the targets then judge this one)")
    parser.add_argument("--capacity-rounds", type=int, default=1, help="write capacity: rounds (default 1)")
    parser.add_argument("--own-postgres", action="store_true", help="a throw-away cluster pinned to --pg-cpus "
                        "(the module's docstring) instead of the service at --database")
    parser.add_argument("--pg-cpus", default="1", help="with --own-postgres: its CPUs (taskset -c; default 1)")
    parser.add_argument("--app-cpus", default="0", help="with --own-postgres: the CPUs of the app processes and "
                        "wrk (default 0)")
    args = parser.parse_args(argv)
    if not args.own_postgres:
        return run(args)
    cluster = OwnCluster(args.database, args.pg_cpus)
    cluster.start()
    try:
        os.sched_setaffinity(0, {int(c) for c in args.app_cpus.split(",")})   # (inherited by all started here)
        print(cluster.describe())
        args.database = cluster.url
        return run(args)
    finally:
        cluster.stop()


def run(args) -> int:
    args.env = dict(item.split("=", 1) for item in args.env)
    args.compare = dict(item.split("=", 1) for item in args.compare)
    wrk = shutil.which("wrk")
    if wrk is None:
        print(WRK_MISSING, file=sys.stderr)
        return 2
    c, d = args.connections, args.duration
    print(f"kubedash PostgreSQL benchmark; machine: {machine()}; load average at start {load_average()}")
    print(f"wrk runs of {d:g} s, {c} renewing connections; settings {args.env or '(defaults)'}\n")

    # Both servers up at once, their runs interleaved round by round: load from elsewhere on a
    # shared machine then falls on both alike, and the medians compare like with like.
    lite = server(args)
    pgs = server(args, database=args.database)
    runs: dict[str, list[Result]] = {"SQLite: renew alone": [], "PostgreSQL: renew alone": [],
                                     "SQLite: renew + idle spinners": [], "PostgreSQL: renew + idle spinners": [],
                                     "PostgreSQL: renew + Table lists": []}
    tables: list[float] = []
    try:
        for s in (lite, pgs):
            seed_leases(s, RENEW_NS, [f"renew-{i}" for i in range(c)])
            scenario_renew(wrk, s, c, 1)   # warm up every path
        if "loaded" not in args.skip:
            seed_jobs(pgs, args.jobs)
        for round_ in range(args.rounds):
            batch = []
            for name, s in (("SQLite: renew alone", lite), ("PostgreSQL: renew alone", pgs)):
                r = scenario_renew(wrk, s, c, d / args.rounds)
                r.scenario = name
                batch.append(r)
            if "loaded" not in args.skip:
                for name, s in (("SQLite: renew + idle spinners", lite), ("PostgreSQL: renew + idle spinners", pgs)):
                    r = scenario_renew_beside_idle_spinners(wrk, s, c, d / args.rounds)
                    r.scenario = name
                    batch.append(r)
                r, loop = scenario_renew_under_tables(wrk, pgs, c, d / args.rounds)
                r.scenario = "PostgreSQL: renew + Table lists"
                tables += loop.times
                batch.append(r)
            for r in batch:
                runs[r.scenario].append(r)
            print(f"round {round_ + 1} (load average {load_average()})")
            print_results(batch, header=round_ == 0)
    finally:
        stop(lite)
        stop(pgs)
    sqlite, pg = median_result(runs["SQLite: renew alone"]), median_result(runs["PostgreSQL: renew alone"])
    sqlite.ratio = 1.0
    pg.ratio = pg.rate / sqlite.rate if sqlite.rate else None
    loaded = median_result(runs["PostgreSQL: renew + Table lists"]) if runs["PostgreSQL: renew + Table lists"] else None
    print(f"\nmedians of {args.rounds} interleaved rounds:")
    print_results([sqlite, pg])
    if loaded is not None:
        spun = {name: median_result(runs[f"{name}: renew + idle spinners"]) for name in ("SQLite", "PostgreSQL")}
        spun["SQLite"].ratio = spun["SQLite"].rate / sqlite.rate if sqlite.rate else None
        spun["PostgreSQL"].ratio = spun["PostgreSQL"].rate / pg.rate if pg.rate else None
        loaded.ratio = loaded.rate / pg.rate if pg.rate else None
        print_results([spun["SQLite"], spun["PostgreSQL"], loaded], header=False)
        if tables:
            print(f"  meanwhile {len(tables)} Table lists of {args.jobs} Jobs (median "
                  f"{statistics.median(tables) * 1000:.0f} ms)")

    capacity: dict[int, Result] = {}
    if "capacity" not in args.skip:
        capacity = write_capacity(args, wrk)

    print("\n(ratios: PostgreSQL alone x SQLite alone; beside idle spinners and under Tables x the same backend "
          "alone; capacity x 1 process)")
    targets = [(f"PostgreSQL renewals >= {PG_MIN_RATIO} x SQLite's", fmt_ratio(pg.ratio),
                (pg.ratio or 0) >= PG_MIN_RATIO)]
    if loaded is not None:
        targets += [
            (f"PostgreSQL under Table lists >= {LOADED_MIN_RATIO} x alone", fmt_ratio(loaded.ratio),
             (loaded.ratio or 0) >= LOADED_MIN_RATIO),
            (f"PostgreSQL under Table lists p99 <= {LOADED_MAX_P99_RATIO:g} x alone",
             f"{loaded.p99_ms:.1f} / {pg.p99_ms:.1f} ms", loaded.p99_ms <= LOADED_MAX_P99_RATIO * pg.p99_ms),
            ("the machine's ceiling: SQLite beside idle spinners x alone", fmt_ratio(spun["SQLite"].ratio), None),
            ("the machine's ceiling: PostgreSQL beside idle spinners", fmt_ratio(spun["PostgreSQL"].ratio), None),
            ("PostgreSQL under Table lists x beside idle spinners",
             fmt_ratio(loaded.rate / spun["PostgreSQL"].rate if spun["PostgreSQL"].rate else None), None),
        ]
    for n, r in capacity.items():
        targets.append((f"writes/s with {n} app process(es) (reported)", f"{r.rate:.0f}/s {fmt_ratio(r.ratio)}", None))
    default = os.cpu_count() or 1
    if default in capacity and 1 in capacity:
        r = capacity[default]
        targets.append((f"default workers ({default}) x 1 process >= 1.0", fmt_ratio(r.ratio), (r.ratio or 0) >= 1.0))
        if "sqlite" in capacity:
            ratio = r.rate / capacity["sqlite"].rate if capacity["sqlite"].rate else 0
            targets.append((f"default workers ({default}) x SQLite's >= 0.6", fmt_ratio(ratio), ratio >= 0.6))
    print_targets(targets, 52, 22)
    print(f"load average at the end {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Time travel under load (issue 38): the Leases list 6 hours back, and renewals beside a scrubber.

    .venv/bin/python bench/timetravel.py list [--leases 1000] [--hours 6.5] [--renew-seconds 30]
                                              [--back-hours 6] [--watch-seconds 300] [--pack-seconds 3600] [--rounds 5]
                                              [--database postgres://…]
    .venv/bin/python bench/timetravel.py renewals [--connections 4] [--duration 5] [--rounds 5]
                                                  [--leases 1000] [--database postgres://…] [--ref PATH]

`list`: a throw-away database (SQLite in a temp dir, or a fresh PostgreSQL database) gets
--leases Leases and --hours of their renewals written straight into the revision log with
simulated write times (bench/history_cost.py's simulate: the log's own insert, the objects' real
JSON), one every --renew-seconds per Lease; then `compaction.compact` with a watch window of
--watch-seconds thins everything older to one renewal a minute per Lease and stores what it keeps
as production does (whatever the storage format is). Then --rounds rounds, interleaved: the live
Leases list page of all of them, then the same page as of --back-hours ago (`?at=`), each through
Django's test client in this process (the page's own work, no server). Target: the as-of page
within 2x the live one (the ratio of the medians, and the worst round's).

`renewals`: a throw-away `manage.py serve` (one worker, the defaults: the heavy child on) with
--leases Leases, and wrk's kubelet-style renewals (bench/lease_renew.lua) of a few more.
--rounds rounds of four --duration s wrk runs, interleaved (each first in turn): renewals alone;
renewals while one logged-in browser session scrubs the time bar (loops
`/leases/?limit=N&at=<moment>` at a random moment since the Leases were written, as the time
bar's slider and step buttons fetch the page); and two controls: renewals beside the same loop
of the live page (the same page on the same lane, the heavy child, without time travel), and
beside a busy loop per CPU at SCHED_IDLE (bench/api.py: what sharing the machine costs renewals
beside any heavy work, at best). Target: renewals beside the scrubber >= 0.9x their rate alone;
printed beside: p99s, and the worker's own CPU per renewal (its process, not its heavy child).
--ref PATH: an A/B, the checkout at PATH served too (its own server and database), its renewals
alone and beside the scrubber taking their turns in the same rounds.

Traffic goes only to 127.0.0.1 (and the given PostgreSQL server); every phase is bounded.
"""
from __future__ import annotations

import argparse
import http.client
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import backend_name, machine, pct, print_targets, proc_cpu_seconds, request  # noqa: E402

LIST_MAX_RATIO = 2.0       # the as-of list / the live list
RENEW_MIN_RATIO = 0.9      # renewals beside a scrubber / renewals alone


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------------------------------------
# list: the Leases list as of hours back against the live one


def list_bench(args) -> int:
    from history_cost import drop, setup, simulate

    url, data, admin = setup(args.database)
    try:
        from django.test import Client

        from dashboard.access.tokens import ensure_user
        from dashboard.kube import compaction

        minutes = round(args.hours * 60)
        print(f"# timetravel list: {args.leases} Leases renewing every {args.renew_seconds} s for {args.hours:g} h "
              f"(simulated), compacted with a {args.watch_seconds} s watch window; {backend_name(args.database, '')}")
        print(f"# {machine()}; load average {loadavg()}")
        began = time.perf_counter()
        start, end = simulate(args.leases, 0, minutes, args.renew_seconds)
        print(f"simulated in {time.perf_counter() - began:.1f} s; load average {loadavg()}", flush=True)
        began = time.perf_counter()
        removed = compaction.compact(keep=0, keep_seconds=args.watch_seconds)
        print(f"compacted in {time.perf_counter() - began:.1f} s ({removed:,} revisions thinned away)", flush=True)
        # (setup() turns packing off for history_cost.py's own steps: pack here as production does,
        # each whole hour past the watch window, so the past page reads packs: kube/pack.py)
        began = time.perf_counter()
        packed = compaction.pack_spans(args.pack_seconds)
        print(f"packed in {time.perf_counter() - began:.1f} s ({packed:,} revisions in packs of "
              f"{args.pack_seconds} s)", flush=True)
        from django.db import connection
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM kube_revision")
            print(f"revision log: {cursor.fetchone()[0]:,} rows kept", flush=True)

        client = Client()
        client.force_login(ensure_user("bench-admin", "admin"))
        at = (end - timedelta(hours=args.back_hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
        live_path = f"/leases/?namespace=kube-node-lease&limit={args.leases}"
        past_path = f"{live_path}&at={at}"

        def timed(path: str) -> float:
            began = time.perf_counter()
            response = client.get(path)
            seconds = time.perf_counter() - began
            assert response.status_code == 200, (response.status_code, response.content[:300])
            body = response.content.decode()
            assert body.count("node-") >= args.leases, f"{path}: not every Lease is listed"
            if "at=" in path:
                assert "not live" in body, f"{path}: no as-of banner"
            return seconds

        timed(live_path), timed(past_path)   # (warm: templates, caches)
        live, past = [], []
        for i in range(args.rounds):
            pair = [(live_path, live), (past_path, past)]
            for path, out in (pair if i % 2 == 0 else pair[::-1]):   # (interleaved, alternating which first)
                out.append(timed(path))
            print(f"round {i + 1}: live {live[-1] * 1000:.0f} ms, as of {args.back_hours:g} h back "
                  f"{past[-1] * 1000:.0f} ms ({past[-1] / live[-1]:.2f}x); load average {loadavg()}", flush=True)
        ratio = statistics.median(past) / statistics.median(live)
        worst = max(p / q for p, q in zip(past, live))
        print(f"\nLeases list ({args.leases}): live median {statistics.median(live) * 1000:.0f} ms, as of "
              f"{args.back_hours:g} h back median {statistics.median(past) * 1000:.0f} ms: {ratio:.2f}x "
              f"(worst round {worst:.2f}x); load average {loadavg()}")
        return print_targets([(f"as-of list {args.back_hours:g} h back / live (medians)", f"{ratio:.2f}x",
                               ratio <= LIST_MAX_RATIO),
                              ("… worst round", f"{worst:.2f}x", None)], 48, 8)
    finally:
        if admin:
            drop(url, admin)
        shutil.rmtree(data, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# renewals: wrk's renewals alone against beside a time-bar scrubber


class Scrubber(threading.Thread):
    """One logged-in browser session loading the Leases list as of random moments in [since, now]
    (what the time bar's slider and step buttons fetch), back to back on one keep-alive connection."""

    def __init__(self, port: int, cookie: str, since: datetime, limit: int, travel: bool = True):
        super().__init__(daemon=True)
        self.port, self.cookie, self.since, self.limit = port, cookie, since, limit
        self.travel = travel   # (False: the live page, the control: the same page on the same lane, now)
        self.stopping = threading.Event()
        self.times: list[float] = []
        self.rejected = 0
        self.failed = ""
        self.random = random.Random(38)

    def moment(self) -> str:
        now = datetime.now(timezone.utc) - timedelta(seconds=1)
        span = max((now - self.since).total_seconds(), 0.0)
        return (self.since + timedelta(seconds=self.random.uniform(0, span))).strftime("%Y-%m-%dT%H:%M:%SZ")

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        headers = {"Cookie": self.cookie, "Accept": "text/html"}
        try:
            while not self.stopping.is_set():
                began = time.perf_counter()
                path = f"/leases/?limit={self.limit}" + (f"&at={self.moment()}" if self.travel else "")
                status, body = request(self.port, "GET", path, headers=headers, conn=conn)
                if status == 200 and (b"not live" in body) == self.travel:
                    self.times.append(time.perf_counter() - began)
                elif status == 429:
                    self.rejected += 1
                    time.sleep(1)   # (Retry-After, as a browser's retry would wait)
                else:
                    self.failed = f"as-of page answered {status}: {body[:200]!r}"
                    return
        finally:
            conn.close()


def renewals_bench(args) -> int:
    from api import RENEW_NS, WRK_MISSING, scenario_renew, scenario_renew_beside_idle_spinners, seed_leases
    from pages import Server, log_in

    wrk = shutil.which("wrk")
    if wrk is None:
        print(WRK_MISSING)
        return 2
    c = args.connections
    roots = {"": None, **({"ref ": Path(args.ref).resolve()} if args.ref else {})}   # (label: checkout)
    dirs = {label: Path(tempfile.mkdtemp(prefix="kubedash-timetravel-bench-")) for label in roots}
    servers = {label: Server(dirs[label], database=args.database, root=root) for label, root in roots.items()}
    try:
        cookies, since = {}, {}
        for label, server in servers.items():
            server.start()
            seed_leases(server, RENEW_NS, [f"renew-{i}" for i in range(c + 1)])
            seed_leases(server, "bench-history", [f"lease-{i:05d}" for i in range(args.leases)])
            since[label] = datetime.now(timezone.utc) + timedelta(seconds=1)   # (every page: all the Leases)
            cookies[label] = log_in(server.port)
            scenario_renew(wrk, server, c, 2)   # (warm up; history for the scrubber to travel through)
        print(f"# timetravel renewals: {c} connections renewing, {args.rounds} rounds of {args.duration:g} s wrk runs "
              f"(/leases/?limit={args.leases + c + 1}&at=…); one worker, {backend_name(args.database, '')}"
              + (f"; A/B against the checkout at {args.ref} (\"ref\")" if args.ref else ""))
        print(f"# {machine()}; load average {loadavg()}")

        def renew(server):
            return scenario_renew(wrk, server, c, args.duration)

        def scrubbed(server, label, travel: bool = True):
            scrubber = Scrubber(server.port, cookies[label], since[label], args.leases + c + 1, travel)
            scrubber.start()
            time.sleep(0.5)   # (its first page under way)
            try:
                result = renew(server)
            finally:
                scrubber.stopping.set()
                scrubber.join(120)
            if scrubber.failed:
                raise SystemExit(scrubber.failed)
            result.extra["pages"] = scrubber.times
            return result

        def worker_cpu(server, run):
            """run(), its result given the worker's own CPU ms per renewal (not its heavy child's: what
            the scrubber costs the process that serves renewals; other load on the machine moves it least)."""
            before = proc_cpu_seconds(server.proc.pid)
            result = run()
            result.extra["worker_ms"] = (proc_cpu_seconds(server.proc.pid) - before) * 1000 / max(
                result.rate * args.duration, 1)
            return result

        arms = []   # (name, run)
        for label, server in servers.items():
            arms += [(f"{label}alone", lambda s=server: renew(s)),
                     (f"{label}beside the scrubber", lambda s=server, k=label: scrubbed(s, k))]
            if not label:
                arms += [("beside the live page looped", lambda s=server, k=label: scrubbed(s, k, travel=False)),
                         ("beside idle spinners", lambda s=server: scenario_renew_beside_idle_spinners(wrk, s, c,
                                                                                                        args.duration))]
        results: dict[str, list] = {name: [] for name, _ in arms}
        owner = {name: servers["ref " if name.startswith("ref ") else ""] for name, _ in arms}
        for i in range(args.rounds):
            k = i % len(arms)
            for name, run in arms[k:] + arms[:k]:   # (interleaved: each arm first in turn)
                results[name].append(worker_cpu(owner[name], run))
            line = []
            for name, _ in arms:
                r = results[name][-1]
                base = results["ref alone" if name.startswith("ref ") else "alone"][-1]
                pages = f", {len(r.extra['pages'])} pages" if "pages" in r.extra else ""
                line.append(f"{name} {r.rate:.0f}/s ({r.rate / base.rate:.2f}x{pages}) p99 {r.p99_ms:.0f} ms "
                            f"worker {r.extra['worker_ms']:.2f} ms/renewal")
            print(f"round {i + 1}: " + "; ".join(line) + f"; load average {loadavg()}", flush=True)

        def ratio(name: str) -> float:
            base = "ref alone" if name.startswith("ref ") else "alone"
            return sum(r.rate for r in results[name]) / sum(r.rate for r in results[base])

        print()
        for name, _ in arms:
            rs = results[name]
            pages = sorted(t for r in rs for t in r.extra.get("pages", ()))
            shown = (f"; pages {len(pages)}, median {pct(pages, 50) * 1000:.0f} ms, p99 {pct(pages, 99) * 1000:.0f} ms"
                     if pages else "")
            print(f"{name:32} {statistics.mean(r.rate for r in rs):6.0f}/s  {ratio(name):.2f}x alone  worst round "
                  f"{min(r.rate / b.rate for r, b in zip(rs, results['ref alone' if name.startswith('ref ') else 'alone'])):.2f}x"
                  f"  p99 (median) {statistics.median(r.p99_ms for r in rs):5.1f} ms  worker CPU/renewal (median) "
                  f"{statistics.median(r.extra['worker_ms'] for r in rs):.2f} ms{shown}")
        print(f"load average {loadavg()}")
        beside = ratio("beside the scrubber")
        targets = [("renewals beside a scrubber / alone (all rounds)", f"{beside:.2f}x", beside >= RENEW_MIN_RATIO),
                   ("control: beside the live page looped / alone", f"{ratio('beside the live page looped'):.2f}x", None),
                   ("control: beside idle spinners / alone", f"{ratio('beside idle spinners'):.2f}x", None)]
        if args.ref:
            targets.append(("ref: beside a scrubber / alone", f"{ratio('ref beside the scrubber'):.2f}x", None))
        return print_targets(targets, 48, 8)
    finally:
        for server in servers.values():
            server.stop()
        for folder in dirs.values():
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parts = parser.add_subparsers(dest="part", required=True)
    lists = parts.add_parser("list", help="the Leases list as of hours back against the live one")
    lists.add_argument("--leases", type=int, default=1000)
    lists.add_argument("--hours", type=float, default=6.5, help="simulated history (default 6.5)")
    lists.add_argument("--renew-seconds", type=int, default=30,
                       help="simulated renewal interval (default 30: thinning keeps one a minute of them)")
    lists.add_argument("--back-hours", type=float, default=6)
    lists.add_argument("--watch-seconds", type=int, default=300, help="compaction's watch window (default 300)")
    lists.add_argument("--pack-seconds", type=int, default=3600,
                       help="history packs of this span after compacting (KUBEDASH_HISTORY_PACK_SECONDS; default 3600, 0: none)")
    lists.add_argument("--rounds", type=int, default=5)
    lists.add_argument("--database", default="", help="a PostgreSQL server URL (default: SQLite in a temp dir)")
    renewals = parts.add_parser("renewals", help="renewals alone against beside a time-bar scrubber")
    renewals.add_argument("--connections", type=int, default=4)
    renewals.add_argument("--duration", type=float, default=5, help="seconds per wrk run (default 5)")
    renewals.add_argument("--rounds", type=int, default=5)
    renewals.add_argument("--leases", type=int, default=1000, help="Leases on the scrubbed page (default 1000)")
    renewals.add_argument("--database", default="", help="a PostgreSQL server URL (default: SQLite)")
    renewals.add_argument("--ref", default="", metavar="PATH",
                          help="A/B: also serve the checkout at PATH (`git archive <commit> | tar -x -C PATH`), "
                               "its renewals alone and beside the scrubber in the same rounds")
    args = parser.parse_args(argv)
    return list_bench(args) if args.part == "list" else renewals_bench(args)


if __name__ == "__main__":
    sys.exit(main())

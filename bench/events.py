"""Events beside Lease renewals (issues 26, 43): do 200 Events/s, the Table loop, or a flood of Events slow renewals?

    .venv/bin/python bench/events.py [--duration 15] [--connections 4] [--rate 200] [--jobs 3000] [--flood 8]

One throw-away server (`manage.py serve`, one worker, SQLite, like bench/api.py), seeded with
Leases and --jobs Jobs, then, in the same run, wrk's kubelet-style renewals (bench/lease_renew.lua)
  1. alone;
  2. while one client loops Table lists of every Job (`kubectl get jobs -A`; the expensive lane);
  3. while that loop runs and two clients record --rate Events/s between them, paced, as
     client-go's recorder does: a POST of a new Event, or (one in four) the correlator's PATCH
     of count and lastTimestamp on one recorded before.
  4. while --flood connections create Leases back to back (an editor's script: fast-lane writes,
     which compete with renewals as equals; the reference for the next run);
  5. while --flood connections post Events back to back, the same flood but of Events (issue 43:
     Events have their own budget, KUBEDASH_EVENT_WRITES_PER_SECOND, beyond which they are
     answered 429 with Retry-After). Both floods wait out a 429's Retry-After, as client-go does.
Prints each run's renewals/s, p50/p99, its ratio to the renewals alone, and the Events/s the
recorders achieved (and their non-2xx). Traffic goes only to 127.0.0.1; every phase is bounded.
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import (LEASES, RENEW_NS, WRK_MISSING, TableLoop, fmt_ratio, lease_body, print_results,  # noqa: E402
                 run_wrk, scenario_renew, seed_jobs, seed_leases)
from common import BenchServer, machine, request  # noqa: E402

EVENTS = "/api/v1/namespaces/{ns}/events"


class EventRecorder(threading.Thread):
    """One client recording Events at `rate` per second (paced by a schedule, not a sleep after
    each): new Events about Jobs, and now and then the correlator's PATCH of one of them."""

    def __init__(self, server: BenchServer, rate: float, tag: str):
        super().__init__(daemon=True)
        self.server, self.rate, self.tag = server, rate, tag
        self.stopping = threading.Event()
        self.statuses: Counter = Counter()
        self.started_at = self.stopped_at = 0.0

    def body(self, i: int) -> bytes:
        ns = f"bench-jobs-{i % 10}"
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return json.dumps({
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": f"job-{i}.{self.tag}{i:x}", "namespace": ns},
            "involvedObject": {"kind": "Job", "namespace": ns, "name": f"job-{i}", "apiVersion": "batch/v1"},
            "reason": "SuccessfulCreate", "message": f"Created pod: job-{i}-abcde", "type": "Normal",
            "source": {"component": "job-controller"}, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }).encode()

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.server.token}", "Content-Type": "application/json"}
        patch_headers = {**headers, "Content-Type": "application/strategic-merge-patch+json"}
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
        recorded: list[tuple[str, str, int]] = []
        self.started_at = time.monotonic()
        i = 0
        try:
            while not self.stopping.is_set():
                due = self.started_at + i / self.rate
                wait = due - time.monotonic()
                if wait > 0:
                    self.stopping.wait(wait)
                    continue
                if i % 4 == 3 and recorded:
                    ns, name, count = recorded[i % len(recorded)]
                    recorded[i % len(recorded)] = (ns, name, count + 1)
                    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
                    status, _ = request(self.server.port, "PATCH", EVENTS.format(ns=ns) + "/" + name,
                                        json.dumps({"count": count + 1, "lastTimestamp": stamp}).encode(),
                                        patch_headers, conn)
                else:
                    ns = f"bench-jobs-{i % 10}"
                    status, _ = request(self.server.port, "POST", EVENTS.format(ns=ns), self.body(i), headers, conn)
                    if status == 201:
                        recorded.append((ns, f"job-{i}.{self.tag}{i:x}", 1))
                self.statuses[status] += 1
                i += 1
        finally:
            self.stopped_at = time.monotonic()
            conn.close()

    @property
    def achieved(self) -> float:
        ok = sum(n for s, n in self.statuses.items() if 200 <= s < 300)
        return ok / max(self.stopped_at - self.started_at, 1e-9)


class Flood(threading.Thread):
    """One connection writing back to back (no pacing): a new Event, or a new Lease, each time.
    A 429 is waited out for its Retry-After, as client-go's rest client does."""

    def __init__(self, server: BenchServer, kind: str, tag: str):
        super().__init__(daemon=True)
        self.server, self.kind, self.tag = server, kind, tag
        self.stopping = threading.Event()
        self.statuses: Counter = Counter()

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.server.token}", "Content-Type": "application/json"}
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
        recorder = EventRecorder(self.server, 1, f"flood{self.tag}")   # (its Event bodies)
        i = 0
        try:
            while not self.stopping.is_set():
                if self.kind == "Event":
                    ns = f"bench-jobs-{i % 10}"
                    path, body = EVENTS.format(ns=ns), recorder.body(i)
                else:
                    path, body = LEASES.format(ns="bench-flood"), lease_body(f"flood-{self.tag}-{i}", "bench-flood", "x")
                conn.request("POST", path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                self.statuses[response.status] += 1
                if response.status == 429:
                    self.stopping.wait(float(response.getheader("Retry-After") or 1))
                i += 1
        finally:
            conn.close()


def flood_scenario(wrk: str, server: BenchServer, c: int, duration: float, kind: str, connections: int):
    """Renewals while `connections` clients create `kind`s back to back: (result, answers)."""
    floods = [Flood(server, kind, f"{kind[0].lower()}{n}") for n in range(connections)]
    for f in floods:
        f.start()
    time.sleep(0.5)
    try:
        result = scenario_renew(wrk, server, c, duration)
    finally:
        for f in floods:
            f.stopping.set()
        for f in floods:
            f.join(120)
    result.scenario = f"renew+{connections}x{kind} flood"
    return result, sum((f.statuses for f in floods), Counter())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=15, help="seconds per wrk run (default 15)")
    parser.add_argument("--connections", type=int, default=4, help="renewing connections (default 4)")
    parser.add_argument("--rate", type=float, default=200, help="Events per second, over two recorders (default 200)")
    parser.add_argument("--jobs", type=int, default=3000, help="Jobs in the Table-list load (default 3000)")
    parser.add_argument("--flood", type=int, default=8,
                        help="connections of the Lease-create and Event floods (default 8; 0: no flood runs)")
    args = parser.parse_args(argv)
    wrk = shutil.which("wrk")
    if wrk is None:
        print(WRK_MISSING, file=sys.stderr)
        return 2
    c, duration = args.connections, args.duration
    print(f"kubedash Events-beside-renewals benchmark  {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}")
    print(f"machine: {machine()}; one worker, SQLite; wrk runs of {duration:g} s, {c} renewing connections; "
          f"Table loop over {args.jobs} Jobs; {args.rate:g} Events/s\n")
    data_dir = Path(tempfile.mkdtemp(prefix="kubedash-bench-events-"))
    server = BenchServer(data_dir)
    try:
        server.start()
        seed_leases(server, RENEW_NS, [f"renew-{i}" for i in range(c)])
        seconds = seed_jobs(server, args.jobs)
        print(f"seeded {args.jobs} Jobs in {seconds:.1f} s")
        run_wrk(wrk, server, "/healthz", 2, 1)                       # warm up
        scenario_renew(wrk, server, 2, 1)

        alone = scenario_renew(wrk, server, c, duration)
        alone.scenario, alone.ratio = "renew alone", 1.0

        loop = TableLoop(server)
        loop.start()
        time.sleep(0.5)
        try:
            tables = scenario_renew(wrk, server, c, duration)
        finally:
            loop.stopping.set()
            loop.join(120)
        tables.scenario, tables.ratio = "renew + Tables", tables.rate / alone.rate if alone.rate else None

        loop2 = TableLoop(server)
        recorders = [EventRecorder(server, args.rate / 2, tag) for tag in ("a", "b")]
        loop2.start()
        for r in recorders:
            r.start()
        time.sleep(0.5)
        try:
            events = scenario_renew(wrk, server, c, duration)
        finally:
            for r in recorders:
                r.stopping.set()
            loop2.stopping.set()
            for t in (*recorders, loop2):
                t.join(120)
        events.scenario = f"renew+Tables+{args.rate:g}ev/s"
        events.ratio = events.rate / alone.rate if alone.rate else None
        floods = []
        for kind in ("Lease", "Event") if args.flood else ():
            result, answers = flood_scenario(wrk, server, c, duration, kind, args.flood)
            result.ratio = result.rate / alone.rate if alone.rate else None
            floods.append((kind, result, answers))
        print("(x ceiling here: x the renewals alone)")
        print_results([alone, tables, events, *(result for _, result, _ in floods)])
        statuses = sum((r.statuses for r in recorders), Counter())
        achieved = sum(r.achieved for r in recorders)
        print(f"\nEvents recorded meanwhile: {achieved:.0f}/s achieved of {args.rate:g}/s asked; "
              f"answers {dict(sorted(statuses.items()))}")
        print(f"Table lists answered: {len(loop.times)} (Table loop alone), {len(loop2.times)} (with Events); "
              f"429s: {loop.rejected}, {loop2.rejected}")
        print(f"renewals with Events and Tables / renewals alone: {fmt_ratio(events.ratio)}; "
              f"p99 {events.p99_ms:.1f} ms vs {alone.p99_ms:.1f} ms alone")
        for kind, result, answers in floods:
            taken = sum(n for status, n in answers.items() if 200 <= status < 300)
            print(f"renewals beside {args.flood} connections creating {kind}s / renewals alone: {fmt_ratio(result.ratio)} "
                  f"(p99 {result.p99_ms:.1f} ms); {kind}s taken {taken / duration:.0f}/s, "
                  f"answers {dict(sorted(answers.items()))}")
        busiest = max(r.other_cpu for r in (alone, tables, events, *(result for _, result, _ in floods)))
        if busiest > 0.25:
            print(f"note: other processes used up to {busiest:.2f} of the {os.cpu_count()} cores during the runs; "
                  "the machine was shared, so these figures are pessimistic")
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

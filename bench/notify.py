"""Notifications' cost (issue 39): renewals with 100 rules vs none, and a notification's delay from its commit.

    .venv/bin/python bench/notify.py [--duration 15] [--connections 4] [--rules 100] [--changes 200] [--idle 10]

One throw-away server (`manage.py serve`, one worker, SQLite, maintenance on: that worker is the
leader, so it both serves the renewals and evaluates the rules), in the same run, once the server
is idle after its start (settle()) and 2 s of renewals not counted:
  1. wrk's kubelet-style renewals (bench/lease_renew.lua) with no rule;
  2. the same with --rules rules (half lease-unheld --for 30, half lease-holder-changed, all over
     the renewed Leases' namespace, to a webhook): every renewal is evaluated by every rule, none
     fires (the Leases stay held, their holders do not change);
  3. --changes holder changes of one Lease, one at a time (20/s), to a rule whose webhook is a
     receiver on 127.0.0.1: the delay from each PATCH's answer (its commit) to the receiver
     getting its message.
Prints the renewals/s of 1 and 2 with their ratio (target >= 0.95), the server's CPU per renewal
of 2 over 1 (reported: on a shared machine the rates swing, the CPU per renewal much less) and the
delays' p50/p99 (target p99 <= 1 s). Also the idle server (no request for --idle seconds),
without a rule (before 1) and with the rules (before 2): its CPU, and how often the rule engine's
and the hub follower's threads ran (py-spy names them): what rules cost a worker nobody uses (reported). Traffic goes only to 127.0.0.1.
"""
from __future__ import annotations

import argparse
import http.client
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import LEASES, RENEW_NS, WRK_MISSING, print_results, scenario_renew, seed_leases  # noqa: E402
from common import BenchServer, child_pids, find_pyspy, machine, metric_lines, pct, request  # noqa: E402

MIN_RATIO = 0.95
MAX_P99_SECONDS = 1.0
LATENCY_NS = "bench-notify"
SCRIPT = """
import shlex
from django.core.management import call_command
for line in {lines!r}:
    call_command(*shlex.split(line))
"""


class Receiver:
    """A webhook on 127.0.0.1 noting when each message arrived (by the new holder's name)."""

    def __init__(self):
        self.arrived: dict[str, float] = {}
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                receiver.arrived.setdefault((body.get("details") or {}).get("to", ""), time.monotonic())
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class NotifyServer(BenchServer):
    def __init__(self, data_dir: Path):
        super().__init__(data_dir)
        self.env.update(KUBEDASH_MAINTENANCE="1", KUBEDASH_MAINTENANCE_RETRY_PERIOD="0.5",
                        KUBEDASH_NOTIFY_PER_MINUTE="100000", KUBEDASH_NOTIFY_RULES_RELOAD_SECONDS="0.5")

    def notify(self, *lines: str) -> None:
        self.manage("shell", "-c", SCRIPT.format(lines=[f"notify {line}" for line in lines]))

    def rules_loaded(self) -> float:
        for line in metric_lines(self):
            if line.startswith("kubedash_notify_rules "):
                return float(line.split()[1])
        return 0.0


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def settle(server: NotifyServer, idle_cores: float = 0.05, timeout: float = 60) -> None:
    """Wait until the server's start-up work (the maintenance leader's first rounds, the heavy
    child) is done: its CPU below idle_cores for a second. Measured from its start, the first
    scenario's CPU per renewal was 2-4x the next ones', which made rules look free."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = server.cpu_seconds()
        time.sleep(1)
        if server.cpu_seconds() - before < idle_cores:
            return


def thread_runs(pid: int) -> dict[int, tuple[int, int]]:
    """Each thread of a process (by native id): (CPU ns, times it ran), from /proc's schedstat."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            run_ns, _, runs = (task / "schedstat").read_text().split()
        except (OSError, ValueError):
            continue
        out[int(task.name)] = (int(run_ns), int(runs))
    return out


def thread_names(pid: int) -> dict[int, str]:
    """Python thread names by native id (py-spy dump), or {} without py-spy."""
    spy = find_pyspy()
    if not spy:
        return {}
    out = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60).stdout
    return {int(tid): name for tid, name in re.findall(r'^Thread (\d+) \([^)]*\): "([^"]*)"', out, re.M)}


IDLE_THREADS = ("notifications-engine", "watch-hub")   # the rule engine; its process's hub follower


def idle_cost(server: NotifyServer, seconds: float) -> str:
    """While nobody sends the server anything: its CPU (the kernel's ns, every thread and child)
    and, for the engine's and the hub follower's threads, how often each ran and its CPU."""
    pids = [server.proc.pid, *child_pids(server.proc.pid)]
    names = thread_names(server.proc.pid)
    before = {pid: thread_runs(pid) for pid in pids}
    time.sleep(seconds)
    after = {pid: thread_runs(pid) for pid in pids}
    total = sum(ns - before[pid].get(tid, (0, 0))[0] for pid in pids for tid, (ns, _) in after[pid].items())
    parts = [f"server {total / 1e6 / seconds:.2f} ms/s"]
    mine = after[server.proc.pid]
    for label in IDLE_THREADS:
        tids = [tid for tid, name in names.items() if name == label and tid in mine]
        if not tids:
            parts.append(f"{label}: none")
            continue
        ns = sum(mine[t][0] - before[server.proc.pid].get(t, (0, 0))[0] for t in tids)
        runs = sum(mine[t][1] - before[server.proc.pid].get(t, (0, 0))[1] for t in tids)
        parts.append(f"{label} ran {runs / seconds:.1f}/s, {ns / 1e6 / seconds:.3f} ms/s")
    return "; ".join(parts)


def delays(server: NotifyServer, receiver: Receiver, changes: int) -> list[float]:
    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/merge-patch+json"}
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    path = LEASES.format(ns=LATENCY_NS) + "/moving"
    committed: dict[str, float] = {}
    for i in range(changes):
        holder = f"holder-{i}"
        status, data = request(server.port, "PATCH", path, json.dumps({"spec": {"holderIdentity": holder}}).encode(),
                               headers, conn)
        if status != 200:
            raise SystemExit(f"PATCH answered {status}: {data[:200]!r}")
        committed[holder] = time.monotonic()
        time.sleep(0.05)
    conn.close()
    wait_for(lambda: all(h in receiver.arrived for h in committed), 60, "every message")
    return sorted(receiver.arrived[h] - t for h, t in committed.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=15)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--rules", type=int, default=100)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--idle", type=float, default=10, help="seconds of no traffic measured, without and with rules")
    args = parser.parse_args()
    wrk = shutil.which("wrk")
    if not wrk:
        print(WRK_MISSING)
        return 2
    print(machine())
    data_dir = Path(tempfile.mkdtemp(prefix="kubedash-bench-notify-"))
    server = NotifyServer(data_dir)
    receiver = Receiver()
    try:
        server.start()
        seed_leases(server, RENEW_NS, [f"renew-{i}" for i in range(args.connections)])
        seed_leases(server, LATENCY_NS, ["moving"])
        settle(server)
        idle_alone = idle_cost(server, args.idle)
        scenario_renew(wrk, server, args.connections, args.duration)   # warm-up, not counted (as long as a
        # measured run: with 2 s the first measured run still ran 1.2x slower than the second, no rules at all)
        alone = scenario_renew(wrk, server, args.connections, args.duration)
        alone.scenario = "renew, no rule"
        half = args.rules // 2
        server.notify(f"channel add bench {receiver.url}",
                      *[f"rule add unheld-{i} --when lease-unheld --for 30 --namespace {RENEW_NS} --to bench"
                        for i in range(half)],
                      *[f"rule add moved-{i} --when lease-holder-changed --namespace {RENEW_NS} --to bench"
                        for i in range(args.rules - half)],
                      f"rule add latency --when lease-holder-changed --namespace {LATENCY_NS} --to bench")
        wait_for(lambda: server.rules_loaded() >= args.rules + 1, 60, "the rules loaded by the leader")
        time.sleep(2)   # (their snapshot taken)
        settle(server)
        idle_ruled = idle_cost(server, args.idle)
        ruled = scenario_renew(wrk, server, args.connections, args.duration)
        ruled.scenario = f"renew, {args.rules} rules"
        ruled.ratio = ruled.rate / alone.rate if alone.rate else None
        print_results([alone, ruled])
        lat = delays(server, receiver, args.changes)
        p50, p99 = pct(lat, 50), pct(lat, 99)
        print(f"\nnotification delay from commit ({len(lat)} changes): p50 {1000 * p50:.0f} ms, "
              f"p99 {1000 * p99:.0f} ms, max {1000 * lat[-1]:.0f} ms")
        ok_ratio = ruled.ratio is not None and ruled.ratio >= MIN_RATIO
        ok_p99 = p99 <= MAX_P99_SECONDS
        print(f"renewals with rules / without: {ruled.ratio:.2f} (target >= {MIN_RATIO}) "
              f"{'ok' if ok_ratio else 'MISSED'}")
        if alone.rate and ruled.rate and alone.cpu:
            # (the server's CPU per renewal: the figure a loaded machine disturbs least)
            print(f"server CPU per renewal with rules / without: "
                  f"{(ruled.cpu / ruled.rate) / (alone.cpu / alone.rate):.2f} (reported)")
        print(f"idle {args.idle:.0f} s, no rule: {idle_alone} (reported)")
        print(f"idle {args.idle:.0f} s, {args.rules + 1} rules: {idle_ruled} (reported)")
        print(f"delay p99: {p99:.3f} s (target <= {MAX_P99_SECONDS} s) {'ok' if ok_p99 else 'MISSED'}")
        return 0 if ok_ratio and ok_p99 else 1
    finally:
        server.stop()
        receiver.server.shutdown()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""A pod's memory with and without the heavy child, after Table loops (issue 28, "heavypg").

    .venv/bin/python bench/heavy_memory.py [--database postgres://USER@HOST:PORT/] [--jobs 3000]
                                           [--workers 2] [--duration 20] [--streams 40] [--modes old new]
                                           [--ref PATH]

One throw-away server per mode (`serve --workers N`, as deploy/kubernetes runs it; SQLite, or
--database's PostgreSQL), seeded with --jobs Jobs; then for --duration seconds two clients loop
Table lists of every Job and two loop whole JSON lists. Prints, per process (supervisor,
workers, their heavy children: `old` is KUBEDASH_HEAVY_PROCESS=0, `new` =1), RSS now, its peak
(VmHWM) and PSS (shared pages split between the processes sharing them, so PSS sums to what
the pod's cgroup is charged, give or take the page cache), and the totals. Then, on PostgreSQL,
--streams clients each ask for the whole list of Jobs at once and read it slowly (a 4 KB receive
window; 120 Jobs of 64 KB are added first, so that they outlast the buffers): the most connections to the server's database (pg_stat_activity) while they stream,
and how many were answered 200 or 429. Traffic goes only to 127.0.0.1.
"""
from __future__ import annotations

import argparse
import http.client
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from api import ALL_JOBS, JOBS, TableLoop, job_body, seed_jobs  # noqa: E402
from common import BenchServer, add_backend_arguments, backend_name, child_pids, machine, request  # noqa: E402


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def pss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


class ListLoop(threading.Thread):
    """One client looping whole JSON lists of every Job (streamed)."""

    def __init__(self, server: BenchServer):
        super().__init__(daemon=True)
        self.server, self.stopping, self.done = server, threading.Event(), 0

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=120)
        headers = {"Authorization": f"Bearer {self.server.token}"}
        try:
            while not self.stopping.is_set():
                if request(self.server.port, "GET", ALL_JOBS, headers=headers, conn=conn)[0] == 200:
                    self.done += 1
        finally:
            conn.close()


def processes(server: BenchServer) -> list[tuple[str, int]]:
    found = [("supervisor" if server.workers > 1 else "worker", server.proc.pid)]
    workers = child_pids(server.proc.pid) if server.workers > 1 else [server.proc.pid]
    for i, pid in enumerate(workers):
        if server.workers > 1:
            found.append((f"worker {i}", pid))
        found += [(f"child of {i}", c) for c in child_pids(pid)
                  if b"heavy_child" in Path(f"/proc/{c}/cmdline").read_bytes()]
    return found


def streams(server: BenchServer, count: int) -> None:
    import psycopg

    url = server.env["DATABASE_URL"]
    dbname = url.rsplit("/", 1)[1]
    ask = (f"GET {ALL_JOBS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}\r\n"
           "Connection: close\r\n\r\n").encode()
    # ~8 MB more of Jobs: a list then outlasts what the server's buffers and the sockets hold for a
    # client that does not read, so the streams are all in flight at once.
    headers = {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"}
    for i in range(120):
        body = orjson.loads(job_body(f"padded-{i}", "bench-streams"))
        body["metadata"]["annotations"] = {"pad": "x" * 64_000}
        status, data = request(server.port, "POST", JOBS.format(ns="bench-streams"), orjson.dumps(body), headers)
        if status != 201:
            raise SystemExit(f"seeding padded Jobs: {status} {data[:200]!r}")
    socks = []
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as admin:
        def connections() -> int:
            return admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (dbname,)).fetchone()[0]

        idle = connections()
        try:
            for _ in range(count):
                sock = socket.socket()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.connect(("127.0.0.1", server.port))
                sock.sendall(ask)
                socks.append(sock)
            most, deadline = 0, time.monotonic() + 5
            while time.monotonic() < deadline:
                most = max(most, connections())
                time.sleep(0.05)
            statuses = []
            for sock in socks:
                resp = http.client.HTTPResponse(sock)
                resp.begin()
                resp.read()
                statuses.append(resp.status)
        finally:
            for sock in socks:
                sock.close()
    print(f"  {count} whole lists at once, read slowly: {statuses.count(200)} answered 200, {statuses.count(429)} 429; "
          f"database connections {idle} before, at most {most} while they streamed")


def measure(mode: str, args, workdir: Path) -> None:
    data_dir = workdir / mode
    data_dir.mkdir()
    server = BenchServer(data_dir, workers=args.workers, database=args.database, root=args.ref)
    server.env["KUBEDASH_HEAVY_PROCESS"] = "1" if mode == "new" else "0"
    try:
        server.start()
        seed_jobs(server, args.jobs)
        before = {name: status_kb(pid, "VmRSS") for name, pid in processes(server)}
        loops = [TableLoop(server), TableLoop(server), ListLoop(server), ListLoop(server)]
        for loop in loops:
            loop.start()
        time.sleep(args.duration)
        for loop in loops:
            loop.stopping.set()
        for loop in loops:
            loop.join(120)
        tables = sum(len(loop.times) for loop in loops[:2])
        lists = sum(loop.done for loop in loops[2:])
        print(f"\n{mode} (KUBEDASH_HEAVY_PROCESS={server.env['KUBEDASH_HEAVY_PROCESS']}): "
              f"{tables} Tables and {lists} JSON lists of {args.jobs} Jobs in {args.duration:.0f} s")
        print(f"  {'process':<14} {'RSS before':>10} {'RSS MiB':>8} {'peak MiB':>9} {'PSS MiB':>8}")
        totals = [0, 0, 0, 0]
        for name, pid in processes(server):
            row = [before.get(name, 0), status_kb(pid, "VmRSS"), status_kb(pid, "VmHWM"), pss_kb(pid)]
            totals = [t + v for t, v in zip(totals, row)]
            print(f"  {name:<14} " + " ".join(f"{v / 1024:>{w}.0f}" for v, w in zip(row, (10, 8, 9, 8))))
        print(f"  {'total':<14} " + " ".join(f"{v / 1024:>{w}.0f}" for v, w in zip(totals, (10, 8, 9, 8))))
        if args.database and args.streams:
            streams(server, args.streams)
    except BaseException:
        print(server.log_tail(), file=sys.stderr)
        raise
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--streams", type=int, default=40, help="whole lists at once (PostgreSQL; 0: none)")
    parser.add_argument("--modes", nargs="+", default=["old", "new"], choices=["old", "new"])
    parser.add_argument("--ref", type=Path, default=None, metavar="PATH",
                        help="serve the checkout at PATH instead (an A/B run: git archive <commit> | tar -x -C PATH)")
    add_backend_arguments(parser)
    args = parser.parse_args()
    print(f"# heavy_memory on {backend_name(args.database, '')}, {args.workers} workers, {machine()}")
    workdir = Path(tempfile.mkdtemp(prefix="kubedash-heavy-memory-"))
    try:
        for mode in args.modes:
            measure(mode, args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

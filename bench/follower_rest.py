"""Renewals with one watch open, then after it closed: does the watch hub rest (issue 28, task C)?

    .venv/bin/python bench/follower_rest.py [--old REF] [--seconds 8] [--rounds 2] [--renewers 4]

Two throw-away servers (bench/common.py BenchServer, SQLite, one process each): this checkout,
and with --old the code at git REF (extracted with `git archive` into a temp dir), both up for
the whole run. Per round and server: bench/attack.py's renewers (threads on keep-alive
connections, each PUTting its own Lease as fast as it answers) for --seconds with one idle
watch (of another namespace) open, then again after that watch was closed. A hub whose
follower keeps reading the revision log after its last watcher left costs the closed phase as
much as the open one; one that rests gives the closed phase the renewals of a server nobody
ever watched. Prints renewals/s, p99 and server CPU per phase, and closed / open per server.
"""
from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attack import NS, create_renewed_leases, renewers  # noqa: E402
from common import ROOT, BenchServer, machine, pct  # noqa: E402


def prepare(server: BenchServer, count: int) -> None:
    create_renewed_leases(server, count)
    renewers(server.port, server.token, count, 2)   # warm up


def keep_watching(server: BenchServer) -> socket.socket:
    """An idle watch of another namespace (as bench/attack.py's), on a raw socket, read (and
    its bytes dropped) by a thread until the socket is shut down."""
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.sendall(f"GET /apis/coordination.k8s.io/v1/namespaces/{NS}-idle/leases?watch=1 HTTP/1.1\r\n"
                 f"Host: 127.0.0.1\r\nAuthorization: Bearer {server.token}\r\n\r\n".encode())
    head = sock.recv(65536)
    assert head.startswith(b"HTTP/1.1 200"), head[:200]

    def drop() -> None:
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass
        sock.close()

    threading.Thread(target=drop, daemon=True).start()
    return sock


def phase(server: BenchServer, args) -> dict:
    cpu = server.cpu_seconds()
    done, latencies = renewers(server.port, server.token, args.renewers, args.seconds)
    latencies.sort()
    return {"rate": done / args.seconds, "p99_ms": pct(latencies, 99) * 1000,
            "cpu": (server.cpu_seconds() - cpu) / args.seconds, "load": open("/proc/loadavg").read().split()[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default=None, help="also serve the code at this git ref (e.g. HEAD~1)")
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--renewers", type=int, default=4)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kubedash-rest-"))
    servers: dict[str, BenchServer] = {}
    try:
        roots = {"new": ROOT}
        if args.old:
            old = work / "old"
            old.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.old], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
            roots = {f"old ({args.old})": old, **roots}
        for name, root in roots.items():
            (work / name).mkdir(exist_ok=True)
            data = work / name / "data"
            data.mkdir()
            servers[name] = BenchServer(data, root=root)
            servers[name].start()
            prepare(servers[name], args.renewers)
        print(f"follower rest benchmark ({machine()}); {args.renewers} renewers, {args.seconds:g} s a phase")
        print(f"{'server':<16} {'phase':<24} {'renewals/s':>10} {'p99 ms':>8} {'srv CPU':>8} {'load':>5}")
        results: dict[str, dict[str, list]] = {name: {"open": [], "closed": []} for name in servers}
        for _ in range(args.rounds):
            for name, server in servers.items():
                watching = keep_watching(server)
                time.sleep(1)
                results[name]["open"].append(opened := phase(server, args))
                watching.shutdown(socket.SHUT_RDWR)
                time.sleep(1)   # the server notices the closed stream
                results[name]["closed"].append(closed := phase(server, args))
                for label, d in (("one idle watch open", opened), ("after it closed", closed)):
                    print(f"{name:<16} {label:<24} {d['rate']:>10.1f} {d['p99_ms']:>8.1f} {d['cpu']:>7.2f}c "
                          f"{d['load']:>5}")
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print()
    for name, res in results.items():
        o = statistics.median(d["rate"] for d in res["open"])
        c = statistics.median(d["rate"] for d in res["closed"])
        print(f"{name:<16} median renewals/s: watch open {o:.1f}, after it closed {c:.1f}: closed / open {c / o:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The fan-out case of issue 28: kubedash against a bare asyncio server, same client, same run.

    .venv/bin/python bench/fanout.py [--watchers 1000] [--rate 200] [--duration 10] [--rounds 2]
                                     [--database postgres://...] [--redis redis://...]

N watchers of one namespace, all of Leases, and R Lease writes/s into it (N x R deliveries/s),
the writer, the watcher client and the server on the same machine. The writer and the watcher
client are bench/watch.py's (`_writer`: creates, merge-patches and deletes, paced open-loop;
`_watchers`: one asyncio process holding every stream as a raw chunked HTTP/1.1 reader), run
against two servers:
  * kubedash (`manage.py serve`, bench/common.py BenchServer: auth, database, watch hub);
  * bare: this file's `_bare` mode, stdlib asyncio only, no auth, no database: it answers
    each write with the object and a counter as its resourceVersion and writes the same
    event line (as long as kubedash's, padded) to every watch of that namespace, at once.
With --old REF, kubedash at that git ref runs too, in the same rounds (an A/B of a change).
Each server first takes the paced writes with no watcher (its writer-rate ceiling), then the
two get the fan-out phase in turn (kubedash, bare, kubedash, ...: --rounds each), so both see
the same load from the rest of the machine. Prints, per phase and as the median over rounds:
events delivered of expected (plus missing / duplicate / out of order), writes/s against that
server's own ceiling, delivery latency (from the write's response to the event's arrival) p50
and p99, and kubedash's p99 against the bare server's, with the issue's 2x ceiling; and each
server's CPU per delivered event (the phase's whole server CPU, writes included, over the events
delivered: a figure the rest of the machine's load hardly moves, unlike the latencies); `closed`
counts watches the server ended (overflow), `unknown` events of no write of the phase (a previous
phase's, arriving after its drain gave up).
"""
from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, BenchServer, add_backend_arguments, backend_name, free_port, machine,  # noqa: E402
                    print_targets, proc_cpu_seconds, request)
from watch import (KINDS, Bench, Child, delivery_stats, expected_events, fmt, raise_fd_limit,  # noqa: E402
                   write_stats)

MAX_P99_RATIO = 2.0       # issue 28: kubedash's delivery p99 <= 2x the bare server's
MIN_WRITER_RATIO = 0.95   # and the writer keeps its rate (reported as x its ceiling)

PLURALS = {"leases": ("Lease", "coordination.k8s.io/v1"), "endpoints": ("Endpoints", "v1"), "jobs": ("Job", "batch/v1")}


# ---------------------------------------------------------------------------------------------
# The bare server


class Bare(asyncio.Protocol):
    """One connection to the bare server: keep-alive requests; a watch turns it into a stream."""

    watchers: dict[str | None, set] = {}   # namespace (None: all) -> transports of watch streams
    rv = [0]
    size = [0]                             # the object size to pad to (kubedash's, measured)

    def connection_made(self, transport):
        self.transport = transport
        self.buf = b""
        self.scope = ()

    def connection_lost(self, exc):
        for ns in self.scope:
            self.watchers.get(ns, set()).discard(self.transport)

    def data_received(self, data):
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = self.buf[:end].decode("latin-1").split("\r\n")
            length = 0
            for line in lines[1:]:
                key, _, value = line.partition(":")
                if key.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            body, self.buf = self.buf[end + 4:end + 4 + length], self.buf[end + 4 + length:]
            method, target, _ = lines[0].split(" ", 2)
            self.handle(method, target, body)

    def respond(self, status: str, body: bytes) -> None:
        self.transport.write(b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                             % (status.encode(), len(body)) + body)

    def handle(self, method: str, target: str, body: bytes) -> None:
        path, _, query = target.partition("?")
        parts = path.strip("/").split("/")
        ns = parts[parts.index("namespaces") + 1] if "namespaces" in parts else None
        if method == "GET" and "watch=" in query:
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Transfer-Encoding: chunked\r\n\r\n")
            self.scope = (ns,)
            self.watchers.setdefault(ns, set()).add(self.transport)
            return
        if method not in ("POST", "PATCH", "PUT", "DELETE"):
            self.respond("200 OK", b"{}")
            return
        if method == "POST":
            plural, name = parts[-1], orjson.loads(body)["metadata"]["name"]
        else:
            plural, name = parts[-2], parts[-1]
        kind, api_version = PLURALS.get(plural, ("Lease", "coordination.k8s.io/v1"))
        self.rv[0] += 1
        patch = orjson.loads(body) if body else {}
        obj = {"kind": kind, "apiVersion": api_version,
               "metadata": {"name": name, "namespace": ns, "resourceVersion": str(self.rv[0]),
                            "labels": (patch.get("metadata") or {}).get("labels") or {}},
               "spec": patch.get("spec") or {}, "status": {"pad": ""}}
        text = orjson.dumps(obj)
        if len(text) < self.size[0]:
            obj["status"]["pad"] = "x" * (self.size[0] - len(text))
            text = orjson.dumps(obj)
        self.respond("201 Created" if method == "POST" else "200 OK", text)
        kind_of = b"ADDED" if method == "POST" else b"DELETED" if method == "DELETE" else b"MODIFIED"
        line = b'{"type":"' + kind_of + b'","object":' + text + b"}\n"
        for scope in (None, ns):
            if self.watchers.get(scope):
                pending = PENDING.setdefault(scope, [])
                if not pending:
                    schedule_flush()
                pending.append(line)


# Events waiting for the next flush, by scope. Flushed as kubedash's hub flushes its watchers
# (hub.FLUSH_INTERVAL_SECONDS): this loop turn, or 10 ms after the last flush if that was
# sooner; one chunk per watcher per flush, built once.
PENDING: dict[str | None, list[bytes]] = {}
FLUSH_INTERVAL = 0.01
_flush = {"at": 0.0, "scheduled": False}


def schedule_flush() -> None:
    if _flush["scheduled"]:
        return
    _flush["scheduled"] = True
    loop = asyncio.get_running_loop()
    delay = _flush["at"] + FLUSH_INTERVAL - loop.time()
    if delay > 0:
        loop.call_later(delay, flush)
    else:
        loop.call_soon(flush)


def flush() -> None:
    _flush["at"], _flush["scheduled"] = asyncio.get_running_loop().time(), False
    for scope, lines in list(PENDING.items()):
        if not lines:
            continue
        data = b"".join(lines)
        chunk = b"%x\r\n" % len(data) + data + b"\r\n"
        lines.clear()
        for transport in Bare.watchers.get(scope, ()):
            transport.write(chunk)


async def bare_main(port: int, size: int) -> None:
    Bare.size[0] = size
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Bare, "127.0.0.1", port, backlog=4096)
    print("LISTENING", flush=True)
    async with server:
        await server.serve_forever()


class BareServer:
    """The bare server as a child process, with what watch.Bench asks of a server."""

    def __init__(self, size: int):
        self.port, self.token, self.size = free_port(), "-", size
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "_bare", str(self.port),
                                      str(self.size)], stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "LISTENING":
            raise SystemExit("the bare server did not start")

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.proc.pid) if self.proc else 0.0

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


# ---------------------------------------------------------------------------------------------
# The run


def fan_phase(bench: Bench, child: Child, plan: list[dict], rate: float, duration: float, ceiling: dict) -> dict:
    bench.dump(child)   # (resets the client's records)
    wall0, cpu0 = time.monotonic(), bench.server.cpu_seconds()
    writes = bench.write_phase(rate, duration, child)
    drained = bench.drain(child, expected_events(writes, plan))
    wall = time.monotonic() - wall0
    cpu = bench.server.cpu_seconds() - cpu0
    w = write_stats(writes, rate)
    d = delivery_stats(writes, bench.dump(child), plan, wall - drained)
    d.update(rate=w["rate"], x_ceiling=w["rate"] / max(ceiling["rate"], 1e-9), write_p99_ms=w["p99_ms"],
             server_cpu=w["server_cpu"], client_cpu=w["client_cpu"], writer_cpu=w["writer_cpu"],
             other_cpu=w["other_cpu"], drained=drained,
             load=open("/proc/loadavg").read().split()[0], us_per_event=cpu / max(d["delivered"], 1) * 1e6)
    return d


def show(name: str, d: dict) -> None:
    print(f"{name:<14} {d['delivered']:>8}/{d['expected']:<8} {d['missing']:>7} {d['dupes']:>5} {d['out_of_order']:>5} "
          f"{d['rate']:>8.1f} {d['x_ceiling']:>6.2f} {fmt(d['p50_ms']):>8} {fmt(d['p99_ms']):>8} {fmt(d['max_ms']):>8} "
          f"{d['server_cpu']:>6.2f}c {d['client_cpu']:>6.2f}c {d['writer_cpu']:>6.2f}c {d['other_cpu']:>6.2f}c "
          f"{d['load']:>5} {d['us_per_event']:>6.2f} {d['closed']:>6} {d['unknown']:>7}")


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "_bare":
        asyncio.run(bare_main(int(sys.argv[2]), int(sys.argv[3])))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=200, help="Lease writes/s (default 200)")
    parser.add_argument("--duration", type=float, default=10, help="seconds per write phase (default 10)")
    parser.add_argument("--rounds", type=int, default=2, help="fan-out phases per server (default 2)")
    parser.add_argument("--connections", type=int, default=4, help="writer keep-alive connections (default 4)")
    parser.add_argument("--workers", type=int, default=1, help="kubedash worker processes (default 1)")
    parser.add_argument("--old", default=None,
                        help="also run kubedash at this git ref (extracted with git archive) in the same rounds")
    parser.add_argument("--profile", type=Path, default=None,
                        help="after the rounds, py-spy (--gil) kubedash for 10 s under the same fan-out; raw stacks here")
    add_backend_arguments(parser)
    args = parser.parse_args()
    args.namespaces, args.per_ns, args.kinds = 1, 10, ["Lease"]
    fd_limit = raise_fd_limit()
    print(f"kubedash fan-out vs a bare asyncio server  {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}")
    print(f"machine: {machine()}; kubedash on {backend_name(args.database, args.redis)}, {args.workers} worker(s); "
          f"fd limit {fd_limit}")
    print(f"{args.watchers} watchers of one namespace's Leases x {args.rate:g} Lease writes/s = "
          f"{args.watchers * args.rate:,.0f} deliveries/s; {args.duration:g} s phases, {args.rounds} rounds")

    work = Path(tempfile.mkdtemp(prefix="kubedash-fanout-"))
    (work / "data").mkdir()
    kube = BenchServer(work / "data", workers=args.workers, database=args.database, redis=args.redis)
    bare = old = None
    children: list[Child] = []
    try:
        kube.start()
        kb = Bench(args, kube, work)
        kb.seed()
        kb.write_phase(args.rate, 2)   # warm up every write path
        servers = [("kubedash", kb)]
        if args.old:
            (work / "old").mkdir()
            (work / "data-old").mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.old], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(work / "old")], input=archive.stdout, check=True)
            old = BenchServer(work / "data-old", workers=args.workers, database=args.database, redis=args.redis,
                              root=work / "old")
            old.start()
            ob = Bench(args, old, work)
            ob.phase_no = 2000
            ob.seed()
            ob.write_phase(args.rate, 2)
            servers.append((f"old {args.old}", ob))
        # The event line's size: kubedash's stored object after a patch (what its watchers get).
        path = KINDS["Lease"][1].format(ns=kb.ns[0]) + "/obj-0"
        status, answer = request(kube.port, "PATCH", path, orjson.dumps({"metadata": {"labels": {"bench/seq": "1"}}}),
                                 {"Authorization": f"Bearer {kube.token}",
                                  "Content-Type": "application/merge-patch+json"})
        assert status == 200, answer[:300]
        bare = BareServer(len(answer))
        bare.start()
        bb = Bench(args, bare, work)
        bb.phase_no = 1000   # (its records' file names and created names apart from kubedash's)
        servers.append(("bare", bb))
        rows: dict[str, list[dict]] = {name: [] for name, _ in servers}
        print(f"kubedash pid {kube.proc.pid} port {kube.port}; bare pid {bare.proc.pid} port {bare.port}; "
              f"event object {len(answer)} bytes\n")

        ceilings = {}
        for name, bench in servers:
            ceilings[name] = write_stats(bench.write_phase(args.rate, args.duration), args.rate)
            print(f"ceiling, 0 watchers: {name:<8} {ceilings[name]['rate']:.1f} writes/s, "
                  f"write p99 {fmt(ceilings[name]['p99_ms'])} ms (load {open('/proc/loadavg').read().split()[0]})")

        plan = [{"kind": "Lease", "ns": kb.ns[0], "path": KINDS["Lease"][1].format(ns=kb.ns[0])}] * args.watchers
        opened = {}
        for name, bench in servers:
            child, opened[name] = bench.open_watchers(plan, 0 if bench is bb else bench.current_rv())
            children.append(child)
            print(f"{name}: {opened[name]['ok']} watchers open ({opened[name]['failed']} failed) "
                  f"in {opened[name]['seconds']:.1f} s")
        time.sleep(2)

        print(f"\n{'phase':<14} {'delivered/expected':>17} {'missing':>7} {'dupes':>5} {'order':>5} {'writes/s':>8} "
              f"{'x ceil':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'server':>7} {'client':>7} {'writer':>7} "
              f"{'other':>7} {'load':>5} {'µs/ev':>6} {'closed':>6} {'unknown':>7}")
        for r in range(args.rounds):
            for (name, bench), child in zip(servers, children):
                d = fan_phase(bench, child, plan, args.rate, args.duration, ceilings[name])
                rows[name].append(d)
                show(f"{name} {r + 1}", d)
        if args.profile:
            print(f"\npy-spy on kubedash for 10 s under the same fan-out (raw stacks: {args.profile}) ...")
            print(kb.profile(args.profile, args.rate, children[0]))
            kb.drain(children[0], 10 ** 12, limit=10)
    finally:
        for child in children:
            child.close()
        if bare is not None:
            bare.stop()
        if old is not None:
            old.stop()
        kube.stop()
        shutil.rmtree(work, ignore_errors=True)

    k, b = rows["kubedash"], rows["bare"]
    k99, b99 = statistics.median(d["p99_ms"] for d in k), statistics.median(d["p99_ms"] for d in b)
    ratios = [dk["p99_ms"] / db["p99_ms"] for dk, db in zip(k, b)]
    complete = all(d["missing"] == 0 and d["dupes"] == 0 and d["out_of_order"] == 0 and d["closed"] == 0 for d in k)
    kx = statistics.median(d["x_ceiling"] for d in k)
    print(f"\nmedians: kubedash p99 {fmt(k99)} ms, bare p99 {fmt(b99)} ms; per round {', '.join(f'{x:.2f}x' for x in ratios)}")
    cpu = {name: statistics.median(d["us_per_event"] for d in ds) for name, ds in rows.items()}
    print("server CPU per delivered event (median): " + ", ".join(f"{name} {us:.2f} µs" for name, us in cpu.items()))
    if args.old:
        o = rows[f"old {args.old}"]
        o99 = statistics.median(d["p99_ms"] for d in o)
        print(f"old {args.old}: p99 {fmt(o99)} ms ({o99 / b99:.2f}x bare), writes/s "
              f"{statistics.median(d['x_ceiling'] for d in o):.2f}x its ceiling; CPU per event "
              f"{cpu['kubedash'] / cpu[f'old {args.old}']:.2f}x old's")
    missed = print_targets([
        ("every event delivered once, in order (kubedash)",
         f"{sum(d['delivered'] for d in k)}/{sum(d['expected'] for d in k)}", complete),
        ("bare server delivered (reference)", f"{sum(d['delivered'] for d in b)}/{sum(d['expected'] for d in b)}", None),
        (f"kubedash writes/s x its ceiling >= {MIN_WRITER_RATIO}", f"{kx:.2f}x", kx >= MIN_WRITER_RATIO),
        ("bare writes/s x its ceiling (reference)", f"{statistics.median(d['x_ceiling'] for d in b):.2f}x", None),
        (f"delivery p99 kubedash / bare <= {MAX_P99_RATIO:g}x (median)", f"{k99 / b99:.2f}x", k99 / b99 <= MAX_P99_RATIO),
    ], 50, 14)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

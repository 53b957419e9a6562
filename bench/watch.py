"""Watch fan-out benchmark (issues 3 and 10): many watchers on `manage.py serve` under writes.

    .venv/bin/python bench/watch.py [--watchers 1000] [--rate 200] [--duration 20] [--quick]
                                    [--namespaces 10] [--cluster-share 0.5] [--no-max]
                                    [--workers 1] [--profile /tmp/spy.txt] [--strict]

    # issue 10's second mix: 1,000 watchers of one namespace (each write reaches a third of them)
    .venv/bin/python bench/watch.py --no-max --namespaces 1 --cluster-share 0

Three processes besides the server, so the server's own CPU is what is measured:
  * this one (orchestrator): starts a throw-away server, seeds objects, runs the phases,
    reads the server's RSS and CPU from /proc, matches events to writes and reports;
  * a writer (`watch.py _writer`): merge-patches of labels/spec on pre-created Leases,
    Endpoints and Jobs plus some creates and deletes, round-robin over the three kinds,
    paced open-loop at --rate writes/s over a few keep-alive connections (or as fast as
    they go for the "max" phases); it records time.time() at send and at response, and the
    resourceVersion of each answer;
  * a watcher client (`watch.py _watchers`): one asyncio process holding every watch
    stream as a raw asyncio.Protocol (HTTP/1.1 GET, chunked decoding, no JSON parsing on
    the hot path), spread over the three kinds, cluster-wide and namespaced; it records
    time.time() at arrival and the resourceVersion of each event.
Writer and watchers run on the same machine, so their time.time() clocks are the same.

Phases:
  A  ceiling: the paced write load with 0 watchers (writes/s, write latency);
  A' max write rate with 0 watchers (closed loop);
  M  RSS of the server before and after opening the watchers (idle), per watcher;
  C  the paced write load with the watchers open: delivery latency, completeness, writes/s;
  P0 (--profile) py-spy on the server under the paced writes alone (after A');
  P  (--profile) py-spy on the server under the same fan-out load as C;
  D  max write rate with the watchers open (fan-out under overload).
Delivery latency is the event's arrival at a watcher minus the write's HTTP response time
(it can be negative: the hub may push an event before the writer has read its answer).

Traffic goes only to 127.0.0.1, and every load phase is bounded in time.
"""
from __future__ import annotations

import argparse
import asyncio
import http.client
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (BenchServer, add_backend_arguments, backend_name, categorise, find_pyspy,  # noqa: E402
                    host_busy_seconds, machine, pct, print_targets, proc_cpu_seconds, read_collapsed, request)

# Targets (issue 3).
DELIVERY_MAX_P99_MS = 100.0
MAX_KB_PER_WATCHER = 50.0
SUSTAIN_MIN_SHARE = 0.95     # the fan-out run must reach this share of the requested write rate

KINDS = {  # kind: (collection path, namespaced path)
    "Lease": ("/apis/coordination.k8s.io/v1/leases", "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"),
    "Endpoints": ("/api/v1/endpoints", "/api/v1/namespaces/{ns}/endpoints"),
    "Job": ("/apis/batch/v1/jobs", "/apis/batch/v1/namespaces/{ns}/jobs"),
}
KIND_ORDER = ("Lease", "Endpoints", "Job")
RV_KEY = b'"resourceVersion":"'


def namespaces(n: int) -> list[str]:
    return [f"bench-w{i}" for i in range(n)]


def raise_fd_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit (children, e.g. the server, inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def proc_status(pid: int, key: str) -> int:
    """A number from /proc/<pid>/status (VmRSS is in KiB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def rss_kb(pid: int) -> int:
    return proc_status(pid, "VmRSS")


def serving_total(server, field_of) -> int:
    """A /proc figure summed over the processes that serve (the workers, not the supervisor)."""
    return sum(field_of(p) for p in server.serving_pids())


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


# ---------------------------------------------------------------------------------------------
# Object bodies


def lease(name: str, ns: str, seq: int) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": ns, "labels": {"bench/seq": str(seq)}},
            "spec": {"holderIdentity": f"node-{seq % 7}", "leaseDurationSeconds": 40,
                     "renewTime": micro_time()}}


def endpoints(name: str, ns: str, seq: int) -> dict:
    return {"apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": name, "namespace": ns, "labels": {"bench/seq": str(seq)}},
            "subsets": [{"addresses": [{"ip": f"10.1.{seq // 250 % 250}.{seq % 250 + 1}"}],
                         "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]}


def job(name: str, ns: str, seq: int) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": {"bench/seq": str(seq)}},
            "spec": {"parallelism": 1, "backoffLimit": 2, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "work", "image": "busybox:1.36", "command": ["sh", "-c", "true"]}]}}}}


BODIES = {"Lease": lease, "Endpoints": endpoints, "Job": job}


def micro_time() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def patch_body(kind: str, seq: int) -> dict:
    """A merge patch that always changes the object (a fresh label), plus a spec field."""
    labels = {"metadata": {"labels": {"bench/seq": str(seq)}}}
    if kind == "Lease":
        return {**labels, "spec": {"renewTime": micro_time(), "holderIdentity": f"node-{seq % 7}"}}
    if kind == "Endpoints":
        return {**labels, "subsets": endpoints("", "", seq)["subsets"]}
    return {**labels, "spec": {"parallelism": seq % 5 + 1}}


# ---------------------------------------------------------------------------------------------
# Writer process


class Plan:
    """Which write comes i-th: kinds round-robin (cfg["kinds"], default all three); per kind 8
    patches, 1 create, 1 delete in 10."""

    def __init__(self, cfg: dict):
        self.kinds = tuple(cfg.get("kinds") or KIND_ORDER)
        self.ns = cfg["namespaces"]
        self.per_ns = cfg["per_ns"]
        self.tag = cfg["tag"]
        self.created: dict[str, list[tuple[str, str]]] = {k: [] for k in KIND_ORDER}  # ready to delete
        self.lock = threading.Lock()

    def op(self, i: int) -> tuple[str, str, str, str, dict | None]:
        """(op, kind, namespace, name, body) of write i."""
        kind = self.kinds[i % len(self.kinds)]
        j = i // len(self.kinds)
        ns = self.ns[(j * 7 + i) % len(self.ns)]
        slot = j % 10
        if slot == 0:
            return "create", kind, ns, f"{self.tag}-{i}", BODIES[kind](f"{self.tag}-{i}", ns, i)
        if slot == 5:
            with self.lock:
                if self.created[kind]:
                    ns, name = self.created[kind].pop(0)
                    return "delete", kind, ns, name, None
        return "patch", kind, ns, f"obj-{(j // 10) % self.per_ns}", patch_body(kind, i)

    def done(self, op: str, kind: str, ns: str, name: str, status: int) -> None:
        if op == "create" and status == 201:
            with self.lock:
                self.created[kind].append((ns, name))


def writer_main(cfg: dict) -> None:
    """Run one write phase; write the records to cfg["out"] as JSON."""
    plan = Plan(cfg)
    rate, duration, port = cfg["rate"], cfg["duration"], cfg["port"]
    auth = {"Authorization": f"Bearer {cfg['token']}"}
    counter = iter(range(10 ** 9))
    counter_lock = threading.Lock()
    records: list[list] = []
    t0 = time.monotonic() + 0.2
    end = t0 + duration

    def work() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        out = []
        while True:
            with counter_lock:
                i = next(counter)
            if rate:
                due = t0 + i / rate
                # Open loop, but bounded in time: a server that falls behind gets no more than
                # the phase's duration (plus one write in flight per connection).
                if due >= end or time.monotonic() >= end:
                    break
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            else:
                due = time.monotonic()
                if due >= end:
                    break
            op, kind, ns, name, body = plan.op(i)
            collection = KINDS[kind][1].format(ns=ns)
            if op == "create":
                method, path, ctype = "POST", collection, "application/json"
            elif op == "patch":
                method, path, ctype = "PATCH", f"{collection}/{name}", "application/merge-patch+json"
            else:
                method, path, ctype = "DELETE", f"{collection}/{name}", None
            headers = dict(auth)
            if ctype:
                headers["Content-Type"] = ctype
            data = orjson.dumps(body) if body is not None else None
            lateness = time.monotonic() - due
            sent = time.time()
            try:
                status, answer = request(port, method, path, data, headers, conn)
            except (OSError, http.client.HTTPException):
                status, answer = 0, b""
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            got = time.time()
            rv = 0
            if op != "delete" and 200 <= status < 300:
                rv = int(orjson.loads(answer)["metadata"]["resourceVersion"])
            plan.done(op, kind, ns, name, status)
            out.append([i, op, kind, ns, name, sent, got, status, rv, lateness])
        conn.close()
        records.extend(out)

    threads = [threading.Thread(target=work) for _ in range(cfg["connections"])]
    started = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    records.sort()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    Path(cfg["out"]).write_bytes(orjson.dumps({
        "started": started, "records": records, "cpu": usage.ru_utime + usage.ru_stime}))


# ---------------------------------------------------------------------------------------------
# Watcher client process


class WatchStream(asyncio.Protocol):
    """One watch: HTTP/1.1 GET, then chunked, newline-delimited events; records (rv, arrival)."""

    __slots__ = ("request", "transport", "ready", "head", "raw", "need", "skip", "partial",
                 "rvs", "times", "deleted", "closed", "status", "others")

    def __init__(self, request_bytes: bytes, ready: asyncio.Future, deleted: dict):
        self.request = request_bytes
        self.ready = ready
        self.head = b""            # response head until the blank line
        self.raw = b""             # undecoded chunked bytes
        self.need = 0              # payload bytes left in the current chunk
        self.skip = 0              # CRLF bytes left after it
        self.partial = b""         # an event line cut by a chunk or read boundary
        self.rvs = array("q")
        self.times = array("d")
        self.deleted = deleted     # rv -> "ns/name" of DELETED events (shared by all streams)
        self.closed = False
        self.status = 0
        self.others = 0            # BOOKMARK / ERROR lines

    def connection_made(self, transport):
        self.transport = transport
        transport.write(self.request)

    def connection_lost(self, exc):
        self.closed = True
        if not self.ready.done():
            self.ready.set_result(False)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        if self.ready is not None and not self.ready.done():
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            self.status = int(self.head[9:12])
            data, self.head = self.head[end + 4:], b""
            self.ready.set_result(self.status == 200)
        raw = self.raw + data if self.raw else data
        pos, size = 0, len(raw)
        payload = []
        while pos < size:
            if self.skip:
                take = min(self.skip, size - pos)
                self.skip -= take
                pos += take
                continue
            if self.need:
                take = min(self.need, size - pos)
                payload.append(raw[pos:pos + take])
                self.need -= take
                pos += take
                if not self.need:
                    self.skip = 2
                continue
            eol = raw.find(b"\r\n", pos)
            if eol < 0:
                break
            n = int(raw[pos:eol].split(b";", 1)[0], 16)
            pos = eol + 2
            if n == 0:  # the server ended the stream
                self.closed = True
                break
            self.need = n
        self.raw = raw[pos:] if pos < size else b""
        if payload:
            self.lines(b"".join(payload), now)

    def lines(self, text: bytes, now: float) -> None:
        if self.partial:
            text, self.partial = self.partial + text, b""
        start = 0
        while True:
            nl = text.find(b"\n", start)
            if nl < 0:
                self.partial = text[start:]
                return
            i = text.find(RV_KEY, start, nl)
            if i < 0 or text.startswith(b'{"type":"BOOKMARK"', start) or text.startswith(b'{"type":"ERROR"', start):
                self.others += 1
            else:
                i += len(RV_KEY)
                rv = int(text[i:text.index(b'"', i)])
                self.rvs.append(rv)
                self.times.append(now)
                if text.startswith(b'{"type":"DELETED"', start) and rv not in self.deleted:
                    meta = orjson.loads(text[start:nl])["object"]["metadata"]
                    self.deleted[rv] = f"{meta.get('namespace', '')}/{meta['name']}"
            start = nl + 1


async def watchers_async(cfg: dict) -> None:
    loop = asyncio.get_running_loop()
    port, token = cfg["port"], cfg["token"]
    deleted: dict[int, str] = {}
    streams: list[WatchStream] = []
    gate = asyncio.Semaphore(cfg.get("connect_concurrency", 50))
    lag: list[float] = []

    async def open_one(path: str) -> WatchStream:
        req = (f"GET {path}?watch=true&resourceVersion={cfg['rv']} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
               f"Authorization: Bearer {token}\r\nAccept: application/json\r\nUser-Agent: kubedash-bench\r\n\r\n"
               ).encode()
        ready = loop.create_future()
        stream = WatchStream(req, ready, deleted)
        async with gate:
            try:
                await loop.create_connection(lambda: stream, "127.0.0.1", port)
                async with asyncio.timeout(60):
                    await ready
            except (OSError, TimeoutError):
                stream.closed = True
        return stream

    started = time.monotonic()
    streams = await asyncio.gather(*(open_one(w["path"]) for w in cfg["watchers"]))
    failed = sum(1 for s in streams if s.closed or s.status != 200)
    print(f"READY {len(streams) - failed} {failed} {time.monotonic() - started:.2f}", flush=True)

    async def lag_monitor() -> None:
        # How late this process wakes for a 10 ms timer: its own queueing delay, which would
        # inflate the measured delivery latency if it were large.
        while True:
            due = loop.time() + 0.01
            await asyncio.sleep(0.01)
            lag.append(loop.time() - due)

    monitor = loop.create_task(lag_monitor())
    commands: asyncio.Queue = asyncio.Queue()
    threading.Thread(target=lambda: [loop.call_soon_threadsafe(commands.put_nowait, line.strip())
                                     for line in sys.stdin] and None, daemon=True).start()
    marks = [0] * len(streams)   # events already dumped, per stream
    while True:
        cmd = await commands.get()
        if cmd == "count":
            print(f"COUNT {sum(len(s.rvs) for s in streams)} {sum(s.closed for s in streams)}", flush=True)
        elif cmd.startswith("dump "):
            usage = resource.getrusage(resource.RUSAGE_SELF)
            lags = sorted(lag)
            lag.clear()
            data = {"rvs": [s.rvs[m:].tolist() for s, m in zip(streams, marks)],
                    "times": [s.times[m:].tolist() for s, m in zip(streams, marks)],
                    "closed": [i for i, s in enumerate(streams) if s.closed],
                    "others": sum(s.others for s in streams),
                    "deleted": {str(k): v for k, v in deleted.items()},
                    "cpu": usage.ru_utime + usage.ru_stime,
                    "lag_p50_ms": pct(lags, 50) * 1000, "lag_p99_ms": pct(lags, 99) * 1000,
                    "lag_max_ms": (lags[-1] if lags else 0) * 1000}
            marks = [len(s.rvs) for s in streams]
            Path(cmd[5:]).write_bytes(orjson.dumps(data))
            print("DUMPED", flush=True)
        elif cmd in ("quit", ""):
            break
    monitor.cancel()
    for s in streams:
        if not s.closed:
            s.transport.close()


def watchers_main(cfg: dict) -> None:
    raise_fd_limit()
    asyncio.run(watchers_async(cfg))


# ---------------------------------------------------------------------------------------------
# Orchestrator


class Child:
    """A helper process of this script, driven over stdin/stdout lines."""

    def __init__(self, mode: str, cfg: dict, work: Path):
        cfg_path = work / f"{mode}-{time.monotonic_ns()}.json"
        cfg_path.write_bytes(orjson.dumps(cfg))
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), mode, str(cfg_path)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def expect(self, prefix: str) -> list[str]:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise SystemExit(f"helper process ended early (exit {self.proc.wait()})")
            if line.startswith(prefix):
                return line.split()[1:]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


class Bench:
    def __init__(self, args, server: BenchServer, work: Path):
        self.args = args
        self.server = server
        self.work = work
        self.ns = namespaces(args.namespaces)
        self.phase_no = 0

    # -- writes --

    def write_phase(self, rate: float, duration: float, client: Child | None = None) -> dict:
        """Run the writer for one phase; returns its records and the CPU (in cores) used by the
        server, the writer, the watcher client and everything else on the machine."""
        self.phase_no += 1
        out = self.work / f"writes-{self.phase_no}.json"
        cfg = {"port": self.server.port, "token": self.server.token, "rate": rate, "duration": duration,
               "connections": self.args.connections, "namespaces": self.ns, "per_ns": self.args.per_ns,
               "tag": f"p{self.phase_no}", "out": str(out), "kinds": getattr(self.args, "kinds", None)}
        client_pid = client.proc.pid if client else None
        cpu0, wall0, busy0 = self.server.cpu_seconds(), time.monotonic(), host_busy_seconds()
        client0 = proc_cpu_seconds(client_pid) if client_pid else 0.0
        cfg_path = self.work / f"writer-{self.phase_no}.json"
        cfg_path.write_bytes(orjson.dumps(cfg))
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "_writer", str(cfg_path)],
                              timeout=duration + 120)
        wall = time.monotonic() - wall0
        if done.returncode != 0:
            raise SystemExit(f"the writer failed (exit {done.returncode})")
        data = orjson.loads(out.read_bytes())
        data["server_cpu"] = (self.server.cpu_seconds() - cpu0) / wall
        data["writer_cpu"] = data["cpu"] / wall
        data["client_cpu"] = (proc_cpu_seconds(client_pid) - client0) / wall if client_pid else 0.0
        data["other_cpu"] = max(0.0, (host_busy_seconds() - busy0) / wall - data["server_cpu"]
                                - data["writer_cpu"] - data["client_cpu"])
        data["duration"] = duration
        return data

    # -- seeding --

    def seed(self) -> None:
        headers = {"Authorization": f"Bearer {self.server.token}", "Content-Type": "application/json"}
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
        try:
            for kind in KIND_ORDER:
                for ns in self.ns:
                    for k in range(self.args.per_ns):
                        body = orjson.dumps(BODIES[kind](f"obj-{k}", ns, 0))
                        status, answer = request(self.server.port, "POST", KINDS[kind][1].format(ns=ns), body,
                                                 headers, conn)
                        if status != 201:
                            raise SystemExit(f"seeding {kind} {ns}/obj-{k}: {status} {answer[:300]!r}")
        finally:
            conn.close()

    def current_rv(self) -> int:
        status, answer = request(self.server.port, "GET", KINDS["Lease"][0] + "?limit=1",
                                 headers={"Authorization": f"Bearer {self.server.token}"})
        return int(orjson.loads(answer)["metadata"]["resourceVersion"])

    # -- watchers --

    def watcher_plan(self) -> list[dict]:
        """Watcher j: kind j%3; a --cluster-share of each kind's watchers are cluster-wide, the
        rest spread evenly over the namespaces."""
        out = []
        per_kind = Counter()
        for j in range(self.args.watchers):
            kind = KIND_ORDER[j % 3]
            n = per_kind[kind]
            per_kind[kind] += 1
            # Spread cluster-wide ones evenly: watcher n of a kind is cluster-wide when the
            # running share of cluster-wide watchers falls below the wanted share.
            cluster = int((n + 1) * self.args.cluster_share) > int(n * self.args.cluster_share)
            if cluster:
                out.append({"kind": kind, "ns": None, "path": KINDS[kind][0]})
            else:
                ns = self.ns[(n - int(n * self.args.cluster_share)) % len(self.ns)]
                out.append({"kind": kind, "ns": ns, "path": KINDS[kind][1].format(ns=ns)})
        return out

    def open_watchers(self, plan: list[dict], rv: int) -> tuple[Child, dict]:
        child = Child("_watchers", {"port": self.server.port, "token": self.server.token, "rv": rv,
                                    "watchers": plan}, self.work)
        ok, failed, seconds = child.expect("READY")
        return child, {"ok": int(ok), "failed": int(failed), "seconds": float(seconds)}

    def drain(self, child: Child, expected: int, limit: float = 20.0) -> float:
        """Wait until the watchers have everything (or stop receiving); returns the seconds waited."""
        started = time.monotonic()
        last, still = -1, time.monotonic()
        while time.monotonic() - started < limit:
            child.send("count")
            got = int(child.expect("COUNT")[0])
            if got >= expected:
                break
            if got != last:
                last, still = got, time.monotonic()
            elif time.monotonic() - still > 2.0:
                break
            time.sleep(0.1)
        return time.monotonic() - started

    def profile(self, out: Path, rate: float, child: Child | None = None, seconds: int = 10) -> str:
        """Sample the server with py-spy while the writer runs at `rate` (with the watchers, if any).

        --gil samples only the thread holding the GIL: Python CPU time, which is what limits a
        one-process server. (Walking every thread instead costs py-spy ~0.3 s per sample once
        each watch pins a thread, which stalls the server it measures.)"""
        pyspy = find_pyspy()
        if pyspy is None:
            return "py-spy not found: `.venv/bin/pip install py-spy` to profile"
        holder: dict = {}
        load = threading.Thread(target=lambda: holder.update(w=self.write_phase(rate, seconds + 3, child)))
        load.start()
        time.sleep(1.5)
        try:
            spy = subprocess.run([pyspy, "record", "--subprocesses", "--pid", str(self.server.proc.pid), "--duration", str(seconds),
                                  "--rate", str(PROFILE_HZ), "--gil", "--nonblocking", "--format", "raw",
                                  "--output", str(out)], capture_output=True, text=True, timeout=seconds + 120)
        except subprocess.TimeoutExpired:
            spy = None
        load.join()
        if spy is None or spy.returncode != 0 or not out.exists():
            return f"py-spy failed: {spy.stderr.strip()[-500:] if spy else 'timed out'}"
        w = write_stats(holder["w"], rate)
        return (f"(during it: {w['rate']:.0f} writes/s, server CPU {w['server_cpu']:.2f} cores, "
                f"other load {w['other_cpu']:.2f} cores)\n" + summarise_profile(out, seconds))

    def dump(self, child: Child) -> dict:
        self.phase_no += 1
        path = self.work / f"events-{self.phase_no}.json"
        child.send(f"dump {path}")
        child.expect("DUMPED")
        return orjson.loads(path.read_bytes())


def write_stats(data: dict, requested: float | None) -> dict:
    recs = data["records"]
    ok = [r for r in recs if 200 <= r[7] < 300]
    lat = sorted((r[6] - r[5]) * 1000 for r in ok)
    # Completions over the phase: a server that keeps up finishes within the phase's duration.
    span = max(data["duration"], max(r[6] for r in recs) - min(r[5] for r in recs)) if recs else 1.0
    return {"writes": len(recs), "ok": len(ok), "failed": len(recs) - len(ok),
            "statuses": dict(Counter(r[7] for r in recs if not 200 <= r[7] < 300)),
            "rate": len(ok) / max(span, 1e-9), "requested": requested,
            "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "max_ms": lat[-1] if lat else float("nan"),
            "late_p99_ms": pct(sorted(r[9] * 1000 for r in recs), 99),
            "server_cpu": data["server_cpu"], "writer_cpu": data["writer_cpu"],
            "client_cpu": data["client_cpu"], "other_cpu": data["other_cpu"]}


def expected_events(writes: dict, plan: list[dict]) -> int:
    """How many events the watchers must receive for these writes (kind, and namespace if set)."""
    by_scope: Counter = Counter()
    for r in writes["records"]:
        if 200 <= r[7] < 300:
            by_scope[(r[2], None)] += 1
            by_scope[(r[2], r[3])] += 1
    return sum(by_scope[(w["kind"], w["ns"])] for w in plan)


def delivery_stats(writes: dict, events: dict, plan: list[dict], wall: float) -> dict:
    """Match each event to its write (by resourceVersion; deletes by key) and check completeness."""
    recs = [r for r in writes["records"] if 200 <= r[7] < 300]
    by_rv = {r[8]: r for r in recs if r[8]}
    deletes = {(r[2], f"{r[3]}/{r[4]}"): r for r in recs if r[1] == "delete"}
    kind_of_rv: dict[int, str] = {}
    for j, rvs in enumerate(events["rvs"]):
        for rv in rvs:
            kind_of_rv.setdefault(rv, plan[j]["kind"])
    for rv_text, key in events["deleted"].items():
        rec = deletes.get((kind_of_rv.get(int(rv_text), ""), key))
        if rec is not None:
            by_rv[int(rv_text)] = rec
    # What each watcher must see: the writes of its kind (and namespace).
    wanted_by_scope: dict[tuple[str, str | None], set] = defaultdict(set)
    for r in recs:
        wanted_by_scope[(r[2], None)].add(id(r))
        wanted_by_scope[(r[2], r[3])].add(id(r))
    rec_by_id = {id(r): r for r in recs}
    missing_samples: Counter = Counter()
    latencies: list[float] = []
    from_send: list[float] = []
    last_arrival: dict[int, float] = {}
    expected = delivered = unknown = dupes = out_of_order = 0
    for j, (rvs, times) in enumerate(zip(events["rvs"], events["times"])):
        w = plan[j]
        expected += len(wanted_by_scope[(w["kind"], w["ns"])])
        seen = set()
        prev = 0
        for rv, t in zip(rvs, times):
            if rv in seen:
                dupes += 1
                continue
            seen.add(rv)
            if rv <= prev:
                out_of_order += 1
            prev = rv
            rec = by_rv.get(rv)
            if rec is None or rec[2] != w["kind"] or (w["ns"] is not None and rec[3] != w["ns"]):
                unknown += 1
                continue
            delivered += 1
            latencies.append((t - rec[6]) * 1000)
            from_send.append((t - rec[5]) * 1000)
            if t > last_arrival.get(rv, 0):
                last_arrival[rv] = t
        got = {id(by_rv[rv]) for rv in seen if rv in by_rv}
        for rid in wanted_by_scope[(w["kind"], w["ns"])] - got:
            r = rec_by_id[rid]
            missing_samples[(r[1], r[2], f"{r[3]}/{r[4]}", r[8], round(r[6] - writes["started"], 3))] += 1
    latencies.sort()
    from_send.sort()
    fanout_done = sorted((t - by_rv[rv][6]) * 1000 for rv, t in last_arrival.items())
    return {"expected": expected, "delivered": delivered, "missing": expected - delivered, "unknown": unknown,
            "dupes": dupes, "out_of_order": out_of_order, "closed": len(events["closed"]),
            "p50_ms": pct(latencies, 50), "p90_ms": pct(latencies, 90), "p99_ms": pct(latencies, 99),
            "max_ms": latencies[-1] if latencies else float("nan"),
            "send_p50_ms": pct(from_send, 50), "send_p99_ms": pct(from_send, 99),
            "last_p50_ms": pct(fanout_done, 50), "last_p99_ms": pct(fanout_done, 99),
            "per_second": delivered / max(wall, 1e-9),
            "fanout": delivered / max(len(last_arrival), 1),
            "missing_samples": missing_samples.most_common(8),
            "client_lag_p99_ms": events["lag_p99_ms"], "client_lag_max_ms": events["lag_max_ms"]}


# ---------------------------------------------------------------------------------------------
# Profiling: py-spy on the server during the fan-out

PROFILE_HZ = 100
CATEGORIES = [  # (label, substrings of a frame), first match from the leaf up wins
    ("watch hub (kube/hub.py, notify.py; server/streams.py)", ("kube/hub.py", "kube/notify.py", "server/streams.py")),
    ("watch stream generator (kube/watch_views.py)", ("kube/watch_views.py",)),
    ("SQLite / Django ORM", ("sqlite3", "django/db/")),
    ("write path (store, views, validation, schema, patch)",
     ("kube/store.py", "kube/views.py", "kube/validation.py", "kube/schema.py", "kube/patch.py",
      "kube/meta.py", "dashboard/coordination/", "dashboard/core/", "dashboard/batch/")),
    ("JSON (orjson/json)", ("orjson", "json/")),
    ("DRF + auth", ("rest_framework/", "web/auth.py", "web/models.py")),
    ("Django ASGI handler (request, streaming response)", ("django/core/handlers/asgi.py",)),
    ("Django HTTP/middleware/urls/signals", ("django/",)),
    ("asgiref (sync_to_async, thread hop)", ("asgiref/",)),
    ("Daphne (ASGI server)", ("daphne/",)),
    ("uvicorn (ASGI server, if swapped in)", ("uvicorn/", "httptools", "uvloop")),
    ("Twisted HTTP/TCP", ("twisted/",)),
    ("asyncio event loop", ("asyncio/", "selectors.py")),
    ("thread pools (submit, thread start/join, waits)", ("concurrent/futures", "threading.py", "queue.py")),
]


def summarise_profile(raw: Path, seconds: float, top: int = 15, categories=None) -> str:
    by_cat: Counter = Counter()
    inclusive: Counter = Counter()
    leaf: Counter = Counter()
    threads: Counter = Counter()
    total = 0
    for frames, n in read_collapsed(raw):
        total += n
        threads[frames[0].split(" ")[0] if frames else "?"] += n
        by_cat[categorise(frames, categories or CATEGORIES)] += n
        leaf[frames[-1]] += n
        for frame in set(frames):
            inclusive[frame] += n
    if not total:
        return "py-spy recorded no samples"
    lines = [f"py-spy --gil: {total} samples over {seconds:g} s at {PROFILE_HZ} Hz: a thread ran Python "
             f"code {100 * total / PROFILE_HZ / seconds:.0f}% of the time", "", "Self time by layer:"]
    lines += [f"  {100 * n / total:5.1f}%  {label}" for label, n in by_cat.most_common()]
    lines += ["", "Hottest leaf functions:"]
    lines += [f"  {100 * n / total:5.1f}%  {frame}" for frame, n in leaf.most_common(top)]
    lines += ["", "Inclusive time, top kubedash / Django / asgiref / Daphne / Twisted frames:"]
    wanted = ("kube/", "follow/", "django/", "asgiref/", "daphne/", "twisted/")
    shown = [f"  {100 * n / total:5.1f}%  {f}" for f, n in inclusive.most_common() if any(w in f for w in wanted)]
    return "\n".join(lines + shown[:top * 2])


# ---------------------------------------------------------------------------------------------
# Reporting


def fmt(v: float, digits: int = 1) -> str:
    return "nan" if v != v else f"{v:.{digits}f}"


def print_writes(name: str, s: dict, ceiling: dict | None = None) -> None:
    ratio = f"{s['rate'] / ceiling['rate']:.2f}" if ceiling and ceiling["rate"] else "1.00" if ceiling is None else "-"
    print(f"{name:<34} {s['rate']:>8.1f} {fmt(s['p50_ms'], 2):>8} {fmt(s['p99_ms'], 2):>8} {fmt(s['max_ms']):>8} "
          f"{s['failed']:>6} {ratio:>8} {s['server_cpu']:>6.2f}c {s['writer_cpu']:>6.2f}c "
          f"{s['client_cpu']:>6.2f}c {s['other_cpu']:>6.2f}c")


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 3 and sys.argv[1] in ("_writer", "_watchers"):
        cfg = orjson.loads(Path(sys.argv[2]).read_bytes())
        (writer_main if sys.argv[1] == "_writer" else watchers_main)(cfg)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--watchers", type=int, default=None, help="concurrent watch streams (default 1000)")
    parser.add_argument("--rate", type=float, default=200, help="paced writes per second (default 200)")
    parser.add_argument("--duration", type=float, default=None, help="seconds per paced phase (default 20)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 100 watchers, 4 s phases")
    parser.add_argument("--max-duration", type=float, default=None,
                        help="seconds per max-rate phase (default: half of --duration)")
    parser.add_argument("--connections", type=int, default=4, help="writer keep-alive connections (default 4)")
    parser.add_argument("--namespaces", type=int, default=10, help="namespaces written and watched (default 10)")
    parser.add_argument("--per-ns", type=int, default=10, help="pre-created objects per kind and namespace")
    parser.add_argument("--cluster-share", type=float, default=0.5,
                        help="share of watchers that watch a kind cluster-wide; the rest watch one "
                             "namespace (default 0.5)")
    parser.add_argument("--profile", type=Path, default=None,
                        help="also sample the server with py-spy (--gil) for 10 s under the writes alone "
                             "and 10 s under the fan-out; raw stacks go to STEM-writes.txt / STEM-fanout.txt")
    parser.add_argument("--no-max", action="store_true", help="skip the max-rate phases")
    parser.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    parser.add_argument("--workers", type=int, default=1, help="server worker processes (default 1)")
    add_backend_arguments(parser)
    args = parser.parse_args(argv)
    args.watchers = args.watchers or (100 if args.quick else 1000)
    args.duration = args.duration or (4 if args.quick else 20)
    max_duration = args.max_duration or args.duration / 2
    fd_limit = raise_fd_limit()

    print(f"kubedash watch fan-out benchmark  {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}")
    print(f"machine: {machine()}; database: {backend_name(args.database, args.redis)}, {args.workers} worker(s)")
    print(f"{args.watchers} watchers ({args.cluster_share:.0%} cluster-wide, the rest over {args.namespaces} "
          f"namespaces), writes paced at {args.rate:g}/s for {args.duration:g} s over {args.connections} "
          f"connections, 3 kinds; fd limit {fd_limit}\n")

    work = Path(tempfile.mkdtemp(prefix="kubedash-watchbench-"))
    server = BenchServer(work / "data", workers=args.workers, database=args.database, redis=args.redis)
    (work / "data").mkdir()
    child: Child | None = None
    results: dict = {}
    try:
        server.start()
        pid = server.proc.pid
        print(f"server: manage.py serve, pid {pid}, http://127.0.0.1:{server.port}  (work dir {work})")
        bench = Bench(args, server, work)
        bench.seed()
        bench.write_phase(args.rate, 2)   # warm up imports and caches on every write path

        print(f"\n{'write phase':<34} {'writes/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} "
              f"{'failed':>6} {'x ceil':>8} {'server':>7} {'writer':>7} {'client':>7} {'other':>7}")
        ceiling = write_stats(bench.write_phase(args.rate, args.duration), args.rate)
        print_writes(f"A  paced {args.rate:g}/s, 0 watchers", ceiling)
        max_ceiling = None
        if not args.no_max:
            max_ceiling = write_stats(bench.write_phase(0, max_duration), None)
            print_writes("A' max rate, 0 watchers", max_ceiling)
        if args.profile:
            path = args.profile.with_name(args.profile.stem + "-writes" + args.profile.suffix)
            print(f"\nP0 py-spy on the server for 10 s under the paced writes, 0 watchers (raw stacks: {path}) ...")
            print(bench.profile(path, args.rate))

        # M: memory of idle watchers
        time.sleep(1)
        def threads(p):
            return proc_status(p, "Threads")

        rss_before, threads_before, fds_before = (serving_total(server, f) for f in (rss_kb, threads, open_fds))
        plan = bench.watcher_plan()
        child, opened = bench.open_watchers(plan, bench.current_rv())
        time.sleep(3)   # let the server finish setting up every stream
        rss_after, threads_after, fds_after = (serving_total(server, f) for f in (rss_kb, threads, open_fds))
        idle_cpu0, idle_wall0 = server.cpu_seconds(), time.monotonic()
        time.sleep(2)
        idle_cpu = (server.cpu_seconds() - idle_cpu0) / (time.monotonic() - idle_wall0)
        per_watcher_kb = (rss_after - rss_before) / max(opened["ok"], 1)
        print(f"\nM  opened {opened['ok']} watchers ({opened['failed']} failed) in {opened['seconds']:.1f} s; "
              f"server RSS {rss_before / 1024:.1f} MiB -> {rss_after / 1024:.1f} MiB = "
              f"{per_watcher_kb:.1f} KiB per watcher; idle server CPU {idle_cpu:.2f} cores")
        print(f"   server threads {threads_before} -> {threads_after}, open fds {fds_before} -> {fds_after}")
        child.send(f"dump {work / 'events-idle.json'}")   # reset the client's counters
        child.expect("DUMPED")

        # C: the fan-out
        client_cpu0 = proc_cpu_seconds(child.proc.pid)
        wall0 = time.monotonic()
        fan = bench.write_phase(args.rate, args.duration, child)
        fan_writes = write_stats(fan, args.rate)
        drained = bench.drain(child, expected_events(fan, plan))
        wall = time.monotonic() - wall0
        client_cpu = (proc_cpu_seconds(child.proc.pid) - client_cpu0) / wall
        rss_active = serving_total(server, rss_kb)
        events = bench.dump(child)
        deliver = delivery_stats(fan, events, plan, wall - drained)
        print_writes(f"C  paced {args.rate:g}/s, {opened['ok']} watchers", fan_writes, ceiling)
        print(f"\nC  delivery: {deliver['delivered']} of {deliver['expected']} events "
              f"({deliver['per_second']:.0f}/s, {deliver['fanout']:.0f} watchers per write), missing "
              f"{deliver['missing']}, duplicates {deliver['dupes']}, out of order {deliver['out_of_order']}, "
              f"unmatched {deliver['unknown']}, streams closed {deliver['closed']}; drained {drained:.1f} s "
              f"after the last write")
        for (op, kind, key, rv, at), n in deliver["missing_samples"]:
            print(f"   missing: {op} {kind} {key} rv {rv} (answered at +{at:.3f} s) at {n} watchers")
        print(f"   latency from the write's response: p50 {fmt(deliver['p50_ms'])} ms, p90 {fmt(deliver['p90_ms'])} ms, "
              f"p99 {fmt(deliver['p99_ms'])} ms, max {fmt(deliver['max_ms'])} ms")
        print(f"   from the write's request:          p50 {fmt(deliver['send_p50_ms'])} ms, "
              f"p99 {fmt(deliver['send_p99_ms'])} ms")
        print(f"   until the last watcher has it:     p50 {fmt(deliver['last_p50_ms'])} ms, "
              f"p99 {fmt(deliver['last_p99_ms'])} ms")
        print(f"   server CPU {fan_writes['server_cpu']:.2f} cores, watcher client CPU {client_cpu:.2f} cores "
              f"(its loop lag p99 {fmt(deliver['client_lag_p99_ms'])} ms, max {fmt(deliver['client_lag_max_ms'])} ms), "
              f"writer CPU {fan_writes['writer_cpu']:.2f} cores; server RSS now {rss_active / 1024:.1f} MiB")

        # What one delivery costs the server: its CPU in C less what the writes cost in A.
        write_cost = ceiling["server_cpu"] / max(ceiling["rate"], 1e-9)          # CPU seconds per write
        fan_cpu = fan_writes["server_cpu"] - write_cost * fan_writes["rate"]
        per_event_us = 1e6 * fan_cpu / max(deliver["per_second"], 1e-9)
        wanted = args.rate * deliver["fanout"]
        print(f"   server CPU per delivered event ~{per_event_us:.0f} us (write cost {write_cost * 1e3:.1f} ms "
              f"CPU each, from A, subtracted): one core fans out ~{1e6 / max(per_event_us, 1e-9):,.0f} events/s; "
              f"{args.rate:g} writes/s x {deliver['fanout']:.0f} watchers needs {wanted:,.0f}/s")
        if args.profile:
            path = args.profile.with_name(args.profile.stem + "-fanout" + args.profile.suffix)
            print(f"\nP  py-spy on the server for 10 s under the same fan-out load (raw stacks: {path}) ...")
            print(bench.profile(path, args.rate, child))
            bench.drain(child, 10 ** 12, limit=10)
            bench.dump(child)

        max_fan = max_deliver = None
        if not args.no_max:
            client_cpu0, wall0 = proc_cpu_seconds(child.proc.pid), time.monotonic()
            data = bench.write_phase(0, max_duration, child)
            max_fan = write_stats(data, None)
            drained = bench.drain(child, 10 ** 12, limit=30)
            wall = time.monotonic() - wall0
            max_client_cpu = (proc_cpu_seconds(child.proc.pid) - client_cpu0) / wall
            max_deliver = delivery_stats(data, bench.dump(child), plan, wall - drained)
            print()
            print_writes(f"D  max rate, {opened['ok']} watchers", max_fan, max_ceiling)
            print(f"D  delivery: {max_deliver['delivered']} of {max_deliver['expected']} events "
                  f"({max_deliver['per_second']:.0f}/s), missing {max_deliver['missing']}, streams closed "
                  f"{max_deliver['closed']}, unmatched {max_deliver['unknown']}; latency p50 {fmt(max_deliver['p50_ms'])} ms, "
                  f"p99 {fmt(max_deliver['p99_ms'])} ms; client CPU {max_client_cpu:.2f} cores")
        results = {"ceiling": ceiling, "max_ceiling": max_ceiling, "fan": fan_writes, "deliver": deliver,
                   "max_fan": max_fan, "max_deliver": max_deliver, "per_watcher_kb": per_watcher_kb,
                   "opened": opened, "client_cpu": client_cpu, "per_event_us": per_event_us}
    finally:
        if child is not None:
            child.close()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    # Summary
    ceiling, fan, deliver = results["ceiling"], results["fan"], results["deliver"]
    complete = deliver["missing"] == 0 and deliver["dupes"] == 0 and deliver["out_of_order"] == 0 \
        and deliver["closed"] == 0 and deliver["unknown"] == 0
    targets = [
        (f"delivery p99 <= {DELIVERY_MAX_P99_MS:.0f} ms", f"{fmt(deliver['p99_ms'])} ms",
         deliver["p99_ms"] <= DELIVERY_MAX_P99_MS),
        ("delivery p50 (reported)", f"{fmt(deliver['p50_ms'])} ms", None),
        ("delivery p99 / write p99 at 0 watchers", f"{deliver['p99_ms'] / ceiling['p99_ms']:.1f}x", None),
        (f"memory per idle watcher < {MAX_KB_PER_WATCHER:.0f} KB", f"{results['per_watcher_kb']:.1f} KiB",
         results["per_watcher_kb"] < MAX_KB_PER_WATCHER),
        (f"writes/s while fanning out >= {SUSTAIN_MIN_SHARE:.0%} of {args.rate:g}", f"{fan['rate']:.1f}/s",
         fan["rate"] >= SUSTAIN_MIN_SHARE * args.rate),
        ("  x ceiling (same load, 0 watchers)", f"{fan['rate'] / ceiling['rate']:.2f}", None),
        ("write p99 while fanning out (reported)", f"{fmt(fan['p99_ms'])} ms ({fan['p99_ms'] / ceiling['p99_ms']:.1f}x)",
         None),
        ("server CPU per delivered event (reported)", f"{results['per_event_us']:.0f} us", None),
        ("every event delivered once, in order", f"{deliver['delivered']}/{deliver['expected']}", complete),
    ]
    if results["max_fan"] and results["max_ceiling"]:
        targets.append(("max writes/s with watchers (reported)",
                        f"{results['max_fan']['rate']:.0f}/s ({results['max_fan']['rate'] / results['max_ceiling']['rate']:.2f}x)",
                        None))
    missed = print_targets(targets, 46, 18)
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())

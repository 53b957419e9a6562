"""Following a cluster: initial sync time and upstream-write -> local-page lag.

Two kubedash servers on this machine: the upstream (a real Kubernetes-compatible API, seeded
with --objects Leases and Endpoints) and the server under test, which follows it as "prod"
(`manage.py follow add`; its maintenance leader runs the informers). Then:

(a) Initial sync: from `follow add` returning until /clusters/prod/... lists every upstream
    object. Ceiling: this client reading the same objects from the upstream in pages of 500
    (what any follower must at least fetch).
(b) Lag: a writer changes upstream Leases at --rate writes/s for --seconds; each write names
    its sequence number in holderIdentity. Measured from just before the write is sent to its
    arrival (1) on a watch through /clusters/prod (the hub: what pages are fed from) and (2) on
    the Leases page's websocket of ?cluster=prod (the rendered row pushed to a browser).
    Ceiling: the same writes' arrival on a watch of the upstream itself.

Usage: .venv/bin/python bench/follow.py [--objects 10000] [--rate 200] [--seconds 20] [--profile]
(--profile: py-spy on the server under test during the initial sync and during (b), by layer.)
Targets (issue 16): sync < 10 s, page lag p99 < 500 ms.
"""
from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import find_pyspy, machine, pct, print_targets, request  # noqa: E402
from pages import Server, log_in  # noqa: E402

PROFILE_CATEGORIES = [  # (label, substrings of a frame), first match from the leaf up wins
    ("SQLite / Django ORM", ("sqlite3", "django/db/")),
    ("JSON (orjson)", ("orjson",)),
    ("kubernetes client + urllib3 + ssl (reading upstream)", ("kubernetes/", "urllib3/", "ssl.py")),
    ("the store's mirror (kube/mirror.py, storage/)", ("kube/mirror.py", "kube/storage/")),
    ("informer (follow/)", ("follow/",)),
    ("watch hub and streams (kube/watch*.py)", ("kube/watch",)),
    ("pages (web/)", ("dashboard/web/",)),
    ("kube API views", ("kube/",)),
    ("Django / Daphne / Twisted / asyncio", ("django/", "daphne/", "twisted/", "asyncio/")),
]

LEASES = "/apis/coordination.k8s.io/v1"
ENDPOINTS = "/api/v1"
HOT_NS, HOT = "hot", 50          # the Leases the writer changes
SEQ = re.compile(r"fw-(\d+)\b")

SEED = """
from django.db import transaction
from dashboard.kube import registry, store
leases = registry.lookup('coordination.k8s.io', 'v1', 'leases')
endpoints = registry.lookup('', 'v1', 'endpoints')
n_leases, n_endpoints = {leases}, {endpoints}
for i in range(n_leases):
    ns = 'hot' if i < {hot} else f'team-{{i % 40}}'
    store.create(leases, ns, {{'metadata': {{'name': f'lease-{{i}}', 'labels': {{'app': f'a{{i % 7}}'}}}},
                               'spec': {{'holderIdentity': f'pod-{{i}}', 'leaseDurationSeconds': 15}}}})
for i in range(n_endpoints):
    store.create(endpoints, f'team-{{i % 40}}', {{'metadata': {{'name': f'svc-{{i}}'}}, 'subsets': [{{
        'addresses': [{{'ip': f'10.{{i // 250 % 250}}.{{i % 250}}.{{k}}'}} for k in range(1, 4)],
        'notReadyAddresses': [{{'ip': f'10.{{i // 250 % 250}}.{{i % 250}}.9'}}],
        'ports': [{{'name': 'http', 'port': 8080, 'protocol': 'TCP'}}]}}]}})
"""


def count(port: int, token: str, path: str) -> int:
    status, body = request(port, "GET", f"{path}?limit=1", headers={"Authorization": f"Bearer {token}"})
    if status != 200:
        return -1
    page = json.loads(body)
    return len(page["items"]) + (page["metadata"].get("remainingItemCount") or 0)


def read_all(port: int, token: str, path: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    token_q, n = "", 0
    while True:
        conn.request("GET", f"{path}?limit=500" + (f"&continue={token_q}" if token_q else ""),
                     headers={"Authorization": f"Bearer {token}"})
        page = json.loads(conn.getresponse().read())
        n += len(page["items"])
        token_q = page["metadata"].get("continue") or ""
        if not token_q:
            conn.close()
            return n


class Watch(threading.Thread):
    """A watch from `rv`, noting when each write's sequence number first arrives."""

    def __init__(self, port: int, token: str, path: str, rv: str):
        super().__init__(daemon=True)
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.conn.request("GET", f"{path}?watch=1&resourceVersion={rv}", headers={"Authorization": f"Bearer {token}"})
        self.response = self.conn.getresponse()
        self.arrivals: dict[int, float] = {}

    def run(self) -> None:
        try:
            for line in self.response:
                now = time.time()
                for seq in SEQ.findall(line.decode(errors="replace")):
                    self.arrivals.setdefault(int(seq), now)
        except (OSError, http.client.HTTPException):
            pass


def writer(port: int, token: str, rate: float, seconds: float) -> dict[int, float]:
    """Paced merge patches of the hot Leases; seq -> when it was sent."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    sent: dict[int, float] = {}
    total = int(rate * seconds)
    start = time.monotonic()
    for seq in range(total):
        due = start + seq / rate
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        body = json.dumps({"spec": {"holderIdentity": f"fw-{seq}"}})
        sent[seq] = time.time()
        conn.request("PATCH", f"{LEASES}/namespaces/{HOT_NS}/leases/lease-{seq % HOT}", body=body,
                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/merge-patch+json"})
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"upstream write failed: {response.status}")
    return sent


async def page_arrivals(port: int, cookie: str, rv: str, stop: asyncio.Event, out: dict) -> None:
    from websockets.asyncio.client import connect

    url = f"ws://127.0.0.1:{port}/ws/live/?view=leases&cluster=prod&rv={rv}"
    async with connect(url, origin=f"http://127.0.0.1:{port}", additional_headers={"Cookie": cookie},
                       max_size=None, open_timeout=30) as ws:
        out["connected"] = True
        while not stop.is_set():
            try:
                message = await asyncio.wait_for(ws.recv(), 0.5)
            except asyncio.TimeoutError:
                continue
            now = time.time()
            for seq in SEQ.findall(message if isinstance(message, str) else message.decode()):
                out.setdefault(int(seq), now)


def lags(sent: dict[int, float], arrived: dict[int, float]) -> tuple[list[float], int]:
    values = sorted(arrived[s] - t for s, t in sent.items() if s in arrived)
    return values, len(sent) - len(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=10000, help="upstream objects: 80%% Leases, 20%% Endpoints")
    parser.add_argument("--rate", type=float, default=200, help="upstream writes per second during (b)")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--workers", type=int, default=1, help="worker processes of the server under test")
    parser.add_argument("--profile", action="store_true", help="py-spy on the server under test during the sync")
    args = parser.parse_args()
    n_endpoints = args.objects // 5
    n_leases = args.objects - n_endpoints

    with tempfile.TemporaryDirectory() as up_dir, tempfile.TemporaryDirectory() as here_dir:
        up = Server(Path(up_dir))
        here = Server(Path(here_dir), workers=args.workers)
        here.env.update(KUBEDASH_MAINTENANCE="1", KUBEDASH_MAINTENANCE_RETRY_PERIOD="0.5",
                        KUBEDASH_LOG_LEVEL="INFO", KUBEDASH_REQUEST_LOG="0")
        try:
            up.prepare()
            t = time.monotonic()
            up.manage("shell", "-c", SEED.format(leases=n_leases, endpoints=n_endpoints, hot=HOT))
            print(f"# {machine()}")
            print(f"# upstream seeded with {n_leases} Leases + {n_endpoints} Endpoints in {time.monotonic() - t:.1f} s")
            up.prepare = lambda: None   # (already done)
            up.start()
            here.start()
            kubeconfig = Path(here_dir) / "prod.kubeconfig"
            up.manage("kubeconfig", "follower", "--role", "viewer", "--server",
                      f"https://127.0.0.1:{up.tls_port}", "--output", str(kubeconfig))

            # (a) initial sync
            t = time.monotonic()
            floor = read_all(up.port, up.token, f"{LEASES}/leases") + read_all(up.port, up.token, f"{ENDPOINTS}/endpoints")
            ceiling = time.monotonic() - t
            assert floor == args.objects, floor
            here.manage("follow", "add", "prod", "--kubeconfig", str(kubeconfig))
            t = time.monotonic()
            spy = None
            if args.profile and find_pyspy():
                raw = Path(here_dir) / "sync.raw"
                spy = subprocess.Popen([find_pyspy(), "record", "--pid", str(here.proc.pid), "--duration", "6",
                                        "--rate", "100", "--gil", "--nonblocking", "--format", "raw",
                                        "--output", str(raw)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            first = None
            while True:
                got = (count(here.port, here.token, f"/clusters/prod{LEASES}/leases"),
                       count(here.port, here.token, f"/clusters/prod{ENDPOINTS}/endpoints"))
                if first is None and max(got) > 0:
                    first = time.monotonic() - t
                if got == (n_leases, n_endpoints):
                    break
                if time.monotonic() - t > 300:
                    raise SystemExit(f"no sync after 300 s: {got}\n{here.log_tail()}")
                time.sleep(0.25)
            sync = time.monotonic() - t
            print("".join(f"#   {line}\n" for line in here.log_tail().splitlines() if "follow prod:" in line), end="")
            print(f"\n(a) initial sync of {args.objects} objects: {sync:.2f} s "
                  f"(ceiling, reading them from upstream: {ceiling:.2f} s; ratio {sync / ceiling:.1f}x); "
                  f"the first objects after {first:.2f} s (the leader starting the follower, the first page)")
            if spy is not None:
                from watch import summarise_profile

                spy.wait(120)
                print("\nThe server under test during the first 6 s of the sync:")
                print(summarise_profile(raw, 6, categories=PROFILE_CATEGORIES) if raw.exists()
                      else f"py-spy failed: {spy.stderr.read().decode()[-500:]}")

            # (b) lag under upstream writes
            rv_up = json.loads(request(up.port, "GET", f"{LEASES}/namespaces/{HOT_NS}/leases?limit=1",
                                       headers={"Authorization": f"Bearer {up.token}"})[1])["metadata"]["resourceVersion"]
            rv_here = json.loads(request(here.port, "GET", f"/clusters/prod{LEASES}/namespaces/{HOT_NS}/leases?limit=1",
                                         headers={"Authorization": f"Bearer {here.token}"})[1])["metadata"]["resourceVersion"]
            direct = Watch(up.port, up.token, f"{LEASES}/namespaces/{HOT_NS}/leases", rv_up)
            followed = Watch(here.port, here.token, f"/clusters/prod{LEASES}/namespaces/{HOT_NS}/leases", rv_here)
            direct.start()
            followed.start()
            cookie = log_in(here.port)
            page: dict = {}
            stop = asyncio.Event()
            loop = asyncio.new_event_loop()
            page_thread = threading.Thread(target=loop.run_until_complete,
                                           args=(page_arrivals(here.port, cookie, rv_here, stop, page),), daemon=True)
            page_thread.start()
            time.sleep(2)
            cpu0 = here.cpu_seconds()
            spy_b = None
            if args.profile and find_pyspy():
                raw_b = Path(here_dir) / "follow.raw"
                spy_b = subprocess.Popen([find_pyspy(), "record", "--pid", str(here.proc.pid), "--duration",
                                          str(int(min(10, args.seconds - 1))), "--rate", "100", "--gil", "--nonblocking",
                                          "--format", "raw", "--output", str(raw_b)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            sent = writer(up.port, up.token, args.rate, args.seconds)
            time.sleep(3)
            cpu = here.cpu_seconds() - cpu0
            loop.call_soon_threadsafe(stop.set)
            page_thread.join(5)
            page.pop("connected", None)
            rows = []
            for label, arrived in (("upstream watch (ceiling)", direct.arrivals),
                                   ("/clusters/prod watch", followed.arrivals),
                                   ("?cluster=prod page push", page)):
                values, missing = lags(sent, arrived)
                rows.append((label, values, missing))
            print(f"\n(b) {len(sent)} upstream writes at {args.rate:g}/s; lag from the write to its arrival (ms):")
            print(f"{'':28} {'p50':>8} {'p99':>8} {'max':>8}  missing")
            for label, values, missing in rows:
                print(f"{label:28} {pct(values, 50) * 1000:8.1f} {pct(values, 99) * 1000:8.1f} "
                      f"{(values[-1] if values else float('nan')) * 1000:8.1f}  {missing}")
            ceiling_p99 = pct(rows[0][1], 99)
            print(f"server under test CPU while following: {cpu / (args.seconds + 3):.2f} cores "
                  f"({cpu * 1e6 / max(1, len(sent)):.0f} µs per upstream write)")
            if spy_b is not None:
                from watch import summarise_profile

                spy_b.wait(120)
                print("\nThe server under test while following the writes:")
                print(summarise_profile(raw_b, min(10, args.seconds - 1), categories=PROFILE_CATEGORIES)
                      if raw_b.exists() else f"py-spy failed: {spy_b.stderr.read().decode()[-500:]}")
            page_values = rows[2][1]
            watch_p99 = pct(rows[1][1], 99)
            print(f"ratio to the ceiling (p99): watch {watch_p99 / ceiling_p99:.1f}x, page {pct(page_values, 99) / ceiling_p99:.1f}x")
            # Pages coalesce pushes (one per 0.25 s per page): each push carries the latest state
            # of the rows that changed, so an older write to a Lease rewritten since is never
            # shown on its own; the page lag counts the writes whose value was pushed.
            missed = print_targets([
                ("initial sync < 10 s", f"{sync:.2f} s", sync < 10),
                ("page lag p99 < 500 ms", f"{pct(page_values, 99) * 1000:.0f} ms",
                 bool(page_values) and pct(page_values, 99) < 0.5),
                ("watch lag p99 (reported)", f"{watch_p99 * 1000:.0f} ms", None),
                ("every write on the followed watch", f"{rows[1][2]} missing", rows[1][2] == 0),
            ], 36, 12)
            return 1 if missed else 0
        finally:
            here.stop()
            up.stop()


if __name__ == "__main__":
    sys.exit(main())

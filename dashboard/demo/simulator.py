"""The demo simulator: a small fake cluster that drives the API over HTTP, as real components do.

- Leader elections: candidates behave like client-go's leaderelection (renew the Lease they
  hold, take over one whose renewTime + leaseDurationSeconds has passed, release it on a
  clean shutdown); holders sometimes crash, so the Lease visibly expires before a takeover.
- Endpoints: an endpoints controller whose pods turn ready / not ready, scale up and down.
- Jobs: a job controller that creates Jobs and reports their pods through /status until
  they complete, fail or get suspended; finished Jobs are deleted after a while.

It is a plain HTTP client with a bearer token (no ORM, no store calls), so it exercises the
same validation, optimistic concurrency and watch fan-out as kubectl does. One thread and
one keep-alive connection: actors are callbacks on a virtual timeline (a heap), and the
loop sleeps until real time catches up with the next one. Every random choice comes from
one seeded RNG in timeline order, so `--seed` replays the same story.

Importable without Django.
"""
from __future__ import annotations

import heapq
import http.client
import json
import random
import ssl
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable
from urllib.parse import quote, urlsplit

from dashboard.coordination.strategy import lease_expiry
from dashboard.kube import formats

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "kubedash-simulator"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
ENDPOINTS = "/api/v1/namespaces/{ns}/endpoints"
JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"

# client-go's defaults (seconds at speed 1): lease 15 s, retry every 2 s (+ up to 20 % jitter).
LEASE_DURATION = 15.0
RETRY_PERIOD = 2.0


# =======================================================================================
# Small formats
# =======================================================================================

def micro_time(ts: float) -> str:
    """metav1.MicroTime of a wall-clock timestamp."""
    return formats.format_micro_time(datetime.fromtimestamp(ts, timezone.utc))


def kube_time(ts: float) -> str:
    """metav1.Time of a wall-clock timestamp."""
    return formats.format_time(datetime.fromtimestamp(ts, timezone.utc))


def parse_time(text: Any) -> float | None:
    moment = formats.parse_time(text)
    return None if moment is None else moment.timestamp()


def format_indexes(indexes: Iterable[int]) -> str:
    """{0, 1, 2, 3, 5} -> "0-3,5" (a Job's completedIndexes / failedIndexes)."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(set(indexes)):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [i]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out)


def parse_indexes(text: Any) -> set[int]:
    """"0-3,5" -> {0, 1, 2, 3, 5}; anything malformed is skipped."""
    out: set[int] = set()
    for piece in (text or "").split(",") if isinstance(text, str) else []:
        first, _, last = piece.partition("-")
        try:
            out.update(range(int(first), int(last or first) + 1))
        except ValueError:
            continue
    return out


# =======================================================================================
# HTTP: one keep-alive connection, and the tally of what happened
# =======================================================================================

@dataclass
class Response:
    status: int            # 0: no HTTP answer (connection refused, reset, timeout)
    body: Any              # parsed JSON, or the raw text / the exception message

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def reason(self) -> str:
        return self.body.get("reason", "") if isinstance(self.body, dict) else ""


@dataclass
class Stats:
    """Accepted writes, reads, 409s (normal for optimistic concurrency), and errors by kind."""

    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
    writes: int = 0
    reads: int = 0
    conflicts: int = 0
    errors: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def error(self, kind: str, detail: str) -> None:
        """Count an error; log only the first of each kind, so a broken server is not a flood."""
        self.errors += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        if self.by_kind[kind] == 1:
            self.log(f"simulator: {kind}: {detail} (further ones are counted, not logged)")

    def summary(self, seconds: float) -> str:
        return (f"simulator summary: writes={self.writes} conflicts={self.conflicts} "
                f"errors={self.errors} reads={self.reads} seconds={seconds:.1f}")


class Client:
    """The API over one persistent HTTP(S) connection, with a bearer token."""

    WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

    def __init__(self, server: str, token: str, stats: Stats, timeout: float = 15.0,
                 ca_file: str | None = None):
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--server must be an http:// or https:// URL, not {server!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.token = token
        self.stats = stats
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=ca_file) if self.https else None
        self.conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if self.conn is None:
            if self.https:
                self.conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                                        context=self.context)
            else:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self.conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def raw(self, method: str, path: str, body: Any = None,
            content_type: str = "application/json") -> Response:
        """One request, no bookkeeping. A kept-alive connection the server closed meanwhile
        is reopened once; other network errors come back as status 0."""
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            try:
                conn = self._connect()
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (http.client.RemoteDisconnected, http.client.CannotSendRequest,
                    BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if attempt == 2:
                    return Response(0, f"{type(exc).__name__}: {exc}")
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                return Response(0, f"{type(exc).__name__}: {exc}")
        if resp.getheader("Connection", "").lower() == "close":
            self.close()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode("utf-8", "replace")[:200]
        return Response(resp.status, parsed)

    def call(self, method: str, path: str, body: Any = None, *, what: str,
             expect: tuple[int, ...] = (), content_type: str = "application/json") -> Response:
        """A request the caller understands: 2xx and `expect` are normal, 409 is a conflict
        (counted apart: losing an optimistic-concurrency race is part of the game), anything
        else an error, logged once per kind."""
        resp = self.raw(method, path, body, content_type)
        if resp.ok:
            if method in self.WRITES:
                self.stats.writes += 1
            else:
                self.stats.reads += 1
        elif resp.status == 409:
            self.stats.conflicts += 1
        elif resp.status not in expect:
            if resp.status == 0:
                self.stats.error(f"{method} {what}: no response", str(resp.body))
            else:
                message = resp.body.get("message", "") if isinstance(resp.body, dict) else resp.body
                self.stats.error(f"{method} {what}: {resp.status} {resp.reason}".rstrip(), f"{message} [{path}]")
        return resp


# =======================================================================================
# The timeline
# =======================================================================================

class Simulation:
    """A virtual clock and a heap of callbacks. Delays are given in speed-1 seconds."""

    def __init__(self, client: Client, namespaces: list[str], *, speed: float = 1.0,
                 seed: int | None = None, max_jobs: int = 12):
        if speed <= 0:
            raise ValueError("speed must be > 0")
        if not namespaces:
            raise ValueError("at least one namespace is needed")
        self.client = client
        self.stats = client.stats
        self.namespaces = namespaces
        self.speed = speed
        self.rng = random.Random(seed)
        self.max_jobs = max_jobs
        self.now = 0.0                      # virtual seconds since start (real seconds, not scaled)
        self._queue: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._wall0 = time.time()
        self._mono0 = time.monotonic()
        self.elections: list[Election] = []
        self.services: list[EndpointsController] = []
        self.jobs = JobController(self)

    def ns(self, i: int) -> str:
        return self.namespaces[i % len(self.namespaces)]

    def wall(self) -> float:
        """The simulated wall clock: what timestamps say, and what expiry is judged by."""
        return self._wall0 + self.now

    def scaled(self, seconds: float) -> float:
        return seconds / self.speed

    def after(self, seconds: float, fn: Callable[[], None]) -> None:
        """Run fn `seconds` (speed-1 seconds) from now on the timeline."""
        self._seq += 1
        heapq.heappush(self._queue, (self.now + max(0.0, seconds) / self.speed, self._seq, fn))

    def uniform(self, low: float, high: float) -> float:
        return self.rng.uniform(low, high)

    def setup(self) -> None:
        """The cast: elections, services and the job controller, spread over the namespaces."""
        self.elections = [
            Election(self, self.ns(0), "kube-scheduler",
                     ["control-plane-1", "control-plane-2", "control-plane-3"], tenure=(40, 150)),
            Election(self, self.ns(0), "kube-controller-manager",
                     ["control-plane-1", "control-plane-2", "control-plane-3"], tenure=(40, 150)),
            Election(self, self.ns(1), "payments-api-leader",
                     ["payments-api-7c9d8f-x2lkp", "payments-api-7c9d8f-q8zrt"], tenure=(20, 90)),
            # An operator that flaps: the page always has a takeover to show.
            Election(self, self.ns(2), "batch-operator",
                     ["batch-operator-5b8d-tw9cm", "batch-operator-5b8d-hk4vz", "batch-operator-5b8d-m7q2x"],
                     tenure=(8, 25)),
        ]
        self.services = [
            EndpointsController(self, self.ns(0), "web", [("http", 80), ("https", 443)],
                                sizes=(3, 8), kind="deployment", subnet=1),
            EndpointsController(self, self.ns(1), "payments", [("grpc", 9090), ("http", 8080), ("metrics", 9100)],
                                sizes=(3, 6), kind="deployment", subnet=2),
            EndpointsController(self, self.ns(0), "search", [("http", 9200), ("transport", 9300)],
                                sizes=(3, 5), kind="statefulset", subnet=3),
            EndpointsController(self, self.ns(2), "ledger-db", [("postgres", 5432)],
                                sizes=(3, 4), kind="external", subnet=4),
        ]
        for actor in [*self.elections, *self.services, self.jobs]:
            actor.start()

    def run(self, duration: float | None = None, stop: Callable[[], bool] = lambda: False) -> None:
        """Run callbacks in timeline order until the duration (real seconds) is up or stop()."""
        began = time.monotonic()
        while self._queue and not stop():
            if duration and time.monotonic() - began >= duration:
                return
            due, _, fn = self._queue[0]
            elapsed = time.monotonic() - self._mono0
            if due > elapsed:
                # Short naps, so a stop request or the end of the duration is noticed quickly.
                time.sleep(min(due - elapsed, 0.25))
                continue
            if elapsed - due > 1.0:
                # The server (or this host) stalled: pause the story rather than write stale
                # timestamps (leases would look expired); the order of events is unchanged.
                self._mono0 += elapsed - due
                self._wall0 += elapsed - due
            heapq.heappop(self._queue)
            self.now = due
            try:
                fn()
            except Exception as exc:   # a bug in one actor must not stop the show
                self.stats.error(f"internal error in {getattr(fn, '__qualname__', fn)}",
                                 f"{type(exc).__name__}: {exc}")
                owner = getattr(fn, "__self__", None)
                if hasattr(owner, "recover"):
                    self.after(5.0, owner.recover)


# =======================================================================================
# Leader election (client-go leaderelection, Lease lock)
# =======================================================================================

class Election:
    """One Lease and its candidates. A holder keeps it for `tenure` (a range of seconds,
    drawn at each acquisition), then dies silently (the Lease expires before a takeover)
    or, `release` of the time, steps down cleanly."""

    def __init__(self, sim: Simulation, namespace: str, name: str, hosts: list[str], *,
                 tenure: tuple[float, float], release: float = 0.4):
        self.sim = sim
        self.namespace = namespace
        self.name = name
        self.path = LEASES.format(ns=namespace) + "/" + name
        self.tenure = tenure
        self.release = release
        self.candidates = [Candidate(self, host) for host in hosts]

    @property
    def duration(self) -> int:
        """leaseDurationSeconds is a whole number of real seconds, so it scales with speed."""
        return max(1, round(self.sim.scaled(LEASE_DURATION)))

    def start(self) -> None:
        for candidate in self.candidates:
            self.sim.after(self.sim.uniform(0.0, 1.5), candidate.try_acquire)

    def manifest(self, spec: dict) -> dict:
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace,
                             "labels": {MANAGED_BY: MANAGER}},
                "spec": spec}


class Candidate:
    """One process competing for a Lease. Its identity is host_<random>, fresh on every
    (re)start, as client-go components name themselves."""

    def __init__(self, election: Election, host: str):
        self.election = election
        self.sim = election.sim
        self.host = host
        self.identity = self._new_identity()
        self.up = True
        self.leader = False
        self.observed: dict | None = None     # the Lease as last seen (carries resourceVersion)
        self.term_end = 0.0                   # when, as the holder, it will crash or step down

    def _new_identity(self) -> str:
        return f"{self.host}_{self.sim.rng.getrandbits(32):08x}"

    def _retry(self) -> None:
        self.sim.after(RETRY_PERIOD * self.sim.uniform(1.0, 1.2), self.try_acquire)

    def _call(self, method: str, body: Any = None, expect=()) -> Response:
        path = self.election.path if method != "POST" else LEASES.format(ns=self.election.namespace)
        return self.sim.client.call(method, path, body, what="lease", expect=expect)

    def _spec(self, **changes) -> dict:
        spec = dict((self.observed or {}).get("spec") or {})
        spec.update(changes)
        return spec

    def _with_spec(self, spec: dict) -> dict:
        obj = dict(self.observed or self.election.manifest({}))
        obj["spec"] = spec
        return obj

    # -- as a candidate ---------------------------------------------------------------

    def try_acquire(self) -> None:
        """Look at the Lease; go for it if nobody holds it or the holder's time ran out."""
        if not self.up or self.leader:
            return
        resp = self._call("GET", expect=(404,))
        if resp.status == 404:
            now = micro_time(self.sim.wall())
            created = self._call("POST", self.election.manifest({
                "holderIdentity": self.identity, "leaseDurationSeconds": self.election.duration,
                "acquireTime": now, "renewTime": now, "leaseTransitions": 0}))
            if created.ok:
                self._lead(created.body)
            else:
                self._retry()        # most likely another candidate created it first (409)
            return
        if resp.ok:
            self.observed = resp.body
            if self._takeable(resp.body.get("spec") or {}):
                # The PUT follows the GET a little later, as over a real network: two
                # candidates may both try, and the slower one gets a 409.
                self.sim.after(self.sim.uniform(0.05, 0.3), self.acquire)
                return
        self._retry()

    def _takeable(self, spec: dict) -> bool:
        holder = spec.get("holderIdentity") or ""
        if not holder or holder == self.identity:
            return True
        expires = lease_expiry(spec)
        return expires is None or expires.timestamp() <= self.sim.wall()

    def acquire(self) -> None:
        if not self.up or self.leader or self.observed is None:
            return
        old = self.observed.get("spec") or {}
        now = micro_time(self.sim.wall())
        transitions = old.get("leaseTransitions") or 0
        if old.get("holderIdentity") != self.identity:
            transitions += 1
        resp = self._call("PUT", self._with_spec(self._spec(
            holderIdentity=self.identity, leaseDurationSeconds=self.election.duration,
            acquireTime=now, renewTime=now, leaseTransitions=transitions)), expect=(404,))
        if resp.ok:
            self._lead(resp.body)
        else:
            self._retry()

    # -- as the leader ----------------------------------------------------------------

    def _lead(self, lease: dict) -> None:
        self.leader = True
        self.observed = lease
        self.term_end = self.sim.now + self.sim.scaled(self.sim.uniform(*self.election.tenure))
        self._next_renewal()

    def _next_renewal(self) -> None:
        self.sim.after(self.sim.uniform(2.0, 5.0), self.renew)

    def renew(self) -> None:
        if not (self.up and self.leader):
            return
        if self.sim.now >= self.term_end:
            if self.sim.rng.random() < self.election.release:
                self.release()
            else:
                self.crash()
            return
        self._put_renewal(retry_conflict=True)

    def _put_renewal(self, retry_conflict: bool) -> None:
        # The fast path: PUT on the Lease as last seen; a 409 means someone else wrote it.
        resp = self._call("PUT", self._with_spec(self._spec(
            holderIdentity=self.identity, leaseDurationSeconds=self.election.duration,
            renewTime=micro_time(self.sim.wall()))), expect=(404,))
        if resp.ok:
            self.observed = resp.body
            self._next_renewal()
        elif resp.status == 409 and retry_conflict:
            fresh = self._call("GET", expect=(404,))
            if fresh.ok and (fresh.body.get("spec") or {}).get("holderIdentity") == self.identity:
                self.observed = fresh.body
                self._put_renewal(retry_conflict=False)
            else:
                self._step_down()
        elif resp.status in (404, 409):
            self._step_down()
        elif self._own_lease_expired():
            self._step_down()       # could not renew in time: client-go gives up leadership
        else:
            self.sim.after(RETRY_PERIOD, self.renew)

    def _own_lease_expired(self) -> bool:
        spec = (self.observed or {}).get("spec") or {}
        expires = lease_expiry(spec)
        return expires is None or expires.timestamp() <= self.sim.wall()

    def _step_down(self) -> None:
        self.leader = False
        self._retry()

    def crash(self) -> None:
        """Die without a word: the Lease expires. Sometimes the standbys are down too (a
        node outage), so the Lease stays expired for a while before anyone takes it."""
        self._go_down(self.sim.uniform(10.0, 40.0))
        for other in self.election.candidates:
            if other is not self and other.up and self.sim.rng.random() < 0.5:
                other._go_down(self.sim.uniform(5.0, 25.0))

    def release(self) -> None:
        """A clean shutdown (ReleaseOnCancel): clear the holder, then restart shortly."""
        now = micro_time(self.sim.wall())
        self._call("PUT", self._with_spec(self._spec(
            holderIdentity="", leaseDurationSeconds=1, acquireTime=now, renewTime=now)),
            expect=(404,))
        self._go_down(self.sim.uniform(3.0, 10.0))

    def _go_down(self, seconds: float) -> None:
        self.up = False
        self.leader = False
        self.sim.after(seconds, self.restart)

    def restart(self) -> None:
        self.identity = self._new_identity()
        self.up = True
        self.leader = False
        self.sim.after(self.sim.uniform(0.2, 1.0), self.try_acquire)

    def recover(self) -> None:
        if self.up and not self.leader:
            self.try_acquire()
        elif self.up:
            self.renew()


# =======================================================================================
# Endpoints (the endpoints controller)
# =======================================================================================

NODES = ["node-a", "node-b", "node-c", "node-d"]


@dataclass
class Backend:
    name: str
    ip: str
    node: str
    uid: str
    ready: bool


class EndpointsController:
    """One Service's Endpoints: pods come and go and turn ready / not ready; each change
    is a PUT of the whole object (as the controller's Update), retried after a 409."""

    def __init__(self, sim: Simulation, namespace: str, name: str, ports: list[tuple[str, int]], *,
                 sizes: tuple[int, int], kind: str, subnet: int):
        self.sim = sim
        self.namespace = namespace
        self.name = name
        self.path = ENDPOINTS.format(ns=namespace) + "/" + name
        self.ports = ports
        self.low, self.high = sizes
        self.kind = kind                # deployment | statefulset | external
        self.subnet = subnet
        self.next_host = 10
        self.ordinal = 0
        self.rs = self._suffix(9, "0123456789bcdfghjklmnpqrstvwxz")   # the ReplicaSet's hash
        self.backends: list[Backend] = []
        self.observed: dict | None = None
        for _ in range(sim.rng.randint(self.low, max(self.low, self.high - 2))):
            self._add(ready=sim.rng.random() < 0.8)

    def _suffix(self, n: int, alphabet: str = "bcdfghjklmnpqrstvwxz2456789") -> str:
        return "".join(self.sim.rng.choice(alphabet) for _ in range(n))

    def _uid(self) -> str:
        h = f"{self.sim.rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"

    def _add(self, ready: bool) -> None:
        node_index = self.sim.rng.randrange(len(NODES))
        if self.kind == "statefulset":
            name = f"{self.name}-{self.ordinal}"
            self.ordinal += 1
        else:
            name = f"{self.name}-{self.rs}-{self._suffix(5)}"
        if self.kind == "external":
            ip = f"192.168.{self.subnet}.{self.next_host}"
        else:
            ip = f"10.244.{node_index * 8 + self.subnet}.{self.next_host}"
        self.next_host = self.next_host + 1 if self.next_host < 250 else 10
        self.backends.append(Backend(name, ip, NODES[node_index], self._uid(), ready))

    def _address(self, b: Backend) -> dict:
        if self.kind == "external":
            return {"ip": b.ip}        # hand-made Endpoints for something outside the cluster
        address = {"ip": b.ip, "nodeName": b.node,
                   "targetRef": {"kind": "Pod", "namespace": self.namespace, "name": b.name, "uid": b.uid}}
        if self.kind == "statefulset":
            address["hostname"] = b.name
        return address

    def manifest(self) -> dict:
        subset: dict = {}
        ready = [self._address(b) for b in self.backends if b.ready]
        not_ready = [self._address(b) for b in self.backends if not b.ready]
        if ready:
            subset["addresses"] = ready
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        subset["ports"] = [{"name": n, "port": p, "protocol": "TCP"} for n, p in self.ports]
        meta = {"name": self.name, "namespace": self.namespace,
                "labels": {MANAGED_BY: MANAGER, "app.kubernetes.io/name": self.name}}
        if self.observed:
            meta["resourceVersion"] = self.observed["metadata"]["resourceVersion"]
        return {"apiVersion": "v1", "kind": "Endpoints", "metadata": meta, "subsets": [subset]}

    def start(self) -> None:
        self.sim.after(self.sim.uniform(0.0, 1.0), self.publish_first)

    def publish_first(self) -> None:
        resp = self.sim.client.call("GET", self.path, what="endpoints", expect=(404,))
        self.observed = resp.body if resp.ok else None
        self._publish()
        self._schedule()

    def _schedule(self) -> None:
        self.sim.after(self.sim.uniform(1.0, 3.0), self.tick)

    def tick(self) -> None:
        self.change()
        self._publish()
        self._schedule()

    def change(self) -> None:
        """One thing happens to the pods behind the service."""
        rng, backends = self.sim.rng, self.backends
        roll = rng.random()
        if roll < 0.08 and len(backends) < self.high:
            self._add(ready=False)                                   # scale up: starts not ready
        elif roll < 0.16 and len(backends) > self.low:
            not_ready = [b for b in backends if not b.ready]
            backends.remove(rng.choice(not_ready or backends))       # scale down
        elif roll < 0.22 and self.kind == "deployment":
            backends.remove(rng.choice(backends))                    # a pod replaced
            self._add(ready=False)
        else:
            ready = [b for b in backends if b.ready]
            not_ready = [b for b in backends if not b.ready]
            # Mostly healthy: a not-ready pod is likelier to recover than a ready one to fail.
            if not_ready and (not ready or rng.random() < 0.6):
                rng.choice(not_ready).ready = True
            else:
                rng.choice(ready).ready = False

    def _publish(self) -> None:
        resp = self.sim.client.call("PUT", self.path, self.manifest(), what="endpoints")
        if resp.status == 409:
            # Someone else wrote it: read the current version and write ours over it.
            fresh = self.sim.client.call("GET", self.path, what="endpoints", expect=(404,))
            self.observed = fresh.body if fresh.ok else None
            resp = self.sim.client.call("PUT", self.path, self.manifest(), what="endpoints")
        if resp.ok:
            self.observed = resp.body
        elif resp.status != 0:
            self.observed = None       # start again from a fresh GET-less create-or-replace

    def recover(self) -> None:
        self._schedule()


# =======================================================================================
# Jobs (the job controller)
# =======================================================================================

# (name prefix, namespace slot, mode, completions range, parallelism range)
CATALOG = [
    ("nightly-report", 2, "NonIndexed", (1, 1), (1, 1)),
    ("db-backup", 2, "NonIndexed", (1, 3), (1, 1)),
    ("etl-orders", 2, "NonIndexed", (4, 10), (2, 4)),
    ("thumbnails", 2, "Indexed", (8, 20), (3, 5)),
    ("train-shard", 2, "Indexed", (5, 12), (2, 4)),
    ("reindex-search", 0, "Indexed", (5, 15), (2, 5)),
    ("data-import", 0, "NonIndexed", (2, 6), (1, 3)),
    ("settle-invoices", 1, "Indexed", (6, 16), (2, 4)),
    ("reconcile-ledger", 1, "NonIndexed", (1, 4), (1, 2)),
]


@dataclass
class Pod:
    index: int | None
    ready: bool = False


class JobController:
    """Keeps a bounded, changing set of Jobs: creates them, deletes the finished ones."""

    def __init__(self, sim: Simulation):
        self.sim = sim
        self.jobs: list[JobSim] = []

    def start(self) -> None:
        self.sim.after(0.3, self.adopt)

    def adopt(self) -> None:
        """Pick up the Jobs a previous run left behind, so a restart leaves none stuck."""
        selector = quote(f"{MANAGED_BY}={MANAGER}")
        for ns in dict.fromkeys(self.sim.namespaces):
            resp = self.sim.client.call("GET", f"{JOBS.format(ns=ns)}?labelSelector={selector}", what="jobs")
            items = (resp.body or {}).get("items") or [] if resp.ok else []
            for obj in items:
                if not (obj.get("metadata") or {}).get("deletionTimestamp"):
                    self.jobs.append(JobSim.adopt(self, obj))
        self.spawn()

    @property
    def target(self) -> int:
        return max(1, self.sim.max_jobs - 2)

    def spawn(self) -> None:
        if len(self.jobs) < self.target:
            job = JobSim.new(self)
            self.jobs.append(job)
            job.create()
        # Fill the page quickly at first, then replace jobs at a calmer pace.
        filling = len(self.jobs) < self.target // 2
        self.sim.after(self.sim.uniform(0.5, 1.0) if filling else self.sim.uniform(3.0, 8.0), self.spawn)

    def forget(self, job: "JobSim") -> None:
        if job in self.jobs:
            self.jobs.remove(job)

    def recover(self) -> None:
        self.spawn()


class JobSim:
    """One Job and its pods, reported through /status the way the job controller does."""

    def __init__(self, controller: JobController, namespace: str, spec: dict):
        self.controller = controller
        self.sim = controller.sim
        self.namespace = namespace
        self.collection = JOBS.format(ns=namespace)
        self.mode = spec.get("completionMode") or "NonIndexed"
        self.completions = spec.get("completions") or 1
        self.parallelism = spec.get("parallelism") or 1
        self.backoff_limit = spec.get("backoffLimit")
        self.per_index = spec.get("backoffLimitPerIndex")
        self.manifest: dict = {}          # what create() posts (new jobs only)
        self.obj: dict | None = None      # the Job as last seen (carries resourceVersion)
        self.name = ""
        # The model; the Job's status is computed from it.
        self.pods: list[Pod] = []
        self.succeeded = 0
        self.failed = 0
        self.completed: set[int] = set()
        self.failed_indexes: set[int] = set()
        self.index_failures: dict[int, int] = {}
        self.start_time: float | None = None
        self.completion_time: float | None = None
        self.terminating = 0
        self.conditions: list[dict] = []
        self.state = "new"      # new | running | suspended | ending | finished | gone
        self._final: tuple[bool, str, str] | None = None     # how an "ending" job ends
        self.suspended_by_us = False
        # The plan: how failure-prone its pods are, and whether we will pause it.
        rng = self.sim.rng
        if self.per_index is not None:
            self.fail_rate = 0.15     # now and then an index fails twice: failedIndexes
        elif self.backoff_limit is not None and self.backoff_limit <= 3:
            self.fail_rate = 0.5      # flaky pods and a low limit: likely BackoffLimitExceeded
        else:
            self.fail_rate = rng.choice([0.0, 0.03, 0.06, 0.12])
        self.suspend_at = rng.uniform(0.2, 0.6) if rng.random() < 0.15 else None

    @property
    def path(self) -> str:
        return f"{self.collection}/{self.name}"

    # -- creation ---------------------------------------------------------------------

    @classmethod
    def new(cls, controller: JobController) -> "JobSim":
        sim = controller.sim
        rng = sim.rng
        prefix, slot, mode, (cmin, cmax), (pmin, pmax) = rng.choice(CATALOG)
        completions = rng.randint(cmin, cmax)
        spec: dict = {"completions": completions, "parallelism": min(completions, rng.randint(pmin, pmax)),
                      "completionMode": mode}
        outcome = rng.random()
        if mode == "Indexed" and outcome < 0.25:
            spec["backoffLimitPerIndex"] = 1      # failedIndexes, and "FailedIndexes" when any
        elif outcome > 0.75:
            spec["backoffLimit"] = rng.randint(2, 3)   # with flaky pods: BackoffLimitExceeded
        created_suspended = rng.random() < 0.08
        job = cls(controller, sim.ns(slot), spec)
        job.manifest = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"generateName": f"{prefix}-", "namespace": job.namespace,
                         "labels": {MANAGED_BY: MANAGER, "app.kubernetes.io/name": prefix}},
            "spec": {**spec, "suspend": created_suspended, "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": prefix}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "worker", "image": "busybox:1.36",
                    "command": ["sh", "-c", f"echo {prefix} item ${{JOB_COMPLETION_INDEX:-0}}; sleep 5"],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}},
        }
        return job

    def create(self) -> None:
        resp = self.sim.client.call("POST", self.collection, self.manifest, what="job")
        if not resp.ok:
            self.state = "gone"
            self.controller.forget(self)
            return
        self.obj = resp.body
        self.name = resp.body["metadata"]["name"]
        if (resp.body.get("spec") or {}).get("suspend"):
            self.state = "suspended"
            self.suspended_by_us = True
            self.sim.after(self.sim.uniform(0.5, 1.5), self.report_suspended)
        else:
            self.sim.after(self.sim.uniform(0.5, 2.0), self.begin)

    @classmethod
    def adopt(cls, controller: JobController, obj: dict) -> "JobSim":
        """Rebuild the model from a Job's spec and status (after a restart of the simulator)."""
        meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        job = cls(controller, meta["namespace"], spec)
        job.obj, job.name = obj, meta["name"]
        job.succeeded, job.failed = status.get("succeeded") or 0, status.get("failed") or 0
        job.completed = parse_indexes(status.get("completedIndexes"))
        job.failed_indexes = parse_indexes(status.get("failedIndexes"))
        job.start_time = parse_time(status.get("startTime"))
        job.completion_time = parse_time(status.get("completionTime"))
        job.conditions = list(status.get("conditions") or [])
        sim = controller.sim
        if job._has("Complete") or job._has("Failed"):
            job.state = "finished"
            sim.after(sim.uniform(2.0, 10.0), job.delete)
        elif job._has("SuccessCriteriaMet") or job._has("FailureTarget"):
            job.state = "ending"
            sim.after(sim.uniform(0.5, 1.5), job.finish)
        elif spec.get("suspend"):
            job.state = "suspended"
            job.suspended_by_us = True
            sim.after(sim.uniform(0.5, 1.5), job.report_suspended)
        else:
            job.state = "running"
            for _ in range(min(status.get("active") or 0, job.parallelism)):
                job._start_pod()
            sim.after(sim.uniform(0.5, 2.0), job.progress if job.start_time else job.begin)
        return job

    # -- status -----------------------------------------------------------------------

    def _has(self, kind: str) -> bool:
        return any(c.get("type") == kind and c.get("status") == "True" for c in self.conditions)

    def _condition(self, kind: str, status: str, reason: str, message: str) -> None:
        """Set a condition the way the controller does: the transition time moves only when
        the status changes."""
        now = kube_time(self.sim.wall())
        for c in self.conditions:
            if c.get("type") == kind:
                if c.get("status") != status:
                    c["lastTransitionTime"] = now
                c.update(status=status, reason=reason, message=message, lastProbeTime=now)
                return
        self.conditions.append({"type": kind, "status": status, "lastProbeTime": now,
                                "lastTransitionTime": now, "reason": reason, "message": message})

    def status(self) -> dict:
        status: dict = {}
        if self.start_time is not None:
            status["startTime"] = kube_time(self.start_time)
        if self.completion_time is not None:
            status["completionTime"] = kube_time(self.completion_time)
        for key, value in (("active", len(self.pods)), ("succeeded", self.succeeded), ("failed", self.failed)):
            if value:
                status[key] = value          # omitempty in kube's JSON
        status["ready"] = sum(p.ready for p in self.pods)
        status["terminating"] = self.terminating
        if self.mode == "Indexed" and self.completed:
            status["completedIndexes"] = format_indexes(self.completed)
        if self.per_index is not None:
            status["failedIndexes"] = format_indexes(self.failed_indexes)
        status["uncountedTerminatedPods"] = {}
        if self.conditions:
            status["conditions"] = [dict(c) for c in self.conditions]
        return status

    def write_status(self) -> bool:
        """PUT /status on the Job as last seen; after a 409, read it and try once more."""
        client = self.sim.client
        for attempt in (1, 2):
            body = dict(self.obj or {})
            body["status"] = self.status()
            resp = client.call("PUT", self.path + "/status", body, what="job status", expect=(404,))
            if resp.ok:
                self.obj = resp.body
                return True
            if resp.status == 404:
                self._gone()
                return False
            if resp.status != 409 or attempt == 2:
                return False
            fresh = client.call("GET", self.path, what="job", expect=(404,))
            if not fresh.ok:
                if fresh.status == 404:
                    self._gone()
                return False
            self.obj = fresh.body
        return False

    def _gone(self) -> None:
        """Deleted behind our back (by a user): forget it."""
        self.state = "gone"
        self.controller.forget(self)

    # -- the life of a job ------------------------------------------------------------

    def _work_left(self) -> int:
        if self.mode == "Indexed":
            return len(self._pending_indexes())
        return self.completions - self.succeeded - len(self.pods)

    def _pending_indexes(self) -> list[int]:
        running = {p.index for p in self.pods}
        return [i for i in range(self.completions)
                if i not in self.completed and i not in self.failed_indexes and i not in running]

    def _start_pod(self) -> None:
        if self.mode == "Indexed":
            pending = self._pending_indexes()
            if pending:
                self.pods.append(Pod(pending[0]))
        elif self._work_left() > 0:
            self.pods.append(Pod(None))

    def _fill(self) -> None:
        while len(self.pods) < self.parallelism and self._work_left() > 0:
            self._start_pod()

    def begin(self) -> None:
        if self.state in ("gone", "finished"):
            return
        self.state = "running"
        self.start_time = self.sim.wall()
        self._fill()
        if self.write_status():
            self._next_progress()

    def _next_progress(self) -> None:
        self.sim.after(self.sim.uniform(0.8, 2.5), self.progress)

    def progress(self) -> None:
        """One controller sync: pods turn ready, finish (mostly succeed), new ones start."""
        if self.state != "running":
            return
        self._follow_spec()
        if self.state != "running":
            return
        rng = self.sim.rng
        new_failure = False
        for pod in list(self.pods):
            if not pod.ready:
                pod.ready = rng.random() < 0.6
                continue
            if rng.random() >= 0.35:
                continue
            self.pods.remove(pod)
            if rng.random() < self.fail_rate:
                self.failed += 1
                new_failure = True
                if pod.index is not None and self.per_index is not None:
                    self.index_failures[pod.index] = self.index_failures.get(pod.index, 0) + 1
                    if self.index_failures[pod.index] > self.per_index:
                        self.failed_indexes.add(pod.index)
            else:
                self.succeeded += 1
                if pod.index is not None:
                    self.completed.add(pod.index)
        if new_failure and self.backoff_limit is not None and self.failed > self.backoff_limit:
            self._end(success=False, reason="BackoffLimitExceeded", message="Job has reached the specified backoff limit")
            return
        if self.suspend_at is not None and self.succeeded >= self.suspend_at * self.completions:
            self.suspend_at = None
            self.suspend()
            return
        self._fill()
        if not self.pods and self._work_left() <= 0:
            if self.failed_indexes:
                self._end(success=False, reason="FailedIndexes", message="Job has failed indexes")
            else:
                self._end(success=True, reason="CompletionsReached",
                          message="Reached expected number of succeeded pods")
            return
        if self.write_status():
            self._next_progress()

    def _follow_spec(self) -> None:
        """A user may suspend our Job (kubectl patch): then act as the controller would."""
        if (self.obj or {}).get("spec", {}).get("suspend") and self.state == "running":
            self.suspended_by_us = False
            self._enter_suspended()

    def _end(self, success: bool, reason: str, message: str) -> None:
        """First the interim condition (SuccessCriteriaMet / FailureTarget) while pods are
        being terminated, then the final one: the order 1.32's controller writes them in."""
        self.state = "ending"
        self.terminating = len(self.pods)
        self.pods = []
        self._condition("SuccessCriteriaMet" if success else "FailureTarget", "True", reason, message)
        self._final = (success, reason, message)
        if self.write_status():
            self.sim.after(self.sim.uniform(0.5, 1.5), self.finish)

    def finish(self) -> None:
        if self.state != "ending":
            return
        success, reason, message = self._final or (
            self._has("SuccessCriteriaMet"), *self._interim_reason())
        self.terminating = 0
        self.pods = []
        if success:
            self.completion_time = self.sim.wall()
            self._condition("Complete", "True", reason, message)
        else:
            self._condition("Failed", "True", reason, message)
        if self.write_status():
            self.state = "finished"
            # Keep it on the page a while, then clean up (like ttlSecondsAfterFinished).
            self.sim.after(self.sim.uniform(15.0, 40.0), self.delete)

    def _interim_reason(self) -> tuple[str, str]:
        for c in self.conditions:
            if c.get("type") in ("SuccessCriteriaMet", "FailureTarget"):
                return c.get("reason") or "", c.get("message") or ""
        return "", ""

    def suspend(self) -> None:
        """Pause the Job through its spec (as a queueing system would), then report it."""
        resp = self.sim.client.call("PATCH", self.path, {"spec": {"suspend": True}}, what="job",
                                    expect=(404,), content_type="application/merge-patch+json")
        if resp.status == 404:
            self._gone()
            return
        if not resp.ok:
            self._next_progress()
            return
        self.obj = resp.body
        self.suspended_by_us = True
        self._enter_suspended()

    def _enter_suspended(self) -> None:
        self.state = "suspended"
        self.report_suspended()

    def report_suspended(self) -> None:
        """Pods are removed and startTime cleared (it restarts on resume), Suspended=True."""
        if self.state != "suspended":
            return
        self.pods = []
        self.start_time = None
        self._condition("Suspended", "True", "JobSuspended", "Job suspended")
        if self.write_status():
            if self.suspended_by_us:
                self.sim.after(self.sim.uniform(10.0, 30.0), self.resume)
            else:
                self.sim.after(5.0, self.watch_user_resume)

    def watch_user_resume(self) -> None:
        """Suspended by someone else: look now and then whether they resumed it."""
        if self.state != "suspended":
            return
        resp = self.sim.client.call("GET", self.path, what="job", expect=(404,))
        if resp.status == 404:
            self._gone()
        elif resp.ok and not (resp.body.get("spec") or {}).get("suspend"):
            self.obj = resp.body
            self._resumed()
        else:
            self.sim.after(5.0, self.watch_user_resume)

    def resume(self) -> None:
        if self.state != "suspended":
            return
        resp = self.sim.client.call("PATCH", self.path, {"spec": {"suspend": False}}, what="job",
                                    expect=(404,), content_type="application/merge-patch+json")
        if resp.status == 404:
            self._gone()
        elif resp.ok:
            self.obj = resp.body
            self._resumed()
        else:
            self.sim.after(5.0, self.resume)

    def _resumed(self) -> None:
        self.state = "running"
        self.start_time = self.sim.wall()
        self._condition("Suspended", "False", "JobResumed", "Job resumed")
        self._fill()
        if self.write_status():
            self._next_progress()

    def delete(self) -> None:
        # Background: a Job's default policy would orphan its (here imaginary) pods.
        self.sim.client.call("DELETE", self.path + "?propagationPolicy=Background", what="job", expect=(404,))
        self.state = "gone"
        self.controller.forget(self)

    def recover(self) -> None:
        """After an internal error: carry on from wherever the job was."""
        step = {"new": self.begin, "running": self.progress, "ending": self.finish,
                "finished": self.delete, "suspended": self.report_suspended}.get(self.state)
        if step is not None:
            step()

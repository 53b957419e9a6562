"""Leader election as client-go's leaderelection does it with a Lease lock: an Election
(one Lease) and its Candidates, which renew, crash, release and take over."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from dashboard.coordination.actions import released
from dashboard.coordination.strategy import lease_expiry
from dashboard.demo import MANAGED_BY, MANAGER
from dashboard.demo.client import Response
from dashboard.kube import formats

if TYPE_CHECKING:
    from dashboard.demo.timeline import Timeline

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"

# client-go's defaults (seconds at speed 1): lease 15 s, retry every 2 s (+ up to 20 % jitter).
LEASE_DURATION = 15.0
RETRY_PERIOD = 2.0


def micro_time(ts: float) -> str:
    """metav1.MicroTime of a wall-clock timestamp."""
    return formats.format_micro_time(datetime.fromtimestamp(ts, timezone.utc))


class Election:
    """One Lease and its candidates. A holder keeps it for `tenure` (a range of seconds,
    drawn at each acquisition), then dies silently (the Lease expires before a takeover)
    or, `release` of the time, steps down cleanly."""

    def __init__(self, sim: Timeline, namespace: str, name: str, hosts: list[str], *,
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
        return not holder or holder == self.identity or self._expired(spec)

    def _expired(self, spec: dict) -> bool:
        """By the simulated wall clock. Without renewTime or leaseDurationSeconds the Lease
        counts as expired: nothing says how long to wait for its holder."""
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

    def _record(self, what: str) -> None:
        """client-go's LeaseLock.RecordEvent: a LeaderElection Event on the Lease."""
        if self.observed is not None:
            self.sim.record(self.observed, "Normal", "LeaderElection", f"{self.identity} {what}",
                            component=self.election.name)

    def _lead(self, lease: dict) -> None:
        self.leader = True
        self.observed = lease
        self._record("became leader")
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
        elif self._expired(self._spec()):
            self._step_down()       # could not renew in time: client-go gives up leadership
        else:
            self.sim.after(RETRY_PERIOD, self.renew)

    def _step_down(self) -> None:
        self.leader = False
        self._record("stopped leading")
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
        now = datetime.fromtimestamp(self.sim.wall(), timezone.utc)
        self._call("PUT", self._with_spec(released(self._spec(), now)), expect=(404,))
        self._record("stopped leading")
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

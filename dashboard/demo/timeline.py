"""The timeline: a Simulation is a virtual clock, a heap of actor callbacks and one seeded
RNG; it casts the actors (setup) and runs them in timeline order (run)."""
from __future__ import annotations

import heapq
import random
import time
from typing import Callable

from dashboard.demo.client import Client
from dashboard.demo.endpoints import EndpointsController
from dashboard.demo.jobs import JobController
from dashboard.demo.leases import Election


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
        self._seq = 0                       # ties on the heap run in the order scheduled
        self._wall0 = time.time()
        self._mono0 = time.monotonic()
        self.elections: list[Election] = []
        self.services: list[EndpointsController] = []
        self.jobs = JobController(self)

    def namespace(self, slot: int) -> str:
        """The namespace an actor plays in: slots wrap around, so one namespace is enough."""
        return self.namespaces[slot % len(self.namespaces)]

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
            Election(self, self.namespace(0), "kube-scheduler",
                     ["control-plane-1", "control-plane-2", "control-plane-3"], tenure=(40, 150)),
            Election(self, self.namespace(0), "kube-controller-manager",
                     ["control-plane-1", "control-plane-2", "control-plane-3"], tenure=(40, 150)),
            Election(self, self.namespace(1), "payments-api-leader",
                     ["payments-api-7c9d8f-x2lkp", "payments-api-7c9d8f-q8zrt"], tenure=(20, 90)),
            # An operator that flaps: the page always has a takeover to show.
            Election(self, self.namespace(2), "batch-operator",
                     ["batch-operator-5b8d-tw9cm", "batch-operator-5b8d-hk4vz", "batch-operator-5b8d-m7q2x"],
                     tenure=(8, 25)),
        ]
        self.services = [
            EndpointsController(self, self.namespace(0), "web", [("http", 80), ("https", 443)],
                                sizes=(3, 8), kind="deployment", subnet=1),
            EndpointsController(self, self.namespace(1), "payments",
                                [("grpc", 9090), ("http", 8080), ("metrics", 9100)],
                                sizes=(3, 6), kind="deployment", subnet=2),
            EndpointsController(self, self.namespace(0), "search", [("http", 9200), ("transport", 9300)],
                                sizes=(3, 5), kind="statefulset", subnet=3),
            EndpointsController(self, self.namespace(2), "ledger-db", [("postgres", 5432)],
                                sizes=(3, 4), kind="external", subnet=4),
        ]
        for actor in [*self.elections, *self.services, self.jobs]:
            actor.start()

    def run(self, duration: float | None = None) -> None:
        """Run callbacks in timeline order until the duration (real seconds) is up."""
        began = time.monotonic()
        while self._queue:
            if duration and time.monotonic() - began >= duration:
                return
            due, _, fn = self._queue[0]
            elapsed = time.monotonic() - self._mono0
            if due > elapsed:
                # Short naps, so the end of the duration is noticed quickly.
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

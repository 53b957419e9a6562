"""The timeline: a virtual clock, a heap of actor callbacks and one seeded RNG, run in
timeline order. It knows no actor; dashboard.demo.cluster casts them."""
from __future__ import annotations

import heapq
import random
import time
from datetime import datetime, timezone
from typing import Callable

from dashboard.demo.client import Client
from dashboard.events.recorder import Recorder

EVENTS = "/api/v1/namespaces/{ns}/events"


class Timeline:
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
        self._recorders: dict[tuple[str, str], Recorder] = {}

    def record(self, obj_or_ref: dict, type_: str, reason: str, message: str, *, component: str,
               host: str = "", field_path: str = "") -> None:
        """An Event, as the component's client-go recorder sends it (over HTTP, correlated)."""
        recorder = self._recorders.get((component, host))
        if recorder is None:
            recorder = self._recorders[(component, host)] = Recorder(
                component, host, self._post_event, self._patch_event, clock=lambda: self.now,
                wall=lambda: datetime.fromtimestamp(self.wall(), timezone.utc))
        recorder.event(obj_or_ref, type_, reason, message, field_path=field_path)

    def _post_event(self, namespace: str, event: dict) -> bool:
        return self.client.call("POST", EVENTS.format(ns=namespace), event, what="event").ok

    def _patch_event(self, namespace: str, name: str, change: dict) -> bool:
        return self.client.call("PATCH", EVENTS.format(ns=namespace) + "/" + name, change, what="event",
                                expect=(404,), content_type="application/strategic-merge-patch+json").ok

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

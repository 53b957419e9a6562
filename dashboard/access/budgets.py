"""How often someone may do something: a token bucket per key (a user, a session, a client).

Used where a client's rate itself is the cost: page sockets opened and frames sent
(web/socket_limits.py, server/ws_limits.py). Process-local, for one thread (an event loop's).
"""
from __future__ import annotations

import time

MAX_KEYS = 10_000   # keys tracked at once; full buckets are forgotten first


class Budget:
    """`burst` at once, refilled at `rate` a second; overspending (a flood) runs into debt, down
    to -burst, so it stays refused longer."""

    def __init__(self, rate: float, burst: float):
        self.rate, self.burst = rate, burst
        self.buckets: dict[str, tuple[float, float]] = {}   # key -> (tokens, when)

    def take(self, key: str, cost: float = 1.0) -> bool:
        now = time.monotonic()
        tokens, when = self.buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - when) * self.rate)
        allowed = tokens >= cost
        self.buckets[key] = (max(tokens - cost, -self.burst), now)
        if len(self.buckets) > MAX_KEYS:
            self._forget(now)
        return allowed

    def _forget(self, now: float) -> None:
        for key, (tokens, when) in list(self.buckets.items()):
            if tokens + (now - when) * self.rate >= self.burst:
                del self.buckets[key]
        while len(self.buckets) > MAX_KEYS:
            del self.buckets[next(iter(self.buckets))]

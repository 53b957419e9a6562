"""How often someone may do something: a token bucket per key (a user, a session, a client).

Used where a client's rate itself is the cost: page sockets opened and frames sent, and Event
writes (server/lanes.py, one bucket per process, refusals free). Page sockets' budget, the sessions known to it and the close codes are here, shared by the protocol
(server/ws_limits.py: before the application runs) and the consumer (web/socket_limits.py,
web/consumers.py). Process-local, for one thread (an event loop's).
"""
from __future__ import annotations

import time

from django.conf import settings

MAX_KEYS = 10_000   # keys tracked at once; full buckets are forgotten first


class Budget:
    """`burst` at once, refilled at `rate` a second; overspending (a flood) runs into debt, down
    to -burst, so it stays refused longer (`debt=False`: a refusal costs nothing, so a client
    over the budget still gets `rate` a second)."""

    def __init__(self, rate: float, burst: float, *, debt: bool = True):
        self.rate, self.burst, self.debt = rate, burst, debt
        self.buckets: dict[str, tuple[float, float]] = {}   # key -> (tokens, when)

    def take(self, key: str, cost: float = 1.0) -> bool:
        now = time.monotonic()
        tokens, when = self.buckets.get(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - when) * self.rate)
        allowed = tokens >= cost
        spent = allowed or self.debt
        self.buckets[key] = (max(tokens - cost, -self.burst) if spent else tokens, now)
        if len(self.buckets) > MAX_KEYS:
            self._forget(now)
        return allowed

    def _forget(self, now: float) -> None:
        for key, (tokens, when) in list(self.buckets.items()):
            if tokens + (now - when) * self.rate >= self.burst:
                del self.buckets[key]
        while len(self.buckets) > MAX_KEYS:
            del self.buckets[next(iter(self.buckets))]


# --------------------------------------------------------------------------------------------
# Page sockets (docs/SERVING.md, "Limits")

CLOSE_POLICY = 4008      # a frame from a client: pages send none (1008 in the 4xxx range autobahn allows)
CLOSE_TOO_MANY = 4429    # over the user's budget of connections
FRAME_COST = 10          # a stray frame costs as much as this many connections

_connects: Budget | None = None

# Session cookies this process has seen belong to someone (a page socket authenticated with it):
# only those are budgeted by session at the protocol (server/ws_limits.py); any other handshake is
# budgeted by its client's address, before a session is looked up, so cookies made up for each
# handshake buy nothing. {session key: monotonic time it was last vouched for}
KNOWN_SESSION_SECONDS = 600.0
MAX_KNOWN_SESSIONS = 10_000
_known_sessions: dict[str, float] = {}


def connects() -> Budget:
    """Page sockets opened, per user, session or client address: KUBEDASH_WEBSOCKET_CONNECT_BURST at
    once, refilled at KUBEDASH_WEBSOCKET_CONNECTS_PER_SECOND."""
    global _connects
    if _connects is None:
        _connects = Budget(settings.KUBEDASH_WEBSOCKET_CONNECTS_PER_SECOND, settings.KUBEDASH_WEBSOCKET_CONNECT_BURST)
    return _connects


def session_budget(session_key: str) -> str:
    """The handshake budget's key of a session the protocol knows (server/ws_limits.py)."""
    return f"session:{session_key}"


def vouch_for_session(session_key: str | None) -> None:
    """A page socket authenticated with this session (web/consumers.py): its next handshakes
    spend the session's budget, which this one's counts against too (its address paid for it)."""
    if not session_key:
        return
    if not session_known(session_key):
        connects().take(session_budget(session_key))
    _known_sessions.pop(session_key, None)
    _known_sessions[session_key] = time.monotonic()
    while len(_known_sessions) > MAX_KNOWN_SESSIONS:
        del _known_sessions[next(iter(_known_sessions))]   # (the oldest vouched for)


def session_known(session_key: str) -> bool:
    at = _known_sessions.get(session_key)
    return at is not None and time.monotonic() - at < KNOWN_SESSION_SECONDS

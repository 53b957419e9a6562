"""What a page socket may cost: the frames it may send (its heartbeat answers only) and how often a
user may open one.

Under Daphne the protocol enforces both first, before the application or the database is
reached (server/ws_limits.py: handshakes per client address, or per session once a socket here
authenticated with it; PONGs per socket, any other frame closes); what is here holds for any server and per user (whichever session or token).

Pages only listen, but for PONG, live.js's answer to each heartbeat BEAT (web/consumers.py);
the htmx extension sends nothing over the socket. So any other frame from a client is not a page's: the socket is closed with CLOSE_POLICY (4008) on the first one,
whatever it holds, before anything is parsed, and the frame costs its sender the price of
FRAME_COST connections. Opening a socket costs a session read, a subscription and a
snapshot of the page, so each user (or share link) has a budget of connections, a token
bucket per process: KUBEDASH_WEBSOCKET_CONNECT_BURST at once, refilled at
KUBEDASH_WEBSOCKET_CONNECTS_PER_SECOND. A connection over it is closed with CLOSE_TOO_MANY
(4429, "Disconnected — reload" in live.js) before the page's snapshot is taken. Frames larger
than KUBEDASH_WEBSOCKET_MAX_MESSAGE_BYTES are refused by the protocol with 1009 (serve.py).
docs/SERVING.md, "Limits".
"""
from __future__ import annotations

import time

from django.conf import settings
from prometheus_client import Counter

from dashboard.access.budgets import Budget

CLOSE_POLICY = 4008      # a frame from a client: pages send none (1008 in the 4xxx range autobahn allows)
CLOSE_TOO_MANY = 4429    # over the user's budget of connections
FRAME_COST = 10          # a stray frame costs as much as this many connections

REFUSED = Counter("kubedash_websocket_refused_total", "Page sockets closed for what their client did",
                  ["reason"])


_connects: Budget | None = None

# Session cookies this process has seen belong to someone (a page socket authenticated with it):
# only those are budgeted by session at the protocol (server/ws_limits.py); any other handshake is
# budgeted by its client's address, before a session is looked up, so cookies made up for each
# handshake buy nothing. {session key: monotonic time it was last vouched for}
KNOWN_SESSION_SECONDS = 600.0
MAX_KNOWN_SESSIONS = 10_000
_known_sessions: dict[str, float] = {}


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


def connects() -> Budget:
    global _connects
    if _connects is None:
        _connects = Budget(settings.KUBEDASH_WEBSOCKET_CONNECTS_PER_SECOND, settings.KUBEDASH_WEBSOCKET_CONNECT_BURST)
    return _connects


def may_connect(who: str) -> bool:
    if connects().take(who):
        return True
    REFUSED.labels("connections").inc()
    return False


def stray_frame(keys) -> None:
    """A frame from a client: charged to its session and user (the caller closes the socket)."""
    REFUSED.labels("frames").inc()
    for key in keys:
        connects().take(key, FRAME_COST)

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

from prometheus_client import Counter

# The budget, the known sessions and the close codes are access's: the protocol (server/ws_limits.py)
# shares them. The consumer reaches them here.
from dashboard.access.budgets import (CLOSE_POLICY, CLOSE_TOO_MANY, FRAME_COST, connects,  # noqa: F401 (re-exported)
                                      vouch_for_session)

REFUSED = Counter("kubedash_websocket_refused_total", "Page sockets closed for what their client did",
                  ["reason"])


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

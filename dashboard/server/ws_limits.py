"""Page sockets at the protocol: what a client may make Daphne do before the application runs.

A flood of frames costs the reactor their parsing and the application a queue entry each (20
sockets sending 1.1 million frames in 6 s cut Lease renewals from 481/s to 6/s); reconnecting
costs a handshake and the session and user reads of Channels' auth. So, in Daphne's protocol:
- the handshake is refused with 429 over a budget per client address (the proxy's X-Forwarded-For
  entry behind --proxy-headers), or per session for a session cookie a page socket of this process
  has authenticated with (access/budgets.py): KUBEDASH_WEBSOCKET_CONNECT_BURST at once, KUBEDASH_WEBSOCKET_CONNECTS_PER_SECOND
  after, before the application or the database is reached, and after the tarpit's delay
  (server/tarpit.py: a client reconnecting in a loop gets one refusal a second a connection);
- pages send one thing, PONG, their answer to each heartbeat BEAT (web/consumers.py): it is
  passed on at most PONGS_PER_BEAT a beat (a per-socket budget); any other data frame, or a
  faster stream of PONGs, ends the socket: reading stops at once (the transport is paused:
  what the client sends next is never read), the frame is not passed on, the close code 4008
  is sent, and the frame costs its session FRAME_COST handshakes; the connection is dropped
  after autobahn's close-handshake timeout;
- a frame over KUBEDASH_WEBSOCKET_MAX_MESSAGE_BYTES gets autobahn's 1009 close frame
  (failByDrop off: serve.py), not a TCP reset.
install(server) puts this protocol in Daphne's websocket factory.
"""
from __future__ import annotations

from http.cookies import CookieError, SimpleCookie

from autobahn.websocket.types import ConnectionDeny
from django.conf import settings

from dashboard.access.budgets import CLOSE_POLICY, FRAME_COST, Budget, connects, session_budget, session_known
from dashboard.compat.daphne import FrameGateProtocol, forwarded_address_header, install_websocket_protocol

from . import tarpit

PONG = b"pong"        # as web/consumers.PONG: the page's answer to a heartbeat
PONGS_PER_BEAT = 2    # a page answers once a beat; twice allows for beats it heard late


def _session_cookie(request) -> str:
    try:
        cookie = SimpleCookie(request.headers.get("cookie", ""))
    except CookieError:
        return ""
    session = cookie.get(settings.SESSION_COOKIE_NAME)
    return session.value if session is not None else ""


def client_address(transport, headers: dict, forwarded_header: str | None) -> str:
    """Who is connecting: the peer, or behind a trusted proxy (serve --proxy-headers) the address
    that proxy added, the last of X-Forwarded-For (the ones before it are the client's own words)."""
    address = str(getattr(transport.getPeer(), "host", ""))
    if forwarded_header:
        added = headers.get(forwarded_header.lower(), "").rsplit(",", 1)[-1].strip()
        address = added or address
    return address


def _key(protocol, request) -> str:
    """Whose handshake budget: a session's once a page socket here authenticated with it, else
    the client address's, decided before any session is looked up (a cookie made up for each
    handshake is only an address's)."""
    session = protocol.session
    if session and session_known(session):
        return session_budget(session)
    return f"client:{client_address(protocol.transport, request.headers, forwarded_address_header(protocol))}"


def _refuse():
    raise ConnectionDeny(429, "Too Many Requests")


class LimitedWebSocketProtocol(FrameGateProtocol):
    budget_key = ""
    denied = False    # the handshake was refused: Daphne never knew this connection

    session = ""   # the handshake's session cookie, if any

    def onConnect(self, request):
        self.session = _session_cookie(request)
        self.budget_key = _key(self, request)
        if not connects().take(self.budget_key):
            self.denied = True
            return tarpit.deferred("websocket_handshake", _refuse) or _refuse()
        return super().onConnect(request)

    pongs: Budget | None = None

    def onMessage(self, payload, isBinary):
        if self.reading_stopped:   # (a frame came: closing)
            return
        if not isBinary and payload == PONG and self._pong_allowed():
            return super().onMessage(payload, isBinary)
        # (not passed on; not `muted` either, which would keep the application from hearing of
        # the disconnect and unsubscribing)
        # Reading stops at once: the frames already read with this one (a read holds thousands of
        # small frames) are dropped unparsed, as what comes after them is never read.
        self.stop_reading()
        connects().take(self.budget_key, FRAME_COST)
        if self.session and session_known(self.session) and self.budget_key != session_budget(self.session):
            # (its first socket, paid for by its address: the session pays for its frame too)
            connects().take(session_budget(self.session), FRAME_COST)
        self.sendClose(code=CLOSE_POLICY)

    def _pong_allowed(self) -> bool:
        if self.pongs is None:
            beat = settings.KUBEDASH_LIVE_HEARTBEAT_SECONDS
            self.pongs = Budget(PONGS_PER_BEAT / beat, PONGS_PER_BEAT)
        return self.pongs.take("")

    def onClose(self, wasClean, code, reason):
        if not self.denied:
            super().onClose(wasClean, code, reason)


def install(server) -> None:
    """Daphne's websocket factory builds this protocol; protocol errors get their close code."""
    install_websocket_protocol(server, LimitedWebSocketProtocol, failByDrop=False)

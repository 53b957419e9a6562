"""Graceful shutdown of a serving process: on SIGTERM (or SIGINT) it drains, then exits.

1. It stops accepting: its listening ports close (the other workers keep accepting on the
   shared sockets, so new connections go there).
2. It gives up the maintenance Lease (dashboard.server.maintenance), so another process
   takes over at once instead of after the lease duration.
3. Keep-alive connections answer their next request with `Connection: close` and close after
   it; those left idle are closed after IDLE_CLOSE_SECONDS, not at once: a proxy may be sending
   a request on one right then (reset, the request lost), while the shipped nginx closes its
   idle upstream connections itself after 2 s (deploy/nginx). A client's next request opens a
   new connection, to another process.
4. Page websockets are closed with 1012 "service restart" (live.js reconnects on it) and
   watch streams end cleanly (the chunked response is completed): clients resume from the
   last resourceVersion they saw, elsewhere - kubectl's and client-go's watchers, and the
   reflector's relist if that revision has been compacted meanwhile.
5. It waits for the requests still running (writes finish and are answered) up to
   KUBEDASH_SHUTDOWN_GRACE_SECONDS, then stops the reactor. A second signal stops at once.
"""
from __future__ import annotations

import asyncio
import logging
import signal
import time

from asgiref.sync import sync_to_async
from daphne.http_protocol import WebRequest
from daphne.ws_protocol import WebSocketProtocol
from django.conf import settings

from dashboard.compat.daphne import connections, send_close
from dashboard.compat.twisted import close_after_response, http_channels
from dashboard.kube.hub import hub

from . import maintenance
from .observe import closed_by_protocol
from .workers import ADOPTED_PORTS

log = logging.getLogger(__name__)

SERVICE_RESTART = 1012   # RFC 6455 / IANA: "the service is restarted": clients reconnect
TICK_SECONDS = 0.05
SAME_SIGNAL_SECONDS = 1.0   # a second signal within this is the first one's copy (install)
IDLE_CLOSE_SECONDS = 3.0   # > the shipped nginx's upstream keepalive_timeout (2 s)


def install(server) -> None:
    """In a serving process, before its reactor runs (Daphne's own handlers are off)."""
    from twisted.internet import reactor   # noqa: PLC0415 (importing it installs a reactor: Daphne's first)

    state = {"draining_since": None}

    def on_signal(signum, frame):
        since = state["draining_since"]
        if since is not None:
            # A terminal's Ctrl-C reaches the worker twice: from the terminal (its process
            # group) and forwarded by the supervisor (workers.py). A second signal later: stop now.
            if time.monotonic() - since > SAME_SIGNAL_SECONDS:
                reactor.callFromThread(reactor.stop)
            return
        state["draining_since"] = time.monotonic()
        reactor.callFromThread(lambda: asyncio.ensure_future(drain(server)))

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)


def _stop_listening() -> None:
    from twisted.internet import reactor, tcp   # noqa: PLC0415 (importing it installs a reactor: Daphne's first)

    # A worker's port may be between two accepts (workers.accept_in_turns): not a reader then.
    ports = {*ADOPTED_PORTS, *(r for r in reactor.getReaders() if isinstance(r, tcp.Port))}
    for port in ports:
        if not port.disconnecting:
            port.stopListening()


def _close_keepalive(close_idle: bool) -> int:
    """Every connection's next response is its last; idle ones close too when close_idle.
    Returns how many connections are still open."""
    from twisted.internet import reactor   # noqa: PLC0415 (importing it installs a reactor: Daphne's first)

    channels = list(http_channels(reactor))
    for channel in channels:
        answering = close_after_response(channel)   # (a request arriving from now on too)
        if close_idle and not answering:
            channel.transport.loseConnection()
    return len(channels)


def _end_streams() -> None:
    for sub in hub.every_subscriber():
        sub.close()


def _busy(server) -> int:
    return sum(1 for proto in connections(server) if isinstance(proto, WebRequest) and not proto.finished)


def _close_websockets(server) -> None:
    """1012 to every open page socket. Sent by the protocol itself: autobahn lets an
    application close only with 1000 or 3000-4999, though a server may say 1012 (RFC 6455, IANA)."""
    closed_by_protocol(SERVICE_RESTART)   # what their log lines say (observe.py)
    for proto in connections(server):
        if isinstance(proto, WebSocketProtocol):
            send_close(proto, SERVICE_RESTART, b"service restart")


async def drain(server) -> None:
    from twisted.internet import reactor   # noqa: PLC0415 (importing it installs a reactor: Daphne's first)

    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + settings.KUBEDASH_SHUTDOWN_GRACE_SECONDS
    try:
        _stop_listening()
        _close_keepalive(close_idle=False)
        _close_websockets(server)
        _end_streams()
        await sync_to_async(maintenance.stop, thread_sensitive=False)()
        while loop.time() < deadline:
            close_idle = loop.time() - started >= IDLE_CLOSE_SECONDS
            still_open = _close_keepalive(close_idle)
            _end_streams()        # a watch that started meanwhile on an open connection
            if not _busy(server) and (close_idle or not still_open):
                break
            await asyncio.sleep(TICK_SECONDS)
    except Exception:
        log.exception("draining failed; stopping now")
    finally:
        if reactor.running:   # (unless a second signal stopped it already)
            reactor.stop()

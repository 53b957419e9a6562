"""Daphne (and autobahn under it) internals kubedash relies on (checked with Daphne 4.2.3 and
autobahn 26.10.2; tests/serving/test_compat.py).

How Server.run builds its factories and listens, its table of connections, how it starts an
application, what its HTTP request does in process() and reads after the application has
answered, its websocket factory, and autobahn's frame parsing and close frames.
"""
from __future__ import annotations

import daphne.server
from daphne.http_protocol import WebRequest
from daphne.ws_protocol import WebSocketProtocol


# --------------------------------------------------------------------------------------------
# The server


REQUEST = "daphne.request"   # the scope key Server gives an HTTP application its request under


class Server(daphne.server.Server):
    """Daphne's Server, telling each HTTP application which request it answers: scope[REQUEST],
    the WebRequest (for a response written to its connection directly, and how much of it is
    unsent). WebRequest.process() builds the scope and hands it, with itself, to
    Server.create_application(protocol, scope), which makes the application's task; Daphne
    offers no other way to tell an application its request."""

    def create_application(self, protocol, scope):
        if scope.get("type") == "http":
            scope[REQUEST] = protocol
        return super().create_application(protocol, scope)


def install_http_factory(factory_class) -> None:
    """Daphne's Server builds factory_class(server) as its HTTP factory: Server.run() looks
    HTTPFactory up in daphne.server's globals when it runs, and there is no argument for it."""
    daphne.server.HTTPFactory = factory_class


def http_factory(server: daphne.server.Server):
    """The server's HTTP factory (Server.http_factory: built in Server.run(), before ready_callable)."""
    return server.http_factory


def listening(server: daphne.server.Server, port) -> None:
    """Tell the server it listens on port (Server.listen_success: what its own endpoints call
    once listening; the address goes to its listening_addresses)."""
    server.listen_success(port)


def listen_on_no_endpoint(server: daphne.server.Server) -> None:
    """Server.run() listens on none of its endpoints (the caller adopts its sockets itself):
    Server.__init__ exits the process when given none, so it is given one, emptied here
    (Server.endpoints, read by run())."""
    server.endpoints = []


def failed_to_listen(server: daphne.server.Server) -> bool:
    """Did run() return without serving, an endpoint failing to listen (Server.abort_start: set
    by Server.stop() while the reactor is not running yet)?"""
    return server.abort_start


def connections(server: daphne.server.Server) -> list:
    """The server's open protocols: HTTP requests (WebRequest) and websockets (Server.connections,
    keyed by protocol; made in run())."""
    return list(server.connections)


# --------------------------------------------------------------------------------------------
# HTTP requests


class Request(WebRequest):
    """Daphne's HTTP request with one of its internals behind a named method.

    take_response(): the application no longer answers this response; something else completes
    it. Its end (the last body message) is ignored, and what Daphne keeps only for the application
    is dropped: WebRequest.application_queue (finish() and connectionLost() then send it no
    http.disconnect) and clean_headers (its copy of the request headers for the scope)."""

    response_taken = False

    def take_response(self) -> None:
        self.response_taken = True
        self.application_queue = None
        self.clean_headers = None

    def handle_reply(self, message):
        # (Daphne's Server passes each message the application sends here)
        if self.response_taken and message.get("type") == "http.response.body" and not message.get("more_body"):
            return
        super().handle_reply(message)


# --------------------------------------------------------------------------------------------
# Websockets


def install_websocket_protocol(server: daphne.server.Server, protocol_class, **options) -> None:
    """The server's websocket factory builds protocol_class, with autobahn's protocol options
    (Server.ws_factory: made in Server.run(), before ready_callable; its `protocol`)."""
    server.ws_factory.protocol = protocol_class
    server.ws_factory.setProtocolOptions(**options)


def forwarded_address_header(protocol: WebSocketProtocol) -> str | None:
    """The header a trusted proxy names the client in (serve --proxy-headers), None without one:
    the server's, through the websocket factory (WebSocketFactory.server_class: the Server)."""
    return protocol.factory.server_class.proxy_forwarded_address_header


class FrameGateProtocol(WebSocketProtocol):
    """Daphne's websocket protocol that can stop reading frames at once (stop_reading()): its
    socket is paused, and the frames already read with the last one are dropped unparsed.

    Relies on autobahn's WebSocketProtocol.processData() parsing the bytes read so far from
    `data` (returning whether to go on)."""

    reading_stopped = False

    def stop_reading(self) -> None:
        self.reading_stopped = True
        self.transport.pauseProducing()

    def processData(self) -> bool:
        if self.reading_stopped:
            self.data = b""
            return False
        return super().processData()


def send_close(protocol: WebSocketProtocol, code: int, reason: bytes) -> None:
    """Close an open websocket with any code: autobahn's sendClose accepts only 1000 and
    3000-4999 from an application, though a server may send others (1012: service restart).
    Relies on WebSocketProtocol.STATE_OPEN, `state` and sendCloseFrame(code, reasonUtf8)."""
    if protocol.state == WebSocketProtocol.STATE_OPEN:
        protocol.sendCloseFrame(code=code, reasonUtf8=reason)

"""Twisted internals kubedash relies on (checked with Twisted 26.10.0; tests/serving/test_compat.py).

HTTPChannel's header count, network producer, request line and `100 Continue`; Request's
connection-lost flag and form parsing; the TCP transport's write buffer (watch streams write to
the socket directly); a channel's keep-alive; a listening port's accepts per wake-up.
"""
from __future__ import annotations

import functools

from twisted.internet import tcp
from twisted.web.http import HTTPChannel


def header_bytes_received(channel: HTTPChannel) -> int:
    """Bytes of the request being read that are lines so far: its request line and header lines
    (HTTPChannel._receivedHeaderSize: counted in lineReceived before a line is handled, so 0 while
    the request line itself is handled; back to 0 once a request is complete)."""
    return channel._receivedHeaderSize


def pause_reading(channel: HTTPChannel) -> None:
    """Read no more from the channel's socket until resume_reading (HTTPChannel._networkProducer:
    the transport as an IPushProducer, set in connectionMade)."""
    channel._networkProducer.pauseProducing()


def resume_reading(channel: HTTPChannel) -> None:
    """Read from the channel's socket again (HTTPChannel._networkProducer)."""
    channel._networkProducer.resumeProducing()


def request_line(channel: HTTPChannel) -> tuple[bytes | None, bytes | None]:
    """(method, target) of the request being read, (None, None) before its request line is parsed
    (HTTPChannel._command and ._path: set when lineReceived parses the request line, deleted in
    allContentReceived)."""
    return getattr(channel, "_command", None), getattr(channel, "_path", None)


def request_target(channel: HTTPChannel) -> bytes:
    """The target (path?query) of the request whose headers are in (HTTPChannel._path)."""
    return channel._path


class HeldContinueChannel(HTTPChannel):
    """HTTPChannel whose `100 Continue` goes out only when continue_allowed() says so;
    send_continue() sends it later.

    Relies on HTTPChannel._send100Continue(): what allHeadersReceived calls for an HTTP/1.1
    request whose Expect header is 100-continue, writing the interim response."""

    def _send100Continue(self):
        if self.continue_allowed():
            HTTPChannel._send100Continue(self)

    def continue_allowed(self) -> bool:
        return True

    def send_continue(self) -> None:
        HTTPChannel._send100Continue(self)


def disconnected(request) -> bool:
    """Has the request's connection been lost (Request._disconnected, set by Request.connectionLost)?"""
    return request._disconnected


def request_factory_without_form_parsing(request_class):
    """HTTPChannel.requestFactory making request_class whose form bodies Twisted does not parse
    (Request.__init__'s parsePOSTFormSubmission=False; it sets the instance's
    _parsePOSTFormSubmission, so a class attribute of that name does nothing). The channel
    calls the factory with (channel, queue position)."""
    return functools.partial(request_class, parsePOSTFormSubmission=False)


def queued_bytes(transport) -> int:
    """Bytes written to a connection's transport that its socket has not taken yet: the TCP
    connection's (tcp.Connection, or the one beneath a TLS wrapper: its `transport`), from its
    write buffer (dataBuffer from offset, plus _tempDataLen written since its last doWrite);
    0 for another transport."""
    t = transport if isinstance(transport, tcp.Connection) else getattr(transport, "transport", None)
    return len(t.dataBuffer) - t.offset + t._tempDataLen if isinstance(t, tcp.Connection) else 0


class DirectChunkWriter:
    """Writes a Twisted request's body as HTTP/1.1 chunks straight to its connection, bypassing
    Request.write (framed as it frames them; the response must be chunked, its headers written).

    On plain TCP, when the transport holds nothing unsent, a chunk goes out with one non-blocking
    send(); what the socket does not take (and everything while the transport holds something,
    so the order is kept) is left to the transport, which sends it when the socket is writable.
    Over TLS every chunk goes through the TLS transport. Request.finish still ends the response
    (the last chunk, after everything written here).

    Relies on tcp.Connection's write buffer (dataBuffer, offset, _tempDataLen), its state flags
    (connected, disconnecting, _writeDisconnected), its `socket`, the TCP transport beneath TLS
    as `transport`, and Request._disconnected."""

    __slots__ = ("request", "transport", "tcp", "sock")

    def __init__(self, request):
        self.request = request
        self.transport = transport = request.channel.transport
        self.tcp = transport if isinstance(transport, tcp.Connection) else None
        self.sock = self.tcp.socket if self.tcp is not None else None

    def finish(self) -> None:
        """Complete the response (the last chunk), unless it is over already."""
        request = self.request
        if not request.finished and not request._disconnected:
            request.finish()

    def write(self, data: bytes) -> int:
        """Write data as one chunk; returns the bytes still queued for the socket, or -1 when
        the response is over (finished or disconnected) and nothing was written."""
        return self.write_frame(b"%x\r\n%b\r\n" % (len(data), data))

    def write_frame(self, frame: bytes) -> int:
        """write() of bytes framed already (one or more whole chunks: a frame built once and
        written to many watchers); the same answer."""
        request = self.request
        if request.finished or request._disconnected:
            return -1
        t = self.tcp
        if t is None:   # TLS: through its transport; what is queued is the TCP transport's beneath
            self.transport.write(frame)
            t = getattr(self.transport, "transport", None)
            if not isinstance(t, tcp.Connection):
                return 0
            return len(t.dataBuffer) - t.offset + t._tempDataLen
        if not t._tempDataLen and t.offset == len(t.dataBuffer) and t.connected and not t.disconnecting \
                and not t._writeDisconnected:
            try:
                sent = self.sock.send(frame)
            except OSError:   # EAGAIN, or the connection broke: the transport finds out when it writes
                sent = 0
            if sent == len(frame):
                return 0
            frame = frame[sent:]
        t.write(frame)
        return len(t.dataBuffer) - t.offset + t._tempDataLen


def http_channels(reactor):
    """The HTTP connections of this process, plain or inside TLS: the protocols of the reactor's
    readers (tcp.Connection.protocol), through a TLS wrapper's wrappedProtocol."""
    for reader in reactor.getReaders():
        proto = getattr(reader, "protocol", None)
        proto = getattr(proto, "wrappedProtocol", proto)
        if isinstance(proto, HTTPChannel):
            yield proto


def _last_response(request, version) -> bool:
    """HTTPChannel.checkPersistence for a closing channel: this response says `Connection: close`."""
    request.responseHeaders.setRawHeaders(b"Connection", [b"close"])
    return False


def close_after_response(channel: HTTPChannel) -> bool:
    """Every response of the channel from now on is its last (`Connection: close`), the one being
    answered included; returns whether one is being answered (else the channel is idle).

    Relies on HTTPChannel.checkPersistence(request, version) deciding each request's persistence
    when its headers are in (replaced on the instance), `persistent` being read when a response
    is complete (requestDone), and _handlingRequest."""
    channel.checkPersistence = _last_response
    if channel._handlingRequest:
        channel.persistent = False      # closes once this response is complete
        return True
    return False


def after_each_accept(port: tcp.Port, then) -> None:
    """The listening port accepts one connection per wake-up, then calls then() (Twisted's accepts
    up to tcp.Port.numberAccepts at a time, 100 to start with: doRead reads and adjusts it; here it
    is set to 1 before each doRead, which is replaced on the instance)."""
    read = port.doRead

    def doRead():
        port.numberAccepts = 1
        read()
        then()

    port.doRead = doRead

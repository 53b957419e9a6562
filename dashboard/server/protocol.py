"""Daphne's HTTP protocol with bounds on what a client may send, and how slowly.

Twisted reads a whole request (headers, then body) before Daphne hands it to the application,
so the bounds must hold here, while it is read (docs/SERVING.md, "Limits"):

- a request line longer than KUBEDASH_MAX_URL_BYTES is answered 414, headers beyond
  KUBEDASH_MAX_HEADER_BYTES 431 (Twisted would drop the connection without a word);
- a request must send all its headers within KUBEDASH_HEADER_TIMEOUT_SECONDS of its first byte
  (slow-loris sockets are closed), and a connection idle between requests, or while sending a
  body, is closed after KUBEDASH_IDLE_TIMEOUT_SECONDS. Twisted stops that idle clock while a
  request is answered, so watches and slow lists are never cut;
- at the end of the headers admission.py decides whether the body may be read at all: a body
  that may be larger than KUBEDASH_ANONYMOUS_BODY_BYTES needs a token or session (401 without
  one), which is checked on the fast lane's thread while the socket is paused
  (admission.credentials_valid: 401 if it is not valid); then a declared length over the limit
  is answered 413 (admission.size_refusal), all before any of the body is read;
- a chunked body is answered 413 the moment it passes the limit;
- the body is kept as received, joined once into the one copy the application reads.

A refused request is answered at once with a metav1.Status and `Connection: close`; what the
client still sends is read and dropped for a moment (so it reads the answer rather than a
reset, as Go's net/http does), then the connection is closed.

What this relies on inside Twisted and Daphne is in dashboard/compat/twisted.py and daphne.py.
"""
from __future__ import annotations

import asyncio
import io
import time
from http import HTTPStatus

import orjson
from daphne.http_protocol import HTTPFactory
from django.conf import settings
from twisted.internet.interfaces import ISSLTransport
from twisted.web.http_headers import Headers

from dashboard.compat.daphne import Request as DaphneRequest
from dashboard.compat.twisted import (HeldContinueChannel, disconnected, header_bytes_received, pause_reading,
                                      request_factory_without_form_parsing, request_line, request_target,
                                      resume_reading)
from dashboard.kube.errors import ApiError, request_entity_too_large, unauthorized

from . import observe
from .admission import anonymous_refusal, body_limit, credentials_valid, needs_credentials, size_refusal
from .lanes import lanes
from .streams import StreamSubscriber, StreamWriter

REFUSED_LINGER_SECONDS = 2   # how long a refused connection's remaining upload is dropped


def uri_too_long(limit: int) -> ApiError:
    return ApiError(414, "RequestURITooLong", f"the request line is longer than {limit} bytes: "
                    "shorten the URL (for example a labelSelector with fewer values, or several requests)")


def headers_too_large(limit: int) -> ApiError:
    return ApiError(431, "RequestHeaderFieldsTooLarge", f"the request headers are larger than {limit} bytes")


class LimitedChannel(HeldContinueChannel):
    """One HTTP/1.1 connection: line and header limits, the header clock, refusals."""

    _awaiting_headers = True
    _header_deadline = None   # time.monotonic() by which the request's headers must be in
    _idle_deadline = None     # ... by which the connection must have sent something (Twisted's timeOut)
    _refused = False
    _request_line_bytes = 0
    _continue = None    # "held": `Expect: 100-continue` waits for the credentials check; "owed"
    _started = None     # perf_counter at the request's first byte (a refusal's logged latency)
    _long_line = b""    # the start of a request line too long to parse (a 414's log line)

    def __init__(self):
        super().__init__()
        # The request line ("GET <url> HTTP/1.1") and each header line; all of them together.
        self.MAX_LENGTH = settings.KUBEDASH_MAX_URL_BYTES + len("DELETE  HTTP/1.1")
        self.totalHeadersSize = settings.KUBEDASH_MAX_URL_BYTES + settings.KUBEDASH_MAX_HEADER_BYTES

    def dataReceived(self, data):
        if self._awaiting_headers and self._header_deadline is None:
            self._started = time.perf_counter()
            self._header_deadline = time.monotonic() + settings.KUBEDASH_HEADER_TIMEOUT_SECONDS
        super().dataReceived(data)

    def lineReceived(self, line):
        # Twisted counts the request line among the headers; the two limits are separate.
        received = header_bytes_received(self)
        if received == 0:
            self._request_line_bytes = len(line)
        elif received - self._request_line_bytes + len(line) > settings.KUBEDASH_MAX_HEADER_BYTES:
            return self.refuse(headers_too_large(settings.KUBEDASH_MAX_HEADER_BYTES))
        super().lineReceived(line)

    def lineLengthExceeded(self, line):
        if header_bytes_received(self) == 0:    # still the request line
            self._long_line = line[:256]
            return self.refuse(uri_too_long(settings.KUBEDASH_MAX_URL_BYTES))
        return self.refuse(headers_too_large(settings.KUBEDASH_MAX_HEADER_BYTES))

    def allHeadersReceived(self):
        self._awaiting_headers = False
        self._stop_header_clock()
        super().allHeadersReceived()

    def continue_allowed(self) -> bool:
        # Only once the body may be read: never after a refusal, and after the credentials check.
        if self._refused:
            return False
        if self._continue == "held":
            self._continue = "owed"
            return False
        return True

    def release_body(self):
        """The credentials check passed: read the body (and say so if the client waits to be told)."""
        owed, self._continue = self._continue == "owed", None
        resume_reading(self)
        if owed:
            self.send_continue()

    def allContentReceived(self):
        if not self._refused:
            super().allContentReceived()

    def requestDone(self, request):
        self._awaiting_headers = True      # the next request's clock starts with its first byte
        super().requestDone(request)

    def connectionLost(self, reason):
        self._stop_header_clock()
        _deadlines.channels.discard(self)
        super().connectionLost(reason)

    def _stop_header_clock(self):
        self._header_deadline = None

    # Timeouts are deadlines checked by one sweep a second for all of a process's connections
    # (_Deadlines), not timers: Twisted's TimeoutMixin cancels and re-creates a timer at least
    # twice per request, and the header clock was a third (together ~5% of a renewal).
    def connectionMade(self):
        super().connectionMade()
        _deadlines.watch(self)

    def setTimeout(self, period):
        """TimeoutMixin's: the idle timeout, `period` seconds from now (None: paused); returns
        the previous period."""
        previous, self.timeOut = self.timeOut, period
        self._idle_deadline = None if period is None else time.monotonic() + period
        return previous

    def resetTimeout(self):
        if self._idle_deadline is not None and self.timeOut is not None:
            self._idle_deadline = time.monotonic() + self.timeOut

    def check_deadlines(self, now: float) -> None:
        if self._header_deadline is not None and now >= self._header_deadline:
            self._headers_too_slow()
        elif self._idle_deadline is not None and now >= self._idle_deadline:
            self._idle_deadline = None
            self.timeoutConnection()

    def _headers_too_slow(self):
        self._header_deadline = None
        self.timeoutConnection()   # Twisted's close for a timed-out client (aborted if it lingers)

    def refuse(self, err: ApiError) -> None:
        """Answer err now, read no more of this request, close."""
        if self._refused:
            return
        self._refused = True
        self._stop_header_clock()
        self.setTimeout(None)
        body = orjson.dumps(err.status())
        peer = self.transport.getPeer()
        audit = observe.refused(*self._request_line(), err.code, self._started, client=getattr(peer, "host", ""))
        head = (f"HTTP/1.1 {err.code} {HTTPStatus(err.code).phrase}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n").encode("latin-1")
        self.transport.write(head + audit + b"\r\n" + body)
        self.dataReceived = self.lineReceived = self.rawDataReceived = _drop
        resume_reading(self)   # in case a credentials check paused it
        if not ISSLTransport.providedBy(self.transport):
            # TCP: FIN after the answer. (TLS has no half-close: a TLS transport would pass
            # this on to the TCP connection beneath it and break the session.)
            self.transport.loseWriteConnection()
        self.callLater(REFUSED_LINGER_SECONDS, self.transport.loseConnection)


    def _request_line(self) -> tuple[str, str, bytes]:
        """(method, path, query) of the request being refused, as far as it was read."""
        command, target = request_line(self)
        if command is None:     # the request line itself was too long: what fits of it
            command, _, target = self._long_line.partition(b" ")
        path, _, query = (target or b"").partition(b"?")
        return command.decode("latin-1")[:16], path.decode("latin-1"), query


def _drop(*args) -> None:
    return None


class LimitedRequest(DaphneRequest):
    """Daphne's request, its body bounded and checked before it is read."""

    _chunks: list | None = None
    _size = 0
    _limit = 0
    _checking = False
    # A watch stream handed over to its subscriber (streams.StreamSubscriber.hand_over): it
    # writes and ends this response; the application has returned (or is returning).
    watch = None
    _on_end: list | None = None   # called once the response is over (when_ended)
    _over = False

    def hand_over(self, sub) -> bool:
        """Let sub drive this response from now on; False if it is over already."""
        if self._over or self.finished or disconnected(self):
            return False   # (lost while the stream caught up: its application is told, not sub)
        self.watch = sub
        # What only the application or the headers' writing read, dropped for the watch's life
        # (~4 KB): the application's queue (at the end the watch is told, not it) and Daphne's
        # copy of the headers (take_response), the request and response headers (sent already),
        # the parsed query.
        self.take_response()
        self.requestHeaders, self.responseHeaders = Headers(), Headers()
        self.args = {}
        return True

    def when_ended(self, callback) -> None:
        """Call callback() once this response is over (finished or its connection lost); now if it is."""
        if self._over or self.finished or disconnected(self):
            callback()
        else:
            self._on_end = [*(self._on_end or ()), callback]

    def _ended(self) -> None:
        if self._over:
            return
        self._over = True
        watch, self.watch = self.watch, None
        if watch is not None:
            watch.end()
        callbacks, self._on_end = self._on_end, None
        for callback in callbacks or ():
            callback()

    def finish(self):
        super().finish()
        self._ended()

    def connectionLost(self, reason):
        super().connectionLost(reason)
        self._ended()

    def gotLength(self, length):
        self._chunks = []
        self.content = io.BytesIO()   # replaced by the body in requestReceived; never a temp file
        if not length and length is not None:
            return                    # no body: nothing to decide
        path = request_target(self.channel).split(b"?", 1)[0].decode("latin-1")
        headers = [(name.lower(), value) for name, values in self.requestHeaders.getAllRawHeaders()
                   for value in values]
        self._limit = body_limit(path)
        if not needs_credentials(length):
            return
        refusal = anonymous_refusal(headers, length)
        if refusal is not None:
            return self.channel.refuse(refusal)
        self._check_credentials(headers, size_refusal(path, length))

    def _check_credentials(self, headers, then: ApiError | None) -> None:
        """Read no more until the token or session proves valid (at most what one read of the
        socket already holds is buffered meanwhile)."""
        channel = self.channel
        pause_reading(channel)
        channel._continue = "held"
        self._checking = True
        future = asyncio.get_event_loop().run_in_executor(lanes().fast.executor, credentials_valid, headers)

        def checked(done: asyncio.Future) -> None:
            if not self._checking:    # the whole body had arrived already; Django answers it
                return
            self._checking = False
            if disconnected(self) or channel._refused:
                return
            if done.exception() is not None or not done.result():
                channel.refuse(unauthorized())
            elif then is not None:
                channel.refuse(then)          # known sender, too large a body: 413
            else:
                channel.release_body()

        future.add_done_callback(checked)

    def handleContentChunk(self, data):
        if self.channel is None or self.channel._refused:
            return
        self._size += len(data)
        if self._size > self._limit:
            return self.channel.refuse(request_entity_too_large(self._limit))
        self._chunks.append(data)

    def watch_subscriber(self, **fields) -> StreamSubscriber:
        """A watch's hub subscriber that writes to this response's connection once attached
        (kube/watch_views.py asks it of the request's context: its `stream` is this request)."""
        return StreamSubscriber(self.stream_writer, **fields)

    def stream_writer(self) -> StreamWriter | None:
        """A direct writer for this response's body, once its headers are out (chunked), else None."""
        if (self.startedWriting and self.chunked and not self.finished and not disconnected(self)
                and self.channel is not None and not self.responseHeaders.hasHeader(b"content-encoding")):
            return StreamWriter(self)
        return None

    def requestReceived(self, command, path, version):
        self._checking = False
        self.channel._continue = None
        # The one copy of the body: Daphne reads it whole (request_buffer_size) and the dispatch
        # hands the same bytes to Django.
        self.content = io.BytesIO(b"".join(self._chunks or ()))
        self._chunks = None
        super().requestReceived(command, path, version)


class _Deadlines:
    """The open connections of this process, checked once a second against their deadlines."""

    SWEEP_SECONDS = 1.0

    def __init__(self):
        self.channels: set[LimitedChannel] = set()
        self.call = None

    def watch(self, channel: LimitedChannel) -> None:
        self.channels.add(channel)
        if self.call is None:
            self.call = channel.callLater(self.SWEEP_SECONDS, self.sweep, channel.callLater)

    def sweep(self, call_later) -> None:
        now = time.monotonic()
        for channel in list(self.channels):
            channel.check_deadlines(now)
        self.call = call_later(self.SWEEP_SECONDS, self.sweep, call_later) if self.channels else None


_deadlines = _Deadlines()

# Django parses forms; Twisted's copy of a form's fields would be wasted.
REQUEST_FACTORY = request_factory_without_form_parsing(LimitedRequest)


class LimitedHTTPFactory(HTTPFactory):
    """Daphne's HTTP factory building LimitedChannel / LimitedRequest, with the idle timeout."""

    protocol = LimitedChannel

    def __init__(self, server):
        super().__init__(server)
        self.timeOut = settings.KUBEDASH_IDLE_TIMEOUT_SECONDS

    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = REQUEST_FACTORY
        return protocol

    def log(self, request):
        """Twisted formats a combined-log line per request for its own log, which nobody reads
        here (2% of a renewal): the request log is dashboard.server.observe's JSON line."""


def request_buffer_size() -> int:
    """Daphne's read size for a request body: all of the largest allowed body in one message."""
    return max(settings.KUBEDASH_MAX_BODY_BYTES, settings.DATA_UPLOAD_MAX_MEMORY_SIZE) + 1

"""A watch's lines straight to its socket: the server's side of a watch stream.

kube/watch_views.py streams a watch; when kubedash's HTTP server serves it (Daphne, HTTP/1.1
chunked), the subscriber it gets from kube.hub.direct_subscriber is a StreamSubscriber made
here for that request: the hub's dispatch appends each event's line to it and the hub flushes
it (at most every FLUSH_INTERVAL_SECONDS) through a StreamWriter, one chunk and usually one
send() per flush, however many events piled up; the stream's task only wakes for its timer.
Anything else (no writer yet, another server) uses the Subscriber's queue.
"""
from __future__ import annotations

import asyncio
import contextvars

from daphne.http_protocol import WebRequest
from django.conf import settings
from twisted.internet import tcp

from dashboard.kube.hub import Event, Subscriber, hub
from dashboard.kube.metrics import WATCH_TERMINATED


# The Twisted request an ASGI application task answers (set by protocol.LimitedRequest.process,
# so it is in the task's context): streamed responses ask it how much the client has not taken.
current_request: contextvars.ContextVar = contextvars.ContextVar("kubedash_http_request", default=None)


def unsent_bytes(request: WebRequest | None) -> int:
    """Bytes of this response queued for its socket and not yet taken by the client; -1 once
    the response is over (disconnected); 0 when unknown (another server)."""
    if request is None:
        return 0
    if request.finished or request._disconnected or request.channel is None:
        return -1
    t = request.channel.transport
    t = t if isinstance(t, tcp.Connection) else getattr(t, "transport", None)   # TLS: the TCP beneath
    return len(t.dataBuffer) - t.offset + t._tempDataLen if isinstance(t, tcp.Connection) else 0


def abort(request: WebRequest | None) -> None:
    """Cut the connection of a response that cannot be completed: the client sees a broken body,
    never a complete-looking one."""
    if request is not None and request.channel is not None and request.channel.transport is not None:
        request.channel.transport.abortConnection()


class StreamSubscriber(Subscriber):
    """A watch stream's subscriber that writes to its connection directly (once attached).

    Made per request by protocol.LimitedRequest.watch_subscriber, with `open_writer`: the
    response's StreamWriter once its headers are out (chunked), else None (then attach()
    declines and the Subscriber's queue is used).

    The hub's dispatch encodes each event this watcher must see (the line is shared by every
    JSON watcher of the revision) and appends it to `out`, synchronously; then the hub flushes
    every watcher that got something (in the same loop turn, or FLUSH_INTERVAL_SECONDS after
    its previous flush): one chunk, one write (a plain `send` on TCP when nothing is queued
    before it) per watcher, however many events piled up. The
    stream's task sleeps until its timer (bookmarks, the deadline) or close() wakes it - no
    task wake-up, no ASGI message, no Twisted writer registration per event.

    Bounded: a watcher more than KUBE_WATCH_QUEUE_SIZE events behind - estimated from the
    bytes its socket has not taken - is closed (its response ends cleanly, its client resumes
    from the last resourceVersion it got), never buffered on; `out` never holds more than that
    many lines (a burst that reaches it is written at once).
    """

    writer = None          # set by attach(); None: the queue of Subscriber is used
    open_writer = None     # () -> StreamWriter | None
    encode = None          # (type, Event) -> bytes
    counter = None         # apiserver_watch_events_total child of this resource
    out: list | None = None
    final: bytes | None = None
    waiter: asyncio.Future | None = None
    woken = False
    events_written = 0
    bytes_written = 0

    def __init__(self, open_writer, **fields):
        super().__init__(**fields)
        self.open_writer = open_writer

    def attach(self, encode, counter) -> bool:
        writer = self.open_writer() if not self.closed else None
        if writer is None:
            return False
        self.writer, self.encode, self.counter = writer, encode, counter
        self.limit = settings.KUBE_WATCH_QUEUE_SIZE   # (a settings lookup costs a µs: not per event)
        self.out = []
        return True

    def offer(self, ev: Event) -> None:
        # The hub offers ev only to the watchers of its cluster, kind and namespace (or all namespaces).
        if self.writer is None or self.buffer is not None or self.matching is not None or self.names \
                or self.field_selector is not None:
            return super().offer(ev)
        if self.closed or ev.rv <= self.start_rv:
            return
        self._pend(self.encode(ev.type, ev))

    def _deliver(self, ev: Event) -> None:
        if self.writer is None:
            return super()._deliver(ev)
        kind = self.decide(ev)
        if kind is not None:
            self._pend(self.encode(kind, ev))

    def _pend(self, line: bytes) -> None:
        """Queue a line for the next flush (the first one schedules it). More than a queue's
        worth before that flush is written at once: lines waiting here for at most
        FLUSH_INTERVAL_SECONDS are not the client being behind, so only the socket's own
        backlog (flush's estimate) closes the watcher."""
        out = self.out
        out.append(line)
        if len(out) == 1:
            hub.schedule_flush(self)
        elif len(out) > self.limit:
            written = self.flush()
            if written:
                self.counter.inc(written)

    def flush(self) -> int:
        """Write what is pending; returns the number of events written."""
        out = self.out
        if not out or self.closed:
            return 0
        n = len(out)
        data = out[0] if n == 1 else b"".join(out)
        out.clear()
        behind = self.writer.write(data)
        if behind < 0:
            return 0     # the client went away: the stream's task is being cancelled
        self.events_written += n
        self.bytes_written += len(data)
        # Events not yet taken by the client, estimated from the bytes still queued for its
        # socket and the average size of what this watcher was sent.
        if behind and behind * self.events_written > self.limit * self.bytes_written:
            self.overflow()
        return n

    def sent(self, events: int, size: int) -> None:
        """Events written another way (the starting list, the catch-up): they count in the
        estimate of how far behind the client is."""
        self.events_written += events
        self.bytes_written += size

    def overflow(self) -> None:
        WATCH_TERMINATED.labels(self.resource.plural).inc()
        self.close()

    def wake(self) -> None:
        self.woken = True
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until close() or the stream's timer wakes it."""
        if not self.woken:
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        self.woken = False

    def close(self, final=None) -> None:
        if self.writer is None:
            return super().close(final)
        if self.closed:
            return
        self.closed = True
        self.out.clear()
        self.final = final
        self.wake()


class StreamWriter:
    """Writes a streamed response's body to its connection, bypassing the ASGI send path.

    For a watch stream (StreamSubscriber above) once Daphne has sent the
    headers: each write is one HTTP/1.1 chunk, framed here as Twisted's Request.write would.
    On plain TCP, when Twisted holds nothing unsent for the connection, the chunk goes out
    with one non-blocking send(); what the socket does not take (and everything while Twisted
    holds something, so the order is kept) is left to the transport, which sends it when the
    socket is writable. Over TLS every chunk goes through the TLS transport. The response is
    still ended by Daphne (Request.finish writes the last chunk after everything written here).
    """

    __slots__ = ("request", "transport", "tcp", "sock")

    def __init__(self, request: WebRequest):
        self.request = request
        self.transport = transport = request.channel.transport
        self.tcp = transport if isinstance(transport, tcp.Connection) else None
        self.sock = self.tcp.socket if self.tcp is not None else None

    def write(self, data: bytes) -> int:
        """Write data as one chunk; returns the bytes still queued for the socket, or -1 when
        the response is over (finished or disconnected) and nothing was written."""
        request = self.request
        if request.finished or request._disconnected:
            return -1
        frame = b"%x\r\n%b\r\n" % (len(data), data)
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

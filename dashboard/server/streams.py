"""A watch's lines straight to its socket: the server's side of a watch stream.

kube/watch_views.py streams a watch; when kubedash's HTTP server serves it (Daphne, HTTP/1.1
chunked), the subscriber it gets from its request context's stream (protocol.LimitedRequest
watch_subscriber) is a StreamSubscriber made here for that request: the hub's dispatch appends
each event's line to it and the hub flushes it (at most every FLUSH_INTERVAL_SECONDS) through a
StreamWriter, one chunk and usually one send() per flush, however many events piled up. Once
caught up, the view hands the stream to it and the request's application returns: the
subscriber's timer, close() and the connection's end drive the rest. Anything else (no writer
yet, another server) uses the Subscriber's queue and the view's loop.
"""
from __future__ import annotations

import asyncio
import contextvars

from daphne.http_protocol import WebRequest
from django.conf import settings

from dashboard.compat.twisted import DirectChunkWriter, disconnected, queued_bytes
from dashboard.kube.hub import LogEntry, Subscriber, hub
from dashboard.kube.metrics import WATCH_TERMINATED


def unsent_bytes(request: WebRequest | None) -> int:
    """Bytes of this response queued for its socket and not yet taken by the client; -1 once
    the response is over (disconnected); 0 when unknown (another server)."""
    if request is None:
        return 0
    if request.finished or disconnected(request) or request.channel is None:
        return -1
    return queued_bytes(request.channel.transport)


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
    before it) per watcher, however many events piled up - no task wake-up, no ASGI message,
    no Twisted writer registration per event.

    Once the stream has caught up (its starting events and the log since are sent), the view
    hands the rest over (hand_over): from then on this object is the stream. Its timer sends
    the bookmarks and ends it at the deadline, close() ends it (revocation's final ERROR
    line, overflow, shutdown), the connection's loss ends it (protocol.LimitedRequest), and
    it completes the response itself (Request.finish: the last chunk; the connection stays
    open for the next request). The request's ASGI application - Django's request, response
    and view, their tasks and frames - has returned by then: an idle watch costs this object,
    its writer, clock and guard, and Twisted's request.

    Bounded: a watcher more than KUBEDASH_WATCH_QUEUE_SIZE events behind - estimated from the
    bytes its socket has not taken - is closed (its response ends cleanly, its client resumes
    from the last resourceVersion it got), never buffered on; `out` never holds more than that
    many lines (a burst that reaches it is written at once).
    """

    __slots__ = ("writer", "open_writer", "encode", "counter", "limit", "out", "final", "clock", "guard", "timer",
                 "ended", "events_written", "bytes_written")

    def __init__(self, open_writer, **fields):
        super().__init__(**fields)
        self.open_writer = open_writer   # () -> StreamWriter | None
        self.writer = None     # set by attach(); None: the queue of Subscriber is used
        self.encode = None     # (type, LogEntry) -> bytes
        self.counter = None    # apiserver_watch_events_total child of this resource
        self.limit = 0
        self.out: list | None = None
        self.final: bytes | None = None   # closed before the hand-over: the view's last line (an ERROR event)
        self.clock = None      # set by hand_over(): watch_views._Clock
        self.guard = None      # ... and the stream's access Guard (or None)
        self.timer: asyncio.TimerHandle | None = None
        self.ended = False
        self.events_written = 0
        self.bytes_written = 0

    def attach(self, encode, counter) -> bool:
        writer = self.open_writer() if not self.closed else None
        if writer is None:
            return False
        self.writer, self.encode, self.counter = writer, encode, counter
        self.open_writer = None
        self.limit = settings.KUBEDASH_WATCH_QUEUE_SIZE   # (a settings lookup costs a µs: not per event)
        self.out = []
        return True

    def offer(self, ev: LogEntry) -> None:
        # The hub offers ev only to the watchers of its cluster, kind and namespace (or all namespaces).
        if self.writer is None or self.buffer is not None or self.matching is not None or self.names \
                or self.field_selector is not None:
            return super().offer(ev)
        if self.closed or ev.rv <= self.start_rv:
            return
        self._pend(self.encode(ev.type, ev))

    def _deliver(self, ev: LogEntry) -> None:
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
            return 0     # the client went away: the stream is being ended
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

    def hand_over(self, clock, guard) -> None:
        """The rest of the stream is this object's: see the class's docstring."""
        self.clock, self.guard = clock, guard
        if not self.writer.request.hand_over(self):
            return self.end()   # the connection was lost meanwhile
        self._arm(asyncio.get_running_loop())

    def _arm(self, loop) -> None:
        wake = self.clock.wake_time()
        # An empty context: the request's (its Django and asgiref state) must not stay alive for this.
        self.timer = loop.call_at(wake if wake > loop.time() else loop.time() + 0.5, self._tick,
                                  context=contextvars.Context())

    def _tick(self) -> None:
        loop = asyncio.get_running_loop()
        bookmark, ended = self.clock(loop.time())
        if bookmark is not None or ended:
            written = self.flush()      # what the hub has pending goes first
            if bookmark is not None and not self.closed and self.writer.write(bookmark) >= 0:
                written += 1
            if written:
                self.counter.inc(written)
        if ended:
            self.end()
        elif not self.closed:
            self._arm(loop)

    def close(self, final=None) -> None:
        if self.writer is None:
            return super().close(final)
        if self.closed:
            return
        self.closed = True
        self.out.clear()
        if self.clock is None:
            self.final = final   # not handed over yet: the view sends it and ends
        else:
            self.end(final)

    def end(self, final: bytes | None = None) -> None:
        """(Handed over) the stream is over: its last line if any, then the response's end."""
        if self.ended:
            return
        self.ended = self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        hub.unregister(self)
        if self.guard is not None:
            hub.unguard(self.guard)
        if final is not None and self.writer.write(final) >= 0:
            self.counter.inc()
        self.writer.finish()


class StreamWriter(DirectChunkWriter):
    """Writes a watch stream's body to its connection (StreamSubscriber above), once Daphne has
    sent the headers: each write one HTTP/1.1 chunk, straight to the socket when nothing is
    queued before it (compat.twisted.DirectChunkWriter). The response is still ended by Daphne
    (Request.finish writes the last chunk after everything written here)."""

    __slots__ = ()

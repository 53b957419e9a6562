"""A watch's lines straight to its socket: the server's side of a watch stream.

kube/watch_views.py streams a watch; when kubedash's HTTP server serves it (Daphne, HTTP/1.1
chunked), the subscriber it gets from its request context's stream (protocol.LimitedRequest
watch_subscriber) is a StreamSubscriber made here for that request: the hub's dispatch appends
each event's line to it and the hub flushes it (at most every FLUSH_INTERVAL_SECONDS) through a
StreamWriter, one chunk and usually one send() per flush, however many events piled up. Once
caught up, the view hands the stream to it and the request's application returns: the
subscriber's timer, close() and the connection's end drive the rest; a plain one (every event of
its scope, in a format others share) then joins its scope's Broadcast, which encodes and frames
each flush once and writes those bytes to every member. Anything else (no writer yet, another
server) uses the Subscriber's queue and the view's loop.
"""
from __future__ import annotations

import asyncio
import contextvars

from daphne.http_protocol import WebRequest
from django.conf import settings

from dashboard.compat.twisted import DirectChunkWriter, disconnected, queued_bytes
from dashboard.kube.hub import FLUSH_SLICE, LogEntry, Subscriber, hub
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
                 "ended", "events_written", "bytes_written", "shared", "broadcast")

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
        self.shared = None     # encode's format key when others may share its bytes (attach)
        self.broadcast: Broadcast | None = None   # joined once handed over (plain watchers only)

    def attach(self, encode, counter, shared=None) -> bool:
        writer = self.open_writer() if not self.closed else None
        if writer is None:
            return False
        self.writer, self.encode, self.counter, self.shared = writer, encode, counter, shared
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
            written = self._write()
            if written:
                self.counter.inc(written)

    def flush(self) -> int:
        """Write what is pending; returns the number of events written. (The hub's flush: a
        plain watcher handed over joins its broadcast here, outside the hub's dispatch.)"""
        n = self._write()
        if self.clock is not None and self.shared is not None and self.broadcast is None and not self.closed:
            self._join()
        return n

    def _join(self) -> None:
        """From now on, this watcher's events come through its scope's broadcast, if it takes
        every event of the scope after the last one dispatched (its own pending ones written first)."""
        if self.matching is not None or self.names or self.field_selector is not None or self.buffer is not None \
                or self.start_rv > hub.last_rv:
            return
        written = self._write()
        if written:
            self.counter.inc(written)
        if not self.closed:
            self.broadcast = hub.join(self, self.shared, self._new_broadcast)

    def _new_broadcast(self) -> "Broadcast":
        return Broadcast(self.shared, self.encode, self.counter, self.limit)

    def _write(self) -> int:
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
        if self.shared is not None:
            self._join()
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
            # what the hub has pending for it goes first
            written = self.flush() if self.broadcast is None else self.broadcast.catch_up(self)
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


class _Gone:
    """A broadcast's place whose watcher took its share already (Broadcast.catch_up)."""

    __slots__ = ()
    closed = True


GONE = _Gone()


class Broadcast:
    """The handed-over watchers of one scope (cluster, kind, namespace) that take every event of
    it in one format (hub.join): each event is encoded once, each flush's lines framed once as one
    chunk, and that frame written to every member's socket - per watcher, one send and no Python
    object made.

    Like the hub's flush, one writes to at most FLUSH_SLICE members per loop turn, the rest in the
    next turns, in order of place: a flush that comes meanwhile frames its lines and adds them to
    what each place still needs (`segments`: the places not written yet get both frames in one
    send, after which those written already get the new one), so every member gets every frame
    once, in order, and none waits behind later flushes. A member that joins gets only what is
    flushed after it joined (add: it has the rest); one that needs a line of its own in order (a
    bookmark) takes its share at once (catch_up). Bounded as StreamSubscriber is: a member whose
    socket holds more than `limit` lines' worth of unsent bytes is closed.
    """

    __slots__ = ("key", "encode", "counter", "limit", "members", "pending", "snap", "joined", "segments",
                 "lines", "size", "resuming")

    def __init__(self, key, encode, counter, limit: int):
        self.key, self.encode, self.counter, self.limit = key, encode, counter, limit
        self.members: dict[StreamSubscriber, None] = {}   # (an ordered set)
        self.pending: list[bytes] = []   # lines offered since the last flush
        # The flush under way: the members as it began (snap; those joined since are appended at
        # the next merge) and, in the order they are written, [first place, end, frame(s), events]:
        # what the places from first to end still need (first moves on as they are written).
        self.snap: list = []
        self.joined: list = []
        self.segments: list[list] = []
        self.lines = self.size = 0   # lines framed and their bytes: a line's average size
        self.resuming = False

    def add(self, sub: StreamSubscriber) -> None:
        if self.pending:
            self._merge()   # (what is pending sub has: it is framed for the others only)
        self.members[sub] = None
        if self.segments:
            self.joined.append(sub)

    def remove(self, sub: StreamSubscriber) -> None:
        del self.members[sub]   # (a place of it in the flush under way is skipped: sub.closed)

    def offer(self, ev: LogEntry) -> None:
        if not self.pending:
            hub.schedule_flush(self)
        self.pending.append(self.encode(ev.type, ev))

    def flush(self) -> int:
        """(The hub's flush) frame what is pending; write to the next slice of members."""
        if self.pending:
            self._merge()
        return self._send()

    def _merge(self) -> None:
        lines, self.pending = self.pending, []
        data = lines[0] if len(lines) == 1 else b"".join(lines)
        frame, n = b"%x\r\n%b\r\n" % (len(data), data), len(lines)
        self.lines += n
        self.size += len(data)
        if not self.segments:
            self.snap, self.joined = list(self.members), []
            if self.snap:
                self.segments = [[0, len(self.snap), frame, n]]
            return
        # Places still owed something get this frame after it; the others (written already) this
        # frame alone, after them; then the members joined since.
        taken = sorted((seg[0], seg[1]) for seg in self.segments)
        for seg in self.segments:
            seg[2] += frame
            seg[3] += n
        at = 0
        for first, end in taken:
            if first > at:
                self.segments.append([at, first, frame, n])
            at = max(at, end)
        if at < len(self.snap):
            self.segments.append([at, len(self.snap), frame, n])
        if self.joined:
            self.segments.append([len(self.snap), len(self.snap) + len(self.joined), frame, n])
            self.snap += self.joined
            self.joined = []

    def _send(self) -> int:
        segments, snap = self.segments, self.snap
        if not segments:
            return 0
        limit = self.limit * self.size / self.lines   # unsent bytes of more than `limit` lines
        budget, written = FLUSH_SLICE, 0
        while segments and budget > 0:
            seg = segments[0]
            first, end, frame, n = seg
            stop = min(end, first + budget)
            for sub in snap[first:stop]:
                if sub.closed:
                    continue
                behind = sub.writer.write_frame(frame)
                if behind:
                    if behind < 0:
                        continue
                    if behind > limit:
                        sub.overflow()
                written += n
            budget -= stop - first
            if stop >= end:
                del segments[0]
            else:
                seg[0] = stop
        if not segments:
            self.snap, self.joined = [], []
        elif not self.resuming:
            # The rest in the next loop turn: requests wait for one slice of sends, not for all.
            self.resuming = True
            hub.loop.call_soon(self._resume)
        return written

    def _resume(self) -> None:
        self.resuming = False
        written = self._send()
        if written:
            self.counter.inc(written)

    def catch_up(self, sub: StreamSubscriber) -> int:
        """Write now what sub is still due of the flush under way (and of what is pending), so a
        line of its own can follow in order; its place is skipped from now on and it takes later
        flushes as a member joined since. Returns the events written."""
        if self.pending:
            self._merge()
        if not self.segments:
            return 0
        try:
            place = self.snap.index(sub)
        except ValueError:
            return 0    # joined since the flush began: owed nothing yet
        owed = next((seg for seg in self.segments if seg[0] <= place < seg[1]), None)
        if owed is None:
            return 0    # written already
        _, _, frame, n = owed
        self.snap[place] = GONE
        self.joined.append(sub)
        behind = sub.writer.write_frame(frame)
        if behind < 0:
            return 0
        if behind > self.limit * self.size / self.lines:
            sub.overflow()
        return n


class StreamWriter(DirectChunkWriter):
    """Writes a watch stream's body to its connection (StreamSubscriber above), once Daphne has
    sent the headers: each write one HTTP/1.1 chunk, straight to the socket when nothing is
    queued before it (compat.twisted.DirectChunkWriter). The response is still ended by Daphne
    (Request.finish writes the last chunk after everything written here)."""

    __slots__ = ()

"""Watch: one hub per process fans committed revisions out to watch streams.

The hub wakes when a write commits (in-process signal; across processes Redis pub/sub or, on
SQLite, `PRAGMA data_version`; plus a slow safety poll), reads the new revisions once, in its
own thread, and offers each to the subscribers
of that kind through bounded queues: one DB query per batch of revisions, never one per
watcher. A subscriber that falls too far behind is closed; its client resumes from the last
resourceVersion it saw.

Selector semantics: a watcher with a label or field selector keeps the set of keys it has
reported as matching, so an object that stops matching is sent as DELETED and one that starts
matching as ADDED, exactly as kube-apiserver's watch cache does.
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from dataclasses import dataclass, field

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection

from dashboard.access import clusters
from dashboard.access.signals import access_changed

from . import metrics, registry, store
from . import revlog
from .revlog import ADDED, DELETED, MODIFIED
from .selectors import field_getter

log = logging.getLogger(__name__)

CLOSE = object()  # queue sentinel: the stream must end (overflow or shutdown)

# Set by the HTTP server while it starts a request's application (dashboard.server.protocol):
# a callable returning a writer for that response's body on its connection, or None. A watch
# stream whose server provides one is written straight to its socket (StreamSubscriber).
response_writer: contextvars.ContextVar = contextvars.ContextVar("kubedash_response_writer", default=None)

# Access re-checks: a change is noticed within this (the follower reads AccessChange rows at
# least this often; also how often deadlines - session, token, share-link expiry - are checked).
ACCESS_POLL_SECONDS = 0.5

# Watch streams are written at most this often (per process): under a steady stream of writes
# each watcher gets a few events per send instead of one send per event; when writes are
# sparse an event goes out in the loop turn it is read. docs/BENCHMARKS.md has the figures.
FLUSH_INTERVAL_SECONDS = 0.01


@dataclass(eq=False)
class Guard:
    """The access a long-lived channel (page websocket, watch) was opened with.

    `subjects` name what it depends on ("user:3", "token:7", "share:2"); when an access-change
    notice names one of them, or `deadline` (epoch seconds: session, token or link expiry)
    passes, the hub calls `recheck()` (a coroutine function) on the loop. The channel then
    re-resolves its principal and closes, narrows, or updates its subjects and deadline.
    """

    subjects: frozenset
    deadline: float | None = None
    recheck: object = None


class Event:
    """One revision as the hub read it; parsed and encoded at most once per format."""

    __slots__ = ("rv", "kind", "namespace", "name", "type", "text", "cluster", "_obj", "_lines")

    def __init__(self, rv, kind, namespace, name, type_, text, cluster=clusters.LOCAL):
        self.rv, self.kind, self.namespace, self.name, self.type, self.text = rv, kind, namespace, name, type_, text
        self.cluster = cluster
        self._obj = None
        self._lines = None

    def line(self, event_type: str) -> bytes:
        """The JSON watch event line; shared by every watcher that gets this revision."""
        if self._lines is None:
            self._lines = {}
        line = self._lines.get(event_type)
        if line is None:
            line = b'{"type":"' + event_type.encode() + b'","object":' + self.text.encode() + b"}\n"
            self._lines[event_type] = line
        return line

    @property
    def obj(self) -> dict:
        if self._obj is None:
            self._obj = orjson.loads(self.text)
        return self._obj


@dataclass(eq=False)
class Subscriber:
    resource: registry.Resource
    namespace: str | None = None
    names: tuple[str, ...] = ()
    # The cluster watched (access/clusters.py): the one the work creating the watcher is about.
    cluster: str = field(default_factory=clusters.current)
    label_selector: object = None
    field_selector: object = None
    start_rv: int = 0
    # Extra condition on the object (e.g. the pages' name search), applied like a selector.
    predicate: object = None
    # Keys reported as matching so far; None when selectors can't change for a key.
    matching: set | None = None
    queue: asyncio.Queue = field(default_factory=lambda: asyncio.Queue(settings.KUBE_WATCH_QUEUE_SIZE))
    buffer: list | None = field(default_factory=list)   # events held while the backlog loads
    closed: bool = False

    @property
    def stateful(self) -> bool:
        """Does matching depend on the object's content (labels, status fields)?"""
        if self.predicate is not None:
            return True
        if self.label_selector is not None and not self.label_selector.empty:
            return True
        fs = self.field_selector
        if fs is None or fs.empty:
            return False
        return any(r.field not in ("metadata.name", "metadata.namespace") for r in fs.requirements)

    def selects(self, obj: dict) -> bool:
        if self.label_selector is not None and not self.label_selector.matches(obj["metadata"].get("labels") or {}):
            return False
        if self.field_selector is not None and not self.field_selector.matches(
                field_getter(obj, self.resource.field_getters)):
            return False
        return self.predicate is None or self.predicate(obj)

    def offer(self, ev: Event) -> None:
        if self.closed or not self.wants(ev):
            return
        if self.buffer is not None:
            self.buffer.append(ev)
            return
        self._deliver(ev)

    def _deliver(self, ev: Event) -> None:
        kind = self.decide(ev)
        if kind is None:
            return
        try:
            self.queue.put_nowait((kind, ev))
        except asyncio.QueueFull:
            metrics.WATCH_TERMINATED.labels(self.resource.plural).inc()
            self.close()

    def decide(self, ev: Event) -> str | None:
        """The event type this watcher must see for ev, or None to skip it."""
        kind = ev.type
        if self.matching is not None:
            key = (ev.namespace, ev.name)
            now = ev.type != DELETED and self.selects(ev.obj)
            was = key in self.matching
            if now:
                kind = MODIFIED if was else ADDED
                self.matching.add(key)
            elif was:
                kind = DELETED
                self.matching.discard(key)
            else:
                return None
        elif self.field_selector is not None and not self.selects(ev.obj):
            return None  # name/namespace terms only: these never change for a key
        return kind

    def wants(self, ev: Event) -> bool:
        if ev.rv <= self.start_rv or ev.kind != self.resource.kind or ev.cluster != self.cluster:
            return False
        if self.namespace is not None and ev.namespace != self.namespace:
            return False
        return not self.names or ev.name in self.names

    def release_buffer(self) -> None:
        pending, self.buffer = self.buffer, None
        for ev in pending or ():
            if ev.rv > self.start_rv:
                self._deliver(ev)

    def close(self, final=None) -> None:
        """End the stream; `final` (an ERROR event line) is the last thing its client gets."""
        if self.closed:
            return
        self.closed = True
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait((CLOSE, final))


class StreamSubscriber(Subscriber):
    """A watch stream's subscriber that writes to its connection directly (when attached).

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
    encode = None          # (type, Event) -> bytes
    counter = None         # apiserver_watch_events_total child of this resource
    out: list | None = None
    final: bytes | None = None
    waiter: asyncio.Future | None = None
    woken = False
    events_written = 0
    bytes_written = 0

    def attach(self, writer, encode, counter) -> None:
        self.writer, self.encode, self.counter = writer, encode, counter
        self.limit = settings.KUBE_WATCH_QUEUE_SIZE   # (a settings lookup costs a µs: not per event)
        self.out = []

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
        metrics.WATCH_TERMINATED.labels(self.resource.plural).inc()
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


def _read_after(rv: int, limit: int, upto: int | None = None) -> list[Event]:
    return [Event(*row) for row in revlog.read_after(rv, limit, upto)]


class Hub:
    """Per-process fan-out of committed revisions to subscribers.

    A follower thread (with its own database connection) reads the revision log after the
    last revision it has read and hands each batch, in order, to the event loop, where
    dispatch() offers it to the subscribers. It reads when rung (a write committed in this
    process, or Redis said another did) and, on SQLite, whenever `PRAGMA data_version` says
    another connection committed (polled every few ms: that is how a write taken by another
    worker process reaches this one without any service); plus a slow safety poll.
    """

    BATCH = 2000

    def __init__(self):
        self.loop: asyncio.AbstractEventLoop | None = None
        # (cluster, kind, namespace or None for all namespaces) -> subscribers: an event is
        # offered only to the watchers of its cluster and kind that watch its namespace or all.
        self.subscribers: dict[tuple[str, str, str | None], set[Subscriber]] = {}
        self.last_rv = 0    # the newest revision dispatched (on the loop)
        self._follower: _Follower | None = None
        # The loop keeps only weak references to tasks: without this one, the Redis listener
        # (a reference cycle with its socket reader) is garbage-collected mid-wait, and the
        # other processes' writes then wait for the safety poll.
        self._redis_task: asyncio.Task | None = None
        self._start_lock: asyncio.Lock | None = None
        # Called (with the loop) from the follower thread after each read of a changed
        # database: state other than revisions that must cross processes.
        self.change_listeners: list = []
        # Access guards by subject, and those with a deadline (see Guard).
        self.guards: dict[str, set[Guard]] = {}
        self.expiring: set[Guard] = set()
        self.access_generation = 0   # bumped per batch of notices (a channel resolving its access compares)
        self._expiry_task: asyncio.Task | None = None
        self._rechecks: set[asyncio.Task] = set()
        self.redis_lost = False   # the Redis doorbell is down: the follower polls the log instead
        self._dirty: list[StreamSubscriber] = []   # watchers with events to write at the next flush
        self._flushed_at = 0.0

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._follower is not None and self.loop is loop and self._follower.is_alive():
            return
        if self._start_lock is None or self.loop is not loop:
            self._start_lock = asyncio.Lock()
            self.loop = loop
        async with self._start_lock:
            if self._follower is not None and self._follower.is_alive() and self._follower.loop is loop:
                return
            if self._follower is not None:
                self._follower.stop()
            self.subscribers = {}
            self._dirty = []
            self.guards, self.expiring = {}, set()
            self.last_rv = await sync_to_async(store.current_revision)()
            self._follower = _Follower(self, loop, self.last_rv, await sync_to_async(_last_access_change)())
            self._follower.start()
            self._expiry_task = loop.create_task(self._expire(), context=contextvars.Context())
            if settings.REDIS_URL:
                self._redis_task = loop.create_task(self._listen_redis())

    def notify(self) -> None:
        """Thread-safe: a revision committed."""
        follower = self._follower
        if follower is not None:
            follower.doorbell.set()

    def register(self, sub: Subscriber) -> int:
        self.subscribers.setdefault((sub.cluster, sub.resource.kind, sub.namespace), set()).add(sub)
        return self.last_rv

    def unregister(self, sub: Subscriber) -> None:
        subs = self.subscribers.get((sub.cluster, sub.resource.kind, sub.namespace))
        if subs is not None:
            subs.discard(sub)

    def guard(self, g: Guard, subjects=None, deadline: float | None = None) -> None:
        """(Re-)register a channel's access guard, with its current subjects and deadline."""
        self.unguard(g)
        if subjects is not None:
            g.subjects = frozenset(subjects)
            g.deadline = deadline
        for subject in g.subjects:
            self.guards.setdefault(subject, set()).add(g)
        if g.deadline is not None:
            self.expiring.add(g)

    def unguard(self, g: Guard) -> None:
        for subject in g.subjects:
            guards = self.guards.get(subject)
            if guards is not None:
                guards.discard(g)
                if not guards:
                    del self.guards[subject]
        self.expiring.discard(g)

    def access_changed(self, subjects) -> None:
        """On the loop: access-change notices arrived; re-check the channels they concern."""
        self.access_generation += 1
        due = {g for subject in subjects for g in self.guards.get(subject, ())}
        for g in due:
            self._recheck(g)

    def _recheck(self, g: Guard) -> None:
        # A fresh context: not the one of the request that happened to start the hub, whose
        # thread executor (sync_to_async) is long gone.
        task = self.loop.create_task(g.recheck(), context=contextvars.Context())
        self._rechecks.add(task)   # the loop holds tasks weakly
        task.add_done_callback(self._rechecks.discard)

    async def _expire(self) -> None:
        while True:
            await asyncio.sleep(ACCESS_POLL_SECONDS)
            now = time.time()
            for g in [g for g in self.expiring if g.deadline is not None and g.deadline <= now]:
                self.expiring.discard(g)   # until the re-check sets a new deadline
                self._recheck(g)

    def dispatch(self, events: list[Event]) -> None:
        for ev in events:
            if ev.rv <= self.last_rv:
                continue  # a follower replaced by a newer one may hand over a batch already seen
            for scope in ((ev.cluster, ev.kind, None), (ev.cluster, ev.kind, ev.namespace)):
                for sub in tuple(self.subscribers.get(scope, ())):
                    sub.offer(ev)
            self.last_rv = ev.rv
        metrics.hub_dispatched(self.last_rv)

    def schedule_flush(self, sub: StreamSubscriber) -> None:
        """sub has events to write: flush it with every other such watcher, this loop turn or,
        if the last flush was less than FLUSH_INTERVAL_SECONDS ago, that long after it."""
        if not self._dirty:
            delay = self._flushed_at + FLUSH_INTERVAL_SECONDS - self.loop.time()
            if delay > 0:
                self.loop.call_later(delay, self._flush)
            else:
                self.loop.call_soon(self._flush)
        self._dirty.append(sub)

    def _flush(self) -> None:
        self._flushed_at = self.loop.time()
        dirty, self._dirty = self._dirty, []
        counts: dict = {}
        for sub in dirty:
            n = sub.flush()
            if n:
                counts[sub.counter] = counts.get(sub.counter, 0) + n
        for counter, n in counts.items():
            counter.inc(n)

    async def _listen_redis(self) -> None:
        import redis.asyncio as aioredis

        while True:
            try:
                client = aioredis.from_url(settings.REDIS_URL)
                async with client.pubsub() as pubsub:
                    await pubsub.subscribe(REDIS_CHANNEL)
                    self.redis_lost = False
                    self.notify()  # catch up on what committed while (re)subscribing
                    async for message in pubsub.listen():
                        if message.get("type") == "message":
                            self.notify()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.redis_lost = True
                log.warning("watch hub lost Redis; relying on polling until it is back", exc_info=True)
                await asyncio.sleep(1)


def _data_version() -> int:
    """SQLite's count of commits by other connections to this database file (3-4 us)."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA data_version")
        return cursor.fetchone()[0]


class _Follower(threading.Thread):
    """The hub's reader thread: follows the revision log, posts batches to the loop in order."""

    def __init__(self, hub: Hub, loop: asyncio.AbstractEventLoop, after: int, access_after: int = 0):
        super().__init__(name="watch-hub", daemon=True)
        self.hub, self.loop, self.after = hub, loop, after
        self.access_after = access_after
        self.doorbell = threading.Event()
        self.stopped = False
        self.sqlite = connection.vendor == "sqlite"

    def stop(self) -> None:
        self.stopped = True
        self.doorbell.set()

    def run(self) -> None:
        safety = settings.KUBE_WATCH_POLL_SECONDS
        # Without SQLite's cheap data_version, access notices are polled on their own, often
        # enough that a change made in another process is noticed in time even when Redis (the
        # doorbell) is down; the revision log keeps its safety poll.
        interval = min(settings.KUBE_WATCH_FOLLOW_SECONDS, safety) if self.sqlite else min(safety, ACCESS_POLL_SECONDS)
        seen_version, quiet = None, 0.0
        try:
            while not self.stopped and not self.loop.is_closed():
                rung = self.doorbell.wait(interval)
                self.doorbell.clear()
                try:
                    if self.sqlite:
                        # Taken before reading the log: a commit after this read bumps it again,
                        # and a local write that rang the doorbell is not read a second time.
                        version = _data_version()
                        if version == seen_version and not rung and quiet < safety:
                            quiet += interval
                            continue
                        seen_version = version
                    elif not rung and quiet < safety and not self.hub.redis_lost:
                        # (While Redis is lost nothing rings: the log is polled as often.)
                        quiet += interval
                        self._read_access()
                        continue
                    quiet = 0.0
                    self._read()
                    self._read_access()
                    for listener in self.hub.change_listeners:
                        listener(self.loop)
                except Exception:  # the DB hiccuped: keep following, retry on the next wake/poll
                    log.exception("watch hub failed to read revisions")
                    connection.close()
        finally:
            connection.close()

    def _read(self) -> None:
        while not self.stopped:
            events = _read_after(self.after, Hub.BATCH)
            if not events:
                return
            self.after = events[-1].rv
            try:
                self.loop.call_soon_threadsafe(self.hub.dispatch, events)
            except RuntimeError:  # the loop closed
                self.stopped = True
                return
            if len(events) < Hub.BATCH:
                return

    def _read_access(self) -> None:
        from dashboard.access.models import AccessChange

        # (plain SQL: asked on every wake, i.e. after every commit anywhere; the ORM's query
        # building was a quarter of a busy follower's thread)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id, subject FROM {AccessChange._meta.db_table} WHERE id > %s ORDER BY id",
                           [self.access_after])
            rows = cursor.fetchall()
        if rows:
            self.access_after = rows[-1][0]
            try:
                self.loop.call_soon_threadsafe(self.hub.access_changed, {subject for _, subject in rows})
            except RuntimeError:  # the loop closed
                self.stopped = True


def _last_access_change() -> int:
    from dashboard.access.models import AccessChange

    last = AccessChange.objects.order_by("-id").values_list("id", flat=True).first()
    return last or 0


REDIS_CHANNEL = "kubedash:revisions"
hub = Hub()
_redis_lock = threading.Lock()
_redis_client = None


def _publish_redis() -> None:
    global _redis_client
    import redis

    with _redis_lock:
        if _redis_client is None:
            _redis_client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
    try:
        _redis_client.publish(REDIS_CHANNEL, b"1")
    except Exception:  # the other processes fall back to their safety poll
        log.warning("could not publish a revision to Redis", exc_info=True)


def on_revision_committed(sender, rv, **kwargs) -> None:
    hub.notify()
    if settings.REDIS_URL:
        _publish_redis()


def on_access_changed(sender, subjects, **kwargs) -> None:
    """An access change committed here: ring this process's follower and the others' (Redis);
    without Redis (or while it is down) they find the notice in the database on their own."""
    hub.notify()
    if settings.REDIS_URL:
        _publish_redis()


store.revision_committed.connect(on_revision_committed, dispatch_uid="kube-watch-hub")
access_changed.connect(on_access_changed, dispatch_uid="kube-watch-hub-access")

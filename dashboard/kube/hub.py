"""Watch: one hub per process fans committed revisions out to its subscribers.

The hub is woken by its follower (notify.py: a commit here, Redis or SQLite's data_version
for other processes', a slow safety poll), which reads the new revisions once, in its own
thread, and hands them to the loop; dispatch() offers each to the subscribers of that kind
through bounded queues: one DB query per batch of revisions, never one per watcher. A
subscriber that falls too far behind is closed; its client resumes from the last
resourceVersion it saw. Watch streams served by kubedash's HTTP server skip the queue: their
subscriber (server/streams.py) writes straight to the connection, flushed by the hub; once
caught up, the plain ones (no selector, one shared format) join a broadcast of their scope,
which encodes and frames each event once for all of them (join()).

Selector semantics: a watcher with a label or field selector keeps the set of keys it has
reported as matching, so an object that stops matching is sent as DELETED and one that starts
matching as ADDED, exactly as kube-apiserver's watch cache does.
"""
from __future__ import annotations

import asyncio
import contextvars
import time
from dataclasses import dataclass, field

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings

from dashboard.access import clusters

from . import metrics, notify, registry, revlog, store
from .notify import ACCESS_POLL_SECONDS
from .revlog import ADDED, DELETED, MODIFIED
from .selectors import field_getter

CLOSE = object()  # queue sentinel: the stream must end (overflow or shutdown)

# Direct subscribers are written at most this often (per process): under a steady stream of
# writes each watcher gets a few events per send instead of one send per event; when writes
# are sparse an event goes out in the loop turn it is read. docs/BENCHMARKS.md has the figures.
FLUSH_INTERVAL_SECONDS = 0.01
# A flush writes to at most this many watchers per loop turn (~1 ms of sends), the rest in the
# next turns: with 1,000 watchers one flush was ~6 ms of the loop, in front of every request.
FLUSH_SLICE = 200


@dataclass(eq=False, slots=True)   # (one per open watch and page socket: no instance dict)
class Guard:
    """The access a long-lived channel (page websocket, watch) was opened with.

    `subjects` name what it depends on ("user:3", "token:7", "share:2"); when an access-change
    notice names one of them, or `deadline` (epoch seconds: session, token or link expiry)
    passes, the hub calls `recheck()` (a coroutine function) on the loop, as work about
    `cluster` (the channel's, when it subscribed). The channel then re-resolves its principal
    and closes, narrows, or updates its subjects and deadline.
    """

    subjects: frozenset
    deadline: float | None = None
    recheck: object = None
    cluster: str = clusters.LOCAL


class LogEntry:
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


@dataclass(eq=False, slots=True)   # (one per open watch: no instance dict)
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
    # The events, for a stream that takes them itself (a page's socket passes its own). Made when
    # first needed (inbox()): a watch written straight to its socket never uses one, and an empty
    # asyncio.Queue is ~2 KB (four deques) per open watch.
    queue: asyncio.Queue | None = None
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

    def inbox(self) -> asyncio.Queue:
        if self.queue is None:
            self.queue = asyncio.Queue(settings.KUBEDASH_WATCH_QUEUE_SIZE)
        return self.queue

    def selects(self, obj: dict) -> bool:
        if self.label_selector is not None and not self.label_selector.matches(obj["metadata"].get("labels") or {}):
            return False
        if self.field_selector is not None and not self.field_selector.matches(
                field_getter(obj, self.resource.field_getters)):
            return False
        return self.predicate is None or self.predicate(obj)

    def offer(self, ev: LogEntry) -> None:
        if self.closed or not self.wants(ev):
            return
        if self.buffer is not None:
            self.buffer.append(ev)
            return
        self._deliver(ev)

    def _deliver(self, ev: LogEntry) -> None:
        kind = self.decide(ev)
        if kind is None:
            return
        try:
            self.inbox().put_nowait((kind, ev))
        except asyncio.QueueFull:
            metrics.WATCH_TERMINATED.labels(self.resource.plural).inc()
            self.close()

    def decide(self, ev: LogEntry) -> str | None:
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

    def wants(self, ev: LogEntry) -> bool:
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
        queue = self.inbox()
        while not queue.empty():
            queue.get_nowait()
        queue.put_nowait((CLOSE, final))

    def attach(self, encode, counter, shared=None) -> bool:
        """Write this watcher's events straight to its connection from now on (encode: (type,
        LogEntry) -> bytes; counter: its events' metric; shared: a key naming encode's format
        when every watcher with that key gets the same bytes, else None)? Only a server's subscriber can (its
        request context's stream makes it); this one's events come through `queue`. A subscriber that
        attaches also has sent(events, size), final, and hand_over(clock, guard), which gives
        it the rest of the stream once caught up (watch_views.py; server/streams.py has the
        one kind there is)."""
        return False


def read_after(rv: int, limit: int, upto: int | None = None) -> list[LogEntry]:
    """The revisions after rv (up to upto), as LogEntry objects: at most limit of them."""
    return [LogEntry(*row) for row in revlog.read_after(rv, limit, upto)]


class Hub:
    """Per-process fan-out of committed revisions to subscribers.

    Its follower thread (notify.Follower, with its own database connection) reads the
    revision log after the last revision it has read and hands each batch, in order, to the
    event loop, where dispatch() offers it to the subscribers; access notices likewise go to
    access_changed(), which re-checks the channels' Guards.
    """

    BATCH = 2000

    def __init__(self):
        self.loop: asyncio.AbstractEventLoop | None = None
        # (cluster, kind, namespace or None for all namespaces) -> subscribers: an event is
        # offered only to the watchers of its cluster and kind that watch its namespace or all.
        self.subscribers: dict[tuple[str, str, str | None], set[Subscriber]] = {}
        # The same scopes -> format key -> broadcast (server/streams.py): watchers that take every
        # event of the scope in one format, offered each event once for all of them (join()).
        self.broadcasts: dict[tuple[str, str, str | None], dict] = {}
        self.count = 0      # subscribers registered: at 0 the follower rests (reads nothing)
        self.last_rv = 0    # the newest revision dispatched (on the loop)
        self._follower: notify.Follower | None = None
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
        self._dirty: list[Subscriber] = []   # direct subscribers with events to write at the next flush
        self._flushed_at = 0.0

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._follower is not None and self.loop is loop and self._follower.is_alive():
            if self._follower.resting:
                await self._skip_rest()
            return
        if self._start_lock is None or self.loop is not loop:
            self._start_lock = asyncio.Lock()
            self.loop = loop
        async with self._start_lock:
            if self._follower is not None and self._follower.is_alive() and self._follower.loop is loop:
                return
            if self._follower is not None:
                self._follower.stop()
            self.subscribers, self.broadcasts, self.count = {}, {}, 0
            self._dirty = []
            self.guards, self.expiring = {}, set()
            self.last_rv = await sync_to_async(store.current_revision)()
            self._follower = notify.Follower(self, loop, self.last_rv, await sync_to_async(notify.last_access_change)())
            self._follower.rest()   # until the first register(): a start with no watcher reads nothing
            metrics.FOLLOWER_RUNNING.set(0)
            self._follower.start()
            self._expiry_task = loop.create_task(self._expire(), context=contextvars.Context())
            if settings.REDIS_URL:
                self._redis_task = loop.create_task(notify.listen_redis())

    def read_new(self, after: int) -> list[LogEntry]:
        """(The follower's thread) the next batch of revisions after `after`."""
        return read_after(after, self.BATCH)

    def register(self, sub: Subscriber) -> int:
        """Offer sub every revision after the one returned (its stream reads those up to it
        from the log itself). Wakes a resting follower: it reads on from last_rv."""
        subs = self.subscribers.setdefault((sub.cluster, sub.resource.kind, sub.namespace), set())
        if sub not in subs:
            subs.add(sub)
            self.count += 1
            if self.count == 1 and self._follower is not None and self._follower.resting:
                self._follower.wake()
                metrics.FOLLOWER_RUNNING.set(1)
                metrics.hub_dispatched(self.last_rv)
        return self.last_rv

    def join(self, sub: Subscriber, key, make):
        """Offer sub's events through the broadcast of its scope and format `key` (make(): a new
        one) from now on, no longer one by one; returns it, or None if sub is not registered.
        Only for a watcher that takes every event of its scope after the last one dispatched,
        as the others of that key do (the broadcast's add() keeps what they have pending from it)."""
        scope = (sub.cluster, sub.resource.kind, sub.namespace)
        subs = self.subscribers.get(scope)
        if subs is None or sub not in subs:
            return None
        groups = self.broadcasts.setdefault(scope, {})
        group = groups.get(key)
        if group is None:
            group = groups[key] = make()
        subs.discard(sub)
        if not subs:
            del self.subscribers[scope]
        group.add(sub)
        return group

    def every_subscriber(self) -> list[Subscriber]:
        """Every registered subscriber, in a broadcast or not."""
        subs = [sub for group in self.subscribers.values() for sub in group]
        subs += [sub for groups in self.broadcasts.values() for group in groups.values() for sub in group.members]
        return subs

    def unregister(self, sub: Subscriber) -> None:
        key = (sub.cluster, sub.resource.kind, sub.namespace)
        group = getattr(sub, "broadcast", None)   # (a direct subscriber that joined one)
        if group is not None:
            groups = self.broadcasts.get(key)
            if not groups or groups.get(group.key) is not group or sub not in group.members:
                return   # (ended already, or of a hub restarted since)
            group.remove(sub)
            if not group.members:
                del groups[group.key]
                if not groups:
                    del self.broadcasts[key]
        else:
            subs = self.subscribers.get(key)
            if subs is None or sub not in subs:
                return
            subs.discard(sub)
            if not subs:
                del self.subscribers[key]
        self.count -= 1
        if not self.count and self._follower is not None:
            # Nobody here to offer revisions to: the follower stops reading the log (at 1,000
            # writes/s its reads took a third of the renewals' share of the GIL).
            self._follower.rest()
            metrics.FOLLOWER_RUNNING.set(0)
            metrics.hub_resting()

    async def _skip_rest(self) -> None:
        """A watch or page is about to register with a resting hub: move last_rv (and the
        follower) to the newest revision, so the follower does not read every revision
        committed while it rested. Safe only while nobody is registered: a subscriber
        registered before the move would miss what it skips; one registered after it gets
        the new last_rv and reads anything older from the log itself (watch_views._stream,
        the pages' snapshot)."""
        rv = await sync_to_async(store.current_revision)()
        follower = self._follower
        if follower is not None and follower.resting and not self.count and rv > self.last_rv:
            # (A read the follower had under way when it came to rest may still set `after`
            # back and hand over older events: dispatch() skips what is <= last_rv.)
            self.last_rv = follower.after = rv

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
        # thread executor (sync_to_async) is long gone; about the channel's cluster.
        context = contextvars.Context()
        context.run(clusters.enter, g.cluster)
        task = self.loop.create_task(g.recheck(), context=context)
        self._rechecks.add(task)   # the loop holds tasks weakly
        task.add_done_callback(self._rechecks.discard)

    async def _expire(self) -> None:
        while True:
            await asyncio.sleep(ACCESS_POLL_SECONDS)
            now = time.time()
            for g in [g for g in self.expiring if g.deadline is not None and g.deadline <= now]:
                self.expiring.discard(g)   # until the re-check sets a new deadline
                self._recheck(g)

    def dispatch(self, events: list[LogEntry]) -> None:
        for ev in events:
            if ev.rv <= self.last_rv:
                continue  # a follower replaced by a newer one may hand over a batch already seen
            for scope in ((ev.cluster, ev.kind, None), (ev.cluster, ev.kind, ev.namespace)):
                groups = self.broadcasts.get(scope)
                if groups:
                    for group in tuple(groups.values()):
                        group.offer(ev)
                for sub in tuple(self.subscribers.get(scope, ())):
                    sub.offer(ev)
            self.last_rv = ev.rv
        if self.count:   # (a batch read before the follower came to rest: the gauge stays +Inf)
            metrics.hub_dispatched(self.last_rv)

    def schedule_flush(self, sub) -> None:
        """A direct subscriber or a broadcast (server/streams.py) has events to write: flush() it with every
        other such watcher, this loop turn or, if the last flush was less than
        FLUSH_INTERVAL_SECONDS ago, that long after it (sub.counter counts what it wrote)."""
        if not self._dirty:
            delay = self._flushed_at + FLUSH_INTERVAL_SECONDS - self.loop.time()
            if delay > 0:
                self.loop.call_later(delay, self._flush)
            else:
                self.loop.call_soon(self._flush)
        self._dirty.append(sub)

    def _flush(self, dirty: list | None = None) -> None:
        if dirty is None:
            self._flushed_at = self.loop.time()
            dirty, self._dirty = self._dirty, []
        if len(dirty) > FLUSH_SLICE:
            # The rest in a later loop turn: requests (a write's hops between its thread and
            # the loop) wait for one slice of sends, not for one to every watcher.
            self.loop.call_soon(self._flush, dirty[FLUSH_SLICE:])
            dirty = dirty[:FLUSH_SLICE]
        counts: dict = {}
        for sub in dirty:
            n = sub.flush()
            if n:
                counts[sub.counter] = counts.get(sub.counter, 0) + n
        for counter, n in counts.items():
            counter.inc(n)


hub = Hub()

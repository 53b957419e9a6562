"""How a process's watch hub learns that the revision log grew, here or in another process.

A commit here rings this process's follower at once (revision_committed, access_changed) and,
with Redis, publishes so every other process's follower is rung too. The follower is a thread
with its own database connection: when rung, or whenever the database says another connection
committed (storage: counts_commits, SQLite's `PRAGMA data_version`, polled every few ms: how a
write taken by another worker process reaches this one without any service), or on a slow
safety poll, it reads the new revisions and access notices and hands them, in order, to the hub
on its event loop (hub.py).

Growth listeners (listen_for_growth: the notifications engine, which reads the log itself) are
rung whenever the follower learns that the log grew elsewhere: a Redis message, a read that found
revisions and, while the hub rests (no watcher here: nothing is read), a cheap look that reads no
log: SQLite's data_version every RESTING_FOLLOW_SECONDS or, where commits cannot be counted and
nothing rings (Redis down or not configured), the revision counter every ACCESS_POLL_SECONDS.
This process's own commits ring them directly (revision_committed).
"""
from __future__ import annotations

import asyncio
import logging
import threading

from django.conf import settings
from django.db import connection

from dashboard.access.models import AccessChange
from dashboard.access.signals import access_changed

from . import metrics, storage
from .models import RevisionCounter
from .outage import Outage
from .postgresql.base import await_on_the_loop, on_the_loop
from .storage import revision_committed

log = logging.getLogger(__name__)

# Access re-checks: a change is noticed within this (the follower reads AccessChange rows at
# least this often; also how often deadlines - session, token, share-link expiry - are checked).
ACCESS_POLL_SECONDS = 0.5
# Resting with growth listeners, on SQLite: how often data_version is looked at. A look is a few us;
# the thread's wake-up around it ~0.2 ms of CPU (bench/notify.py's idle figures), so not the awake
# follower's KUBEDASH_WATCH_FOLLOW_SECONDS: that would keep an idle worker busy.
RESTING_FOLLOW_SECONDS = 0.25

REDIS_CHANNEL = f"{settings.KUBEDASH_REDIS_PREFIX}:revisions"   # (one per deployment on a shared Redis)
# Redis unreachable: one log line when publishing starts failing and one when it works again
# (not a traceback per write), and kubedash_redis_errors_total{operation} (kube/metrics.py).
_publishing = Outage(log, "publishing commits to Redis (the other processes poll the log meanwhile)")
_subscription = Outage(log, "the watch hub's Redis subscription (polling the log meanwhile)")
redis_lost = False   # the Redis doorbell is down: the follower polls the log instead
_current: Follower | None = None   # this process's follower (the hub's), rung by ring()
_redis_lock = threading.Lock()
_redis_client = None
_growth_listeners: list = []   # see listen_for_growth()


def ring() -> None:
    """Thread-safe: something committed; this process's follower reads the database now."""
    follower = _current
    if follower is not None:
        follower.doorbell.set()


def stir() -> None:
    """A resting follower looks again at how to learn of growth (a listener came, Redis was lost)."""
    follower = _current
    if follower is not None:
        follower.stirred.set()


def listen_for_growth(listener) -> None:
    """Call listener(rv) (quick and thread-safe: an Event.set) whenever this process's follower
    learns that the revision log grew, resting or not (once the hub is started: hub.start()): rv is
    its newest revision then, or None when unknown (a Redis message). The listener reads the log
    itself; with rv it can tell an echo of what it has read, or was rung for, from news."""
    _growth_listeners.append(listener)
    stir()


def stop_listening_for_growth(listener) -> None:
    if listener in _growth_listeners:
        _growth_listeners.remove(listener)


def _grew(rv: int | None = None) -> None:
    for listener in tuple(_growth_listeners):
        listener(rv)


class Follower(threading.Thread):
    """The hub's reader thread: follows the revision log, posts batches to the loop in order.

    `hub` is hub.py's (which imports this module): read_new() in this thread, dispatch() and
    access_changed() on its loop, change_listeners after each read of a changed database.
    """

    def __init__(self, hub, loop: asyncio.AbstractEventLoop, after: int, access_after: int = 0):
        super().__init__(name="watch-hub", daemon=True)
        self.hub, self.loop, self.after = hub, loop, after
        self.access_after = access_after
        self.doorbell = threading.Event()
        self.stopped = False
        # Resting: no subscriber in this process, so nothing is read (hub.py's rest()/wake();
        # the loop sets these). The resting thread waits on `stirred`, not on every commit's
        # doorbell: set by wake(), stop(), and what changes how it looks for growth (stir()).
        self.resting = False
        self.stirred = threading.Event()
        self.rest_mark = None   # resting: what the last look for growth saw (_rest)
        self.storage = storage.backend()

    def start(self) -> None:
        global _current
        _current = self   # rung from now on: a commit before its first read is not waited for
        super().start()

    def stop(self) -> None:
        self.stopped = True
        self.stirred.set()
        self.doorbell.set()

    def rest(self) -> None:
        """(On the loop) stop reading until wake(): the log and access notices wait where they are."""
        self.resting = True
        self.rest_mark = None

    def wake(self) -> None:
        """(On the loop) read again, now, from where it stopped (or where the hub moved it)."""
        self.resting = False
        self.stirred.set()
        self.doorbell.set()

    def run(self) -> None:
        safety = settings.KUBEDASH_WATCH_POLL_SECONDS
        # Without a cheap count of commits (SQLite's data_version), access notices are polled on
        # their own, often enough that a change made in another process is noticed in time even
        # when Redis (the doorbell) is down; the revision log keeps its safety poll.
        counts_commits = self.storage.counts_commits
        interval = min(settings.KUBEDASH_WATCH_FOLLOW_SECONDS if counts_commits else ACCESS_POLL_SECONDS, safety)
        seen_version, quiet = None, 0.0
        reading = Outage(log, "the watch hub reading the revision log")
        try:
            while not self.stopped and not self.loop.is_closed():
                if self.resting:
                    self._rest(safety, reading)
                    continue
                rung = self.doorbell.wait(interval)
                self.doorbell.clear()
                try:
                    if counts_commits:
                        # Taken before reading the log: a commit after this read bumps it again,
                        # and a local write that rang the doorbell is not read a second time.
                        version = self.storage.data_version()
                        if version == seen_version and not rung and quiet < safety:
                            quiet += interval
                            continue
                        seen_version = version
                    elif not rung and quiet < safety and not redis_lost:
                        # (While Redis is lost nothing rings: the log is polled as often.)
                        quiet += interval
                        self._read_access()
                        continue
                    quiet = 0.0
                    newest = self._read()
                    if newest:
                        _grew(newest)
                    self._read_access()
                    for listener in self.hub.change_listeners:
                        listener(self.loop)
                except Exception as err:  # the DB hiccuped: keep following, retry on the next wake/poll
                    reading.failed(err, trace=True)
                    connection.close()
                else:
                    reading.ok()
        finally:
            connection.close()

    def _rest(self, safety: float, reading: Outage) -> None:
        """Resting: nothing is read until wake(). With growth listeners, one cheap look whether
        another process committed, ringing them if so; then wait for the next. (While Redis
        works it rings them from the loop: no look then.)"""
        if not _growth_listeners:
            look = None
        elif self.storage.counts_commits:   # (then the counter, only when it changed: ~20 us)
            look, every = self.storage.data_version, RESTING_FOLLOW_SECONDS
        elif redis_lost or not settings.REDIS_URL:
            look, every = self._newest_revision, ACCESS_POLL_SECONDS
        else:
            look = None
        if look is None:
            self._wait_resting(safety)   # (timed: a closed loop is noticed)
            return
        try:
            mark = look()
        except Exception as err:  # the DB hiccuped: ring anyway (the listener reads, or fails, itself)
            reading.failed(err, trace=True)
            connection.close()
            mark = None
        else:
            reading.ok()
        if mark is None or mark != self.rest_mark:   # (the first look rings: nothing before it is missed)
            self.rest_mark = mark
            try:
                newest = mark if look == self._newest_revision else self._newest_revision()
            except Exception as err:  # (the listener reads, or fails, itself)
                reading.failed(err, trace=True)
                connection.close()
                newest = None
            _grew(newest)
        self._wait_resting(every)

    @staticmethod
    def _newest_revision() -> int:
        """store.current_revision() in plain SQL: its ORM query building was most of a resting look."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT value FROM {RevisionCounter._meta.db_table} WHERE id = 1")
            row = cursor.fetchone()
        return row[0] if row else 0

    def _wait_resting(self, seconds: float) -> None:
        self.stirred.wait(seconds)
        self.stirred.clear()   # (wake() set it too: `resting` is read after this)

    def _read(self) -> int:
        """Hand the revisions after `after` to the loop; the newest found, or 0."""
        found = 0
        while not self.stopped and not self.resting:
            events = self.hub.read_new(self.after)
            if not events:
                break
            found = events[-1].rv
            self.after = events[-1].rv
            try:
                self.loop.call_soon_threadsafe(self.hub.dispatch, events)
            except RuntimeError:  # the loop closed
                self.stopped = True
                break
            if len(events) < self.hub.BATCH:
                break
        return found

    def _read_access(self) -> None:
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


def last_access_change() -> int:
    last = AccessChange.objects.order_by("-id").values_list("id", flat=True).first()
    return last or 0


async def listen_redis() -> None:
    """On the hub's loop: ring the follower whenever another process publishes a commit."""
    global redis_lost
    import redis.asyncio as aioredis  # noqa: PLC0415 (~1 s to import, and only with REDIS_URL set)

    while True:
        try:
            client = aioredis.from_url(settings.REDIS_URL)
            async with client.pubsub() as pubsub:
                await pubsub.subscribe(REDIS_CHANNEL)
                redis_lost = False
                _subscription.ok()
                ring()  # catch up on what committed while (re)subscribing
                _grew()
                async for message in pubsub.listen():
                    if message.get("type") == "message":
                        ring()
                        _grew()
        except asyncio.CancelledError:
            raise
        except Exception as err:
            if not redis_lost:
                redis_lost = True
                stir()   # (a resting follower polls from now on)
            metrics.REDIS_ERRORS.labels("subscribe").inc()
            _subscription.failed(err)
            await asyncio.sleep(1)


def _sync_client():
    global _redis_client
    import redis  # noqa: PLC0415 (~1 s to import, and only with REDIS_URL set)

    with _redis_lock:
        if _redis_client is None:
            _redis_client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
    return _redis_client


def redis_reachable() -> bool | None:
    """Does Redis answer a PING within a second? None without REDIS_URL (/metrics, off the loop)."""
    if not settings.REDIS_URL:
        return None
    try:
        return bool(_sync_client().ping())
    except Exception:  # any failure is "unreachable": the scrape reports it, the log needs no trace
        return False


def _publish_redis() -> None:
    try:
        _sync_client().publish(REDIS_CHANNEL, b"1")
    except Exception as err:  # the other processes fall back to their safety poll
        metrics.REDIS_ERRORS.labels("publish").inc()
        _publishing.failed(err)
    else:
        _publishing.ok()


_loop_client = None   # the event loop's Redis client (publishes from requests served there)


async def _publish_redis_on_the_loop() -> None:
    """_publish_redis for a request served on the loop (server/green.py): awaited, so the loop
    serves others meanwhile instead of waiting for Redis."""
    global _loop_client
    import redis.asyncio as aioredis  # noqa: PLC0415 (~1 s to import, and only with REDIS_URL set)

    try:
        if _loop_client is None:
            _loop_client = aioredis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
        await _loop_client.publish(REDIS_CHANNEL, b"1")
    except Exception as err:  # the other processes fall back to their safety poll
        metrics.REDIS_ERRORS.labels("publish").inc()
        _publishing.failed(err)
    else:
        _publishing.ok()


def publish() -> None:
    """Ring the other processes' followers through Redis (if any), from wherever the commit is."""
    if not settings.REDIS_URL:
        return
    if on_the_loop():
        await_on_the_loop(_publish_redis_on_the_loop)
    else:
        _publish_redis()


def on_revision_committed(sender, rv, **kwargs) -> None:
    ring()
    publish()


def on_access_changed(sender, subjects, **kwargs) -> None:
    """An access change committed here: ring this process's follower and the others' (Redis);
    without Redis (or while it is down) they find the notice in the database on their own."""
    ring()
    publish()


revision_committed.connect(on_revision_committed, dispatch_uid="kube-watch-hub")
access_changed.connect(on_access_changed, dispatch_uid="kube-watch-hub-access")

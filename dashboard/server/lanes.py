"""Lanes, like kube-apiserver's API Priority and Fairness: cheap requests never queue behind
expensive ones.

Every buffered HTTP request is classified from its method, path and query string alone
(before Django runs) into one of two lanes, each with its own threads (and so its own
persistent database connections, which Django keeps per thread):

- FAST: single-object reads and writes (GET/PUT/PATCH/DELETE of one object, POST of one),
  `/status` and other subresources, small pages of a list (`limit` <= FAST_LIST_LIMIT),
  discovery, health checks and `/version`, and watch starts. One thread on SQLite (where it
  mostly runs on the event loop instead: inline.LoopInline): a renewal waits only for other
  renewals. On PostgreSQL a request spends most of its time waiting for the server's answers,
  so several run at once (KUBEDASH_FAST_LANE_THREADS, default 4), on the event loop too, each in
  a greenlet whose round trips the loop awaits (server/green.py): their round trips overlap,
  and watch starts (which read a starting list) get a thread of their own.
- BACKGROUND: the fast lane's writes of kinds that declare `background_writes` (Events): served
  like the fast lane's (on the loop), but each first yields to the fast lane's other
  requests while they keep coming (one started within QUIET_SECONDS), for at most
  KUBEDASH_BACKGROUND_YIELD_MS: a burst of Events never delays a renewal, and no Event waits
  for ever. One thread of its own where the loop does not serve it. Its writes have a budget
  too (event_budget: KUBEDASH_EVENT_WRITES_PER_SECOND per process, like kube's EventRateLimit
  admission for its whole server): beyond it, 429 with Retry-After, before the body is decoded.
  The yield alone lets Events through whenever renewals pause for 5 ms, and every Event after
  50 ms, so Events on many connections would still take most of the worker.
- EXPENSIVE: unpaged or large lists (JSON or Table), collection deletes, OpenAPI documents,
  and everything that is not the API (pages, forms, admin). A few threads. A long list or
  Table pauses every few hundred rows while renewals keep coming (kube/yielding.py,
  PAUSE_SECONDS at a time): its thread would otherwise hold the GIL half the time a renewal
  wants it. With KUBEDASH_HEAVY_PROCESS (the default) the lane's threads only relay: the work
  runs in a child process at a lower OS priority (heavy.py), with a GIL of its own.

Each lane admits a bounded number of requests (running + queued); one more is answered
429 TooManyRequests with Retry-After, so a flood holds bounded memory and never spills into
the other lane. Websocket consumers (live pages) run their sync work on a lane of their own.
"""
from __future__ import annotations

import asyncio
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qsl

from asgiref.sync import ThreadSensitiveContext
from django.conf import settings
from prometheus_client import Counter, Gauge

from dashboard.access.budgets import Budget
from dashboard.kube import registry, yielding
from dashboard.kube.paths import API_ROOTS

from .heavy import HeavyProcess

FAST_LIST_LIMIT = 500   # a list page this small costs about what one object does
HEALTH_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/"})

# The interpreter hands the GIL over every 5 ms by default: a renewal waking from a SQLite
# call would wait that long behind a thread rendering a big Table. 0.5 ms bounds the wait.
SWITCH_INTERVAL = 0.0005

# Renewals are "coming" while one started less than this long ago: back to back they start every
# 1–3 ms on a busy worker (a shared machine stretches the gaps), so a background write waits,
# and a long list pauses; with gaps longer than this (a worker renewals do not saturate) they go.
QUIET_SECONDS = 0.005
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# How long an expensive lane's list or Table pauses, at most, at each pause point (every
# yielding.ROWS rows, a few ms of its work) while fast requests keep coming.
PAUSE_SECONDS = 0.002


# Admitted (running + queued) requests per lane, summed over live workers; and the 429s.
ADMITTED = Gauge("kubedash_lane_requests", "Requests admitted to a lane (running and queued)", ["lane"],
                 multiprocess_mode="livesum")
REJECTED = Counter("kubedash_lane_rejected_total", "Requests a full lane answered 429 TooManyRequests", ["lane"])
EVENTS_REFUSED = Counter("kubedash_event_writes_refused_total",
                         "Event writes answered 429 TooManyRequests over the process's Event budget")


class LaneFull(Exception):
    """The lane has admitted as many requests as it may hold: answer 429."""


class Lane:
    """A thread pool with a bounded number of admitted (running + waiting) requests."""

    def __init__(self, name: str, threads: int, queue: int):
        self.name = name
        self.capacity = threads + queue
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"lane-{name}")
        # Watch streams' sync work needs one call at a time on one thread (asgiref's
        # ThreadSensitiveContext): the lane's own when it has one thread, else one of theirs.
        self.streams = self.executor if threads == 1 else ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"lane-{name}-streams")
        self.admitted = 0
        self.shared = None   # (the fast lane's: heavy.FastLoad, how busy it is, for the heavy child)
        self._lock = threading.Lock()
        self._gauge = ADMITTED.labels(name)
        self._rejected = REJECTED.labels(name)

    def admit(self) -> None:
        with self._lock:
            if self.admitted >= self.capacity:
                self._rejected.inc()
                raise LaneFull(self.name)
            self.admitted += 1
            if self.shared is not None:
                self.shared.set(self.admitted)
        self._gauge.inc()

    def release(self) -> None:
        with self._lock:
            self.admitted -= 1
            if self.shared is not None:
                self.shared.set(self.admitted)
        self._gauge.dec()


def is_stream(scope) -> bool:
    """Requests that may answer with a long stream: watches (?watch=... or /watch/ paths)."""
    return b"watch=" in scope.get("query_string", b"") or "/watch/" in scope["path"]


def _api_rest(path: str) -> list[str] | None:
    """The segments after /api/{version} or /apis/{group}/{version}; None for other paths."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        return parts[2:] if len(parts) > 2 else []
    if parts[0] == "apis":
        return parts[3:] if len(parts) > 3 else []
    return None


def _small_page(query: bytes) -> bool:
    for key, value in parse_qsl(query.decode("latin-1")):
        if key == "limit":
            return value.isdigit() and 0 < int(value) <= FAST_LIST_LIMIT
    return False


def is_fast(method: str, path: str, query: bytes) -> bool:
    """Does this buffered request belong in the fast lane? (See the module docstring.)"""
    if path in HEALTH_PATHS:
        return True
    rest = _api_rest(path)
    if rest is None:
        return False            # pages, forms, admin, OpenAPI documents
    collection = len(rest) == 1 or (len(rest) == 3 and rest[0] == "namespaces")
    if not rest or not collection:
        return True             # discovery, or one object (or its subresource)
    if method == "GET" or method == "HEAD":
        return _small_page(query)
    return method != "DELETE"   # POST creates one object; DELETE deletes a collection


def is_background(method: str, path: str) -> bool:
    """A write of a kind whose writes yield (Resource.background_writes)? (Only asked of
    requests is_fast admits: one object, or a POST to its collection.)"""
    if method not in WRITES:
        return False
    parts = path.strip("/").split("/")
    if parts[0] == "api" and len(parts) > 2:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis" and len(parts) > 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return False
    plural = rest[2] if rest[0] == "namespaces" and len(rest) > 2 else rest[0]
    res = registry.lookup(group, version, plural)
    return res is not None and res.background_writes


def wants_full_middleware(path: str, headers: list) -> bool:
    """Pages, and any request with a session cookie (the dashboard's own fetches, share
    links), go through every middleware; bearer-token API calls need none of sessions,
    CSRF, messages or share-link confinement."""
    if not path.startswith(API_ROOTS):
        return True
    cookie_name = settings.SESSION_COOKIE_NAME.encode()
    for name, value in headers:
        if name == b"cookie" and cookie_name in value:
            return True
    return False


class Lanes:
    """The lanes of this process (created on first use, once settings are loaded)."""

    def __init__(self):
        self.fast = Lane("fast", settings.KUBEDASH_FAST_LANE_THREADS, settings.KUBEDASH_FAST_LANE_QUEUE)
        self.background = Lane("background", 1, settings.KUBEDASH_BACKGROUND_LANE_QUEUE)
        rate = settings.KUBEDASH_EVENT_WRITES_PER_SECOND
        self.events = Budget(rate, max(settings.KUBEDASH_EVENT_WRITE_BURST, 1), debt=False) if rate > 0 else None
        self.fast_started_at = float("-inf")   # (time.monotonic) when the last fast request started
        yielding.install(self.pause_for_fast)
        self.expensive = Lane("expensive", settings.KUBEDASH_EXPENSIVE_LANE_THREADS,
                              settings.KUBEDASH_EXPENSIVE_LANE_QUEUE)
        # Its work in a child process at a lower priority (heavy.py), the lane's threads relaying.
        self.heavy = None
        if settings.KUBEDASH_HEAVY_PROCESS:
            # (started by `serve` once it listens, else by the first request that needs it)
            self.heavy = HeavyProcess(keep=settings.KUBEDASH_EXPENSIVE_LANE_THREADS, nice=settings.KUBEDASH_HEAVY_NICE,
                                      duty=settings.KUBEDASH_HEAVY_DUTY)
            self.fast.shared = self.heavy.fast_load   # (the child paces by it)
        # Live pages (websocket consumers): one thread, unbounded like the sockets it serves.
        self.pages = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lane-pages")
        sys.setswitchinterval(SWITCH_INTERVAL)

    def for_request(self, method: str, path: str, query: bytes) -> Lane:
        if not is_fast(method, path, query):
            return self.expensive
        return self.background if is_background(method, path) else self.fast

    def event_budget(self) -> bool:
        """May one more background write (an Event) be admitted now? (On the event loop.)"""
        if self.events is None or self.events.take(""):
            return True
        EVENTS_REFUSED.inc()
        return False

    def fast_started(self) -> None:
        self.fast_started_at = time.monotonic()

    def pause_for_fast(self) -> None:
        """On an expensive lane's thread, a pause point of a long list: while a fast request
        started within QUIET_SECONDS, sleep (the GIL free), PAUSE_SECONDS at most."""
        if not threading.current_thread().name.startswith("lane-expensive"):
            return   # (a small list on the fast lane, or the loop itself: never wait there)
        deadline = time.monotonic() + PAUSE_SECONDS
        while True:
            now = time.monotonic()
            quiet_at = self.fast_started_at + QUIET_SECONDS
            if now >= quiet_at or now >= deadline:
                return
            time.sleep(min(quiet_at, deadline) - now)

    async def yield_to_fast(self) -> None:
        """A background request's turn: once no fast request started for QUIET_SECONDS, or
        after KUBEDASH_BACKGROUND_YIELD_MS whatever comes."""
        deadline = time.monotonic() + settings.KUBEDASH_BACKGROUND_YIELD_MS / 1000
        while True:
            now = time.monotonic()
            quiet_at = self.fast_started_at + QUIET_SECONDS
            if now >= quiet_at or now >= deadline:
                return
            await asyncio.sleep(min(quiet_at, deadline) - now)


_lanes: Lanes | None = None
_lanes_lock = threading.Lock()


def lanes() -> Lanes:
    global _lanes
    if _lanes is None:   # the lock only for the first request, not on every one
        with _lanes_lock:
            if _lanes is None:
                _lanes = Lanes()
    return _lanes


class PagesLane:
    """ASGI wrapper for websockets (live pages): their sync work runs on the pages lane's
    thread, never on the fast lane's."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        async with ThreadSensitiveContext(executor=lanes().pages):
            return await self.app(scope, receive, send)

"""Live pages: one websocket per page pushes re-rendered fragments (htmx `hx-swap-oob`).

The consumer subscribes to the per-process watch hub for exactly what its page shows (kind,
namespace, label selector, name search, one object), renders the changed object with the
same template partial as the full page, and sends it. On (re)connect it compares the page's
revision with the current one and, if anything changed meanwhile, sends just those changes
(the view at the page's revision against the view now, as one coalesced push), or, when the
log no longer reaches back to the page's revision, re-renders the page's items wholesale: a
reconnecting page always converges, and nothing is silently missed.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.template.loader import render_to_string

from dashboard.kube import registry
from dashboard.kube.errors import ApiError
from dashboard.kube.meta import now
from dashboard.kube.selectors import parse_label_selector
from dashboard.access import clusters
from dashboard.access.principals import principal_for
from dashboard.access.sessions import reload_session, session_deadline, session_user
from dashboard.kube.hub import CLOSE, Guard, Subscriber, hub

from . import cluster_scope, kinds, live, scope, share, socket_limits

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.05   # coalesce bursts of writes into one push
# At most one push per PUSH_INTERVAL_SECONDS to a page, however fast its objects change: a
# push costs the browser a layout of the whole list (O(rows): ~15 ms CPU at 1,000 rows), so a
# page written 100 times a second would spend its main thread on layouts. Changes meanwhile
# coalesce (one row per object, its newest state); an idle page still gets a change after
# FLUSH_SECONDS. docs/BENCHMARKS.md, "Pages in the browser".
PUSH_INTERVAL_SECONDS = 0.25

# Close codes (static/kubedash/live.js): 4401 the viewer is signed out (banner with a sign-in
# link), 4403 this page is no longer allowed (revoked share link, access taken away), 4400 a
# malformed page address, 4408 fell behind (reconnect and refresh).
CLOSE_SIGNED_OUT = 4401
CLOSE_BEHIND = 4408

# The heartbeat (docs/ARCHITECTURE.md, live.js "heartbeat"): every HEARTBEAT_SECONDS
# (settings.KUBEDASH_LIVE_HEARTBEAT_SECONDS) the server sends BEAT, the page answers PONG. A page
# that hears nothing (no beat, no push) for two beats says it is not live, freezes its clocks
# and reconnects, so a server that stopped answering without closing the socket is noticed; a
# client that answers nothing for SILENT_BEATS beats is closed by the server (4408: a page
# that comes back reconnects and catches up).
BEAT = "beat"
PONG = "pong"
SILENT_BEATS = 6   # (30 s by default: a busy browser or machine is not a gone client)

SIGNED_OUT_FRAGMENT = ('<main id="main" hx-swap-oob="innerHTML"><div class="page-head"><h1>Signed out</h1></div>'
                       '<p class="alert" role="alert">You have been signed out. '
                       '<a href="/accounts/login/">Sign in again</a></p></main>')
NO_ACCESS_FRAGMENT = ('<main id="main" hx-swap-oob="innerHTML"><div class="page-head"><h1>Not allowed</h1></div>'
                      '<p class="alert" role="alert">You no longer have access to this page.</p></main>')


@dataclass
class PageSpec:
    """What a page shows, parsed from the websocket's query string (mirrors the page URL)."""

    view: str
    kinds: tuple[str, ...]
    namespace: str | None
    label_selector: object
    q: str
    name: str
    rv: int
    allowed: tuple[str, ...] = ()   # the viewer's namespace limits (empty: all)
    # One page of several (limit/continue): its first and last rows, (namespace, name). Live
    # updates keep each row on its page: rows in the range change in place or go; new rows
    # are announced ("N new — show"), never pushed into the page.
    paged: bool = False
    first: tuple[str, str] | None = None
    last: tuple[str, str] | None = None
    announced: int = 0
    tab: str = ""   # a detail page's History or Field owners view (kinds.DETAIL_TABS)
    show: str = ""  # the History view's filter (web/history.py SHOW: changes only, warnings only)
    # A sorted view (views.KindListView.sorted): its rows are those the sorted page holds when
    # the socket connects (`members`); they change in place and never move.
    sort: str = ""
    page: int = 1
    limit: int = 0
    members: set | None = None
    cluster: str = "local"   # the page's ?cluster= (web/cluster_scope.py): what it reads and watches
    # The list's namespaces for its heading counts (scope.list_scope for the viewer), and the
    # rows before the page (its pager's "Rows 101–200 of N"; None: the page has no pager).
    namespaces: list | None = None
    offset: int | None = None
    principal: object = None   # the viewer (the overview's clusters panel)
    totals_sent: str | None = None   # the last heading counts pushed (live.render_changes)


def _key(text: str) -> tuple[str, str] | None:
    namespace, sep, name = text.partition("/")
    return (namespace, name) if sep else None


def parse_spec(query: bytes) -> PageSpec:
    params = {k: v[-1] for k, v in parse_qs(query.decode()).items()}
    view = params.get("view", "")
    shown = kinds.view_kinds(view)
    if shown is None:
        raise ValueError(f"unknown view {view!r}")
    rv = params.get("rv", "0")
    sort, page, limit = params.get("sort", ""), params.get("page", "1"), params.get("limit", "0")
    cluster = params.get("cluster") or clusters.LOCAL
    if not clusters.NAME_RE.match(cluster):
        raise ValueError(f"bad cluster {cluster!r}")
    return PageSpec(cluster=cluster, sort=sort, page=int(page) if page.isdigit() else 1, limit=int(limit) if limit.isdigit() else 0,
                    announced=int(params["announced"]) if params.get("announced", "").isdigit() else 0,
                    offset=int(params["offset"]) if params.get("offset", "").isdigit() else None,
                    view=view, kinds=shown, namespace=params.get("namespace") or None,
                    label_selector=parse_label_selector(params.get("labelSelector", "")) if params.get("labelSelector") else None,
                    q=params.get("q", ""), name=params.get("name", ""), rv=int(rv) if rv.isdigit() else 0,
                    paged=params.get("paged") == "1" or bool(sort), first=_key(params.get("first", "")),
                    last=_key(params.get("last", "")),
                    tab=params.get("tab", "") if params.get("tab") in kinds.DETAIL_TABS else "",
                    show=params.get("show", "") if params.get("show") in ("changes", "warnings") else "")


def page_access(scope, fresh: bool = False):
    """(principal or None, subjects, deadline) of a websocket's session, now.

    The page's share link if the session is in share mode, else its signed-in user (checked as
    the pages check it: active, not signed out since, session not expired). `fresh` re-reads
    the session from its store (a re-check). Subjects and deadline feed the hub's Guard.
    """
    session = scope.get("session")
    if session is None:
        # No session middleware in front (a bare consumer, as in tests): the scope's user,
        # re-read so that deactivation and deletion still count.
        user = scope.get("user")
        if user is None or not user.is_authenticated:
            return None, (), None
        user = type(user)._default_manager.filter(pk=user.pk, is_active=True).first()
        return (principal_for(user), (f"user:{user.pk}",), None) if user else (None, (), None)
    if fresh:
        session = reload_session(session.session_key)
    if share.session_has_share(session):
        principal, subjects, deadline = share.link_access(session.get(share.SESSION_KEY))
        return principal, subjects, _earliest(deadline, session_deadline(session))
    user = session_user(session)
    if user is None:
        return None, (), None
    return principal_for(user), (f"user:{user.pk}",), session_deadline(session)


BANNER_SECONDS = 2.0   # how often a followed cluster's page re-reads its follower's state


def cluster_known(name: str) -> bool:
    """The local store, or a cluster that is followed now."""
    return name == clusters.LOCAL or cluster_scope.followed(name) is not None


_banners: dict[str, tuple[float, tuple]] = {}   # cluster -> (when read, banner_state): shared by its pages


def banner_state(name: str, fresh: bool = False) -> tuple:
    """(what the stale banner says, its fragment) for a followed cluster now: read and rendered
    at most once per BANNER_SECONDS / 2 in this process, however many of its pages are open
    (`fresh`: read now, as the page just rendered it)."""
    read_at, state = _banners.get(name, (float("-inf"), None))
    if not fresh and time.monotonic() - read_at < BANNER_SECONDS / 2:
        return state
    row = cluster_scope.followed(name)
    banner = cluster_scope.staleness(row) if row is not None else None
    html = render_to_string("web/_cluster_banner.html", {"banner": banner, "oob": True})
    state = ((banner["key"] if banner else None), html)
    _banners[name] = (time.monotonic(), state)
    return state


def _earliest(*times):
    times = [t for t in times if t is not None]
    return min(times) if times else None


class LiveConsumer(AsyncWebsocketConsumer):
    # No channel layer: pushes come from the watch hub and access changes from its notices,
    # so a page keeps working while Redis is down (a layer's receive would fail with it).
    channel_layer_alias = None   # not a configured alias: get_channel_layer() gives None

    async def connect(self):
        self.subscribers: list[Subscriber] = []
        self.pending: dict[tuple, tuple] = {}
        self.flush_lock = asyncio.Lock()
        self.flush_handle = None
        self.flush_task = None
        self.last_flush_at = float("-inf")   # loop time of the last push
        self.pump = None
        self.closing = False
        try:
            self.spec = parse_spec(self.scope.get("query_string", b""))
        except (ValueError, ApiError):
            await self.close(code=4400)
            return
        # Everything this consumer does from here runs about the page's cluster: this task
        # (connect, later messages) and the tasks it starts (pump, flushes) copy the context.
        clusters.enter(self.spec.cluster)
        await hub.start()
        generation = hub.access_generation
        self.principal, subjects, deadline = await sync_to_async(page_access)(self.scope)
        if self.principal is None:
            if share.session_has_share(self.scope.get("session")):
                await self.close(code=4403)   # the share link stopped: refused
                return
            # Signed out (maybe while this page was reconnecting): accept, to be able to say so
            # with a close code the page shows (a refused handshake reaches it as 1006).
            await self.accept()
            await self.close(code=CLOSE_SIGNED_OUT)
            return
        record = self.scope.get("kubedash.record")   # the websocket's log line (server/observe.py)
        if record is not None:
            record["user"] = self.principal.username
        self.budgets = [subjects[0] if subjects else self.principal.username]   # whose budget (socket_limits)
        session = self.scope.get("session")
        socket_limits.vouch_for_session(session.session_key if session is not None else None)
        if not socket_limits.may_connect(self.budgets[0]):
            await self.accept()   # (to say why: a refused handshake reaches the page as 1006)
            await self.close(code=socket_limits.CLOSE_TOO_MANY)
            return
        if not live.may_view(self.principal, self.spec.namespace, self.spec.kinds) or \
                not await sync_to_async(cluster_known)(self.spec.cluster):
            await self.close(code=4403)
            return
        # Re-checked whenever that access changes (notices from any process) or expires.
        self.guard = Guard(frozenset(), recheck=self._recheck)
        hub.guard(self.guard, subjects, deadline)
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=10000)
        state = await self._subscribe()
        await self.accept()  # only now: the subscription and the snapshot are in place
        if await sync_to_async(live.changed_since)(self.spec, state.rv):
            # The changes since the page's revision when that will do; else the whole page.
            messages = await sync_to_async(live.catch_up)(self.spec, self.principal, state)
            if messages is None:
                messages = [await sync_to_async(live.render_refresh)(self.spec, state)]
            for html in messages:
                await self.send(text_data=html)
        for sub in self.subscribers:
            sub.release_buffer()
        self.pump = asyncio.get_running_loop().create_task(self._pump())
        self.heard_at = asyncio.get_running_loop().time()
        self.beat_task = asyncio.get_running_loop().create_task(self._heartbeat())
        if self.spec.cluster != clusters.LOCAL:
            self.banner_task = asyncio.get_running_loop().create_task(self._watch_banner())
        if hub.access_generation != generation:
            await self._recheck()   # a notice may have come between resolving and guarding

    async def _subscribe(self):
        """Subscribe to what the page shows for self.principal; the snapshot it starts from."""
        self.spec.allowed = tuple(self.principal.namespaces)
        self.spec.principal = self.principal
        if not kinds.is_detail_view(self.spec.view) and self.spec.view != kinds.OVERVIEW:
            self.spec.namespaces = scope.list_scope(self.principal, self.spec.namespace or "", self.spec.kinds[0])
        # A share link's selector narrows whatever the page asked for (never widens).
        self.spec.label_selector = scope.narrow(self.principal, self.spec.label_selector)
        for kind in self.spec.kinds:
            res = registry.by_kind(kind)
            sub = Subscriber(resource=res, namespace=self.spec.namespace, label_selector=self.spec.label_selector,
                             names=(self.spec.name,) if self.spec.name else (),
                             predicate=live.page_predicate(self.principal, self.spec.q), queue=self.queue)
            sub.matching = set()
            hub.register(sub)            # buffered until the snapshot below is taken
            self.subscribers.append(sub)
        timeline = kinds.timeline()
        if self.spec.tab == kinds.DETAIL_TABS[0] and self.spec.name and timeline is not None:
            # The History view is one timeline: the Events about its object push it too.
            sub = Subscriber(resource=registry.by_kind(timeline.kind), namespace=self.spec.namespace,
                             field_selector=timeline.selector(self.spec.kinds[0], self.spec.name), queue=self.queue)
            sub.matching = set()
            hub.register(sub)
            self.subscribers.append(sub)
        elif not kinds.is_detail_view(self.spec.view) and timeline is not None:
            # A list's warning badges and the overview's warnings line: the warnings about its
            # kind (the overview: any kind), within the viewer's namespaces, push them too.
            about = None if self.spec.view == kinds.OVERVIEW else self.spec.kinds[0]
            sub = Subscriber(resource=registry.by_kind(timeline.kind), namespace=self.spec.namespace,
                             field_selector=timeline.warnings_selector(about),
                             predicate=live.namespace_predicate(self.principal), queue=self.queue)
            sub.matching = set()
            hub.register(sub)
            self.subscribers.append(sub)
        if self.spec.sort:
            self.spec.members = await sync_to_async(live.sorted_members)(self.spec, self.principal)
        state = await sync_to_async(live.snapshot)(self.spec, self.principal)
        for sub in self.subscribers:
            sub.start_rv = state.rv
            sub.matching.update(state.keys.get(sub.resource.kind, ()))
        self.known = {k for keys in state.keys.values() for k in keys}   # everything the view matches
        self.shown = sorted(k for k in self.known if live.on_page(self.spec, k))
        return state

    async def disconnect(self, code):
        self.closing = True
        if getattr(self, "guard", None) is not None:
            hub.unguard(self.guard)
        for sub in getattr(self, "subscribers", ()):
            hub.unregister(sub)
        if getattr(self, "pump", None) is not None:
            self.pump.cancel()
        if getattr(self, "flush_handle", None) is not None:
            self.flush_handle.cancel()
        if getattr(self, "flush_task", None) is not None:
            self.flush_task.cancel()   # a render for a socket that is gone: its send would fail
        if getattr(self, "banner_task", None) is not None:
            self.banner_task.cancel()
        if getattr(self, "beat_task", None) is not None:
            self.beat_task.cancel()

    async def websocket_receive(self, message):
        # A page sends one thing: PONG, its answer to each BEAT (the heartbeat), at most a few a
        # beat (server/ws_limits.py refuses a faster stream at the protocol, before it gets here).
        # Anything else is not a page's (web/socket_limits.py): closed on the first, charged to
        # its user; what follows before the close completes costs nothing.
        if self.closing:
            return
        if message.get("text") == PONG:
            self.heard_at = asyncio.get_running_loop().time()
            return
        self.closing = True
        socket_limits.stray_frame(getattr(self, "budgets", ()))
        for sub in getattr(self, "subscribers", ()):
            hub.unregister(sub)
        await self.close(code=socket_limits.CLOSE_POLICY)
    async def _heartbeat(self):
        """BEAT every HEARTBEAT_SECONDS; close a client that answered none of the last SILENT_BEATS."""
        from django.conf import settings

        interval = settings.KUBEDASH_LIVE_HEARTBEAT_SECONDS
        loop = asyncio.get_running_loop()
        while not self.closing:
            await asyncio.sleep(interval)
            if self.closing:
                return
            if loop.time() - self.heard_at > SILENT_BEATS * interval:
                self.closing = True
                await self.close(code=CLOSE_BEHIND)
                return
            try:
                await self.send(text_data=BEAT)
            except Exception:   # gone meanwhile
                return
            if self.spec.view == kinds.OVERVIEW:
                await self._send_clusters_panel()

    async def _send_clusters_panel(self):
        """The Overview's clusters panel, when it changed since last sent."""
        try:
            panel = await sync_to_async(live.clusters_fragment)(self.spec, now())
            if panel and panel != getattr(self, "panel_sent", None) and not self.closing:
                self.panel_sent = panel
                await self.send(text_data=panel)
        except Exception:
            if not self.closing:
                log.warning("the overview's clusters panel push failed", exc_info=True)

    async def _recheck(self):
        """The access this page was opened with changed or expired: close, narrow, or carry on."""
        # The hub runs re-checks in a fresh context: back to this page's cluster first.
        clusters.enter(self.spec.cluster)
        if self.closing:
            return
        principal, subjects, deadline = await sync_to_async(page_access)(self.scope, fresh=True)
        if self.closing:
            return
        if principal is None:
            # A share link that stopped, or a user signed out / deactivated / expired.
            if self.principal.share_id is not None:
                await self._close(share.REVOKED_FRAGMENT, 4403)
            else:
                await self._close(SIGNED_OUT_FRAGMENT, CLOSE_SIGNED_OUT)
            return
        if not live.may_view(principal, self.spec.namespace, self.spec.kinds):
            await self._close(NO_ACCESS_FRAGMENT, 4403)
            return
        hub.guard(self.guard, subjects, deadline)
        if principal != self.principal:
            await self._narrow(principal)

    async def _narrow(self, principal):
        """Still allowed to view the page, but maybe less of it: re-subscribe and re-render, so
        rows it may no longer see leave the page and are no longer pushed."""
        async with self.flush_lock:
            for sub in self.subscribers:
                hub.unregister(sub)
            self.subscribers, self.pending = [], {}
            while not self.queue.empty():
                self.queue.get_nowait()
            self.principal = principal
            state = await self._subscribe()
            await self.send(text_data=await sync_to_async(live.render_refresh)(self.spec, state))
            for sub in self.subscribers:
                sub.release_buffer()

    async def _close(self, fragment: str, code: int):
        # Clear the page's data first (the page shows why), then close: 4xxx means "don't retry".
        if self.closing:
            return
        self.closing = True
        hub.unguard(self.guard)
        for sub in self.subscribers:
            hub.unregister(sub)
        try:
            await self.send(text_data=fragment)
        except Exception:  # the socket may already be gone
            pass
        await self.close(code=code)

    async def _watch_banner(self):
        """A followed cluster's page: its stale banner follows the follower's state (read every
        BANNER_SECONDS), so a copy that stops being current never keeps looking current."""
        shown = await sync_to_async(banner_state)(self.spec.cluster, fresh=True)
        while not self.closing:
            await asyncio.sleep(BANNER_SECONDS)
            now = await sync_to_async(banner_state)(self.spec.cluster)
            if now[0] != shown[0] and not self.closing:
                shown = now
                try:
                    await self.send(text_data=now[1])
                except Exception:   # gone meanwhile
                    return

    async def _pump(self):
        loop = asyncio.get_running_loop()
        while True:
            kind, ev = await self.queue.get()
            if kind is CLOSE:
                # We fell too far behind: close; the page reconnects at once and catches up
                # from its revision (live.js: 4408 is the one 4xxx code that retries).
                self.closing = True
                await self.close(code=CLOSE_BEHIND)
                return
            self.pending[(ev.kind, ev.namespace, ev.name)] = (kind, ev)
            if self.flush_handle is None:
                delay = max(FLUSH_SECONDS, self.last_flush_at + PUSH_INTERVAL_SECONDS - loop.time())
                self.flush_handle = loop.call_later(delay, self._start_flush)

    def _start_flush(self):
        self.flush_handle = None
        if self.closing:
            return
        self.last_flush_at = asyncio.get_running_loop().time()
        self.flush_task = asyncio.get_running_loop().create_task(self._flush())
        self.flush_task.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Task) -> None:
        # Retrieve the outcome (no "Task exception was never retrieved"): a render that failed
        # is logged (a push into a socket that closed meanwhile is not an error: _flush).
        self.flush_task = None
        if task.cancelled() or task.exception() is None:
            return
        if not self.closing:
            log.warning("a live page push failed", exc_info=task.exception())

    async def _flush(self):
        async with self.flush_lock:  # one render at a time: it updates self.shown
            pending, self.pending = self.pending, {}
            if not pending:
                return
            messages = await sync_to_async(live.render_changes)(self.spec, pending, self.shown, self.known)
            for html in messages:
                if self.closing:   # closed while rendering (asgiref finishes the render anyway)
                    return
                try:
                    await self.send(text_data=html)
                except Exception:   # the client went away meanwhile: its disconnect is on its way
                    self.closing = True
                    return

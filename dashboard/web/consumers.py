"""Live pages: one websocket per page pushes re-rendered fragments (htmx `hx-swap-oob`).

The consumer subscribes to the per-process watch hub for exactly what its page shows (kind,
namespace, label selector, name search, one object), renders the changed object with the
same template partial as the full page, and sends it. On (re)connect it compares the page's
revision with the current one and, if anything changed meanwhile, sends just those changes
(the view at the page's revision against the view now, as one coalesced push), or, when the
log no longer reaches back to the page's revision or too much changed, re-renders the page's
items wholesale: a reconnecting page always converges, and nothing is silently missed.

Every message stays within the socket's message limit (autobahn refuses to send a larger one:
the 1011 of issue 43): a push is cut into pieces (live.render_changes), and a page whose
whole view no longer fits one message is told to reload (CLOSE_RELOAD). A page that asks
(live.js: `ready=1`) is sent LIVE once it is caught up, and says "Live" only then.
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import time

import orjson

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.template.loader import render_to_string

from dashboard.kube import context, registry
from dashboard.kube.errors import ApiError
from dashboard.kube.meta import now
from dashboard.access import clusters
from dashboard.access.principals import principal_for
from dashboard.access.sessions import reload_session, session_deadline, session_user
from dashboard.kube.hub import CLOSE, Guard, LogEntry, Subscriber, hub
from dashboard.kube.revlog import DELETED, MODIFIED

from . import badges, cluster_scope, kinds, live, scope, share, socket_limits
from .live_page import PageSocket, PageView
from .queries import state_changes, view_predicate

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.05   # coalesce bursts of writes into one push
# At most one push per PUSH_INTERVAL_SECONDS to a page, however fast its objects change: a
# push costs the browser a layout of the whole list (O(rows): ~15 ms CPU at 1,000 rows), so a
# page written 100 times a second would spend its main thread on layouts. Changes meanwhile
# coalesce (one row per object, its newest state); an idle page still gets a change after
# FLUSH_SECONDS. docs/BENCHMARKS.md, "Pages in Chromium".
PUSH_INTERVAL_SECONDS = 0.25

# Close codes (dashboard/web/static/kubedash/live.js): 4401 the viewer is signed out (banner with a sign-in
# link), 4403 this page is no longer allowed (revoked share link, access taken away), 4400 a
# malformed page address, 4408 fell behind (reconnect and refresh).
CLOSE_SIGNED_OUT = 4401
CLOSE_BEHIND = 4408
CLOSE_RELOAD = 4409   # what the page must be sent does not fit a message: live.js reloads the page
# Sent after a (re)connecting page's catch-up, to a page whose address says ready=1 (live.js):
# everything it missed has been sent, so it may say "Live".
LIVE = "live"

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


RECHECK = object()   # queue item: (RECHECK, objects whose time-derived state may have changed)


def _earliest(*times):
    times = [t for t in times if t is not None]
    return min(times) if times else None


class LiveConsumer(AsyncWebsocketConsumer):
    """One page's socket. It holds the page's view as parsed from its address (self.page, a
    live_page.PageView) and everything that changes while the socket lives (self.socket, a
    live_page.PageSocket)."""

    # No channel layer: pushes come from the watch hub and access changes from its notices,
    # so a page keeps working while Redis is down (a layer's receive would fail with it).
    channel_layer_alias = None   # not a configured alias: get_channel_layer() gives None

    async def connect(self):
        self.socket = s = PageSocket()   # (first: disconnect reads it, however early connect stops)
        try:
            self.page = PageView.parse(self.scope.get("query_string", b""))
        except (ValueError, ApiError):
            await self.close(code=4400)
            return
        s.rv, s.announced = self.page.rv, self.page.announced   # (they count on from the page's)
        # Everything this consumer does from here runs about the page's cluster: this task
        # (connect, later messages) and the tasks it starts (pump, flushes) copy the context.
        ctx = context.in_scope(self.scope)
        ctx.enter_cluster(self.page.cluster)
        await hub.start()
        generation = hub.access_generation
        principal, subjects, deadline = await sync_to_async(page_access)(self.scope)
        if principal is None:
            if share.session_has_share(self.scope.get("session")):
                await self.close(code=4403)   # the share link stopped: refused
                return
            # Signed out (maybe while this page was reconnecting): accept, to be able to say so
            # with a close code the page shows (a refused handshake reaches it as 1006).
            await self.accept()
            await self.close(code=CLOSE_SIGNED_OUT)
            return
        ctx.record["user"] = principal.username   # the websocket's log line (server/observe.py)
        s.budgets = (subjects[0] if subjects else principal.username,)   # whose budget (socket_limits)
        session = self.scope.get("session")
        socket_limits.vouch_for_session(session.session_key if session is not None else None)
        if not socket_limits.may_connect(s.budgets[0]):
            await self.accept()   # (to say why: a refused handshake reaches the page as 1006)
            await self.close(code=socket_limits.CLOSE_TOO_MANY)
            return
        if not live.may_view(principal, self.page.namespace, self.page.kinds) or \
                not await sync_to_async(cluster_known)(self.page.cluster):
            await self.close(code=4403)
            return
        # Re-checked whenever that access changes (notices from any process) or expires, about
        # the page's cluster.
        s.guard = Guard(frozenset(), recheck=self._recheck, cluster=self.page.cluster)
        hub.guard(s.guard, subjects, deadline)
        s.queue = asyncio.Queue(maxsize=10000)
        timed = self.page.state_filter is not None and self.page.state_filter.until is not None
        if timed:
            s.rvs, s.states_checked = {}, now()   # (before the snapshot: _check_states goes on from it)
            # The re-checks read about the page's cluster (a timer set from the hub's dispatch
            # would otherwise run in the dispatch's context).
            self._states_context = contextvars.copy_context()
        state = await self._subscribe(principal)
        await self.accept()  # only now: the subscription and the snapshot are in place
        # A time-derived state filter: rows may have entered or left it with no write since the
        # page was rendered, which a catch-up by revisions cannot see: the whole page, then.
        if timed or await sync_to_async(live.changed_since)(s.view, state.rv):
            # The changes since the page's revision when that will do; else the whole page.
            messages = None if timed else await sync_to_async(live.catch_up)(s, state)
            if messages is None:
                messages = await sync_to_async(live.render_refresh)(s, state)
            if not await self._send_pushes(messages):
                return
        if self.page.ready:
            await self.send(text_data=LIVE)
        for sub in s.subscribers:
            sub.release_buffer()
        loop = asyncio.get_running_loop()
        s.pump = loop.create_task(self._pump())
        s.heard_at = loop.time()
        s.beat_task = loop.create_task(self._heartbeat())
        if self.page.cluster != clusters.LOCAL:
            s.banner_task = loop.create_task(self._watch_banner())
        if timed:
            self._start_state_check()
        self._guard_badges(principal)
        if hub.access_generation != generation:
            await self._recheck()   # a notice may have come between resolving and guarding

    def _guard_badges(self, principal):
        """Each header badge (web/badges.py) pushed again when its notice arrives."""
        if principal.is_share or principal.user_id is None:
            return
        for badge in badges.registered():
            subject = badge.subject(principal)
            if subject:
                g = Guard(frozenset(), recheck=lambda badge=badge: self._push_badge(badge), cluster=self.page.cluster)
                hub.guard(g, (subject,))
                self.socket.badge_guards.append(g)

    async def _push_badge(self, badge):
        s = self.socket
        if s.closing:
            return
        html = await sync_to_async(badges.render)(badge, s.principal, True)
        if not s.closing:
            try:
                await self.send(text_data=html)
            except Exception:   # the client went away meanwhile: its disconnect is on its way
                s.closing = True

    async def _subscribe(self, principal):
        """Subscribe to what the page shows `principal`; the snapshot it starts from."""
        s = self.socket
        s.principal, s.view = principal, self.page.for_viewer(principal)
        view = s.view
        if not kinds.is_detail_view(view.view) and view.view != kinds.OVERVIEW:
            s.namespaces = scope.list_scope(principal, view.namespace or "", view.kinds[0])
        if view.warnings and s.namespaces is not None:
            s.members = await sync_to_async(live.warned_members)(s)
        only = frozenset(s.members or ()) if view.warnings else None
        for kind in view.kinds:
            res = registry.by_kind(kind)
            predicate = view_predicate(principal, view.q, only, kind, view.state_filter)
            sub = Subscriber(resource=res, namespace=view.namespace, label_selector=view.label_selector,
                             names=(view.name,) if view.name else (),
                             predicate=self._noting(predicate) if s.rvs is not None else predicate, queue=s.queue)
            sub.matching = set()
            hub.register(sub)            # buffered until the snapshot below is taken
            s.subscribers.append(sub)
        timeline = kinds.timeline()
        if view.tab == kinds.DETAIL_TABS[0] and view.name and timeline is not None:
            # The History view is one timeline: the Events about its object push it too.
            sub = Subscriber(resource=registry.by_kind(timeline.kind), namespace=view.namespace,
                             field_selector=timeline.selector(view.kinds[0], view.name), queue=s.queue)
            sub.matching = set()
            hub.register(sub)
            s.subscribers.append(sub)
        elif not kinds.is_detail_view(view.view) and timeline is not None and timeline.kind not in view.kinds:
            # A list's warning badges and the overview's warnings line: the warnings about its
            # kind (the overview: any kind), within the viewer's namespaces, push them too.
            about = None if view.view == kinds.OVERVIEW else view.kinds[0]
            sub = Subscriber(resource=registry.by_kind(timeline.kind), namespace=view.namespace,
                             field_selector=timeline.warnings_selector(about),
                             predicate=live.namespace_predicate(principal), queue=s.queue)
            sub.matching = set()
            hub.register(sub)
            s.subscribers.append(sub)
        if view.sort:
            s.members = await sync_to_async(live.sorted_members)(s)
        state = await sync_to_async(live.snapshot)(view, principal, members=s.members)
        for sub in s.subscribers:
            sub.start_rv = state.rv
            sub.matching.update(state.keys.get(sub.resource.kind, ()))
        s.known, s.shown = live.page_rows(s, state)
        return state

    async def disconnect(self, code):
        s = self.socket
        s.closing = True
        if s.guard is not None:
            hub.unguard(s.guard)
        for g in s.badge_guards:
            hub.unguard(g)
        for sub in s.subscribers:
            hub.unregister(sub)
        # (the flush task: a render for a socket that is gone, whose send would fail)
        for timer in (s.pump, s.flush_handle, s.flush_task, s.banner_task, s.beat_task, s.state_timer, s.state_task):
            if timer is not None:
                timer.cancel()

    async def websocket_receive(self, message):
        # A page sends one thing: PONG, its answer to each BEAT (the heartbeat), at most a few a
        # beat (server/ws_limits.py refuses a faster stream at the protocol, before it gets here).
        # Anything else is not a page's (web/socket_limits.py): closed on the first, charged to
        # its user; what follows before the close completes costs nothing.
        s = self.socket
        if s.closing:
            return
        if message.get("text") == PONG:
            s.heard_at = asyncio.get_running_loop().time()
            return
        s.closing = True
        socket_limits.stray_frame(s.budgets)
        for sub in s.subscribers:
            hub.unregister(sub)
        await self.close(code=socket_limits.CLOSE_POLICY)

    async def _heartbeat(self):
        """BEAT every HEARTBEAT_SECONDS; close a client that answered none of the last SILENT_BEATS."""
        s = self.socket
        interval = settings.KUBEDASH_LIVE_HEARTBEAT_SECONDS
        loop = asyncio.get_running_loop()
        while not s.closing:
            await asyncio.sleep(interval)
            if s.closing:
                return
            if loop.time() - s.heard_at > SILENT_BEATS * interval:
                s.closing = True
                await self.close(code=CLOSE_BEHIND)
                return
            try:
                await self.send(text_data=BEAT)
            except Exception:   # gone meanwhile
                return
            if self.page.view == kinds.OVERVIEW:
                await self._send_clusters_panel()

    async def _send_clusters_panel(self):
        """The Overview's clusters panel, when it changed since last sent."""
        s = self.socket
        try:
            panel = await sync_to_async(live.clusters_fragment)(s, now())
            if panel and panel != s.panel_sent and not s.closing:
                s.panel_sent = panel
                await self.send(text_data=panel)
        except Exception:
            if not s.closing:
                log.warning("the overview's clusters panel push failed", exc_info=True)

    async def _recheck(self):
        """The access this page was opened with changed or expired: close, narrow, or carry on."""
        s = self.socket
        if s.closing:
            return
        principal, subjects, deadline = await sync_to_async(page_access)(self.scope, fresh=True)
        if s.closing:
            return
        if principal is None:
            # A share link that stopped, or a user signed out / deactivated / expired.
            if s.principal.share_id is not None:
                await self._close(share.REVOKED_FRAGMENT, 4403)
            else:
                await self._close(SIGNED_OUT_FRAGMENT, CLOSE_SIGNED_OUT)
            return
        if not live.may_view(principal, self.page.namespace, self.page.kinds):
            await self._close(NO_ACCESS_FRAGMENT, 4403)
            return
        hub.guard(s.guard, subjects, deadline)
        if principal != s.principal:
            await self._narrow(principal)

    async def _narrow(self, principal):
        """Still allowed to view the page, but maybe less of it: re-subscribe and re-render, so
        rows it may no longer see leave the page and are no longer pushed."""
        s = self.socket
        async with s.flush_lock:
            for sub in s.subscribers:
                hub.unregister(sub)
            s.subscribers, s.pending = [], {}
            while not s.queue.empty():
                s.queue.get_nowait()
            state = await self._subscribe(principal)
            if not await self._send_pushes(await sync_to_async(live.render_refresh)(s, state)):
                return
            for sub in s.subscribers:
                sub.release_buffer()

    async def _close(self, fragment: str, code: int):
        # Clear the page's data first (the page shows why), then close: 4xxx means "don't retry".
        s = self.socket
        if s.closing:
            return
        s.closing = True
        hub.unguard(s.guard)
        for sub in s.subscribers:
            hub.unregister(sub)
        try:
            await self.send(text_data=fragment)
        except Exception:  # the socket may already be gone
            pass
        await self.close(code=code)

    async def _watch_banner(self):
        """A followed cluster's page: its stale banner follows the follower's state (read every
        BANNER_SECONDS), so a copy that stops being current never keeps looking current."""
        s = self.socket
        shown = await sync_to_async(banner_state)(self.page.cluster, fresh=True)
        while not s.closing:
            await asyncio.sleep(BANNER_SECONDS)
            now = await sync_to_async(banner_state)(self.page.cluster)
            if now[0] != shown[0] and not s.closing:
                shown = now
                try:
                    await self.send(text_data=now[1])
                except Exception:   # gone meanwhile
                    return

    async def _pump(self):
        s = self.socket
        loop = asyncio.get_running_loop()
        while True:
            kind, ev = await s.queue.get()
            if kind is CLOSE:
                # We fell too far behind: close; the page reconnects at once and catches up
                # from its revision (live.js: 4408 is the one 4xxx code that retries).
                s.closing = True
                await self.close(code=CLOSE_BEHIND)
                return
            if kind is RECHECK:
                self._offer_states(ev)
                continue
            if s.rvs is not None and ev.type == DELETED and ev.kind == self.page.kinds[0]:
                # (a delete is decided without the predicate, which notes every other write: _noting)
                s.rvs[(ev.namespace, ev.name)] = max(s.rvs.get((ev.namespace, ev.name), 0), ev.rv)
            self._push_later(kind, ev, loop)

    def _push_later(self, kind, ev, loop):
        s = self.socket
        s.pending[(ev.kind, ev.namespace, ev.name)] = (kind, ev)
        if s.flush_handle is None:
            delay = max(FLUSH_SECONDS, s.last_flush_at + PUSH_INTERVAL_SECONDS - loop.time())
            s.flush_handle = loop.call_later(delay, self._start_flush)

    # A time-derived state filter (kinds.State.until: a Lease's held / expired): rows enter and
    # leave it with no write. At the next instant one's state changes by time alone, the rows
    # whose instant passed are read as stored and offered to the page's subscription again,
    # in the order of its events: its predicate decides at that moment whether each enters,
    # stays or leaves the page, and keeps the subscription's matching keys, as for a write.

    def _noting(self, predicate):
        """The subscription's predicate, noting each object the hub offers it (every write in
        the view, in the state or not): its revision (a re-check read before it must not undo
        it) and its next instant, which may come before the one awaited."""
        s, state = self.socket, self.page.state_filter
        columns = registry.by_kind(self.page.kinds[0]).typed_columns

        def noted(obj: dict) -> bool:
            m = obj["metadata"]
            key = (m["namespace"], m["name"])
            s.rvs[key] = max(s.rvs.get(key, 0), int(m.get("resourceVersion") or 0))
            values = columns(obj)
            at = state.until(tuple(values[c] for c in state.columns))
            if at is not None and at > s.states_checked and not s.closing:
                self._start_state_check(at)
            return predicate(obj)

        return noted

    def _start_state_check(self, at=None):
        """Check the state at `at` (a datetime; None: now), unless a check comes sooner."""
        s = self.socket
        loop = asyncio.get_running_loop()
        when = loop.time() + (max((at - now()).total_seconds(), 0) + 0.01 if at is not None else 0)
        if s.state_timer is not None:
            if s.state_timer.when() <= when:
                return
            s.state_timer.cancel()
        s.state_timer = loop.call_at(when, self._run_state_check)

    def _run_state_check(self):
        s = self.socket
        s.state_timer = None
        if s.closing:
            return
        if s.state_task is not None:   # one at a time: again once this one is done
            s.state_task.add_done_callback(lambda _: self._start_state_check() if not s.closing else None)
            return
        s.state_task = asyncio.get_running_loop().create_task(self._check_states(),
                                                              context=self._states_context.copy())

    async def _check_states(self):
        s = self.socket
        view, state = self.page, self.page.state_filter
        try:
            moment = now()
            changed, following = await sync_to_async(state_changes)(
                kinds.by_view(view.view), s.namespaces or [], s.view.label_selector, view.q, state,
                s.states_checked, moment)
            s.states_checked = moment
            if changed and not s.closing:
                s.queue.put_nowait((RECHECK, changed))
            if following is not None and not s.closing:
                self._start_state_check(following)
        except Exception:
            if not s.closing:
                log.warning("a live page's state re-check failed", exc_info=True)
        finally:
            s.state_task = None

    def _offer_states(self, objects):
        s = self.socket
        if not s.subscribers:
            return   # (re-subscribing, _narrow: its snapshot has the rows as they are now)
        sub, loop = s.subscribers[0], asyncio.get_running_loop()
        for obj in objects:
            m = obj["metadata"]
            rv = int(m.get("resourceVersion") or 0)
            if s.rvs.get((m["namespace"], m["name"]), 0) > rv:
                continue   # a newer write was pushed meanwhile: it decided
            entry = LogEntry(rv, sub.resource.kind, m["namespace"], m["name"], MODIFIED, orjson.dumps(obj).decode(),
                             sub.cluster)
            change = sub.decide(entry)
            if change is not None:
                self._push_later(change, entry, loop)

    def _start_flush(self):
        s = self.socket
        s.flush_handle = None
        if s.closing:
            return
        s.last_flush_at = asyncio.get_running_loop().time()
        s.flush_task = asyncio.get_running_loop().create_task(self._flush())
        s.flush_task.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Task) -> None:
        # Retrieve the outcome (no "Task exception was never retrieved"): a render that failed
        # is logged (a push into a socket that closed meanwhile is not an error: _flush).
        self.socket.flush_task = None
        if task.cancelled() or task.exception() is None:
            return
        if not self.socket.closing:
            log.warning("a live page push failed", exc_info=task.exception())

    async def _flush(self):
        s = self.socket
        async with s.flush_lock:  # one render at a time: it updates the socket's rows
            pending, s.pending = s.pending, {}
            if not pending:
                return
            messages = await sync_to_async(live.render_changes)(s, pending)
            if s.closing:   # closed while rendering (asgiref finishes the render anyway)
                return
            try:
                await self._send_pushes(messages)
            except Exception:   # the client went away meanwhile: its disconnect is on its way
                s.closing = True

    async def _send_pushes(self, messages: list[str]) -> bool:
        """Send one push's messages, in order; or, when one of them is larger than the socket can
        carry (live.message_limit: a page's whole view, an object's detail), none of them: the
        page is closed with CLOSE_RELOAD, and reloads. False: closed."""
        s = self.socket
        limit = live.message_limit()
        if any(len(html) > limit // 4 and len(html.encode()) > limit for html in messages):
            s.closing = True
            for sub in s.subscribers:
                hub.unregister(sub)
            await self.close(code=CLOSE_RELOAD)
            return False
        for html in messages:
            if s.closing:
                return False
            await self.send(text_data=html)
        return True

"""The all-clusters pages' websocket (`/ws/clusters/`): the overview's (web/all_clusters.py), or,
with `list=<plural>` and the list's own query, a list's across clusters (web/all_clusters_list.py).
It subscribes to the watch hub for the kinds the page shows in every cluster the viewer may see,
and after any change (coalesced: FLUSH_SECONDS, and at most one render per PUSH_INTERVAL_SECONDS) re-renders the page's panel
(a list: its rows and totals) and pushes it when it changed. It re-renders on a timer too (STATE_SECONDS): a followed cluster goes stale, and the Warning
Events leave their hour, without any write. It speaks the live pages' heartbeat (consumers.py: BEAT /
PONG, LIVE once the page is current), so the page says whether it is live as every live page does.
"""
from __future__ import annotations

import asyncio
import logging

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import QueryDict
from django.template.loader import render_to_string

from dashboard.access import clusters

from dashboard.kube import context, registry
from dashboard.kube.hub import CLOSE, Guard, Subscriber, hub

from . import all_clusters, all_clusters_list, cluster_scope, kinds, socket_limits
from .views import Filters
from .consumers import BEAT, CLOSE_BEHIND, CLOSE_RELOAD, CLOSE_SIGNED_OUT, LIVE, PONG, SILENT_BEATS, page_access

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.05   # coalesce a burst of writes (in any cluster) into one render (as consumers.py)
PUSH_INTERVAL_SECONDS = 0.25   # and at most one render per this, however fast the clusters change
STATE_SECONDS = 2.0   # as consumers.BANNER_SECONDS: how soon a cluster that stops being current says so
# A list re-renders on a timer too (a Lease's held / expired, its rows' ages), less often: a list's
# render may sort a large view in Python.
LIST_STATE_SECONDS = 5.0


def render_panel(principal, query: QueryDict) -> str:
    """The overview's panel, or (`list=<plural>`) a list's rows and totals, as the page renders them."""
    web = kinds.by_view(query.get("list", ""))
    if web is None:
        return render_to_string("web/all_clusters.html#panel", {**all_clusters.panel_context(principal), "oob": True})
    with clusters.within(all_clusters.ALL):   # (the pager's links keep `cluster=*`: in_cluster)
        ctx = {**all_clusters_list.rows_context(web, principal, query, Filters), "oob": True}
        return "".join(render_to_string(f"web/all_clusters_list.html#{part}", ctx) for part in ("totals", "rows"))


def watched_kinds(query: QueryDict) -> tuple[str, ...]:
    """The kinds whose changes re-render the page: the overview's counted kinds, or a list's kind
    (and the Events, when it shows the objects with warnings)."""
    web = kinds.by_view(query.get("list", ""))
    if web is None:
        return tuple(problem.kind for problem in all_clusters.problems())
    timeline = kinds.timeline()
    return (web.kind,) + ((timeline.kind,) if query.get("warnings") and timeline is not None else ())


class AllClustersConsumer(AsyncWebsocketConsumer):
    channel_layer_alias = None   # (as LiveConsumer: pushes come from the hub, not a channel layer)

    async def connect(self):
        self.closing, self.subscribers, self.sent, self.tasks = False, [], None, []
        self.guard = None
        self.changed = asyncio.Event()
        await hub.start()
        principal, subjects, deadline = await sync_to_async(page_access)(self.scope)
        if principal is None or principal.is_share:
            await self.accept()   # (to say why: a refused handshake reaches the page as 1006)
            await self.close(code=CLOSE_SIGNED_OUT if principal is None else 4403)
            return
        self.budgets = (subjects[0] if subjects else principal.username,)
        if not socket_limits.may_connect(self.budgets[0]):
            await self.accept()
            await self.close(code=socket_limits.CLOSE_TOO_MANY)
            return
        names = await sync_to_async(cluster_scope.visible_clusters)(principal)
        if not names:
            await self.close(code=4403)
            return
        self.principal, self.names = principal, names
        context.in_scope(self.scope).enter_cluster(names[0])
        # Access that changes or expires (a user's clusters narrowed, a sign-out) re-checks.
        self.guard = Guard(frozenset(), recheck=self._recheck, cluster=names[0])
        hub.guard(self.guard, subjects, deadline)
        self.queue = asyncio.Queue(maxsize=10000)
        self.query = QueryDict(self.scope.get("query_string", b"").decode())
        if self.query.get("list") and kinds.by_view(self.query["list"]) is None:
            await self.close(code=4400)
            return
        for name in names:
            for kind in watched_kinds(self.query):
                sub = Subscriber(resource=registry.by_kind(kind), cluster=name, queue=self.queue)
                hub.register(sub)
                self.subscribers.append(sub)
        await self.accept()
        # Rendered after subscribing: a change from here on is pushed, one before is in the panel.
        for sub in self.subscribers:
            sub.release_buffer()
        if not await self._push():
            return
        if self.query.get("ready") == "1":
            await self.send(text_data=LIVE)
        loop = asyncio.get_running_loop()
        self.heard_at = loop.time()
        self.tasks = [loop.create_task(f()) for f in (self._pump, self._render_loop, self._heartbeat)]

    async def disconnect(self, code):
        self.closing = True
        if getattr(self, "guard", None) is not None:
            hub.unguard(self.guard)
        for sub in getattr(self, "subscribers", ()):
            hub.unregister(sub)
        for task in getattr(self, "tasks", ()):
            task.cancel()

    async def websocket_receive(self, message):
        if self.closing:
            return
        if message.get("text") == PONG:
            self.heard_at = asyncio.get_running_loop().time()
            return
        # Anything else is not a page's (web/socket_limits.py): closed, charged to its user.
        self.closing = True
        socket_limits.stray_frame(self.budgets)
        await self.close(code=socket_limits.CLOSE_POLICY)

    async def _push(self) -> bool:
        """Render the panel now and send it if it changed. False: the socket is gone."""
        html = await sync_to_async(render_panel)(self.principal, self.query)
        if self.closing:
            return False
        if html != self.sent:
            self.sent = html
            try:
                await self.send(text_data=html)
            except Exception:   # the client went away meanwhile
                self.closing = True
                return False
        return True

    async def _pump(self):
        while not self.closing:
            item, _ = await self.queue.get()
            if item is CLOSE:   # fell too far behind: the page reconnects and renders afresh
                self.closing = True
                await self.close(code=CLOSE_BEHIND)
                return
            self.changed.set()

    async def _render_loop(self):
        loop = asyncio.get_running_loop()
        last = float("-inf")
        while not self.closing:
            try:
                await asyncio.wait_for(self.changed.wait(), LIST_STATE_SECONDS if self.query.get("list") else STATE_SECONDS)
                # (the rest of a burst joins this render)
                await asyncio.sleep(max(FLUSH_SECONDS, last + PUSH_INTERVAL_SECONDS - loop.time()))
            except asyncio.TimeoutError:
                pass
            self.changed.clear()
            last = loop.time()
            try:
                if not await self._push():
                    return
            except Exception:
                if not self.closing:
                    log.warning("the all-clusters overview's push failed", exc_info=True)

    async def _heartbeat(self):
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
            except Exception:
                return

    async def _recheck(self):
        """Access changed: signed out closes; any other change reloads the page, which renders
        the clusters the viewer may see now."""
        if self.closing:
            return
        principal, _, _ = await sync_to_async(page_access)(self.scope, fresh=True)
        if principal == self.principal:
            return
        self.closing = True
        await self.close(code=CLOSE_SIGNED_OUT if principal is None else CLOSE_RELOAD)


"""Live pages: one websocket per page pushes re-rendered fragments (htmx `hx-swap-oob`).

The consumer subscribes to the per-process watch hub for exactly what its page shows (kind,
namespace, label selector, name search, one object), renders the changed object with the
same template partial as the full page, and sends it. On (re)connect it compares the page's
revision with the current one and, if anything changed meanwhile, sends those changes (read
from the revision log, as the pushes would have), or re-renders the page's items wholesale
when that is cheaper or the log no longer reaches back: a reconnecting page always
converges, and nothing is silently missed.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from dashboard.kube import registry
from dashboard.kube.errors import ApiError
from dashboard.kube.selectors import parse_label_selector
from dashboard.kube.watch import CLOSE, Subscriber, hub

from . import kinds, live, scope, share

log = logging.getLogger(__name__)

FLUSH_SECONDS = 0.05   # coalesce bursts of writes into one push


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
    # A sorted view (views.KindListView.sorted): its rows are those the sorted page holds when
    # the socket connects (`members`); they change in place and never move.
    sort: str = ""
    page: int = 1
    limit: int = 0
    members: set | None = None


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
    return PageSpec(sort=sort, page=int(page) if page.isdigit() else 1, limit=int(limit) if limit.isdigit() else 0,
                    announced=int(params["announced"]) if params.get("announced", "").isdigit() else 0,
                    view=view, kinds=shown, namespace=params.get("namespace") or None,
                    label_selector=parse_label_selector(params.get("labelSelector", "")) if params.get("labelSelector") else None,
                    q=params.get("q", ""), name=params.get("name", ""), rv=int(rv) if rv.isdigit() else 0,
                    paged=params.get("paged") == "1" or bool(sort), first=_key(params.get("first", "")),
                    last=_key(params.get("last", "")),
                    tab=params.get("tab", "") if params.get("tab") in kinds.DETAIL_TABS else "")


class LiveConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        self.subscribers: list[Subscriber] = []
        self.pending: dict[tuple, tuple] = {}
        self.flush_lock = asyncio.Lock()
        self.flush_handle = None
        self.pump = None
        try:
            self.spec = parse_spec(self.scope.get("query_string", b""))
        except (ValueError, ApiError):
            await self.close(code=4400)
            return
        self.principal = await sync_to_async(live.principal_from_scope)(self.scope)
        if self.principal is None or not live.may_view(self.principal, self.spec.namespace, self.spec.kinds):
            await self.close(code=4403)
            return
        self.spec.allowed = tuple(self.principal.namespaces)
        # A share link's selector narrows whatever the page asked for (never widens).
        self.spec.label_selector = scope.narrow(self.principal, self.spec.label_selector)
        if self.principal.share_id is not None:
            # Revoking the link closes this socket at once (group_send from any process),
            # and a timer re-checks it (expiry, or a revoke message that got lost).
            await self.channel_layer.group_add(share.group_name(self.principal.share_id), self.channel_name)
        await hub.start()
        self.queue: asyncio.Queue = asyncio.Queue(maxsize=10000)
        for kind in self.spec.kinds:
            res = registry.by_kind(kind)
            sub = Subscriber(resource=res, namespace=self.spec.namespace, label_selector=self.spec.label_selector,
                             names=(self.spec.name,) if self.spec.name else (),
                             predicate=live.page_predicate(self.principal, self.spec.q), queue=self.queue)
            sub.matching = set()
            hub.register(sub)            # buffered until the snapshot below is taken
            self.subscribers.append(sub)
        if self.spec.sort:
            self.spec.members = await sync_to_async(live.sorted_members)(self.spec, self.principal)
        state = await sync_to_async(live.snapshot)(self.spec, self.principal)
        for sub in self.subscribers:
            sub.start_rv = state.rv
            sub.matching.update(state.keys.get(sub.resource.kind, ()))
        self.known = {k for keys in state.keys.values() for k in keys}   # everything the view matches
        self.shown = sorted(k for k in self.known if live.on_page(self.spec, k))
        await self.accept()  # only now: the subscription and the snapshot are in place
        if self.principal.share_id is not None:
            self.share_watch = asyncio.get_running_loop().create_task(self._watch_share())
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

    async def disconnect(self, code):
        principal = getattr(self, "principal", None)
        if principal is not None and principal.share_id is not None:
            await self.channel_layer.group_discard(share.group_name(principal.share_id), self.channel_name)
        if getattr(self, "share_watch", None) is not None:
            self.share_watch.cancel()
        for sub in getattr(self, "subscribers", ()):
            hub.unregister(sub)
        if getattr(self, "pump", None) is not None:
            self.pump.cancel()
        if getattr(self, "flush_handle", None) is not None:
            self.flush_handle.cancel()

    async def receive(self, text_data=None, bytes_data=None):
        # Pages only listen; anything a client sends is ignored (no writes over this socket).
        return

    async def share_revoked(self, event):
        """Channel-layer message: this socket's share link was revoked."""
        await self._close_share()

    async def _watch_share(self):
        while True:
            left = await sync_to_async(share.seconds_left)(self.principal.share_id)
            if left is None:
                await self._close_share()
                return
            await asyncio.sleep(max(left, 0.05))

    async def _close_share(self):
        # Clear the page's data first (the page shows why), then close: 4403 means "don't retry".
        if getattr(self, "share_closed", False):
            return
        self.share_closed = True
        try:
            await self.send(text_data=share.REVOKED_FRAGMENT)
        except Exception:  # the socket may already be gone
            pass
        await self.close(code=4403)

    async def _pump(self):
        loop = asyncio.get_running_loop()
        while True:
            kind, ev = await self.queue.get()
            if kind is CLOSE:
                # We fell too far behind: close; the page reconnects and refreshes.
                await self.close(code=4408)
                return
            self.pending[(ev.kind, ev.namespace, ev.name)] = (kind, ev)
            if self.flush_handle is None:
                self.flush_handle = loop.call_later(FLUSH_SECONDS, lambda: loop.create_task(self._flush()))

    async def _flush(self):
        self.flush_handle = None
        async with self.flush_lock:  # one render at a time: it updates self.shown
            pending, self.pending = self.pending, {}
            if not pending:
                return
            for html in await sync_to_async(live.render_changes)(self.spec, pending, self.shown, self.known):
                await self.send(text_data=html)

"""A live page as its websocket knows it: what the page shows (PageView, parsed once from the
socket's address, views.ws_url's query, and never changed) and what changes while the socket
lives (PageSocket: the viewer, the rows the page holds, what it was sent, the pushes on their way).

The consumer (consumers.py) owns both; live.py renders with them.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from urllib.parse import parse_qs

from dashboard.access import clusters
from dashboard.access.principals import Principal
from dashboard.kube.hub import Guard, Subscriber
from dashboard.kube.selectors import LabelSelector, parse_label_selector

from . import columns as columns_param, kinds, scope, warnings


@dataclass(frozen=True)
class PageView:
    """What a page shows, parsed from its websocket's query string (mirrors the page URL)."""

    view: str
    kinds: tuple[str, ...]
    namespace: str | None
    label_selector: LabelSelector | None   # for_viewer(): ANDed with a share link's own
    q: str
    name: str
    rv: int   # the revision the page was rendered at
    # One page of several (limit/continue): its first and last rows, (namespace, name). Live
    # updates keep each row on its page: rows in the range change in place or go; new rows
    # are announced ("N new — show"), never pushed into the page.
    paged: bool = False
    first: tuple[str, str] | None = None
    last: tuple[str, str] | None = None
    announced: int = 0   # the "N new" the page had already announced when it (re)connected
    tab: str = ""   # a detail page's History or Field owners view (kinds.DETAIL_TABS)
    show: str = ""  # the History view's filter (web/history.py SHOW: changes only, warnings only)
    # A sorted view (views.KindListView.sorted): its rows are those the sorted page holds when
    # the socket connects (PageSocket.members); they change in place and never move.
    sort: str = ""
    page: int = 1
    limit: int = 0
    cluster: str = clusters.LOCAL   # the page's ?cluster= (web/cluster_scope.py): what it reads and watches
    offset: int | None = None   # the rows before the page (its pager's "Rows 101–200 of N"; None: no pager)
    # A list of the objects with warnings (?warnings=1h): its rows are those that had them when the
    # socket connected (PageSocket.members, web/warnings.py); they change in place or go.
    warnings: str = ""
    ready: bool = False   # the page waits for consumers.LIVE before it says "Live" (live.js sends ready=1)
    state: str = ""   # a list's ?state= (a key of its kind's states, kinds.State)
    columns: tuple = ()   # (param, value) of its column filters (kinds.ColumnFilter)
    chosen: tuple = ()    # its chosen columns (?columns=, web/columns.py; (): the kind's own)

    @classmethod
    def parse(cls, query: bytes) -> PageView:
        """The view a socket's query string asks for (ValueError or ApiError: not one)."""
        params = {k: v[-1] for k, v in parse_qs(query.decode()).items()}
        view = params.get("view", "")
        shown = kinds.view_kinds(view)
        if shown is None:
            raise ValueError(f"unknown view {view!r}")
        cluster = params.get("cluster") or clusters.LOCAL
        if not clusters.NAME_RE.match(cluster):
            raise ValueError(f"bad cluster {cluster!r}")
        sort, state = params.get("sort", ""), params.get("state", "")
        web = kinds.by_view(view)
        if state and (web is None or web.state(state) is None):
            raise ValueError(f"unknown state {state!r}")
        columns = tuple((f.param, params[f.param]) for f in (web.column_filters if web else ()) if params.get(f.param))
        return cls(view=view, kinds=shown, namespace=params.get("namespace") or None,
                   label_selector=parse_label_selector(params["labelSelector"]) if params.get("labelSelector") else None,
                   q=params.get("q", ""), name=params.get("name", ""), rv=_number(params.get("rv"), 0),
                   paged=params.get("paged") == "1" or bool(sort), first=_key(params.get("first", "")),
                   last=_key(params.get("last", "")), announced=_number(params.get("announced"), 0),
                   tab=params.get("tab", "") if params.get("tab") in kinds.DETAIL_TABS else "",
                   show=params.get("show", "") if params.get("show") in ("changes", "warnings") else "",
                   sort=sort, page=_number(params.get("page"), 1), limit=_number(params.get("limit"), 0),
                   cluster=cluster, offset=_number(params.get("offset"), None), state=state,
                   columns=columns, chosen=columns_param.parse(web, [params.get(columns_param.PARAM, "")])[0]
                   if web is not None else (),
                   warnings=params.get("warnings", "") if params.get("warnings") == warnings.WINDOW_PARAM else "",
                   ready=params.get("ready") == "1")

    @property
    def state_filter(self) -> kinds.State | None:
        """The list's state and column filters, as one kinds.State (None: none)."""
        return kinds.by_view(self.view).view_filter(self.state, dict(self.columns)) \
            if self.state or self.columns else None

    def for_viewer(self, principal: Principal) -> PageView:
        """This view as `principal` may see it: a share link's selector narrows whatever the
        page asked for (never widens)."""
        return replace(self, label_selector=scope.narrow(principal, self.label_selector))


def _number(text: str | None, default):
    return int(text) if text and text.isdigit() else default


def _key(text: str) -> tuple[str, str] | None:
    namespace, sep, name = text.partition("/")
    return (namespace, name) if sep else None


@dataclass(eq=False)
class PageSocket:
    """What changes while a page's socket lives. The consumer owns it; live.py's render
    functions read it and update the rows and counts they render (shown, known, announced,
    totals_sent, rv)."""

    # The viewer and what the page shows them: set again whenever the viewer's access changes.
    view: PageView | None = None           # the page's view for the viewer (PageView.for_viewer)
    principal: Principal | None = None
    namespaces: list | None = None          # a list's namespaces for its heading counts (scope.list_scope)
    members: set | None = None              # a sorted view's rows (PageView.sort), a warnings list's
    known: set = field(default_factory=set)     # every (namespace, name) the view matches, on any of its pages
    shown: list = field(default_factory=list)   # the sorted (namespace, name) of the rows on the page
    # What the page was sent.
    rv: int = 0                     # the newest revision a History view shows
    announced: int = 0              # "N new — show" on a paged view
    totals_sent: str | None = None  # the heading counts (live.totals_fragment)
    panel_sent: str | None = None   # the Overview's clusters panel (live.clusters_fragment)
    panels: dict = field(default_factory=dict)   # OVERVIEW_PANELS' own state (saved/pins.py: the pins shown)
    # The subscriptions, the pushes on their way and the timers and tasks that send them.
    budgets: tuple = ()                     # whose socket budget it counts against (socket_limits)
    guard: Guard | None = None
    badge_guards: list = field(default_factory=list)   # header badges' guards (web/badges.py), one per badge
    subscribers: list[Subscriber] = field(default_factory=list)
    queue: asyncio.Queue | None = None
    pending: dict = field(default_factory=dict)   # (kind, namespace, name) -> (event type, hub LogEntry)
    flush_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    flush_handle: asyncio.TimerHandle | None = None
    flush_task: asyncio.Task | None = None
    last_flush_at: float = float("-inf")    # loop time of the last push
    pump: asyncio.Task | None = None
    beat_task: asyncio.Task | None = None
    banner_task: asyncio.Task | None = None
    heard_at: float = 0.0                   # loop time the client was last heard (its PONG)
    closing: bool = False
    # A time-derived state filter (kinds.State.until): the newest revision pushed per row, so a
    # re-check read before a write that was pushed first cannot undo it; and when it last ran.
    rvs: dict | None = None
    states_checked: object = None           # (a datetime)
    state_timer: asyncio.TimerHandle | None = None
    state_task: asyncio.Task | None = None

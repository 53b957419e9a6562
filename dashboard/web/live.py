"""What the live consumer renders: page snapshots and the fragments for changed objects.

Kept apart from the consumer so the page views, the websocket and the tests share one
definition of "what a page shows" (queries.py) and render through the very same template
partials. The render functions take the page's socket state (live_page.PageSocket: its view
for the viewer, the rows it holds, what it was sent) and update the rows and counts they push.
"""
from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass, field, replace

import orjson
from django.conf import settings
from django.template.loader import render_to_string
from django.utils.html import escape, format_html

from dashboard.access import clusters
from dashboard.kube import registry, revlog, store
from dashboard.kube.errors import ApiError
from dashboard.kube.meta import now
from dashboard.kube.hub import LogEntry

from . import columns, kinds, warnings
from .history_views import live_fragment
from .kinds import OVERVIEW
from .live_page import PageSocket, PageView
from .cluster_scope import moment as page_moment
from .present import age, clock, dom_id, iso, object_yaml, overview_totals, present
from .queries import (PAGE_SIZE, cluster_rows, last_deletion, namespace_cards, overview_namespaces, page_keys,
                      view_objects, view_predicate, view_totals)


def _wrapped(kind: str, swap: str, html: str) -> str:
    # The element that carries a non-replacing oob swap: htmx inserts its children. Table rows
    # need a <tbody> to survive HTML parsing; cards a <div> (KindWeb.wrapper).
    tag = kinds.by_kind(kind).wrapper
    return f'<{tag} hx-swap-oob="{swap}">{html}</{tag}>'


# A catch-up of more changed objects than this is not rendered object by object: the page gets
# its whole view again (render_refresh), or, when that is too big for one message, reloads.
CATCH_UP_MAX_CHANGES = 200
# Room kept in each message for a revision marker appended after it (catch_up's).
MARKER_ROOM = 128


def message_limit() -> int:
    """The largest message a page socket can carry: autobahn refuses to send (and to receive) one
    over KUBEDASH_WEBSOCKET_MAX_MESSAGE_BYTES (serve.py), so a push is cut into messages within it."""
    return settings.KUBEDASH_WEBSOCKET_MAX_MESSAGE_BYTES


def _pack(elements: list[str], limit: int) -> list[str]:
    """elements (each a whole hx-swap-oob element, applied on its own), in order, joined into as
    few messages as keep within limit bytes; one element over it gets a message of its own (the
    consumer then has the page reload instead)."""
    messages, current, size = [], [], 0
    for element in elements:
        n = len(element.encode())
        if current and size + n > limit:
            messages.append("".join(current))
            current, size = [], 0
        current.append(element)
        size += n
    if current:
        messages.append("".join(current))
    return messages


def revision_marker(rv: int) -> str:
    """Where the page keeps its revision: a reconnect resumes from it (dashboard/web/static/kubedash/live.js)."""
    return f'<span id="live-rv" data-rv="{rv}" hidden hx-swap-oob="true"></span>'


def may_view(principal, namespace: str | None, kinds) -> bool:
    """May the principal see this page's every kind (in its namespace, if it has one), in the
    cluster the work is about (the consumer runs within the page's cluster)?"""
    if not principal.sees_cluster(clusters.current()):
        return False
    if principal.is_share and len(kinds) != 1:
        return False   # the overview (all kinds) is never part of a shared view
    if namespace:
        return all(principal.can("list", namespace, kind) for kind in kinds)
    # No namespace: everything the principal may see (namespace limits apply per object).
    return all(not principal.kinds or kind in principal.kinds for kind in kinds)


def namespace_predicate(principal):
    """The viewer's namespace limits alone (None: none), for objects about the page's objects."""
    allowed = set(principal.namespaces_here)
    return (lambda obj: obj["metadata"].get("namespace") in allowed) if allowed else None


@dataclass
class Snapshot:
    rv: int
    keys: dict = field(default_factory=dict)      # kind -> set of (namespace, name)
    objects: dict = field(default_factory=dict)   # kind -> [object], in key order


def snapshot(view: PageView, principal, at: int = 0, members: set | None = None) -> Snapshot:
    """What the page shows now (or at revision `at`), all kinds read at one revision; a
    warnings list (PageView.warnings) only its `members`."""
    only = frozenset(members or ()) if view.warnings else None
    state = Snapshot(rv=at)
    for kind in view.kinds:
        visible = view_predicate(principal, view.q, only, kind, view.state_filter)
        state.rv, objects = _read(view, kind, visible, state.rv)
        state.objects[kind] = objects
        state.keys[kind] = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects}
    return state


def _read(view: PageView, kind: str, visible, at: int = 0) -> tuple[int, list[dict]]:
    """The page's objects of one kind (its namespace, selector, name), at revision `at` if given."""
    return view_objects(kind, view.namespace, view.label_selector, (view.name,) if view.name else (), visible, at)


def _summary(view: PageView, shown: list) -> str:
    """A list page's summary (e.g. the namespace roll-up), recomputed from the objects the page
    shows now.

    `shown` already went through the page's predicate (namespace limits, share selector, name
    search), so membership in it is the whole filter; the store read adds current contents.
    """
    keys = set(shown)
    kind = view.kinds[0]
    _, objects = _read(view, kind, lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]) in keys)
    return _summary_fragment(kind, objects, page_moment(cached=True))


def _summary_fragment(kind: str, objects: list[dict], moment) -> str:
    web = kinds.by_kind(kind)
    if not web.summary_partial:
        return ""
    summary = web.summarize([present(kind, o, moment) for o in objects])
    return render_to_string(f"{web.list_template}#{web.summary_partial}", {**summary, "oob": "true"})


def totals_fragment(socket: PageSocket, shown: list) -> str:
    """A list page's heading counts and pager position, for the whole filtered view as it is
    now (queries.view_totals), as oob swaps: sent with every change, so "1,100 leases" and
    "Rows 1–100 of 1,100" stay exact through live creates and deletes."""
    view = socket.view
    if socket.namespaces is None:
        return ""
    totals = view_totals(kinds.by_view(view.view), socket.namespaces, view.label_selector, view.q, page_moment(cached=True),
                         frozenset(socket.members or ()) if view.warnings else None, view.state_filter)
    html = render_to_string("web/_list_totals.html", {"totals": totals, "oob": True})
    if view.offset is not None:
        html += render_to_string("web/_pager_position.html", {
            "rows_from": f"{view.offset + 1:,}" if shown else "0", "rows_to": f"{view.offset + len(shown):,}",
            "rows_total": f"{max(totals['total'], view.offset + len(shown)):,}", "oob": True})
    return html


def sorted_members(socket: PageSocket) -> set:
    """The (namespace, name) keys of a sorted view's page, as it is now (queries.page_keys)."""
    view = socket.view
    keys, _ = page_keys(kinds.by_view(view.view), socket.namespaces or [], view.label_selector, view.q, view.sort,
                        view.page, view.limit or PAGE_SIZE, page_moment(cached=True),
                        frozenset(socket.members or ()) if view.warnings else None, view.state_filter)
    return {(ns, name) for _, ns, name in keys}


def warned_members(socket: PageSocket) -> set:
    """A warnings list's rows: the objects of its view with warnings now (web/warnings.py)."""
    return set(warnings.warned_keys(socket.view.kinds[0], now(), socket.namespaces))


def on_page(socket: PageSocket, key: tuple[str, str]) -> bool:
    """Is this (namespace, name) within the rows the page was rendered with? (Always, for a
    page that shows the whole list.)"""
    view = socket.view
    if socket.members is not None:
        return key in socket.members
    if not view.paged:
        return True
    if view.first is None or view.last is None:
        return False   # an empty page of several: nothing on it to keep live
    return view.first <= key <= view.last


def page_rows(socket: PageSocket, state: Snapshot) -> tuple[set, list]:
    """(known, shown) of the page at this snapshot: every (namespace, name) its view matches,
    on any of its pages, and the sorted ones on this page."""
    known = {k for keys in state.keys.values() for k in keys}
    return known, sorted(k for k in known if on_page(socket, k))


def _announcement(count: int) -> str:
    """"N new — show": rows written since a paged view was rendered (it does not move rows)."""
    if not count:
        return '<p id="items-new" class="notice" role="status" hidden hx-swap-oob="true"></p>'
    # data-count: a reconnecting page tells the server how many it announced (live.js), so
    # the count goes on from there instead of starting again at 1.
    return (f'<p id="items-new" class="notice" role="status" data-count="{count}" hx-swap-oob="true">{count} new '
            f'{"object" if count == 1 else "objects"} since this page was loaded — '
            '<a href="" data-reload>show</a></p>')


def changed_since(view: PageView, rv: int) -> bool:
    """Did anything this page may show change after the page's revision (up to rv)?"""
    return revlog.changed_between(view.kinds, view.rv, rv, view.namespace, view.name) or warnings_changed(view, rv)


def warnings_changed(view: PageView, rv: int) -> bool:
    """Was any Event (kinds.Timeline) of the page's namespace written after the page's revision
    (up to rv)? Then a list's badges or the Overview's warnings line may be out of date."""
    timeline = kinds.timeline()
    if timeline is None or kinds.is_detail_view(view.view) or not view.rv or timeline.kind in view.kinds:
        return False   # (the Events page: its own rows, not badges)
    return revlog.changed_between((timeline.kind,), view.rv, rv, view.namespace or "")


# Every open page of a kind gets the same row for the same revision: render it once. (The item
# partials depend on nothing but the object; time-based text is refreshed in the browser.)
_rendered: OrderedDict = OrderedDict()
RENDERED_KEEP = 4096


def _event_item(kind: str, ev, oob: str, moment, badges: dict, chosen: tuple = ()) -> str:
    # (a revision number alone is unique only per database; the cluster's links differ in the HTML;
    # a page's chosen columns (web/columns.py) its cells)
    key = (kind, ev.rv, ev.namespace, ev.name, oob, clusters.current(), chosen)
    html = _rendered.get(key)
    if html is None:
        html = _rendered[key] = _item(kind, ev.obj, oob, moment, badges, chosen)
        if len(_rendered) > RENDERED_KEEP:
            _rendered.popitem(last=False)
    return html


def _item(kind: str, obj: dict, oob: str, moment, badges: dict, chosen: tuple = ()) -> str:
    """One row, its cells the page's chosen columns (`chosen`: ?columns=, web/columns.py); badges:
    kind -> warnings.recent(kind), filled on first use, so a snapshot or a push batch reads the
    warnings once per kind, not once per row."""
    item = present(kind, obj, moment)
    if kind not in badges:
        badges[kind] = warnings.recent(kind, moment)
    item["warnings"] = badges[kind].get((item.get("namespace"), item.get("name")), 0)
    web = kinds.by_kind(kind)
    cols = columns.shown(web, chosen)
    return render_to_string(web.list_template + "#item", {"item": item, "oob": oob, "view_columns": cols,
                                                          "column_keys": {c.key for c in cols}, "chosen_columns": chosen})


def _detail(socket: PageSocket, kind: str, obj: dict | None, moment) -> str:
    if socket.view.tab:   # the History or Field owners view of a detail page
        html, socket.rv = live_fragment(socket.view, kind, obj, socket.rv)
        return html
    web = kinds.by_kind(kind)
    if obj is None:
        return _deleted_notice(web, socket.view.namespace or "", socket.view.name)
    item = present(kind, obj, moment)
    html = render_to_string(web.detail_template + "#detail", {"item": item, "oob": "true", "yaml": object_yaml(obj)})
    if web.detail_partials and web.detail_context is not None:
        # The page's other live parts (a Lease's holder history), from the log as it is now.
        meta = obj["metadata"]
        ctx = {**web.detail_context(meta["namespace"], meta["name"], moment, None), "item": item, "oob": "true"}
        html += "".join(render_to_string(f"{web.detail_template}#{part}", ctx) for part in web.detail_partials)
    return html


def _deleted_notice(web: kinds.KindWeb, namespace: str, name: str) -> str:
    """An open detail page's object was deleted: say so and when (the log's deletion, as the
    page a reload shows: views.deleted_page)."""
    found = last_deletion(web, namespace, name)
    when = ""
    if found is not None:
        at, moment = iso(found[1]), found[1]
        when = format_html(' <time datetime="{}" data-ago-since="{}">{}</time> ago (<time datetime="{}" data-abs>{}</time>)',
                           at, at, age(moment, now()), at, clock(moment))
    return format_html('<section id="detail" hx-swap-oob="true"><p class="notice" role="status">This {} was deleted{}. '
                       '<a href="">Reload</a> for its last YAML and to create it again.</p></section>', web.noun, when)


def _empty_marker(empty: bool) -> str:
    if empty:
        return '<p id="items-empty" class="empty" hx-swap-oob="true">Nothing matches this view right now.</p>'
    return '<p id="items-empty" class="empty" hidden hx-swap-oob="true"></p>'


def catch_up(socket: PageSocket, state: Snapshot) -> list[str] | None:
    """A (re)connecting list page, brought up to date with just what changed since its
    revision, as one coalesced live push would have sent it (its messages each within the
    socket's limit), however many writes there were meanwhile; None when a full refresh is due
    instead (the page's revision was compacted, a page that is not a list, or more than
    CATCH_UP_MAX_CHANGES objects changed).

    What changed is the difference between the view at the page's revision (`then`) and now
    (`state`, the consumer's snapshot): objects that entered the view, left it, or have
    another resourceVersion. Both are the page's own filtered view (selector, name search,
    namespaces, share scope), so an object that moved out of a label selector leaves the
    page as the live push would have removed it."""
    view = socket.view
    if view.view == OVERVIEW or kinds.is_detail_view(view.view) or not view.rv:
        return None
    if warnings_changed(view, state.rv):
        return None   # (which rows' badges changed is not known: all of them again)
    try:
        then = snapshot(view, socket.principal, at=view.rv, members=socket.members)   # what the page showed
    except ApiError:
        return None   # compacted
    pending = {}
    for kind in view.kinds:
        before = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in then.objects.get(kind, ())}
        after = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in state.objects.get(kind, ())}
        for key, obj in after.items():
            old = before.get(key)
            if old is not None and old["metadata"].get("resourceVersion") == obj["metadata"].get("resourceVersion"):
                continue
            change = revlog.MODIFIED if old is not None else revlog.ADDED
            pending[(kind, *key)] = (change, LogEntry(int(obj["metadata"].get("resourceVersion") or state.rv), kind,
                                                   key[0], key[1], change, orjson.dumps(obj).decode()))
        for key, obj in before.items():
            if key not in after:
                pending[(kind, *key)] = (revlog.DELETED, LogEntry(state.rv, kind, key[0], key[1], revlog.DELETED,
                                                               orjson.dumps(obj).decode()))
    if len(pending) > CATCH_UP_MAX_CHANGES:
        return None
    # Rendered against the rows the page held at its revision (the socket keeps those of now,
    # its snapshot's); what it announces and sends counts on from there.
    known, shown = page_rows(socket, then)
    was = replace(socket, known=known, shown=shown)
    messages = render_changes(was, pending) if pending else [""]
    socket.announced, socket.totals_sent = was.announced, was.totals_sent
    messages[-1] += revision_marker(state.rv)   # (after the changes' own marker: it wins)
    return messages


def render_refresh(socket: PageSocket, state: Snapshot) -> list[str]:
    """The whole live part of a page, for a page that missed changes (e.g. it reconnected): one
    message (the consumer has the page reload when it does not fit), the Overview's cut into
    messages that do."""
    view = socket.view
    moment = page_moment(cached=True)
    marker = revision_marker(state.rv)
    if view.view == OVERVIEW:
        return _overview_messages(socket, moment, marker)
    kind = view.kinds[0]
    if kinds.is_detail_view(view.view):
        objects = state.objects[kind]
        return [_detail(socket, kind, objects[0] if objects else None, moment) + marker]
    objects = [o for o in state.objects[kind] if on_page(socket, (o["metadata"]["namespace"], o["metadata"]["name"]))]
    badges: dict = {}
    rows = "".join(_item(kind, o, "", moment, badges, view.chosen) for o in objects)
    summary = _summary_fragment(kind, objects, moment)
    shown = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects]
    return [_wrapped(kind, "innerHTML:#items", rows) + _empty_marker(not objects) + summary
            + totals_fragment(socket, shown) + marker]


def render_changes(socket: PageSocket, pending: dict) -> list[str]:
    """The messages for the objects that changed. The socket's rows are updated (`shown`, the
    sorted keys on the page; `known`, every key the view matches, on any of its pages), and
    what it announced and sent (`announced`, `totals_sent`; a History view's `rv`).

    Usually one message; two when table rows change in place beside anything else: a message
    is parsed as one fragment, whose first element sets the parsing context, so a row after
    a <p> or <div> (or the other way round) would be dropped. Rows go in a message of their
    own, first; in the other message new table rows (their <tbody> wrappers) come before
    any <div> or <p>, for the same reason (a <tbody> after a <div> is dropped; a <div>
    after a <tbody> is kept). Either is cut into several where it would be larger than a
    socket's message (message_limit): every piece keeps that order, and the page's revision
    marker comes last, so a page that reconnects half-way catches up from the old revision."""
    view, shown, known = socket.view, socket.shown, socket.known
    moment = page_moment(cached=True)
    badges: dict = {}   # (see _item)
    marker = revision_marker(max(ev.rv for _, ev in pending.values()))
    if view.view == OVERVIEW:
        # Re-render the cards, so new and emptied namespaces come and go too.
        return _overview_messages(socket, moment, marker, set(pending))
    detail = kinds.is_detail_view(view.view)
    if not detail:
        pending = _badges_to_rows(view, pending)
    moved = detail or any(event != BADGE for event, _ in pending.values())   # (else no count changed)
    rows, parts = [], []    # rows: <tr hx-swap-oob> replacements (table context)
    inserts = []            # new table rows, each in a <tbody hx-swap-oob> (table context)
    announced = socket.announced
    was_empty = not shown
    web = kinds.by_view(view.view)
    on_top = web.new_on_top and socket.members is not None and view.sort == web.default_sort and view.page == 1

    for (kind, namespace, name), (event, ev) in sorted(pending.items(), key=lambda kv: kv[0][1:]):
        key = (namespace, name)
        at = bisect.bisect_left(shown, key)
        present_now = at < len(shown) and shown[at] == key
        if detail:
            parts.append(_detail(socket, kind, None if event == revlog.DELETED else ev.obj, moment))
            continue
        if event == BADGE:   # the row, as it is now, for its new warning count (rows on the page only)
            obj = _current(kind, namespace, name) if present_now else None
            if obj is not None:
                (rows if kinds.by_kind(kind).wrapper == "tbody" else parts).append(_item(kind, obj, "true", moment, badges, view.chosen))
            continue
        is_new = key not in known and event != revlog.DELETED
        (known.discard if event == revlog.DELETED else known.add)(key)
        if view.paged and not present_now and is_new and on_top:
            # A feed's first page, newest first (the Events page): a new object goes on top.
            socket.members.add(key)
            shown.insert(at, key)
            inserts.append(_wrapped(kind, "afterbegin:#items", _event_item(kind, ev, "", moment, badges, view.chosen)))
            continue
        if view.paged and not present_now:
            # One page of several: rows stay on their pages; new ones are announced.
            socket.announced += is_new
            continue
        if event == revlog.DELETED:
            if present_now:
                shown.pop(at)
                parts.append(f'<div id="{dom_id(kind, namespace, name)}" hx-swap-oob="delete"></div>')
            continue
        if present_now:
            (rows if kinds.by_kind(kind).wrapper == "tbody" else parts).append(_event_item(kind, ev, "true", moment, badges, view.chosen))
            continue
        # A new row goes right after its predecessor in (namespace, name) order.
        target = "afterbegin:#items" if at == 0 else f"afterend:#{dom_id(kind, *shown[at - 1])}"
        shown.insert(at, key)
        (inserts if kinds.by_kind(kind).wrapper == "tbody" else parts).append(
            _wrapped(kind, target, _event_item(kind, ev, "", moment, badges, view.chosen)))
    parts = inserts + parts
    if socket.announced != announced:
        parts.append(_announcement(socket.announced))
    if not detail and was_empty != (not shown):
        parts.append(_empty_marker(not shown))
    if not detail and moved and kinds.by_kind(view.kinds[0]).summary_partial:
        parts.append(_summary(view, shown))   # the totals move with any item
    if not detail and moved:
        totals = totals_fragment(socket, shown)
        if totals != socket.totals_sent:   # (unchanged counts are not sent again)
            socket.totals_sent = totals
            parts.append(totals)
    limit = message_limit() - MARKER_ROOM
    messages = _pack(rows, limit) + _pack(parts, limit) or [""]
    messages[-1] += marker
    return messages


BADGE = "BADGE"   # render_changes: a row whose warnings changed (not the object)


def _badges_to_rows(view: PageView, pending: dict) -> dict:
    """A list page's pending changes with each warning (kinds.Timeline) about one of its rows
    turned into that row's BADGE change; a change of the object itself already re-renders it."""
    timeline = kinds.timeline()
    if timeline is None or timeline.kind in view.kinds or not any(key[0] == timeline.kind for key in pending):
        return pending
    out = {key: change for key, change in pending.items() if key[0] != timeline.kind}
    for key, (_, ev) in pending.items():
        if key[0] != timeline.kind:
            continue
        about = timeline.about(ev.obj)
        if about[0] in view.kinds and about not in out:
            out[about] = (BADGE, ev)
    return out


def _current(kind: str, namespace: str, name: str) -> dict | None:
    try:
        return store.get(registry.by_kind(kind), namespace, name)
    except ApiError:
        return None   # deleted meanwhile: its own change removes the row


def overview_fragment(socket: PageSocket, moment, changed: set | None = None) -> list[str]:
    """Everything the Overview shows live: its namespace cards, its totals, its warnings line and
    (when clusters are followed) its clusters panel, as it is now (the page's own queries), as
    oob elements, each applied on its own. The cards are as many as the namespaces (~1.7 KB
    each): they go in pieces that each fit a message, the first replacing the cards, the others
    appended after it, so an Overview of many namespaces is pushed, not reloaded (CLOSE_RELOAD:
    its whole view was one message, over the limit at ~40 namespaces)."""
    namespace = socket.view.namespace
    only = overview_namespaces(socket.principal, namespace)
    cards = namespace_cards(moment, only)
    html = [render_to_string("web/overview.html#namespace", {"ns": card, "oob": ""}) for card in cards]
    pieces = _pack(html, message_limit() - MARKER_ROOM - 64) or [""]   # (64: room for the wrapper)
    elements = [f'<div hx-swap-oob="{"beforeend" if i else "innerHTML"}:#namespaces">{piece}</div>'
                for i, piece in enumerate(pieces)]
    elements.append(render_to_string("web/overview.html#totals", {"totals": overview_totals(cards), "oob": True}))
    elements.append(render_to_string("web/overview.html#warnings",
                                     {"warnings": warnings.overview(moment, only, namespace or ""), "oob": True}))
    panels = clusters_fragment(socket, now(), cards, changed)   # (real time: each its own moment)
    return elements + [panels] if panels else elements


def _overview_messages(socket: PageSocket, moment, marker: str, changed: set | None = None) -> list[str]:
    """The Overview's live part (overview_fragment; `changed`: a push's objects) in as few
    messages as fit, the page's revision marker last."""
    messages = _pack(overview_fragment(socket, moment, changed), message_limit() - MARKER_ROOM) or [""]
    messages[-1] += marker
    return messages


# Other apps' Overview panels (saved/pins.py: the Pinned panel): (socket, changed) -> its oob
# fragment, or "" when it has nothing new to show; sent with the clusters panel. `changed`: the
# (kind, namespace, name) of a push's objects; None at a heartbeat or a whole refresh.
OVERVIEW_PANELS: list = []


def clusters_fragment(socket: PageSocket, moment, cards=None, changed: set | None = None) -> str:
    """The Overview's clusters panel now ("" when no cluster is followed), and OVERVIEW_PANELS:
    with every change, and every heartbeat (a followed cluster's state and objects change
    without a local event)."""
    if socket.principal is None:
        return ""
    rows = cluster_rows(socket.principal, moment, cards, socket.view.namespace or "")
    html = render_to_string("web/overview.html#clusters", {"cluster_rows": rows, "oob": True}) if rows else ""
    return html + "".join(panel(socket, changed) for panel in OVERVIEW_PANELS)


__all__ = ["snapshot", "render_refresh", "render_changes", "escape"]

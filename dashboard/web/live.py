"""What the live consumer renders: page snapshots and the fragments for changed objects.

Kept apart from the consumer so the page views, the websocket and the tests share one
definition of "what a page shows" and render through the very same template partials.
"""
from __future__ import annotations

import bisect
from collections import OrderedDict
from dataclasses import dataclass, field

import orjson
from django.template.loader import render_to_string
from django.utils.html import escape

from dashboard.access import clusters
from dashboard.kube import lists, registry, revlog, store
from dashboard.kube.errors import ApiError
from dashboard.kube.meta import now
from dashboard.kube.hub import Event

from . import kinds, scope, warnings
from .history_views import live_fragment
from .kinds import OVERVIEW
from .present import dom_id, object_yaml, overview_totals, present
from .scope import list_scope
from .views import cluster_rows, namespace_cards, page_keys


def _wrapped(kind: str, swap: str, html: str) -> str:
    # The element that carries a non-replacing oob swap: htmx inserts its children. Table rows
    # need a <tbody> to survive HTML parsing; cards a <div> (KindWeb.wrapper).
    tag = kinds.by_kind(kind).wrapper
    return f'<{tag} hx-swap-oob="{swap}">{html}</{tag}>'


def revision_marker(rv: int) -> str:
    """Where the page keeps its revision: a reconnect resumes from it (static/kubedash/live.js)."""
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


def page_predicate(principal, q: str):
    """Namespace limits, a share link's selector and the name search, as one condition."""
    allowed = set(principal.namespaces)
    own = scope.own_selector(principal)
    if not allowed and not q and own is None:
        return None

    def visible(obj: dict) -> bool:
        m = obj["metadata"]
        return ((not allowed or m.get("namespace") in allowed) and (not q or q in m["name"])
                and (own is None or own.matches(m.get("labels") or {})))

    return visible


def namespace_predicate(principal):
    """The viewer's namespace limits alone (None: none), for objects about the page's objects."""
    allowed = set(principal.namespaces)
    return (lambda obj: obj["metadata"].get("namespace") in allowed) if allowed else None


@dataclass
class Snapshot:
    rv: int
    keys: dict = field(default_factory=dict)      # kind -> set of (namespace, name)
    objects: dict = field(default_factory=dict)   # kind -> [object], in key order


def snapshot(spec, principal, at: int = 0) -> Snapshot:
    """What the page shows now (or at revision `at`), all kinds read at one revision."""
    visible = page_predicate(principal, spec.q)
    state = Snapshot(rv=at)
    for kind in spec.kinds:
        state.rv, objects = _read(spec, kind, visible, state.rv)
        state.objects[kind] = objects
        state.keys[kind] = {(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects}
    return state


def _read(spec, kind: str, visible, rv: int = 0) -> tuple[int, list[dict]]:
    """The page's objects of one kind (its namespace, selector, name), at rv if given."""
    q = lists.ListQuery(namespace=spec.namespace, label_selector=spec.label_selector,
                        names=(spec.name,) if spec.name else ())
    if rv:
        q.resource_version, q.resource_version_match = rv, "Exact"
    page = lists.list_objects(registry.by_kind(kind), q)
    return page.resource_version, [o for o in map(orjson.loads, page.items) if visible is None or visible(o)]


def _summary(spec, shown: list) -> str:
    """A list page's summary (e.g. the namespace roll-up), recomputed from the objects the page
    shows now.

    `shown` already went through the page's predicate (namespace limits, share selector, name
    search), so membership in it is the whole filter; the store read adds current contents.
    """
    keys = set(shown)
    kind = spec.kinds[0]
    _, objects = _read(spec, kind, lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]) in keys)
    return _summary_fragment(kind, objects, now())


def _summary_fragment(kind: str, objects: list[dict], moment) -> str:
    web = kinds.by_kind(kind)
    if not web.summary_partial:
        return ""
    summary = web.summarize([present(kind, o, moment) for o in objects])
    return render_to_string(f"{web.list_template}#{web.summary_partial}", {**summary, "oob": "true"})


def totals_fragment(spec, shown: list) -> str:
    """A list page's heading counts and pager position, for the whole filtered view as it is
    now (views.view_totals), as oob swaps: sent with every change, so "1,100 leases" and
    "Rows 1–100 of 1,100" stay exact through live creates and deletes."""
    from .views import view_totals

    if getattr(spec, "namespaces", None) is None:
        return ""
    totals = view_totals(kinds.by_view(spec.view), spec.namespaces, spec.label_selector, spec.q, now())
    html = render_to_string("web/_list_totals.html", {"totals": totals, "oob": True})
    if spec.offset is not None:
        html += render_to_string("web/_pager_position.html", {
            "rows_from": f"{spec.offset + 1:,}" if shown else "0", "rows_to": f"{spec.offset + len(shown):,}",
            "rows_total": f"{max(totals['total'], spec.offset + len(shown)):,}", "oob": True})
    return html


def sorted_members(spec, principal) -> set:
    """The (namespace, name) keys of a sorted view's page, as it is now (views.page_keys)."""
    web = kinds.by_view(spec.view)
    namespaces = list_scope(principal, spec.namespace or "", web.kind) or []
    keys, _ = page_keys(web, namespaces, spec.label_selector, spec.q, spec.sort, spec.page,
                        spec.limit or 100, now())
    return {(ns, name) for _, ns, name in keys}


def on_page(spec, key: tuple[str, str]) -> bool:
    """Is this (namespace, name) within the rows the page was rendered with? (Always, for a
    page that shows the whole list.)"""
    if getattr(spec, "members", None) is not None:
        return key in spec.members
    if not getattr(spec, "paged", False):
        return True
    if spec.first is None or spec.last is None:
        return False   # an empty page of several: nothing on it to keep live
    return spec.first <= key <= spec.last


def _announcement(count: int) -> str:
    """"N new — show": rows written since a paged view was rendered (it does not move rows)."""
    if not count:
        return '<p id="items-new" class="notice" role="status" hidden hx-swap-oob="true"></p>'
    # data-count: a reconnecting page tells the server how many it announced (live.js), so
    # the count goes on from there instead of starting again at 1.
    return (f'<p id="items-new" class="notice" role="status" data-count="{count}" hx-swap-oob="true">{count} new '
            f'{"object" if count == 1 else "objects"} since this page was loaded — '
            '<a href="" data-reload>show</a></p>')


def changed_since(spec, rv: int) -> bool:
    """Did anything this page may show change after the page's revision (up to rv)?"""
    return revlog.changed_between(spec.kinds, spec.rv, rv, spec.namespace, spec.name) or warnings_changed(spec, rv)


def warnings_changed(spec, rv: int) -> bool:
    """Was any Event (kinds.Timeline) of the page's namespace written after the page's revision
    (up to rv)? Then a list's badges or the Overview's warnings line may be out of date."""
    timeline = kinds.timeline()
    if timeline is None or kinds.is_detail_view(spec.view) or not spec.rv:
        return False
    return revlog.changed_between((timeline.kind,), spec.rv, rv, spec.namespace or "")


# Every open page of a kind gets the same row for the same revision: render it once. (The item
# partials depend on nothing but the object; time-based text is refreshed in the browser.)
_rendered: OrderedDict = OrderedDict()
RENDERED_KEEP = 4096


def _event_item(kind: str, ev, oob: str, moment, badges: dict) -> str:
    # (a revision number alone is unique only per database; the cluster's links differ in the HTML)
    key = (kind, ev.rv, ev.namespace, ev.name, oob, clusters.current())
    html = _rendered.get(key)
    if html is None:
        html = _rendered[key] = _item(kind, ev.obj, oob, moment, badges)
        if len(_rendered) > RENDERED_KEEP:
            _rendered.popitem(last=False)
    return html


def _item(kind: str, obj: dict, oob: str, moment, badges: dict) -> str:
    """One row; badges: kind -> warnings.recent(kind), filled on first use, so a snapshot or a
    push batch reads the warnings once per kind, not once per row."""
    item = present(kind, obj, moment)
    if kind not in badges:
        badges[kind] = warnings.recent(kind, moment)
    item["warnings"] = badges[kind].get((item.get("namespace"), item.get("name")), 0)
    return render_to_string(kinds.by_kind(kind).list_template + "#item", {"item": item, "oob": oob})


def _detail(kind: str, obj: dict | None, moment, spec=None) -> str:
    if getattr(spec, "tab", ""):   # the History or Field owners view of a detail page
        return live_fragment(spec, kind, obj)
    if obj is None:
        return ('<section id="detail" hx-swap-oob="true"><p class="notice" role="status">'
                "This object has been deleted. <a href=\"\">Reload</a> for when, its last YAML and "
                "an undo.</p></section>")
    return render_to_string(kinds.by_kind(kind).detail_template + "#detail", {
        "item": present(kind, obj, moment), "oob": "true", "yaml": object_yaml(obj)})


def _empty_marker(empty: bool) -> str:
    if empty:
        return '<p id="items-empty" class="empty" hx-swap-oob="true">Nothing matches this view right now.</p>'
    return '<p id="items-empty" class="empty" hidden hx-swap-oob="true"></p>'


def catch_up(spec, principal, state: Snapshot) -> list[str] | None:
    """A (re)connecting list page, brought up to date with just what changed since its
    revision, as one coalesced live push would have sent it (one or two messages), however
    many writes there were meanwhile; None when a full refresh is due instead (the page's
    revision was compacted, or a page that is not a list).

    What changed is the difference between the view at the page's revision (`then`) and now
    (`state`, the consumer's snapshot): objects that entered the view, left it, or have
    another resourceVersion. Both are the page's own filtered view (selector, name search,
    namespaces, share scope), so an object that moved out of a label selector leaves the
    page as the live push would have removed it."""
    if spec.view == OVERVIEW or kinds.is_detail_view(spec.view) or not spec.rv:
        return None
    if warnings_changed(spec, state.rv):
        return None   # (which rows' badges changed is not known: all of them again)
    try:
        then = snapshot(spec, principal, at=spec.rv)   # what the page showed
    except ApiError:
        return None   # compacted
    pending = {}
    for kind in spec.kinds:
        before = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in then.objects.get(kind, ())}
        after = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in state.objects.get(kind, ())}
        for key, obj in after.items():
            old = before.get(key)
            if old is not None and old["metadata"].get("resourceVersion") == obj["metadata"].get("resourceVersion"):
                continue
            change = revlog.MODIFIED if old is not None else revlog.ADDED
            pending[(kind, *key)] = (change, Event(int(obj["metadata"].get("resourceVersion") or state.rv), kind,
                                                   key[0], key[1], change, orjson.dumps(obj).decode()))
        for key, obj in before.items():
            if key not in after:
                pending[(kind, *key)] = (revlog.DELETED, Event(state.rv, kind, key[0], key[1], revlog.DELETED,
                                                               orjson.dumps(obj).decode()))
    known = {k for keys in then.keys.values() for k in keys}
    shown = sorted(k for k in known if on_page(spec, k))
    messages = render_changes(spec, pending, shown, known) if pending else [""]
    messages[-1] += revision_marker(state.rv)   # (after the changes' own marker: it wins)
    return messages


def render_refresh(spec, state: Snapshot) -> str:
    """The whole live part of a page, for a page that missed changes (e.g. it reconnected)."""
    moment = now()
    marker = revision_marker(state.rv)
    if spec.view == OVERVIEW:
        return overview_fragment(spec, overview_namespaces(state), moment) + marker
    if kinds.is_detail_view(spec.view):
        kind = spec.kinds[0]
        objects = state.objects[kind]
        return _detail(kind, objects[0] if objects else None, moment, spec) + marker
    kind = spec.kinds[0]
    objects = [o for o in state.objects[kind] if on_page(spec, (o["metadata"]["namespace"], o["metadata"]["name"]))]
    badges: dict = {}
    rows = "".join(_item(kind, o, "", moment, badges) for o in objects)
    summary = _summary_fragment(kind, objects, moment)
    shown = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in objects]
    return (_wrapped(kind, "innerHTML:#items", rows) + _empty_marker(not objects) + summary
            + totals_fragment(spec, shown) + marker)


def render_changes(spec, pending: dict, shown: list, known: set | None = None) -> list[str]:
    """The messages for the objects that changed; `shown` (sorted keys on the page) is
    updated, and `known` (every key the view matches, on any of its pages), when given.

    Usually one message; two when table rows change in place beside anything else: a message
    is parsed as one fragment, whose first element sets the parsing context, so a row after
    a <p> or <div> (or the other way round) would be dropped. Rows go in a message of their
    own, first; in the other message new table rows (their <tbody> wrappers) come before
    any <div> or <p>, for the same reason (a <tbody> after a <div> is dropped; a <div>
    after a <tbody> is kept)."""
    moment = now()
    badges: dict = {}   # (see _item)
    marker = revision_marker(max(ev.rv for _, ev in pending.values()))
    if spec.view == OVERVIEW:
        # Few namespaces: re-render the cards, so new and emptied namespaces come and go too.
        return [overview_fragment(spec, visible_namespaces(spec), moment) + marker]
    detail = kinds.is_detail_view(spec.view)
    if not detail:
        pending = _badges_to_rows(spec, pending)
    moved = detail or any(event != BADGE for event, _ in pending.values())   # (else no count changed)
    rows, parts = [], []    # rows: <tr hx-swap-oob> replacements (table context)
    inserts = []            # new table rows, each in a <tbody hx-swap-oob> (table context)
    announced = spec.announced
    was_empty = not shown

    for (kind, namespace, name), (event, ev) in sorted(pending.items(), key=lambda kv: kv[0][1:]):
        key = (namespace, name)
        at = bisect.bisect_left(shown, key)
        present_now = at < len(shown) and shown[at] == key
        if detail:
            parts.append(_detail(kind, None if event == revlog.DELETED else ev.obj, moment, spec))
            continue
        if event == BADGE:   # the row, as it is now, for its new warning count (rows on the page only)
            obj = _current(kind, namespace, name) if present_now else None
            if obj is not None:
                (rows if kinds.by_kind(kind).wrapper == "tbody" else parts).append(_item(kind, obj, "true", moment, badges))
            continue
        if known is not None:
            is_new = key not in known and event != revlog.DELETED
            (known.discard if event == revlog.DELETED else known.add)(key)
        else:
            is_new = not present_now
        if getattr(spec, "paged", False) and not present_now:
            # One page of several: rows stay on their pages; new ones are announced.
            spec.announced += is_new
            continue
        if event == revlog.DELETED:
            if present_now:
                shown.pop(at)
                parts.append(f'<div id="{dom_id(kind, namespace, name)}" hx-swap-oob="delete"></div>')
            continue
        if present_now:
            (rows if kinds.by_kind(kind).wrapper == "tbody" else parts).append(_event_item(kind, ev, "true", moment, badges))
            continue
        # A new row goes right after its predecessor in (namespace, name) order.
        target = "afterbegin:#items" if at == 0 else f"afterend:#{dom_id(kind, *shown[at - 1])}"
        shown.insert(at, key)
        (inserts if kinds.by_kind(kind).wrapper == "tbody" else parts).append(
            _wrapped(kind, target, _event_item(kind, ev, "", moment, badges)))
    parts = inserts + parts
    if spec.announced != announced:
        parts.append(_announcement(spec.announced))
    if not detail and was_empty != (not shown):
        parts.append(_empty_marker(not shown))
    if not detail and moved and kinds.by_kind(spec.kinds[0]).summary_partial:
        parts.append(_summary(spec, shown))   # the totals move with any item
    if not detail and moved:
        totals = totals_fragment(spec, shown)
        if totals != getattr(spec, "totals_sent", None):   # (unchanged counts are not sent again)
            spec.totals_sent = totals
            parts.append(totals)
    if not rows:
        return ["".join(parts) + marker]
    return ["".join(rows)] + ["".join(parts) + marker] if parts else ["".join(rows) + marker]


BADGE = "BADGE"   # render_changes: a row whose warnings changed (not the object)


def _badges_to_rows(spec, pending: dict) -> dict:
    """A list page's pending changes with each warning (kinds.Timeline) about one of its rows
    turned into that row's BADGE change; a change of the object itself already re-renders it."""
    timeline = kinds.timeline()
    if timeline is None or not any(key[0] == timeline.kind for key in pending):
        return pending
    out = {key: change for key, change in pending.items() if key[0] != timeline.kind}
    for key, (_, ev) in pending.items():
        if key[0] != timeline.kind:
            continue
        about = timeline.about(ev.obj)
        if about[0] in spec.kinds and about not in out:
            out[about] = (BADGE, ev)
    return out


def _current(kind: str, namespace: str, name: str) -> dict | None:
    try:
        return store.get(registry.by_kind(kind), namespace, name)
    except ApiError:
        return None   # deleted meanwhile: its own change removes the row


def overview_namespaces(state: Snapshot) -> list[str]:
    return sorted({key[0] for keys in state.keys.values() for key in keys})  # already limited by snapshot()


def visible_namespaces(spec) -> list[str]:
    """Namespaces that hold any object (the overview's cards), limited to the page's filter."""
    names: set[str] = set()
    for kind in spec.kinds:
        rows = registry.by_kind(kind).model.objects.all()
        if spec.namespace:
            rows = rows.filter(namespace=spec.namespace)
        names.update(rows.values_list("namespace", flat=True).distinct())
    if spec.allowed:
        names &= set(spec.allowed)
    return sorted(names)


def overview_fragment(spec, namespaces: list[str], moment) -> str:
    """Everything the Overview shows live: its namespace cards, its totals and (when clusters
    are followed) its clusters panel, as it is now."""
    cards = namespace_cards(moment, namespaces) if namespaces else []
    html = "".join(render_to_string("web/overview.html#namespace", {"ns": card, "oob": ""}) for card in cards)
    html = f'<div hx-swap-oob="innerHTML:#namespaces">{html}</div>'
    html += render_to_string("web/overview.html#totals", {"totals": overview_totals(cards), "oob": True})
    only = [spec.namespace] if spec.namespace else (sorted(spec.allowed) or None)
    html += render_to_string("web/overview.html#warnings", {"warnings": warnings.overview(moment, only), "oob": True})
    return html + clusters_fragment(spec, moment, None if spec.namespace else cards)


def clusters_fragment(spec, moment, cards=None) -> str:
    """The Overview's clusters panel now ("" when no cluster is followed): with every change,
    and every heartbeat (a followed cluster's state and objects change without a local event)."""
    if getattr(spec, "principal", None) is None:
        return ""
    rows = cluster_rows(spec.principal, moment, cards)
    return render_to_string("web/overview.html#clusters", {"cluster_rows": rows, "oob": True}) if rows else ""



__all__ = ["snapshot", "render_refresh", "render_changes", "escape"]

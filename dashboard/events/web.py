"""Events on the pages: an object's Events merged into its History view (one timeline), the
warnings the lists and the overview count, and the Events page (a read-only feed), declared to
web.kinds (web/ names no kind)."""
from __future__ import annotations

from datetime import datetime

import orjson
from django.db.models import Count, Q

from dashboard.kube import registry, revlog, store
from dashboard.kube.errors import ApiError
from dashboard.kube.formats import human_duration
from dashboard.kube.selectors import parse_field_selector
from dashboard.web import kinds
from dashboard.web.present import base_item, clock, iso

from . import strategy
from .models import Event
from .resource import EVENTS

TIMELINE_EVENTS = 500    # the newest Events of one object a timeline reads


def _entry(obj: dict, rv: int, kind: str = "", name: str = "") -> dict:
    meta = obj.get("metadata") or {}
    involved = obj.get("involvedObject") or {}
    if (involved.get("kind"), involved.get("name")) == (kind, name):
        involved = {}
    seen = strategy.last_seen(obj) or strategy.first_seen(obj)
    first = strategy.first_seen(obj)
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    host = source.get("host") or obj.get("reportingInstance") or ""
    type_ = obj.get("type") or ""
    count = strategy.count(obj)
    return {
        "is_event": True, "rv": rv, "key": meta.get("uid") or f"{meta.get('namespace')}-{meta.get('name')}",
        "at": seen, "when": clock(seen), "when_iso": iso(seen), "first": clock(first), "first_iso": iso(first),
        "type": type_, "warning": type_ == strategy.WARNING, "reason": obj.get("reason") or "",
        "message": (obj.get("message") or "").strip(), "count": count, "repeated": count > 1,
        "source": f"{component}, {host}" if host else component, "name": meta.get("name", ""),
        # An Event about another object (an Endpoints address's Pod) says which.
        "about": f"{involved.get('kind', '')} {involved.get('name', '')}".strip() if involved else "",
    }


def _targets(value, out: set) -> set:
    """The objects an object points at through `targetRef`s (an Endpoints address's Pod), as
    (kind, name): what happens to them is part of what happens to it (a failed readiness probe)."""
    if isinstance(value, dict):
        ref = value.get("targetRef")
        if isinstance(ref, dict) and ref.get("kind") and ref.get("name"):
            out.add((str(ref["kind"]), str(ref["name"])))
        for item in value.values():
            _targets(item, out)
    elif isinstance(value, list):
        for item in value:
            _targets(item, out)
    return out


def _about(kind: str, namespace: str, name: str) -> Q:
    """The Events about the object, and about the objects it targets (its current version's)."""
    about = Q(involved_kind=kind, involved_name=name)
    res = registry.by_kind(kind)
    if res is not None:
        try:
            obj = store.get(res, namespace, name)
        except ApiError:
            obj = None
        for target_kind, target_name in sorted(_targets(obj, set()) if obj else ()):
            about |= Q(involved_kind=target_kind, involved_name=target_name)
    return about


def entries(kind: str, namespace: str, name: str, after_rv: int | None = None) -> list[dict]:
    """The Events about one object and its targets (the newest TIMELINE_EVENTS), newest last
    seen first."""
    rows = Event.objects.filter(_about(kind, namespace, name), involved_namespace=namespace)
    if after_rv is not None:
        rows = rows.filter(current_id__gt=after_rv)
    rows = revlog.with_current(rows.order_by("-last_seen", "-current_id"), "current_id")[:TIMELINE_EVENTS]
    return [_entry(orjson.loads(text), rv, kind, name) for rv, text in rows]


SELECTABLE = {"metadata.name", "metadata.namespace", *EVENTS.field_getters}


def selector(kind: str, name: str):
    return parse_field_selector(f"involvedObject.kind={kind},involvedObject.name={name}", SELECTABLE, kind="Event")


def warnings_selector(kind: str | None):
    about = f",involvedObject.kind={kind}" if kind else ""
    return parse_field_selector(f"type={strategy.WARNING}{about}", SELECTABLE, kind="Event")


def about(obj: dict) -> tuple[str, str, str]:
    """(kind, namespace, name) of the object an Event is about (the keys warnings() counts by)."""
    involved = obj.get("involvedObject") or {}
    return (str(involved.get("kind") or ""), str(involved.get("namespace") or ""), str(involved.get("name") or ""))


def warnings(kind: str, since: datetime) -> dict[tuple[str, str], int]:
    """{(namespace, name): Warning Events about it last seen since `since`} for one kind."""
    out: dict[tuple[str, str], int] = {}
    rows = Event.objects.filter(involved_kind=kind, type=strategy.WARNING, last_seen__gte=since)
    for namespace, name, count in rows.values_list("involved_namespace", "involved_name", "count"):
        out[(namespace, name)] = out.get((namespace, name), 0) + (count or 1)
    return out


EVENT_TIMELINE = kinds.register_timeline(kinds.Timeline(
    kind="Event", entries=entries, selector=selector, warnings=warnings, warnings_selector=warnings_selector,
    about=about))


# ---------------------------------------------------------------------------------------------
# The Events page (/events/): a read-only feed, newest first (kinds.register_feed)


def present_event(obj: dict, now: datetime) -> dict:
    """One Event's row: when (first and last seen), how often, what, and the object it is
    about, linked to that object's page when it is a kind with pages."""
    item = base_item("Event", obj, now)
    involved = obj.get("involvedObject") or {}
    kind, name = str(involved.get("kind") or ""), str(involved.get("name") or "")
    namespace = str(involved.get("namespace") or item["namespace"])
    web = kinds.by_kind(kind)
    first, last = strategy.first_seen(obj), strategy.last_seen(obj)
    source = obj.get("source") or {}
    type_ = obj.get("type") or ""
    item.update({
        "url": "",   # (no page of its own: its row says it all)
        "type": type_, "warning": type_ == strategy.WARNING, "reason": obj.get("reason") or "",
        "message": (obj.get("message") or "").strip(), "count": strategy.count(obj),
        "first_seen": clock(first), "first_seen_at": iso(first),
        "last_seen": clock(last), "last_seen_at": iso(last), "last_seen_ago": human_duration(max((now - last).total_seconds(), 0)) if last else "",
        "object_kind": kind, "object_name": name, "object_namespace": namespace,
        "object_url": web.detail_url(namespace, name) if web is not None and web.form is not None and name else "",
        "source": source.get("component") or obj.get("reportingComponent") or "",
    })
    return item


def overview_counts(rows) -> dict[str, dict[str, int]]:
    """{"": {type: Events}}: the heading's counts, in one bucket (Events are on no Overview card,
    and grouping by type alone reads the type index)."""
    return {"": dict(rows.values_list("type").annotate(n=Count("id")).order_by())}


def overview_card(types: dict[str, int] | None, now: datetime) -> dict:
    types = types or {}
    return {"total": sum(types.values()), "warning": types.get(strategy.WARNING, 0),
            "normal": types.get(strategy.NORMAL, 0)}


def _seen(values, now):
    return values[0].timestamp() if values[0] is not None else None


EVENT_PAGES = kinds.register_feed(kinds.KindWeb(
    kind="Event", plural="events", detail_view="event", title="Events", heading="Events", noun="event",
    list_noun="events", present=present_event, count_by="type", form=None,
    overview=kinds.Overview(counts=overview_counts, card=overview_card, count_key="total", warn_key="warning"),
    sorts=(kinds.Sort("last_seen", "Last seen", ("last_seen",), _seen, field="last_seen"),
           kinds.Sort("count", "Count", ("count",), lambda v, now: v[0], field="count"),
           kinds.Sort("type", "Type", ("type",), lambda v, now: v[0], field="type"),
           kinds.Sort("reason", "Reason", ("reason",), lambda v, now: v[0], field="reason")),
    column_filters=(kinds.ColumnFilter("type", "Type", "type", (strategy.NORMAL, strategy.WARNING)),
                    kinds.ColumnFilter("reason", "Reason", "reason")),
    default_sort="-last_seen", new_on_top=True,
    columns=(kinds.column("last_seen", "Last seen", ("Last seen", "last_seen_at"), sort="last_seen"),
             kinds.column("type", "Type", ("Type", "type"), sort="type"),
             kinds.column("reason", "Reason", ("Reason", "reason"), sort="reason"),
             kinds.column("object", "Object", ("Object kind", "object_kind"), ("Object namespace", "object_namespace"),
                          ("Object name", "object_name"), required=True),
             kinds.column("message", "Message", ("Message", "message"), ("Source", "source")),
             kinds.column("count", "Count", ("Count", "count"), sort="count", css="num"),
             kinds.column("first_seen", "First seen", ("First seen", "first_seen_at"), css="opt"),
             kinds.column("name", "Event", ("Namespace", "namespace"), ("Event", "name"), sort="name", css="opt"))))

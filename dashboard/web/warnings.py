"""Warnings about objects (kinds.Timeline: the Warning Events of the last hour) on the list rows
and the overview: "3 Jobs with warnings in the last hour", counting the objects that exist (Events
outlive the objects they are about), and a list filtered to them (`?warnings=1h`). One query per
page, per kind."""
from __future__ import annotations

from datetime import datetime, timedelta
from urllib.parse import urlencode

from dashboard.kube.registry import by_kind

from . import kinds

# The list filter's one value: the timeline's window, as the parameter says it.
WINDOW_PARAM = "1h"


def recent(kind: str, now: datetime) -> dict[tuple[str, str], int]:
    """{(namespace, name): warnings about it within the timeline's window}, for one kind."""
    timeline = kinds.timeline()
    if timeline is None:
        return {}
    return timeline.warnings(kind, now - timedelta(seconds=timeline.window_seconds))


def annotate(kind: str, items: list[dict], now: datetime) -> None:
    """Each item's `warnings` (the rows' badge), from one query for the kind."""
    counts = recent(kind, now) if items else {}
    for item in items:
        item["warnings"] = counts.get((item.get("namespace"), item.get("name")), 0)


def warned_keys(kind: str, now: datetime, namespaces: list[str | None] | None) -> frozenset:
    """The (namespace, name) of the objects of `kind` that exist, in `namespaces` (None or [None]:
    all), with warnings within the window: an Event about a deleted object counts for nothing."""
    keys = {k for k in recent(kind, now) if namespaces in (None, [None]) or k[0] in namespaces}
    if not keys:
        return frozenset()
    rows = by_kind(kind).model.objects.filter(name__in={name for _, name in keys},
                                              namespace__in={ns for ns, _ in keys})
    return frozenset(key for key in rows.values_list("namespace", "name") if key in keys)


def overview(now: datetime, namespaces: list[str] | None, namespace: str = "") -> list[dict]:
    """Per kind with warnings: how many of its objects (in `namespaces`; None: all) had any, and
    the link to its list of them (the Overview's namespace kept)."""
    timeline = kinds.timeline()
    if timeline is None:
        return []
    out = []
    for web in kinds.registered():
        n = len(warned_keys(web.kind, now, namespaces))
        if n:
            noun = web.noun if n == 1 else web.list_noun
            query = urlencode({"namespace": namespace, "warnings": WINDOW_PARAM} if namespace
                              else {"warnings": WINDOW_PARAM})
            out.append({"n": n, "text": f"{n} {noun} with warnings in {timeline.window}",
                        "link": f"{web.list_url}?{query}"})
    return out

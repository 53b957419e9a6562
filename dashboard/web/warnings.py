"""Warnings about objects (kinds.Timeline: the Warning Events of the last hour) on the list rows
and the overview: "3 Jobs with warnings in the last hour". One query per page, per kind."""
from __future__ import annotations

from datetime import datetime, timedelta

from . import kinds


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


def overview(now: datetime, namespaces: list[str] | None) -> list[dict]:
    """Per kind with warnings: how many of its objects (in `namespaces`; None: all) had any."""
    timeline = kinds.timeline()
    if timeline is None:
        return []
    out = []
    for web in kinds.registered():
        keys = [k for k in recent(web.kind, now) if namespaces is None or k[0] in namespaces]
        if keys:
            noun = web.noun if len(keys) == 1 else web.list_noun
            out.append({"n": len(keys), "text": f"{len(keys)} {noun} with warnings in {timeline.window}",
                        "link": web.list_url})
    return out

"""Pins: an object (its detail page's address) or a saved view, starred by a user; the
Overview's "Pinned" panel shows each pinned object's state now, and says when one was deleted
(with its last state, from the revision log, as the deleted object's page does).

The panel is pushed on the Overview's socket with its other panels (web/live.py
OVERVIEW_PANELS), re-rendered only where it may have changed: with a push that carries a pinned
object (its write or deletion), and at a heartbeat for a viewer who has pins (pins added or
removed elsewhere, a pinned object in another namespace or cluster than the Overview's, a lease
that expires with no write); sent only when what it shows changed. A deletion's age ticks in the
browser (data-ago-since), so it does not change the panel. A viewer without pins costs one query
a heartbeat."""
from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from django.template.loader import render_to_string

from dashboard.access import clusters
from dashboard.kube import store
from dashboard.kube.errors import ApiError
from dashboard.kube.meta import now as utcnow
from dashboard.web import cluster_scope, kinds, scope
from dashboard.web import present as p
from dashboard.web.queries import last_deletion

from .models import Pin, SavedView

VIEW_PREFIX = "/views/"


def target(url: str) -> dict | None:
    """What an address pins: {"view": SavedView} for /views/<slug>/, {"cluster", "kind",
    "namespace", "name"} for an object's page, else None."""
    parts = urlsplit(url or "")
    if parts.scheme or parts.netloc:
        return None
    path = parts.path
    if path.startswith(VIEW_PREFIX):
        slug = path[len(VIEW_PREFIX):].strip("/")
        view = SavedView.objects.filter(slug=slug).first() if slug and "/" not in slug else None
        return {"view": view} if view is not None else None
    cluster = dict(parse_qsl(parts.query)).get(cluster_scope.PARAM) or clusters.LOCAL
    for web in kinds.registered():
        if path.startswith(web.list_url):
            rest = path[len(web.list_url):].split("/")
            if len(rest) == 3 and rest[0] and rest[1] and rest[2] == "":
                return {"cluster": cluster, "kind": web.kind, "namespace": rest[0], "name": rest[1]}
    return None


def pins_of(user, found: dict):
    if "view" in found:
        return Pin.objects.filter(user=user, view=found["view"])
    return Pin.objects.filter(user=user, view=None, **found)


def is_pinned(user, url: str) -> bool:
    found = target(url)
    return found is not None and user is not None and user.is_authenticated and pins_of(user, found).exists()


def toggle(user, found: dict) -> bool:
    """Pin, or unpin if pinned: whether it is pinned now."""
    existing = pins_of(user, found)
    if existing.exists():
        existing.delete()
        return False
    Pin.objects.create(user=user, **found)
    return True


def panel_items(user, principal, now=None, at=None) -> list[dict]:
    """The Pinned panel's rows: each pin the viewer still may see, as it is now (`at`: on a page
    as of a past moment, kube/asof.At, its links keep it)."""
    now = now or utcnow()
    items = []
    for pin in Pin.objects.filter(user=user).select_related("view"):
        if pin.view is not None:
            items.append({"kind": "View", "label": pin.view.name, "url": pin.view.open_url, "state": "saved view",
                          "tone": "", "pin_url": pin.view.open_url, "key": f"view-{pin.view.slug}"})
            continue
        web = kinds.by_kind(pin.kind)
        if web is None or not principal.sees_cluster(pin.cluster) or not principal.can("get", pin.namespace, pin.kind):
            continue
        item = {"kind": pin.kind, "label": f"{pin.namespace}/{pin.name}", "cluster": pin.cluster,
                "url": cluster_scope.in_cluster(web.detail_url(pin.namespace, pin.name), pin.cluster, at),
                "key": p.dom_id(pin.kind, pin.namespace, pin.name) + f"-{pin.cluster}"}
        item["pin_url"] = item["url"]
        if pin.cluster != clusters.LOCAL and cluster_scope.followed(pin.cluster) is None:
            items.append({**item, "state": f"cluster {pin.cluster} is not followed any more", "tone": "warn"})
            continue
        with clusters.within(pin.cluster):
            items.append({**item, **object_state(web, principal, pin.namespace, pin.name, now, at)})
    return items


def object_state(web: kinds.KindWeb, principal, namespace: str, name: str, now, at=None) -> dict:
    """{"state", "tone", ...} of a pinned object now, or of its deletion."""
    try:
        obj = store.get(web.resource, namespace, name)
    except ApiError as exc:
        if exc.code != 404:
            raise
        found = last_deletion(web, namespace, name)
        if found is None:
            return {"state": "not found", "tone": "warn", "gone": True}
        last, when = found
        was = summary(web, last, when)
        return {"state": "deleted", "tone": "bad", "gone": True, "deleted_ago": p.age(when, now),
                "last_state": was, "deleted_at": p.iso(when), "deleted_clock": p.clock(when)}
    if not scope.sees(principal, web.kind, obj):
        return {"state": "not found", "tone": "warn", "gone": True}
    item = web.present(obj, cluster_scope.moment(now, at=at))
    return {"state": summary(web, obj, now, item), "tone": tone(str(item.get(web.count_by, "")))}


TONES = ("ok", "bad", "warn", "run", "idle")   # app.css's badge tones


def tone(state: str) -> str:
    """A kind's state word as a badge tone (a lease's held / expired; a job's and an endpoints'
    are tones already)."""
    return {"held": "ok", "expired": "bad", "unknown": "warn"}.get(state, state if state in TONES else "idle")


def summary(web: kinds.KindWeb, obj: dict, now, item: dict | None = None) -> str:
    """One line of an object's state: its kind's state word, and a lease's holder."""
    item = item or web.present(obj, now)
    text = str(item.get("state_text") or item.get("phase") or item.get(web.count_by) or "")
    if item.get("holder"):
        text += f" · {item['holder']}"
    return text


def panel_fragment(socket, changed: set | None = None) -> str:
    """The Overview socket's Pinned panel (web/live.py OVERVIEW_PANELS) when what it shows
    changed, else "". `changed`: a push's (kind, namespace, name), in the socket's cluster; None
    (a heartbeat, a refresh): the viewer's pins are read again."""
    principal = socket.principal
    if principal is None or principal.user_id is None or principal.is_share:
        return ""
    mine = socket.panels.setdefault("pins", {"pins": set(), "shown": None})
    if changed is None:
        pins = set(Pin.objects.filter(user_id=principal.user_id).values_list("cluster", "kind", "namespace", "name",
                                                                              "view_id"))
        if not pins and not mine["pins"] and mine["shown"] is not None:
            return ""   # no pins, and the panel the page has says so
        mine["pins"] = pins
    else:
        here = clusters.current()
        if not any((here, *key, None) in mine["pins"] for key in changed):
            return ""
    items = panel_items(principal.user_id, principal)
    shown = [{k: v for k, v in item.items() if k != "deleted_ago"} for item in items]   # (the browser ticks it)
    if shown == mine["shown"]:
        return ""
    mine["shown"] = shown
    return render_to_string("saved/_pinned.html", {"pinned": items, "oob": True})

"""The saved views' and pins' parts of every page (templates/saved/): the header's Views menu,
the page's Save view / default note / pin star, the Overview's Pinned panel, and the command
palette's suggestions."""
from __future__ import annotations

import json
from urllib.parse import parse_qsl

from django import template

from dashboard.access import clusters
from dashboard.web import cluster_scope, kinds, scope, timetravel

from .. import pins, saving
from ..models import Pin, SavedView

register = template.Library()


def _user(context):
    request = context.get("request")
    principal = context.get("principal")
    user = getattr(request, "user", None)
    if request is None or principal is None or principal.is_share or user is None or not user.is_authenticated:
        return None, None, None
    return request, principal, user


@register.inclusion_tag("saved/_bar.html", takes_context=True)
def saved_bar(context):
    """On a list or the Overview: Save view, and the default view's note; on an object's page:
    its pin star."""
    request, principal, user = _user(context)
    if user is None:
        return {"show": False}
    url = request.get_full_path()
    out = {"show": True, "url": url, "csrf_token": context.get("csrf_token")}
    # (a list or the Overview as it renders its view: not its error or "not allowed" page)
    if request.path in saving.list_paths() and context.get("filters") is not None and not context.get("error"):
        out.update(save=True, groups=sorted(saving.user_groups(user, principal)),
                   shared_choices=SavedView.SHARED_CHOICES, page=saving.list_paths()[request.path])
        default = saving.default_for(user, request.path) if request.path != saving.OVERVIEW_PATH else None
        if default is not None:
            given = sorted(parse_qsl(request.META.get("QUERY_STRING", "")))
            out["default"] = default
            out["on_default"] = given == sorted(parse_qsl(default.query))
            out["show_all"] = request.path + "?default=off"
            out["bare"] = not given
    elif (found := pins.target(url)) is not None and "view" not in found:
        out.update(star=True, pinned=pins.pins_of(user, found).exists(),
                   what=f"{found['kind']} {found['namespace']}/{found['name']}")
    return out


@register.inclusion_tag("saved/_pinned.html", takes_context=True)
def pinned_panel(context):
    request, principal, user = _user(context)
    if user is None:
        return {"show": False}
    return {"show": True, "pinned": pins.panel_items(user, principal, at=timetravel.page_at(context)), "oob": False}


@register.inclusion_tag("saved/_palette.html", takes_context=True)
def command_palette(context):
    """The palette's dialog, and what a page's script needs at once: the row stars' pinned
    objects (this cluster's) and the CSRF token for the pin toggle. Its suggestions (the lists,
    namespaces, saved views, clusters) are fetched when it first opens (views.palette_data)."""
    request, principal, user = _user(context)
    if user is None:
        return {"show": False}
    data = {
        "cluster": request.GET.get(cluster_scope.PARAM, ""),
        "csrf": str(context.get("csrf_token") or ""),
        "pinned": [w.detail_url(pin.namespace, pin.name) for pin in Pin.objects.filter(
                   user=user, view=None, cluster=clusters.current()) if (w := kinds.by_kind(pin.kind)) is not None],
    }
    return {"show": True, "data_json": json.dumps(data)}


def palette_suggestions(user, principal) -> dict:
    """What the palette suggests: the lists, the namespaces, the saved views, the clusters."""
    seen = saving.visible_views(user, principal)
    return {
        "kinds": [{"name": w.plural, "title": w.title, "url": w.list_url} for w in (*kinds.registered(), *kinds.feeds())],
        "namespaces": scope.known_namespaces(principal),
        "views": [{"name": v.name, "url": v.open_url} for key in ("mine", "groups", "everyone") for v in seen[key]],
        "clusters": cluster_scope.visible_clusters(principal),
    }

"""What the saved views, defaults and pins pages share: which addresses may be saved or pinned,
and which saved views a user sees."""
from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

from dashboard.access import clusters
from dashboard.web import kinds
from dashboard.web.share import shared_namespaces

from .models import DefaultView, SavedView

# Parameters a saved view never keeps: a page position bound to one snapshot of the list (it
# expires with compaction); everything else of the canonical address is kept as it is.
DROPPED = ("continue",)
OVERVIEW_PATH = "/"


def list_paths() -> dict[str, str]:
    """{list path: its title} of every page a view can be saved of: the Overview and the lists."""
    return {OVERVIEW_PATH: "Overview", **{w.list_url: w.title for w in (*kinds.registered(), *kinds.feeds())}}


def page_address(url: str) -> tuple[str, str] | None:
    """(path, canonical query) of a page address that may be saved, else None. The query is the
    page's own (already canonical: the lists redirect any other spelling), minus DROPPED."""
    parts = urlsplit(url or "")
    if parts.scheme or parts.netloc or parts.path not in list_paths():
        return None
    kept = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=False) if k not in DROPPED]
    return parts.path, urlencode(kept)


def user_groups(user, principal=None) -> set[str]:
    """The names of the groups a user is in: Django's auth groups, and the principal's own (an
    identity provider's groups, where sign-in brings them)."""
    names = set(user.groups.values_list("name", flat=True)) if user is not None and user.pk else set()
    return names | set(getattr(principal, "idp_groups", ()) or ()) | set(getattr(principal, "groups", ()) or ())


def visible_views(user, principal=None) -> dict[str, list[SavedView]]:
    """The saved views a user sees: {"mine", "groups", "everyone"} (each once: mine first)."""
    groups = user_groups(user, principal)
    out: dict[str, list[SavedView]] = {"mine": [], "groups": [], "everyone": []}
    for view in SavedView.objects.select_related("owner"):
        if view.owner_id == user.pk:
            out["mine"].append(view)
        elif view.shared == SavedView.GROUPS and groups.intersection(view.groups or ()):
            out["groups"].append(view)
        elif view.shared == SavedView.EVERYONE:
            out["everyone"].append(view)
    return out


def find_visible(user, principal, slug: str) -> SavedView | None:
    view = SavedView.objects.filter(slug=slug).first()
    return view if view is not None and view.visible_to(user, user_groups(user, principal)) else None


def may_manage(principal, user, view: SavedView) -> bool:
    """Rename, re-share, delete: the owner, or an admin."""
    return view.owner_id == user.pk or bool(principal is not None and principal.is_full_admin)


def default_for(user, path: str) -> SavedView | None:
    """The user's default view of this list, while they still see it."""
    if user is None or not user.is_authenticated:
        return None
    found = DefaultView.objects.filter(user=user, path=path).select_related("view").first()
    if found is None or not found.view.visible_to(user, user_groups(user)):
        return None
    return found.view


def view_refusal(principal, view: SavedView) -> str:
    """Why this viewer may not see what the saved view shows ("": they may): its cluster and
    namespace checked against their own rights. (The page it opens checks them again.)"""
    params = view.params
    cluster = params.get("cluster") or clusters.LOCAL
    if not principal.sees_cluster(cluster):
        return f"“{view.name}” shows cluster “{cluster}”, which you may not see."
    namespace = params.get("namespace", "")
    if namespace and not principal.can("list", namespace):
        return f"“{view.name}” shows namespace “{namespace}”, which you may not see."
    return ""


def share_address(principal, view: SavedView) -> str:
    """"Make a share link" for a saved list view: /share/new/ with the view's kind and query
    (the share form then asks for a label and a lifetime), for a viewer who may share what it
    shows; "" otherwise (the Overview, a feed, or no right to share it)."""
    web = next((w for w in kinds.registered() if w.list_url == view.path and w.form is not None), None)
    if web is None:
        return ""
    params = view.params
    with clusters.within(params.get("cluster") or clusters.LOCAL):
        if shared_namespaces(principal, params.get("namespace", ""), web.kind) is None:
            return ""
    return f"/share/new/?kind={web.kind}" + (f"&{view.query}" if view.query else "")

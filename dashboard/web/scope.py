"""Who may see and do what on the pages, per namespace: shared by the read pages (views) and
the write pages (edit_views)."""
from __future__ import annotations

from dashboard.access import clusters
from dashboard.access.principals import Principal
from dashboard.follow import writes
from dashboard.follow.models import Cluster
from dashboard.kube.registry import by_kind
from dashboard.kube.selectors import LabelSelector, parse_label_selector
from dashboard.kube.validation import is_dns1123_label

from . import kinds


# Namespaces every Kubernetes cluster has: a form offers them and never asks before using them.
BUILT_IN_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")


def namespaces_in_use() -> set[str]:
    """The namespaces that hold an object of any kind (Events too) in the page's cluster: the
    namespaces that exist, as far as kubedash knows (it stores no Namespace objects)."""
    seen: set[str] = set()
    for web in (*kinds.registered(), *kinds.feeds()):
        seen.update(web.resource.model.objects.values_list("namespace", flat=True).distinct())
    return seen


def known_namespaces(principal: Principal) -> list[str]:
    """Namespaces for the filter menu: the user's own list, or every namespace in use."""
    if principal.namespaces_here:
        return sorted(principal.namespaces_here)
    if principal.is_share:
        return []   # a shared view names no namespace beyond its own objects
    return sorted(namespaces_in_use())


def form_namespaces(principal: Principal) -> list[str]:
    """The namespaces a create form offers: those that exist (in use, or built in), limited to the
    user's own; a namespace-limited user picks among all of theirs (forms/base.py: a select)."""
    if principal.namespaces_here:
        return sorted(principal.namespaces_here)
    return sorted(namespaces_in_use().union(BUILT_IN_NAMESPACES))


def is_new_namespace(namespace: str) -> bool:
    """Would creating an object in `namespace` bring a namespace into use? (A create form asks
    first: edit_views.new_namespace_question.) Not for a name no namespace can have: the API's
    refusal says why instead."""
    return (bool(namespace) and not is_dns1123_label(namespace) and namespace not in BUILT_IN_NAMESPACES
            and namespace not in namespaces_in_use())


# The namespace the pages follow: a list, the Overview and search show the one their address names
# (`?namespace=`, none: all). The last one shown is remembered in the session only so that the
# menu's links from pages that choose none (an object's page, a form) keep it; an address without
# `?namespace=` always shows every namespace, whatever was remembered.
NAMESPACE_KEY = "kubedash_namespace"


def remember_namespace(request, namespace: str) -> None:
    """Called by the pages that choose a namespace, once the viewer may see it."""
    session = getattr(request, "session", None)
    if session is None or getattr(request, "share_link", None) is not None:
        return
    if session.get(NAMESPACE_KEY, "") != namespace:
        if namespace:
            session[NAMESPACE_KEY] = namespace
        else:
            session.pop(NAMESPACE_KEY, None)


def followed_namespace(request, principal: Principal | None) -> str:
    """The namespace the menu's links carry: the last one chosen, while the viewer may list it."""
    session = getattr(request, "session", None)
    if session is None or principal is None or principal.is_share:
        return ""
    namespace = session.get(NAMESPACE_KEY, "")
    return namespace if namespace and principal.can("list", namespace) else ""


def list_scope(principal: Principal, namespace: str, kind: str) -> list[str | None] | None:
    """The namespaces a list reads, or None when the user may not see the one asked for."""
    if namespace:
        return [namespace] if principal.can("list", namespace, kind) else None
    if principal.namespaces_here:
        allowed = [ns for ns in sorted(principal.namespaces_here) if principal.can("list", ns, kind)]
        return allowed or None
    return [None] if principal.can("list", None, kind) else None


def write_refusal(principal: Principal, verb: str, namespace: str | None, kind: str) -> str | None:
    """Why a page must not offer this write (None: offer it). kubedash's role first; in a
    followed cluster then its write mode (and the user's stored credentials), then what the
    cluster answers a SelfSubjectAccessReview for them (cached briefly, follow/writes.py)."""
    why = principal.refusal(verb, namespace, kind)
    if why is not None or principal.is_share or clusters.is_local():
        return why or ("A shared view is read-only." if principal.is_share else None)
    cluster = Cluster.objects.filter(name=clusters.current()).first()
    if cluster is None:
        return f"{clusters.current()} is not followed any more."
    if why := writes.mode_refusal(cluster, principal):
        return why
    return writes.Writer(cluster, principal).access_refusal(verb, by_kind(kind), namespace or "")


def may_create_somewhere(principal: Principal, namespace: str, kind: str) -> bool:
    """May this principal create a `kind` in `namespace` (or, without one, in any namespace)?
    write_refusal: the role, and in a followed cluster its write mode and its answer."""
    if namespace:
        return write_refusal(principal, "create", namespace, kind) is None
    if principal.namespaces_here:
        return any(write_refusal(principal, "create", ns, kind) is None for ns in principal.namespaces_here)
    return write_refusal(principal, "create", None, kind) is None


# A share link's label selector: the pages and pushes of its visitor show only matching objects.

def own_selector(principal: Principal) -> LabelSelector | None:
    """The principal's own label selector (parsed), or None when it has none."""
    return parse_label_selector(principal.label_selector) if principal.label_selector else None


def narrow(principal: Principal, selector: LabelSelector | None) -> LabelSelector | None:
    """A page's label selector ANDed with the principal's own (a share link's)."""
    own = own_selector(principal)
    if own is None:
        return selector
    if selector is None or selector.empty:
        return own
    return LabelSelector(own.requirements + selector.requirements,
                         nothing=own.matches_nothing or selector.matches_nothing)


def sees(principal: Principal, kind: str, obj: dict) -> bool:
    """May this principal read this very object (kind, namespace and labels)?"""
    meta = obj.get("metadata") or {}
    if not principal.can("get", meta.get("namespace"), kind):
        return False
    own = own_selector(principal)
    return own is None or own.matches(meta.get("labels") or {})

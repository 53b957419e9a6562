"""Share links: read-only, expiring, revocable views of one list page, without a login.

Opening /s/<token>/ stores the link's id in the visitor's session. From then on every
request of that session is checked here (ShareLinkMiddleware) before any view runs:

- the link is re-read on every request: expired or revoked means it stops working at once;
- only the list and detail pages (and leaving/login) are reachable at all; everything else
  (the API, forms, tokens, admin, other pages) answers 403;
- the pages then see a share Principal (auth.Principal, role "share") whose can() allows only
  get/list/watch of the shared kind, in the shared namespaces (one, every one, or a limited
  creator's own when it shared "All namespaces"); its label selector narrows
  every list, detail page and websocket.

A logged-in user who opens a share link sees exactly what its recipients see (the share
principal wins in that session) until they leave the shared view or log in again.
"""
from __future__ import annotations

import secrets
from datetime import timedelta
from functools import wraps
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.signals import user_logged_in
from django.contrib.auth.views import redirect_to_login
from django.dispatch import receiver
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone

from dashboard.access import clusters
from dashboard.access.authentication import touch_last_used
from dashboard.access.middleware import EitherModeMiddleware
from dashboard.access.models import ShareLink, hash_token
from dashboard.access.principals import SHARE, SHARE_VERB, Principal, principal_for
from dashboard.kube.errors import ApiError
from dashboard.kube.views import status_response

from . import kinds

SESSION_KEY = "kubedash_share_link"
TOKEN_BYTES = 32                 # 256 random bits (the brief asks for at least 128)

EXPIRY_CHOICES = {               # form value -> (label, lifetime)
    "1h": ("1 hour", timedelta(hours=1)),
    "1d": ("1 day", timedelta(days=1)),
    "7d": ("7 days", timedelta(days=7)),
    "30d": ("30 days", timedelta(days=30)),
}
DEFAULT_EXPIRY = "1d"

# What a share session may reach at all (every registered kind's list and detail pages, as a
# link shares one kind's list); the views then check the scope itself.
SHARE_ROUTES = frozenset(kinds.page_route_names() | {"share_open", "share_leave", "login", "logout"})


# ---------------------------------------------------------------------------------------------
# The link itself


def shared_namespaces(principal: Principal, namespace: str, kind: str) -> tuple[str, ...] | None:
    """What a link made by `principal` from a `kind` list in `namespace` ("": all namespaces)
    shows: (namespace,), () for every namespace, the principal's own namespaces where it may
    share (a namespace-limited creator on "All namespaces"), or None: it may not share this."""
    if namespace:
        return (namespace,) if principal.can(SHARE_VERB, namespace, kind) else None
    if principal.namespaces_here:
        own = tuple(ns for ns in sorted(principal.namespaces_here) if principal.can(SHARE_VERB, ns, kind))
        return own or None
    return () if principal.can(SHARE_VERB, None, kind) else None


def create_link(creator, *, kind: str, label_selector: str, label: str, expiry: str, namespace: str = "",
                namespaces: tuple[str, ...] | None = None, cluster: str = "") -> tuple[ShareLink, str]:
    """Create a link to `namespace`, or to `namespaces` (shared_namespaces; empty: all); return
    (row, token). The token exists only in this return value. It shows `cluster` (default: the
    cluster the work is about, i.e. the page it was made from)."""
    if namespaces is None:
        namespaces = (namespace,) if namespace else ()
    token = secrets.token_urlsafe(TOKEN_BYTES)
    one = len(namespaces) == 1   # (one namespace: the field links always had)
    link = ShareLink.objects.create(
        token_hash=hash_token(token), label=label, kind=kind, namespace=namespaces[0] if one else "",
        namespaces=[] if one else list(namespaces), cluster=cluster or clusters.current(),
        label_selector=label_selector, creator=creator, expires=timezone.now() + EXPIRY_CHOICES[expiry][1])
    return link, token


def creator_covers(link: ShareLink) -> bool:
    """The link may never show more than its creator may see now (deactivated, narrowed)."""
    creator = link.creator
    if not creator.is_active:
        return False
    principal = principal_for(creator)
    with clusters.within(link.cluster):   # (checked before the request's cluster is set)
        return all(principal.can("list", ns, link.kind) for ns in link.scope_namespaces() or (None,))


def usable_link(link_id, now=None) -> tuple[ShareLink | None, str]:
    """(link, "") when the link works now, else (link or None, why: revoked/expired/gone)."""
    if not isinstance(link_id, int):
        return None, "gone"
    link = ShareLink.objects.select_related("creator", "creator__kube_profile").filter(pk=link_id).first()
    if link is None:
        return None, "gone"
    state = link.state(now or timezone.now())
    if state != "active":
        return link, state
    if not creator_covers(link):
        return link, "revoked"
    return link, ""


def link_by_token(token: str) -> ShareLink | None:
    return ShareLink.objects.filter(token_hash=hash_token(token)).first()


def share_principal(link: ShareLink) -> Principal:
    return Principal(username=f"share link “{link.label}”", role=SHARE,
                     namespaces=link.scope_namespaces(), kinds=(link.kind,),
                     clusters=(link.cluster,), label_selector=link.label_selector, share_id=link.pk)


# The view a link opens, carried by its address (/s/<token>/?q=…&sort=…), not its scope: the
# visitor may change them. The list page checks them as any address's (views.Filters).
VIEW_PARAMS = ("q", "state", "sort", "limit", "page", "columns", "at")   # at: as of a past moment (timetravel.py)


def page_url(link: ShareLink, view: dict | None = None) -> str:
    """Where the link lands: its list page, in its namespace (the selector is implied), in the
    view it was shared with (VIEW_PARAMS)."""
    view = view or {}
    query = urlencode({k: v for k, v in (("namespace", link.namespace), *((p, view.get(p)) for p in VIEW_PARAMS)) if v})
    return reverse(kinds.by_kind(link.kind).plural) + (f"?{query}" if query else "")


def revoke(link: ShareLink) -> None:
    """Revoke now. Saving it records an access-change notice (access/signals.py): every
    process's open websockets on this link re-check it and close, Redis or not."""
    if link.revoked_at is None:
        link.revoked_at = timezone.now()
        link.save(update_fields=["revoked_at"])


def visible_links(principal: Principal, user):
    """Admins without limits see every link; everyone else (a limited admin too) the links they made."""
    rows = ShareLink.objects.select_related("creator").order_by("-created")
    return rows if principal.is_full_admin else rows.filter(creator=user)


# ---------------------------------------------------------------------------------------------
# Requests: who is looking at a page


def page_principal(request) -> Principal | None:
    """The principal a page serves: the session's share link, else the logged-in user."""
    link = getattr(request, "share_link", None)
    if link is not None:
        return share_principal(link)
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return principal_for(user)
    return None


def viewer_required(view):
    """login_required for the pages a share link may show: a share session counts as a viewer."""
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if getattr(request, "share_link", None) is None:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not principal_for(request.user).role:   # signed in, no right at all: say whom to ask
                return HttpResponseRedirect("/accounts/no-access/")
        return view(request, *args, **kwargs)
    return wrapper


def user_required(view):
    """login_required that refuses share sessions (tokens page, share links page)."""
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if getattr(request, "share_link", None) is not None:
            return forbidden(request, "A shared view cannot open this page.")
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)
    return wrapper


def _error_page(request, status: int, title: str, message: str, link: ShareLink | None = None):
    principal = share_principal(link) if link is not None else None
    ctx = {"title": title, "message": message, "principal": principal, "share_link": link,
           "share_home": page_url(link) if link is not None else ""}
    response = render(request, "web/share/error.html", ctx, status=status)
    response["Cache-Control"] = "no-store"
    return response


def forbidden(request, message: str) -> HttpResponse:
    return _error_page(request, 403, "Not allowed", message, getattr(request, "share_link", None))


def stopped_page(request, why: str) -> HttpResponse:
    """410 for a link that no longer works (the open page also learns it via its websocket)."""
    text = {"revoked": "This share link has been revoked.", "expired": "This share link has expired."}
    return _error_page(request, 404 if why == "gone" else 410, "Link no longer valid",
                       text.get(why, "This share link does not exist.") + " Ask its owner for a new one.")


def _api_forbidden() -> HttpResponse:
    return status_response(ApiError(403, "Forbidden", "a share link gives no access to the API"))


def _route_name(path: str) -> str | None:
    """The route's full name ("admin:login" is not our "login")."""
    try:
        return resolve(path).view_name
    except Resolver404:
        return None


def check_share_session(request) -> HttpResponse | None:
    """Set request.share_link for a share session; answer instead of the view when needed."""
    request.share_link = None
    session = getattr(request, "session", None)
    if session is None or SESSION_KEY not in session:
        return None
    link, why = usable_link(session.get(SESSION_KEY))
    if why:
        # Stops working at once; later requests of this session are ordinary again.
        session.pop(SESSION_KEY, None)
        if _route_name(request.path_info) in ("share_open", "login", "logout"):
            return None
        return stopped_page(request, why)
    request.share_link = link
    touch_last_used(ShareLink, link)
    name = _route_name(request.path_info)
    if name in SHARE_ROUTES:
        return None
    if name == "overview":
        return HttpResponseRedirect(page_url(link))
    if request.path_info.startswith(("/api", "/openapi")):   # /api/..., /apis/...: a Status, not a page
        return _api_forbidden()
    if name is None and request.path_info.startswith("/" + settings.STATIC_URL.lstrip("/")):
        return None
    return forbidden(request, "A shared view shows only its own page.")


class ShareLinkMiddleware(EitherModeMiddleware):
    """Runs check_share_session on every request (after sessions and auth).

    Requests without a session cookie (API clients) pass straight through, without a
    database query and, for async views (watches), without a hop to a thread.
    """

    def handle(self, request):
        request.share_link = None
        if settings.SESSION_COOKIE_NAME in request.COOKIES:
            answer = check_share_session(request)
            if answer is not None:
                return answer
        return self.get_response(request)

    async def ahandle(self, request):
        request.share_link = None
        if settings.SESSION_COOKIE_NAME in request.COOKIES:
            answer = await sync_to_async(check_share_session, thread_sensitive=True)(request)
            if answer is not None:
                return answer
        return await self.get_response(request)


@receiver(user_logged_in)
def _leave_share_on_login(sender, request, user, **kwargs):
    # Logging in means "be me again": the session stops being a shared view.
    if request is not None and hasattr(request, "session"):
        request.session.pop(SESSION_KEY, None)


# ---------------------------------------------------------------------------------------------
# Websockets


def session_has_share(session) -> bool:
    return session is not None and SESSION_KEY in session


def link_access(link_id) -> tuple[Principal | None, tuple[str, ...], float | None]:
    """(share principal or None, subjects, deadline) for an open shared page's re-checks: the
    link itself, its creator (deactivated or narrowed stops it) and its expiry."""
    link, why = usable_link(link_id)
    if why:
        return None, (), None
    return share_principal(link), (f"share:{link.pk}", f"user:{link.creator_id}"), link.expires.timestamp()


REVOKED_FRAGMENT = ('<main id="main" hx-swap-oob="innerHTML"><div class="page-head"><h1>Link no longer valid</h1>'
                    '</div><p class="alert" role="alert">This shared view has been revoked or has expired.</p></main>')

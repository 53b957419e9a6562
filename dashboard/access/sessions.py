"""Browser sessions that end everywhere at once: logout signs a user out of every session.

Django's logout flushes only the session it is called from. Each session here remembers the
user's session epoch at login (signals._logged_in); logout bumps the epoch
(signals.sign_out_everywhere), so every other session of that user stops too: its pages
(SessionEpochMiddleware) and its open websockets and watches (they re-check through
`session_user` when the access-change notice arrives).
"""
from __future__ import annotations

from importlib import import_module
from types import SimpleNamespace

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import auth
from django.contrib.auth.models import AnonymousUser
from django.http import HttpResponseRedirect

from . import oidc
from .middleware import EitherModeMiddleware
from .models import EPOCH_KEY, Profile


def _epoch(user) -> int:
    profile = Profile.objects.filter(user_id=user.pk).only("session_epoch").first()
    return profile.session_epoch if profile else 0


def session_current(session, user) -> bool:
    """Was this session signed in under the user's current epoch (no logout since)?"""
    return int(session.get(EPOCH_KEY, 0)) == _epoch(user)


def reload_session(session_key: str | None):
    """The session as the store holds it now ({} once it expired, was flushed or deleted)."""
    return import_module(settings.SESSION_ENGINE).SessionStore(session_key)


def session_user(session):
    """The active user a session is signed in as now, or None (expired, signed out, deactivated,
    deleted, password changed, its identity provider's sign-in no longer refreshed): Django's own
    checks plus the epoch, and the OpenID tokens refreshed when due (oidc.keep_fresh)."""
    user = auth.get_user(SimpleNamespace(session=session))
    if not user.is_authenticated or not user.is_active or not session_current(session, user):
        return None
    if not oidc.keep_fresh(session, user):
        return None
    return user


def session_deadline(session) -> float | None:
    """When the session must be checked again (epoch seconds): its expiry, or sooner its OpenID
    refresh; None when it has neither to watch."""
    refresh = oidc.next_check(session.get(oidc.SESSION_TOKENS))
    try:
        expiry = session.get_expiry_date().timestamp()
    except Exception:  # a session engine without expiry dates
        return refresh
    return min(expiry, refresh) if refresh is not None else expiry


EXPIRED_PAGE = "/accounts/signed-out/"


def end_stale_session(request) -> None:
    """A session from before the user's last logout is signed out: flushed, anonymous. So is one
    whose identity provider's sign-in could not be refreshed (it keeps oidc.EXPIRED_KEY)."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return
    if not session_current(request.session, user):
        request.session.flush()
        request.user = AnonymousUser()
    elif not oidc.keep_fresh(request.session, user):
        request.session.flush()
        request.session[oidc.EXPIRED_KEY] = True
        request.user = AnonymousUser()


class SessionEpochMiddleware(EitherModeMiddleware):
    """After AuthenticationMiddleware: end_stale_session on every request with a session
    cookie (API clients without one pass straight through, async views without a thread hop)."""

    def handle(self, request):
        if settings.SESSION_COOKIE_NAME in request.COOKIES:
            end_stale_session(request)
            if _expired_page(request):
                return HttpResponseRedirect(EXPIRED_PAGE)
        return self.get_response(request)

    async def ahandle(self, request):
        if settings.SESSION_COOKIE_NAME in request.COOKIES:
            await sync_to_async(end_stale_session, thread_sensitive=True)(request)
            if _expired_page(request):
                return HttpResponseRedirect(EXPIRED_PAGE)
        return await self.get_response(request)


def _expired_page(request) -> bool:
    """A page (not an API call, nor a form's POST) asked by a session whose sign-in just expired:
    the "signed out: your sign-in expired" page says so instead of a bare login form."""
    if request.method != "GET" or request.path.startswith(("/api/", "/apis/")) or \
            not request.session.get(oidc.EXPIRED_KEY):
        return False
    del request.session[oidc.EXPIRED_KEY]
    return True

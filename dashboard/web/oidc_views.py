"""Sign-in through the identity provider (access/oidc.py does the protocol), the login page that
offers it, and the page for a person signed in without any access."""
from __future__ import annotations

import logging

from authlib.integrations.base_client import OAuthError
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from dashboard.access import oidc
from dashboard.access.models import Profile, Role
from dashboard.access.principals import principal_for

log = logging.getLogger(__name__)

NEXT_KEY = "kubedash_oidc_next"
CALLBACK_PATH = "/accounts/oidc/callback/"


def safe_next(request, value: str | None) -> str:
    if value and url_has_allowed_host_and_scheme(value, {request.get_host()}, require_https=request.is_secure()):
        return value
    return settings.LOGIN_REDIRECT_URL


def login_context() -> dict:
    return {"oidc_name": oidc.config()["name"] if oidc.enabled() else "",
            "local_login": settings.KUBEDASH_LOCAL_LOGIN or not oidc.enabled()}


class LoginView(auth_views.LoginView):
    """The local form at /accounts/login/, with "Sign in with <provider>" beside it, or instead of
    it when KUBEDASH_LOCAL_LOGIN=0 (then a posted password signs no one in)."""

    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), **login_context()}

    def post(self, request, *args, **kwargs):
        if not login_context()["local_login"]:
            return HttpResponseNotAllowed(["GET"], "Sign in with the identity provider.")
        return super().post(request, *args, **kwargs)


@require_GET
def oidc_login(request):
    """Off to the provider: a fresh state, nonce and PKCE verifier in this session (Authlib)."""
    if not oidc.enabled():
        return render(request, "registration/oidc_error.html", {"message": "Sign-in with an identity provider is "
                      "not configured here."}, status=404)
    request.session[NEXT_KEY] = safe_next(request, request.GET.get("next"))
    try:
        return oidc.client().authorize_redirect(request, request.build_absolute_uri(CALLBACK_PATH),
                                                **oidc.config()["auth_params"])
    except Exception as exc:   # the issuer unreachable, its discovery document unreadable
        log.warning("OpenID sign-in could not start: %s", exc)
        return render(request, "registration/oidc_error.html",
                      {"message": f"{oidc.config()['name']} cannot be reached just now; try again in a moment."},
                      status=502)


@require_GET
def oidc_callback(request):
    """Back from the provider: Authlib checks state, exchanges the code with the PKCE verifier
    and verifies the ID token (signature, iss, aud, exp, nonce); we sign the person in."""
    if not oidc.enabled():
        return HttpResponseRedirect(settings.LOGIN_URL)
    try:
        token = oidc.client().authorize_access_token(request)
        claims = oidc.claims_of(token)
        username, groups = oidc.identity(claims)
    except (OAuthError, oidc.SignInRefused) as exc:
        log.info("OpenID sign-in refused: %s", exc)
        return render(request, "registration/oidc_error.html", {"message": f"Sign-in failed: {exc}"}, status=400)
    except Exception as exc:   # a bad ID token (signature, claims), the provider down mid-way
        log.warning("OpenID sign-in failed: %r", exc)
        return render(request, "registration/oidc_error.html",
                      {"message": "Sign-in failed: the identity provider's answer could not be verified."}, status=400)
    next_url = request.session.get(NEXT_KEY) or settings.LOGIN_REDIRECT_URL
    user = oidc.sign_in_user(username, groups, oidc.subject_of(claims))
    if not user.is_active:
        return render(request, "registration/oidc_error.html",
                      {"message": "Your kubedash account is deactivated."}, status=403)
    auth.login(request, user, backend=oidc.BACKEND)   # (a new session key: no fixation)
    tokens = oidc.session_tokens(token, claims)
    request.session[oidc.SESSION_TOKENS] = tokens
    request.session.save()   # (its key now, for the back-channel logout's index)
    oidc.remember_session(request.session, user, tokens)
    if not principal_for(user).role:
        return HttpResponseRedirect("/accounts/no-access/")
    return HttpResponseRedirect(next_url)


def access_contacts() -> list[str]:
    """Whom to ask for access: KUBEDASH_ACCESS_CONTACT, else the unlimited admins."""
    if settings.KUBEDASH_ACCESS_CONTACT:
        return [settings.KUBEDASH_ACCESS_CONTACT]
    admins = Profile.objects.filter(role=Role.ADMIN, namespaces=[], clusters=[], user__is_active=True) \
        .select_related("user").order_by("user__username")[:5]
    return [p.user.email or p.user.get_username() for p in admins]


@require_GET
@login_required
def no_access(request):
    """Signed in, but neither a group binding nor a grant of one's own gives any right."""
    principal = principal_for(request.user)
    if principal.role:
        return HttpResponseRedirect("/")
    return render(request, "registration/no_access.html",
                  {"username": principal.username, "groups": principal.idp_groups, "contacts": access_contacts(),
                   "groups_overage": (request.session.get(oidc.SESSION_TOKENS) or {}).get("groups_overage")},
                  status=403)


class LogoutView(auth_views.LogoutView):
    """Sign out of kubedash (every session of the person: signals.sign_out_everywhere) and, for a
    sign-in through the identity provider, of the provider too (RP-initiated logout: off to its
    end_session_endpoint, which comes back to the login page)."""

    next_page = "/accounts/login/"

    def post(self, request, *args, **kwargs):
        tokens = request.session.get(oidc.SESSION_TOKENS)
        response = super().post(request, *args, **kwargs)
        url = oidc.end_session_url(tokens, request.build_absolute_uri(settings.LOGIN_URL))
        if not url:
            return response
        # A page that goes on to the provider, not a redirect: the pages' CSP (form-action 'self')
        # stops a form's POST from being redirected to another origin.
        return render(request, "registration/provider_logout.html", {"url": url, **login_context()})


@require_GET
def signed_out(request):
    """Where a session whose sign-in could not be refreshed lands (sessions.EXPIRED_PAGE)."""
    return render(request, "registration/signed_out.html", login_context())


@csrf_exempt
@require_POST
def backchannel_logout(request):
    """The provider's back-channel logout (OpenID Connect Back-Channel Logout 1.0): a signed
    logout token naming a sid or sub; every kubedash session of it ends, sockets included."""
    if not oidc.enabled():
        return HttpResponse(status=404)
    raw = request.POST.get("logout_token", "")
    try:
        claims = oidc.verify_logout_token(raw)
    except oidc.LogoutTokenRefused as exc:
        log.info("back-channel logout refused: %s", exc)
        return JsonResponse({"error": "invalid_request", "error_description": str(exc)}, status=400)
    ended = oidc.end_sessions(claims)
    log.info("back-channel logout: %d session(s) ended", ended)
    response = HttpResponse(status=200)
    response["Cache-Control"] = "no-store"
    return response

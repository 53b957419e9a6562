"""Signing in with OpenID Connect: the authorization code flow with PKCE, `state` and `nonce`.

Authlib does the protocol (discovery from the issuer's .well-known/openid-configuration, the
PKCE verifier and challenge, `state` and `nonce` kept in the session, the token request, the ID
token's signature, iss, aud, exp and nonce, the JWKS fetched once and fetched again on an
unknown `kid`). Why Authlib: it is a protocol library rather than a login framework, so the
Django user, the Profile and the groups stay ours (mozilla-django-oidc has no PKCE-by-default
nor back-channel logout; django-allauth brings its own account model, pages and email flows).

Here: what a sign-in makes of the tokens. The person is a Django user named by the username
claim, made on first sign-in with no grant of its own (their groups' bindings give the rights:
principals.principal_for); their groups go on their Profile at each sign-in (and refresh), which
records an access change, so open pages and watches re-check at once. The tokens stay in the
server-side session (SESSION_TOKENS), never in a cookie or a page.
"""
from __future__ import annotations

import functools
import logging
import time

from authlib.integrations.django_client import OAuth
from authlib.integrations.requests_client import OAuth2Session
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from .models import Profile

log = logging.getLogger(__name__)

SESSION_TOKENS = "kubedash_oidc"      # the session's tokens: {access_token, refresh_token, expires_at, id_token, sid, sub}
BACKEND = "django.contrib.auth.backends.ModelBackend"


class SignInRefused(Exception):
    """The provider's answer cannot sign anyone in (message for the login page)."""


def config() -> dict | None:
    return settings.KUBEDASH_OIDC


def enabled() -> bool:
    return settings.KUBEDASH_OIDC is not None


class _CaFileSession(OAuth2Session):
    """requests lets REQUESTS_CA_BUNDLE (set on many hosts) override a session's own `verify`:
    pass KUBEDASH_OIDC_CA_FILE with every request, so the configured CA is the one used (an
    issuer on a private CA works whatever the environment says)."""

    def request(self, method, url, *args, **kwargs):
        if isinstance(self.verify, str):
            kwargs.setdefault("verify", self.verify)
        return super().request(method, url, *args, **kwargs)


@functools.cache
def client():
    """The Authlib client, registered once per process (its discovery document and JWKS are
    fetched on first use and kept)."""
    cfg = config()
    oauth = OAuth()
    client_kwargs = {"scope": " ".join(cfg["scopes"]), "code_challenge_method": "S256", "default_timeout": 10}
    if cfg["ca_file"]:
        client_kwargs["verify"] = cfg["ca_file"]    # discovery, JWKS, token and userinfo requests alike
    app = oauth.register("kubedash", client_id=cfg["client_id"], client_secret=cfg["client_secret"],
                         server_metadata_url=cfg["issuer"] + "/.well-known/openid-configuration",
                         client_kwargs=client_kwargs)
    app.client_cls = _CaFileSession
    return app


def identity(claims: dict) -> tuple[str, tuple[str, ...]]:
    """(username, groups) from the ID token's (or userinfo's) claims, as configured."""
    cfg = config()
    username = claims.get(cfg["username_claim"])
    if not isinstance(username, str) or not username:
        raise SignInRefused(f'the identity provider sent no "{cfg["username_claim"]}" claim to name you by '
                            "(KUBEDASH_OIDC_USERNAME_CLAIM)")
    groups = claims.get(cfg["groups_claim"]) or ()
    if isinstance(groups, str):
        groups = (groups,)
    return username, tuple(sorted({g for g in groups if isinstance(g, str) and g}))


def claims_of(token: dict) -> dict:
    """The ID token's claims, completed from the userinfo endpoint when the username or groups
    claim is not in it (providers that keep the ID token small)."""
    cfg = config()
    claims = dict(token.get("userinfo") or {})
    if cfg["username_claim"] not in claims or cfg["groups_claim"] not in claims:
        try:
            claims = {**client().userinfo(token=token), **claims}
        except Exception as exc:   # no userinfo endpoint, or it failed: the ID token is what we have
            log.info("userinfo not read: %s", exc)
    if "_claim_names" in claims and cfg["groups_claim"] in claims["_claim_names"]:
        # Entra ID's groups overage (over 200 groups): the claim is a link to Microsoft Graph.
        log.warning("%s: the groups claim is a distributed claim (groups overage), not followed: "
                    "configure the provider to send only the application's groups", claims.get("sub"))
    return claims


@transaction.atomic
def sign_in_user(username: str, groups: tuple[str, ...], subject: str):
    """The Django user for this identity (made on first sign-in, with no grant of its own), its
    groups and subject recorded on its Profile."""
    User = get_user_model()
    user, created = User.objects.get_or_create(**{User.USERNAME_FIELD: username})
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
        # (the user's signal made a viewer Profile: an identity provider's user has rights from
        # its groups only, until an admin grants more)
        Profile.objects.filter(user=user).update(role="")
    set_groups(user, groups, subject)
    return User.objects.select_related("kube_profile").get(pk=user.pk)


def set_groups(user, groups: tuple[str, ...], subject: str | None = None) -> bool:
    """Record the provider's groups for the user; when they changed, the save records an access
    change (signals._profile_saved), so open pages and watches re-check. True if they changed."""
    profile = Profile.objects.select_for_update().get(user=user)
    fields = []
    if list(profile.groups or ()) != list(groups):
        profile.groups = list(groups)
        fields.append("groups")
    if subject is not None and profile.oidc_subject != subject:
        profile.oidc_subject = subject
        fields.append("oidc_subject")
    if fields:
        profile.save(update_fields=fields)
    return "groups" in fields


def subject_of(claims: dict) -> str:
    return f'{claims.get("iss", "")}#{claims.get("sub", "")}'


def session_tokens(token: dict, claims: dict) -> dict:
    """What the session keeps of a token response (server-side only)."""
    expires_at = token.get("expires_at") or (time.time() + float(token.get("expires_in") or 300))
    return {"access_token": token.get("access_token"), "refresh_token": token.get("refresh_token"),
            "expires_at": float(expires_at), "id_token": token.get("id_token"),
            "sid": claims.get("sid", ""), "subject": subject_of(claims)}

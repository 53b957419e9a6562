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
from urllib.parse import urlencode

from authlib.integrations.django_client import OAuth
from authlib.integrations.requests_client import OAuth2Session
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.db import transaction
from django.utils import timezone
from joserfc import jwt
from joserfc.errors import InvalidKeyIdError
from joserfc.jwk import KeySet
from joserfc.jws import JWSRegistry

from . import signals
from .models import OidcSession, Profile

log = logging.getLogger(__name__)

EXPIRED_KEY = "kubedash_sign_in_expired"   # a session signed out because its refresh failed
SESSION_TOKENS = "kubedash_oidc"      # the session's tokens: {access_token, refresh_token, expires_at, id_token, sid, sub, groups_overage}
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
    if groups_overage(claims):
        log.warning("%s: the groups claim is a distributed claim (groups overage), not followed: "
                    "configure the provider to send only the application's groups", claims.get("sub"))
    return claims


def groups_overage(claims: dict) -> bool:
    """Entra ID's groups overage (over 200 groups): the groups claim is a distributed claim, a
    link to Microsoft Graph (`_claim_names`/`_claim_sources`), which kubedash does not follow."""
    names = claims.get("_claim_names")
    return isinstance(names, dict) and config()["groups_claim"] in names


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
    now = time.time()
    expires_at = float(token.get("expires_at") or (now + float(token.get("expires_in") or 300)))
    return {"access_token": token.get("access_token"), "refresh_token": token.get("refresh_token"),
            "expires_at": expires_at, "refresh_at": refresh_at(expires_at, now), "id_token": token.get("id_token"),
            "sid": claims.get("sid", ""), "subject": subject_of(claims),
            "groups_overage": groups_overage(claims)}   # (the no-access page says why no group counts)


# --- Keeping a session's sign-in fresh -------------------------------------------------------
#
# Before the access token expires the session's tokens are refreshed, once per session however
# many tabs, sockets and processes notice it: the refresher claims the session by a compare-and-set
# on its row in the session store (django_session: UPDATE ... WHERE session_data = what it read);
# the others keep serving on the current token until the winner has written the new ones. Each
# refresh re-reads the groups (set_groups: a change is an access change, so open pages and watches
# re-check at once). A refresh that fails ends the session.

REFRESH_LEEWAY = 60.0        # seconds before expiry; at most a quarter of the token's lifetime
CLAIM_SECONDS = 30.0         # how long a refresher's claim holds (a refresher that died frees it then)


def refresh_at(expires_at: float, issued_at: float) -> float:
    return expires_at - min(REFRESH_LEEWAY, max(0.0, expires_at - issued_at) / 4)


def next_check(tokens: dict | None, now: float | None = None) -> float | None:
    """When a long-lived channel of this session must re-check (refresh due), or None."""
    if not tokens:
        return None
    now = time.time() if now is None else now
    due = tokens.get("refresh_at", 0.0)
    if due <= now and tokens.get("claimed_until", 0.0) > now:
        due = min(tokens["claimed_until"], now + 2.0)   # another is refreshing: look again soon
    return due if due > now else now + 1.0


def _row_cas(session_key: str, change):
    """Compare-and-set on the session's row: (data after, whether `change` was written). `change`
    maps the stored data to new data, or None to leave it. None when the session is gone."""
    raw = Session.objects.filter(session_key=session_key, expire_date__gt=timezone.now()) \
        .values_list("session_data", flat=True).first()
    if raw is None:
        return None
    store = SessionStore(session_key)
    data = store.decode(raw)
    new = change(data)
    if new is None:
        return data, False
    written = Session.objects.filter(session_key=session_key, session_data=raw).update(
        session_data=store.encode(new))
    return (new, True) if written else (store.decode(Session.objects.filter(session_key=session_key)
                                                     .values_list("session_data", flat=True).first() or raw), False)


def keep_fresh(session, user) -> bool:
    """Refresh the session's tokens when due; False when the session must end (the refresh
    failed: revoked at the provider, the person removed, the provider refusing)."""
    tokens = session.get(SESSION_TOKENS)
    now = time.time()
    if not tokens or not enabled() or now < tokens.get("refresh_at", 0.0) or session.session_key is None:
        return True
    claim_until = now + CLAIM_SECONDS

    def claim(data):
        stored = data.get(SESSION_TOKENS)
        if not stored or now < stored.get("refresh_at", 0.0) or stored.get("claimed_until", 0.0) > now:
            return None                         # refreshed already, or being refreshed
        return {**data, SESSION_TOKENS: {**stored, "claimed_until": claim_until}}

    found = _row_cas(session.session_key, claim)
    if found is None:
        return False                            # the session is gone from the store
    data, claimed = found
    stored = data.get(SESSION_TOKENS) or {}
    if not claimed:
        session[SESSION_TOKENS] = stored        # another refreshed (or is refreshing): take theirs
        return now < stored.get("expires_at", 0.0) or stored.get("refresh_at", 0.0) > now
    try:
        fresh, claims = refresh(stored)
        username, groups = identity(claims)
        if subject_of(claims) != stored.get("subject") or username != user.get_username():
            raise SignInRefused("the refreshed identity is another person")
    except Exception as exc:
        log.info("sign-in of %s not refreshed, session ends: %r", user.get_username(), exc)
        end_session_everywhere(session.session_key, user)
        return False
    with transaction.atomic():
        set_groups(user, groups)

    def store_fresh(data):
        return {**data, SESSION_TOKENS: fresh}

    found = _row_cas(session.session_key, store_fresh)
    session[SESSION_TOKENS] = fresh
    return found is not None


def refresh(tokens: dict) -> tuple[dict, dict]:
    """The token endpoint's answer to the session's refresh token, as the session keeps it, and
    the identity's claims (from the new ID token, verified, or else userinfo)."""
    app = client()
    metadata = app.load_server_metadata()
    if not tokens.get("refresh_token"):
        raise SignInRefused("no refresh token (ask for the offline_access scope: KUBEDASH_OIDC_SCOPES)")
    with app._get_oauth_client(**metadata) as oauth:
        token = dict(oauth.refresh_token(metadata["token_endpoint"], refresh_token=tokens["refresh_token"]))
    token.setdefault("refresh_token", tokens["refresh_token"])   # (a provider that does not rotate it)
    token.setdefault("id_token", tokens.get("id_token"))
    if token.get("id_token") and token["id_token"] != tokens.get("id_token"):
        token["userinfo"] = app.parse_id_token(token, nonce=None)
    claims = claims_of(token)
    claims.setdefault("iss", tokens.get("subject", "#").rsplit("#", 1)[0])
    claims.setdefault("sub", tokens.get("subject", "#").rsplit("#", 1)[1])
    out = session_tokens(token, claims)
    out["sid"] = out["sid"] or tokens.get("sid", "")
    return out, claims


# --- Ending sessions: RP-initiated and back-channel logout -----------------------------------

BACKCHANNEL_EVENT = "http://schemas.openid.net/event/backchannel-logout"


def remember_session(session, user, tokens: dict) -> None:
    OidcSession.objects.update_or_create(session_key=session.session_key, defaults={
        # (a sid longer than the column, which OpenID Connect does not bound, is not kept: that
        # session is then ended by its subject's back-channel logout only)
        "user": user, "sid": sid if len(sid := tokens.get("sid") or "") <= 255 else "", "subject": tokens["subject"]})


def end_session_url(tokens: dict | None, post_logout_redirect_uri: str) -> str | None:
    """The provider's end_session_endpoint for RP-initiated logout, or None (none advertised)."""
    if not tokens or not enabled():
        return None
    try:
        endpoint = client().load_server_metadata().get("end_session_endpoint")
    except Exception as exc:
        log.warning("the provider's end_session_endpoint is unknown: %s", exc)
        return None
    if not endpoint:
        return None
    params = {"client_id": config()["client_id"], "post_logout_redirect_uri": post_logout_redirect_uri}
    if tokens.get("id_token"):
        params["id_token_hint"] = tokens["id_token"]
    return endpoint + ("&" if "?" in endpoint else "?") + urlencode(params)


class LogoutTokenRefused(Exception):
    pass


def verify_logout_token(raw: str) -> dict:
    """A back-channel logout token's claims, verified as OpenID Connect Back-Channel Logout 1.0
    section 2.6 says: signature (the provider's JWKS, fetched again on an unknown kid), iss, aud,
    iat, the backchannel-logout event, a sid or sub, and no nonce."""
    app = client()
    metadata = app.load_server_metadata()
    algorithms = metadata.get("id_token_signing_alg_values_supported") or ["RS256"]
    registry = JWSRegistry(algorithms=[a for a in algorithms if a != "none"])
    try:
        try:
            token = jwt.decode(raw, KeySet.import_key_set(app.fetch_jwk_set()), registry=registry)
        except InvalidKeyIdError:
            token = jwt.decode(raw, KeySet.import_key_set(app.fetch_jwk_set(force=True)), registry=registry)
    except Exception as exc:
        raise LogoutTokenRefused(f"logout token not verified: {exc}") from exc
    claims = token.claims
    audiences = claims.get("aud")
    audiences = [audiences] if isinstance(audiences, str) else list(audiences or ())
    now = time.time()
    if claims.get("iss") != metadata.get("issuer", config()["issuer"]):
        raise LogoutTokenRefused("logout token from another issuer")
    if config()["client_id"] not in audiences:
        raise LogoutTokenRefused("logout token for another client")
    if not isinstance(claims.get("iat"), (int, float)) or claims["iat"] > now + 120:
        raise LogoutTokenRefused("logout token without a valid iat")
    if isinstance(claims.get("exp"), (int, float)) and claims["exp"] < now - 120:
        raise LogoutTokenRefused("logout token expired")
    events = claims.get("events")
    if not isinstance(events, dict) or BACKCHANNEL_EVENT not in events:
        raise LogoutTokenRefused("logout token without the back-channel logout event")
    if "nonce" in claims:
        raise LogoutTokenRefused("logout token with a nonce")
    if not claims.get("sid") and not claims.get("sub"):
        raise LogoutTokenRefused("logout token naming neither sid nor sub")
    return claims


def end_session_everywhere(session_key: str, user) -> None:
    """This session is signed out in the store (it keeps only EXPIRED_KEY, so its next page says
    "signed out: your sign-in expired"); its other pages and sockets re-check and close."""
    with transaction.atomic():
        Session.objects.filter(session_key=session_key).update(
            session_data=SessionStore(session_key).encode({EXPIRED_KEY: True}))
        OidcSession.objects.filter(session_key=session_key).delete()
        signals.record(f"user:{user.pk}")


def end_sessions(claims: dict) -> int:
    """End every kubedash session of the logout token's sid (or, without one, its subject):
    their rows leave the session store, and an access change makes their open pages and
    sockets re-check, find the session gone, and close. The number ended."""
    rows = OidcSession.objects.all()
    if claims.get("sid"):
        rows = rows.filter(sid=claims["sid"])
    if claims.get("sub"):
        rows = rows.filter(subject=subject_of(claims))
    found = list(rows.values_list("session_key", "user_id"))
    if not found:
        return 0
    keys = [key for key, _ in found]
    with transaction.atomic():
        Session.objects.filter(session_key__in=keys).delete()
        OidcSession.objects.filter(session_key__in=keys).delete()
        signals.record(*sorted({f"user:{user_id}" for _, user_id in found}))
    return len(keys)

"""Authentication for the API: bearer tokens (one plain SQL query per request) and browser
sessions. Each turns the caller into a Principal."""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from datetime import timedelta
from datetime import timezone as dt_timezone

import orjson
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection
from django.db.models import Q
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, SessionAuthentication
from rest_framework.exceptions import AuthenticationFailed

from . import jwt_authn
from .models import ApiToken, Profile, Role, hash_token
from .principals import Principal, principal_for

log = logging.getLogger(__name__)


# last_used is bookkeeping: written at most once a minute per token, never on every request.
LAST_USED_GRANULARITY = timedelta(minutes=1)


def touch_last_used(model, row, now=None) -> None:
    """Record a use of an ApiToken / ShareLink row if its last_used is older than a minute.

    One conditional UPDATE, only when the loaded row looks stale: concurrent requests don't
    pile up writes, and a busy database never fails the request over this.
    """
    now = now or timezone.now()
    if row.last_used is not None and now - row.last_used < LAST_USED_GRANULARITY:
        return
    stale = Q(last_used__isnull=True) | Q(last_used__lt=now - LAST_USED_GRANULARITY)
    try:
        model.objects.filter(stale, pk=row.pk).update(last_used=now)
    except DatabaseError:
        log.debug("could not record the last use of %s %s", model.__name__, row.pk)
    row.last_used = now


@dataclass
class TokenRow:
    """The bits of an ApiToken row authentication needs (no model instances on the hot path)."""

    pk: int
    last_used: object
    user_id: int | None = None
    expires: object = None      # aware datetime, or None: until revoked
    may_impersonate: bool = False


_TOKEN_FROM = ("FROM {token} t JOIN {user} u ON u.id = t.user_id LEFT JOIN {profile} p ON p.user_id = u.id "
               "WHERE t.token_hash = %s AND t.revoked = %s AND u.is_active = %s AND (t.expires IS NULL OR t.expires > %s)")
# What the Principal and TokenRow are made of (all but last_used). A database whose write can check
# in its own statement that the token still stands for the same caller (recent_principal) hashes
# them into a fingerprint: kube's storage hands its SQL over at start-up (use_fingerprint).
FINGERPRINT_COLUMNS = ("t.id", "u.{username}", "u.is_superuser", "p.role", "p.namespaces", "u.id", "t.expires",
                       "p.clusters", "t.may_impersonate")
_fingerprint = "NULL"   # the fingerprint's SQL; NULL: none (every request's token is checked first)


def use_fingerprint(sql: str) -> None:
    """From start-up (kube/apps.py): `sql` hashes FINGERPRINT_COLUMNS in this database's dialect.
    From then on the token query reads each token's fingerprint, and recent_principal answers."""
    global _fingerprint
    _fingerprint = sql
    _token_sql.cache_clear()
    token_check_sql.cache_clear()


@functools.cache
def _token_tables() -> dict:
    user_model = get_user_model()
    return {"token": ApiToken._meta.db_table, "user": user_model._meta.db_table, "profile": Profile._meta.db_table,
            "username": user_model.USERNAME_FIELD}


@functools.cache
def _token_sql() -> str:
    return ("SELECT t.id, t.last_used, u.{username}, u.is_superuser, p.role, p.namespaces, u.id, t.expires, "
            f"p.clusters, t.may_impersonate, p.groups, {_fingerprint} " + _TOKEN_FROM).format(**_token_tables())


@functools.cache
def token_check_sql() -> str:
    """(With a fingerprint) true while the token still stands for the caller a recent_principal()
    was made from (params: token_check_params)."""
    return f"EXISTS (SELECT 1 {_TOKEN_FROM} AND {_fingerprint} = %s)".format(**_token_tables())


# With a fingerprint: the caller each token stood for at its last check in this process, and its
# fingerprint: {token hash: (Principal, TokenRow, fingerprint)}; a few thousand at most.
_recent: dict[str, tuple] = {}
RECENT_TOKENS = 4096


def recent_principal(token_hash: str) -> tuple[Principal, TokenRow, str] | None:
    """The caller this token stood for when this process last checked it, unconfirmed: only a
    write that checks token_check_sql in its own statement may act on it (kube/views.py
    serve_direct). None when never checked here, or its last use was recorded over
    LAST_USED_GRANULARITY ago (a checked request records it)."""
    found = _recent.get(token_hash)
    if found is None or found[1].last_used is None or timezone.now() - found[1].last_used >= LAST_USED_GRANULARITY:
        return None
    return found


def token_check_params(token_hash: str, fingerprint: str) -> list:
    return [token_hash, False, True, _db_time(timezone.now()), fingerprint]


def token_principal(token_hash: str) -> tuple[Principal, TokenRow] | None:
    """One query per API request: the token's user, role and namespace limits.

    Plain SQL because this runs on every API call, and the ORM's query building for the
    three-table join was half of a Lease renewal's CPU.
    """
    with connection.cursor() as cursor:
        cursor.execute(_token_sql(), [token_hash, False, True, _db_time(timezone.now())])
        hit = cursor.fetchone()
    if hit is None:
        _recent.pop(token_hash, None)
        return None
    token_id, last_used, username, is_superuser, role, namespaces, user_id, expires, clusters, may_impersonate, \
        groups, fingerprint = hit
    last_used, expires = _aware(last_used), _aware(expires)
    if isinstance(namespaces, str):
        namespaces = orjson.loads(namespaces)
    if isinstance(clusters, str):
        clusters = orjson.loads(clusters)
    if role is None:
        role = Role.ADMIN if is_superuser else Role.VIEWER
    if isinstance(groups, str):
        groups = orjson.loads(groups)
    row = TokenRow(token_id, last_used, user_id, expires, bool(may_impersonate))
    if groups:
        # An identity provider's user: the union of the grant and the group bindings
        # (principal_for), looked up on every request, never remembered (its bindings are not
        # in the fingerprint).
        user = get_user_model().objects.select_related("kube_profile").get(pk=user_id)
        return principal_for(user), row
    principal = Principal(username, role, tuple(namespaces or ()), clusters=tuple(clusters or ()), user_id=user_id)
    if fingerprint is not None:
        if len(_recent) >= RECENT_TOKENS:
            _recent.clear()
        _recent[token_hash] = (principal, row, fingerprint)
    return principal, row


def _aware(value):
    if isinstance(value, str):  # SQLite may hand back text...
        value = ApiToken._meta.get_field("last_used").to_python(value)
    if value is not None and timezone.is_naive(value):  # ...or a naive UTC datetime
        value = value.replace(tzinfo=dt_timezone.utc)
    return value


def _db_time(value):
    """A datetime parameter for raw SQL, as the ORM would send it to this database."""
    return ApiToken._meta.get_field("expires").get_db_prep_value(value, connection)


def bearer_principal(token: str):
    """(Principal, row) for a bearer token: an identity provider's JWT when
    KUBEDASH_AUTHENTICATION_CONFIG names its issuer (access/jwt_authn.py), else a kubedash
    token; None when neither accepts it."""
    if jwt_authn.issuers() and jwt_authn.looks_like_jwt(token):
        try:
            return jwt_authn.principal(token)
        except jwt_authn.TokenRefused as exc:
            log.info("bearer JWT refused: %s", exc)
            return None
    return token_principal(hash_token(token))


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        found = bearer_principal(token.strip())
        if found is None:
            raise AuthenticationFailed("Unauthorized")   # the API answers it with a 401 Status
        principal, row = found
        if isinstance(row, TokenRow):
            touch_last_used(ApiToken, row)
        return principal, row

    def authenticate_header(self, request):
        return 'Bearer realm="kubedash"'


class KubeSessionAuthentication(SessionAuthentication):
    """Browser sessions (the dashboard's own fetches); CSRF is enforced for writes."""

    def authenticate(self, request):
        result = super().authenticate(request)
        if result is None:
            return None
        user, auth = result
        return principal_for(user), auth

    def enforce_csrf(self, request):
        # Check the Django request: DRF's own would parse the body for a form token through
        # our empty parser list (415 for every JSON write); Django's reads only form bodies
        # and otherwise takes the X-CSRFToken header.
        return super().enforce_csrf(getattr(request, "_request", request))


"""Authentication (bearer tokens, browser sessions) and the one place roles are enforced."""
from __future__ import annotations

import functools
import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta
from datetime import timezone as dt_timezone

import orjson
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.db.models import Q
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, SessionAuthentication

from .models import ApiToken, Profile, Role, hash_token

log = logging.getLogger(__name__)

READ_VERBS = frozenset({"get", "list", "watch"})


SHARE = "share"           # the role of a share link's visitor (not a user role)
SHARE_VERB = "share"      # creating share links: editors and admins, within their own scope


@dataclass(frozen=True)
class Principal:
    """Who is asking and what they may do; attached to request.user by authentication.

    One class for everyone: users (a role, optional namespace limits) and share links (role
    "share", one kind, optionally one namespace, plus a label selector objects must match).
    """

    username: str
    role: str
    namespaces: tuple[str, ...] = ()   # empty: all namespaces
    kinds: tuple[str, ...] = ()        # empty: all kinds (share links: the one kind shared)
    label_selector: str = ""           # share links: only objects matching it
    share_id: int | None = None        # share links: the ShareLink row
    is_authenticated: bool = True

    @property
    def is_share(self) -> bool:
        return self.role == SHARE

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN

    def can(self, verb: str, namespace: str | None, kind: str | None = None) -> bool:
        """The one place roles are enforced (API, pages, forms, websockets).

        `kind` is required for principals limited to kinds (share links): without it, or
        with another kind, the answer is no - so a caller that forgets it fails closed.
        """
        if self.kinds and kind not in self.kinds:
            return False
        if self.namespaces and (namespace is None or namespace not in self.namespaces):
            # Like a namespaced RoleBinding: no cluster-wide reads, nothing outside the list.
            return False
        if verb in READ_VERBS:
            return True
        return self.role in (Role.ADMIN, Role.EDITOR)

    def selector(self):
        """This principal's own label selector (parsed), or None when it has none."""
        if not self.label_selector:
            return None
        from dashboard.kube.selectors import parse_label_selector

        return parse_label_selector(self.label_selector)

    def narrow(self, selector):
        """A page's label selector ANDed with this principal's own (a share link's)."""
        own = self.selector()
        if own is None:
            return selector
        if selector is None or selector.empty:
            return own
        from dashboard.kube.selectors import LabelSelector

        return LabelSelector(own.requirements + selector.requirements,
                             nothing=own.matches_nothing or selector.matches_nothing)

    def sees(self, kind: str, obj: dict) -> bool:
        """May this principal read this very object (kind, namespace and labels)?"""
        meta = obj.get("metadata") or {}
        if not self.can("get", meta.get("namespace"), kind):
            return False
        own = self.selector()
        return own is None or own.matches(meta.get("labels") or {})


def principal_for(user) -> Principal:
    profile = getattr(user, "kube_profile", None)
    if profile is None:
        role = Role.ADMIN if user.is_superuser else Role.VIEWER
        return Principal(user.get_username(), role)
    return Principal(user.get_username(), profile.role, tuple(profile.namespaces or ()))


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


@functools.cache
def _token_sql() -> str:
    user_model = get_user_model()
    return (f"SELECT t.id, t.last_used, u.{user_model.USERNAME_FIELD}, u.is_superuser, p.role, p.namespaces "
            f"FROM {ApiToken._meta.db_table} t JOIN {user_model._meta.db_table} u ON u.id = t.user_id "
            f"LEFT JOIN {Profile._meta.db_table} p ON p.user_id = u.id "
            "WHERE t.token_hash = %s AND t.revoked = %s AND u.is_active = %s")


def token_principal(token_hash: str) -> tuple[Principal, TokenRow] | None:
    """One query per API request: the token's user, role and namespace limits.

    Plain SQL because this runs on every API call, and the ORM's query building for the
    three-table join was half of a Lease renewal's CPU.
    """
    with connection.cursor() as cursor:
        cursor.execute(_token_sql(), [token_hash, False, True])
        hit = cursor.fetchone()
    if hit is None:
        return None
    token_id, last_used, username, is_superuser, role, namespaces = hit
    if isinstance(last_used, str):  # SQLite may hand back text...
        last_used = ApiToken._meta.get_field("last_used").to_python(last_used)
    if last_used is not None and timezone.is_naive(last_used):  # ...or a naive UTC datetime
        last_used = last_used.replace(tzinfo=dt_timezone.utc)
    if isinstance(namespaces, str):
        namespaces = orjson.loads(namespaces)
    if role is None:
        role = Role.ADMIN if is_superuser else Role.VIEWER
    return Principal(username, role, tuple(namespaces or ())), TokenRow(token_id, last_used)


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        found = token_principal(hash_token(token.strip()))
        if found is None:
            from dashboard.kube.errors import unauthorized
            raise unauthorized()
        principal, row = found
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


def ensure_user(username: str, role: str) -> object:
    """Create the user if needed and set its role."""
    if role not in Role.values:
        raise ValueError(f"role must be one of {', '.join(Role.values)}")
    User = get_user_model()
    with transaction.atomic():
        user, _ = User.objects.get_or_create(username=username)
        Profile.objects.update_or_create(user=user, defaults={"role": role})
        if role == Role.ADMIN and not user.is_staff:
            user.is_staff = user.is_superuser = True
            user.save(update_fields=["is_staff", "is_superuser"])
    return user


def new_secret() -> str:
    """256 random bits, URL-safe, never starting with "-" (so `--token X` parses in any CLI)."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


def issue_token(username: str, role: str, name: str = "") -> str:
    """Create the user if needed, set its role, and return a new bearer token (stored hashed)."""
    user = ensure_user(username, role)
    token = new_secret()
    ApiToken.objects.create(user=user, name=name, token_hash=hash_token(token))
    return token

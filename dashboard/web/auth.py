"""Authentication (bearer tokens, browser sessions) and the one place roles are enforced."""
from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction
from rest_framework.authentication import BaseAuthentication, SessionAuthentication

from .models import ApiToken, Profile, Role, hash_token

READ_VERBS = frozenset({"get", "list", "watch"})


@dataclass(frozen=True)
class Principal:
    """Who is asking and what they may do; attached to request.user by authentication."""

    username: str
    role: str
    namespaces: tuple[str, ...] = ()   # empty: all namespaces
    is_authenticated: bool = True

    def can(self, verb: str, namespace: str | None) -> bool:
        if self.namespaces and (namespace is None or namespace not in self.namespaces):
            # Like a namespaced RoleBinding: no cluster-wide reads, nothing outside the list.
            return False
        if verb in READ_VERBS:
            return True
        return self.role in (Role.ADMIN, Role.EDITOR)


def principal_for(user) -> Principal:
    profile = getattr(user, "kube_profile", None)
    if profile is None:
        role = Role.ADMIN if user.is_superuser else Role.VIEWER
        return Principal(user.get_username(), role)
    return Principal(user.get_username(), profile.role, tuple(profile.namespaces or ()))


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request):
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        row = (ApiToken.objects.select_related("user", "user__kube_profile")
               .filter(token_hash=hash_token(token.strip()), revoked=False, user__is_active=True).first())
        if row is None:
            from dashboard.kube.errors import unauthorized
            raise unauthorized()
        return principal_for(row.user), row

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


def issue_token(username: str, role: str, name: str = "") -> str:
    """Create the user if needed, set its role, and return a new bearer token (stored hashed)."""
    user = ensure_user(username, role)
    token = secrets.token_urlsafe(32)
    ApiToken.objects.create(user=user, name=name, token_hash=hash_token(token))
    return token

"""Users and their API tokens: create a user with a role, issue a token (stored hashed), and
check that a token still works."""
from __future__ import annotations

import secrets
from types import SimpleNamespace

from django.contrib.auth import get_user_model
from django.db import transaction
from rest_framework.exceptions import AuthenticationFailed

from .authentication import BearerTokenAuthentication
from .models import ApiToken, Profile, Role, hash_token


def ensure_user(username: str, role: str) -> object:
    """Create the user if needed and set its role (its staff flags follow: access/signals.py)."""
    if role not in Role.values:
        raise ValueError(f"role must be one of {', '.join(Role.values)}")
    User = get_user_model()
    with transaction.atomic():
        user, _ = User.objects.get_or_create(username=username)
        Profile.objects.update_or_create(user=user, defaults={"role": role})
    user.refresh_from_db(fields=["is_staff", "is_superuser"])
    return user


def new_secret() -> str:
    """256 random bits, URL-safe, never starting with "-" (so `--token X` parses in any CLI)."""
    while True:
        token = secrets.token_urlsafe(32)
        if not token.startswith("-"):
            return token


def issue_token(username: str, role: str, name: str = "", *, impersonate: bool = False) -> str:
    """Create the user if needed, set its role, and return a new bearer token (stored hashed).
    impersonate: the token may send Impersonate-* headers (access/impersonation.py)."""
    return create_token(ensure_user(username, role), name, impersonate=impersonate)


def create_token(user, name: str = "", *, impersonate: bool = False) -> str:
    """A new bearer token for an existing user (stored hashed): the plaintext exists only in
    this return value."""
    token = new_secret()
    ApiToken.objects.create(user=user, name=name, token_hash=hash_token(token), may_impersonate=impersonate)
    return token


def token_works(token: str, username: str, role: str) -> bool:
    """Whether the token authenticates as username with role, through the API's own check."""
    request = SimpleNamespace(META={"HTTP_AUTHORIZATION": f"Bearer {token}"})
    try:
        result = BearerTokenAuthentication().authenticate(request)
    except AuthenticationFailed:
        return False
    return result is not None and result[0].username == username and result[0].role == role

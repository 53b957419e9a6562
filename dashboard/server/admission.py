"""What a request may send before the application runs: which bodies may be read at all.

At the end of a request's headers the HTTP protocol (dashboard.server.protocol) asks
anonymous_refusal (401 for a body that may be large from a request with no credentials),
credentials_valid for such a body (the token or session, checked on the fast lane's thread),
then size_refusal (413 for a declared length over the limit), before it reads any of it.
cluster_paths.py asks caller_principal who is asking before a followed cluster's name is answered.
"""
from __future__ import annotations

from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.db import DatabaseError
from django.http.cookie import parse_cookie
from rest_framework.exceptions import AuthenticationFailed

from dashboard.access.authentication import BearerTokenAuthentication
from dashboard.access.principals import Principal, principal_for
from dashboard.access.sessions import reload_session, session_user
from dashboard.kube.errors import ApiError, request_entity_too_large, unauthorized
from dashboard.kube.paths import API_ROOTS


def body_limit(path: str) -> int:
    """The largest body a request to this path may send: the API's (kube's 3 MiB), or a page
    form's (Django's DATA_UPLOAD_MAX_MEMORY_SIZE)."""
    return settings.KUBEDASH_MAX_BODY_BYTES if path.startswith(API_ROOTS) else settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def needs_credentials(length: int | None) -> bool:
    """Is the body (length None: chunked, unknown) large enough that its sender must prove who
    it is before the server reads it?"""
    return length is None or length > settings.KUBEDASH_ANONYMOUS_BODY_BYTES


def _credentials(headers) -> tuple[str | None, str | None]:
    """The bearer Authorization header and the session key a request carries, if any."""
    bearer = session = None
    for name, value in headers:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                bearer = value.decode("latin-1")
        elif name == b"cookie":
            session = parse_cookie(value.decode("latin-1")).get(settings.SESSION_COOKIE_NAME) or session
    return bearer, session


def anonymous_refusal(headers, length: int | None) -> ApiError | None:
    """401 for a body that may be large from a request with no token or session at all."""
    if needs_credentials(length) and _credentials(headers) == (None, None):
        return unauthorized()
    return None


def size_refusal(path: str, length: int | None) -> ApiError | None:
    """413 for a declared length over the path's limit (asked once the sender is known, as
    kube-apiserver authenticates before it looks at the body)."""
    limit = body_limit(path)
    if length is not None and length > limit:
        return request_entity_too_large(limit)
    return None


def caller_principal(headers) -> Principal | None:
    """The Principal behind a request's token or session, None without valid credentials (for
    answers that depend on who asks before the request is read: cluster_paths.py). Runs on a
    lane's thread; a DatabaseError is the caller's to answer."""
    bearer, session = _credentials(headers)
    if bearer:
        try:
            found = BearerTokenAuthentication().authenticate(SimpleNamespace(META={"HTTP_AUTHORIZATION": bearer}))
        except AuthenticationFailed:
            return None
        return found[0] if found else None
    if session:
        user = session_user(reload_session(session))
        return principal_for(user) if user is not None else None
    return None


def credentials_valid(headers) -> bool:
    """Does the request's token (access's one-query check) or session belong to someone?
    Runs on a lane's thread. Django authenticates the request again once it is read; this
    only decides whether it is read."""
    bearer, session = _credentials(headers)
    try:
        if bearer:
            try:
                return BearerTokenAuthentication().authenticate(SimpleNamespace(META={"HTTP_AUTHORIZATION": bearer})) is not None
            except AuthenticationFailed:
                return False
        if session:
            return SESSION_KEY in import_module(settings.SESSION_ENGINE).SessionStore(session)
    except DatabaseError:
        return True   # unknown: read the (bounded) body and let Django's own check answer
    return False

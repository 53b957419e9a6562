"""ApiError and metav1.Status: every failed request ends here.

Messages follow kube-apiserver's wording so that kubectl prints what a user of a real
cluster would see.
"""
from __future__ import annotations

import json
from typing import Any

import orjson
from django.http import HttpResponse
from django.views import defaults

# Field error reasons (k8s.io/apimachinery/pkg/util/validation/field).
REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
FORBIDDEN = "FieldValueForbidden"
DUPLICATE = "FieldValueDuplicate"
TOO_MANY = "FieldValueTooMany"
TOO_LONG = "FieldValueTooLong"


class Verbatim(str):
    """A bad value already written as kube prints it (e.g. Go's `[]string{"x"}`)."""


def _fmt_value(value: Any) -> str:
    """Render a bad value the way field.ErrorList does (Go %#v-ish)."""
    if isinstance(value, Verbatim):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


class Cause(dict):
    """One StatusCause: {"reason", "message", "field"} with kube-apiserver's message text."""

    def __init__(self, reason: str, field: str, detail: str = "", value: Any = ...):
        label = {
            REQUIRED: "Required value",
            INVALID: "Invalid value",
            NOT_SUPPORTED: "Unsupported value",
            FORBIDDEN: "Forbidden",
            DUPLICATE: "Duplicate value",
            TOO_MANY: "Too many",
            TOO_LONG: "Too long",
        }.get(reason, reason)
        text = label
        if value is not ...:
            text += ": " + _fmt_value(value)
        if detail:
            text += ": " + detail
        super().__init__(reason=reason, message=text, field=field)

    @property
    def text(self) -> str:
        return f"{self['field']}: {self['message']}" if self["field"] else self["message"]


def required(field: str, detail: str = "") -> Cause:
    return Cause(REQUIRED, field, detail)


def invalid(field: str, value: Any, detail: str) -> Cause:
    return Cause(INVALID, field, detail, value)


def not_supported(field: str, value: Any, allowed: list[str]) -> Cause:
    return Cause(NOT_SUPPORTED, field, "supported values: " + ", ".join(f'"{a}"' for a in allowed), value)


def forbidden(field: str, detail: str) -> Cause:
    return Cause(FORBIDDEN, field, detail)


def duplicate(field: str, value: Any) -> Cause:
    return Cause(DUPLICATE, field, "", value)


def too_many(field: str, actual: int, limit: int) -> Cause:
    return Cause(TOO_MANY, field, f"must have at most {limit} items", actual)


class ApiError(Exception):
    """An error answered as a metav1.Status. Raise it anywhere below a view."""

    # A refusal of a body over a decoding limit no honest client meets (codec.refused_body):
    # the view answering it marks its request's context (views.status_response), for the tarpit.
    limits_hit = False

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict:
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _qualified(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def bad_request(message: str, details: dict | None = None) -> ApiError:
    return ApiError(400, "BadRequest", message, details)


def unauthorized(message: str = "Unauthorized") -> ApiError:
    return ApiError(401, "Unauthorized", message)


READS = frozenset({"GET", "HEAD", "OPTIONS"})   # (methods that change nothing)


def internal_error(method: str) -> ApiError:
    """An error of ours. Most happen before a write commits, but not all (an answer that fails to
    encode after it): a write's message says what is known, not what is likely."""
    if method in READS:
        return ApiError(500, "InternalError", "an internal error occurred; nothing was changed")
    return ApiError(500, "InternalError", "an internal error occurred; the request may or may not have been "
                    "applied: read the object before trying again")


def database_lost(method: str) -> ApiError:
    """The database connection broke under the request (the database restarted or failed over,
    its session was ended): 503 with Retry-After, which client-go retries. A write's outcome is
    then unknown (the commit may have been made), and the message says so."""
    message = ("the database connection was lost while serving the request; try again" if method in READS else
               "the database connection was lost while the request was being written: it may or may not have "
               "been applied; read the object before writing it again")
    return ApiError(503, "ServiceUnavailable", message, headers={"Retry-After": "1"})


def forbidden_request(user: str, verb: str, group: str, plural: str, namespace: str | None,
                      why: str = "") -> ApiError:
    scope = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    msg = (f'{plural}{"." + group if group else ""} is forbidden: User "{user}" cannot {verb} '
           f'resource "{plural}" in API group "{group}"{scope}')
    if why:
        msg += ": " + why
    return ApiError(403, "Forbidden", msg, {"group": group, "kind": plural})


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(group, plural)} "{name}" not found',
                    {"name": name, "group": group, "kind": plural})


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource",
                    {})


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{_qualified(group, plural)} "{name}" already exists',
                    {"name": name, "group": group, "kind": plural})


def conflict(group: str, plural: str, name: str, why: str) -> ApiError:
    return ApiError(409, "Conflict",
                    f'Operation cannot be fulfilled on {_qualified(group, plural)} "{name}": {why}',
                    {"name": name, "group": group, "kind": plural})


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


def invalid_object(group: str, kind: str, name: str, causes: list[Cause]) -> ApiError:
    qualified = f"{kind}.{group}" if group else kind
    msg = f'{qualified} "{name}" is invalid: '
    texts = [c.text if isinstance(c, Cause) else f"{c['field']}: {c['message']}" for c in causes]
    msg += texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return ApiError(422, "Invalid", msg,
                    {"name": name, "group": group, "kind": kind, "causes": [dict(c) for c in causes]})


def method_not_allowed(method: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def unsupported_media_type(content_type: str, supported: list[str]) -> ApiError:
    return ApiError(415, "UnsupportedMediaType",
                    'the body of the request was in an unknown format - accepted media types include: '
                    + ", ".join(supported) + (f' (got "{content_type}")' if content_type else ""))


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def request_entity_too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge", f"the request body is larger than {limit} bytes")




# Django's last-resort handlers (urls.handler400 / handler500): on API paths they still answer
# a metav1.Status, e.g. for a request whose Host header is not allowed.
API_PREFIXES = ("/api", "/apis", "/openapi", "/version")


def _django_fallback(request, code: int, reason: str, message: str, default):
    if request.path.startswith(API_PREFIXES):
        body = ApiError(code, reason, message).status()
        return HttpResponse(orjson.dumps(body), status=code, content_type="application/json")
    return default()


def handler400(request, exception=None):
    return _django_fallback(request, 400, "BadRequest", "the request could not be processed: "
                            "check the Host header and the request line",
                            lambda: defaults.bad_request(request, exception))


def handler500(request):
    err = internal_error(request.method)
    return _django_fallback(request, err.code, err.reason, err.message, lambda: defaults.server_error(request))

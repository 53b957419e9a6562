"""Django's request handlers as kubedash's lanes run them, and one request through them.

Django's ASGI handler runs each request in a fresh ThreadSensitiveContext: two new threads and
a new database connection per request, and one thread hop per sync middleware. For a request
that is answered in one piece (everything but watch streams), kubedash instead runs Django's
sync handler, middleware and view together in one call (respond: on its lane's thread, on the
event loop, or in the heavy child), whose database connection persists. Streams (watches) keep
the ASGI path (SharedThreadASGIHandler), with their sync work on the fast lane's thread.

Bearer-token API calls skip the middleware only a browser session needs (sessions, CSRF,
messages, share-link confinement: lanes.wants_full_middleware): APIWSGIHandler and
APIStreamsHandler run settings.KUBEDASH_API_MIDDLEWARE only, and the resource paths of
bearer-token calls are dispatched directly (kube.views.serve_direct).
"""
from __future__ import annotations

import io
import sys

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, RequestAborted
from django.utils.module_loading import import_string

from dashboard.compat.django import (CallersThreadASGIHandler, HookedWSGIHandler, exception_response,
                                     install_middleware_chain, view_step)
from dashboard.kube import context
from dashboard.kube.views import bearer_route, serve_direct

from .observe import note_user


class SharedThreadASGIHandler(CallersThreadASGIHandler):
    """Django's ASGI handler without the per-request thread: sync work goes to the thread of
    the ThreadSensitiveContext the caller opened (a lane's)."""

    async def get_response_async(self, request):
        response = await super().get_response_async(request)
        note_user(request)   # the request log's user (dashboard.server.observe)
        return response


class LaneWSGIHandler(HookedWSGIHandler):
    """Django's WSGI handler, run on a lane's thread.

    An async view that has a sync equivalent for requests that are not streams (the list
    paths' `collection_or_watch`: watches never reach this handler, see is_stream) is
    swapped for it: otherwise Django would run the async view through async_to_sync, a
    round trip through the event loop and back to this thread for every list and create.
    """

    def view_for(self, view):
        return getattr(view, "sync_view", view)

    def get_response(self, request):
        response = super().get_response(request)
        note_user(request)   # the request log's user (dashboard.server.observe)
        return response


MIDDLEWARE_HOOKS = ("process_view", "process_template_response", "process_exception")


def load_api_middleware(handler, asynchronous: bool = False) -> None:
    """Django's loader reads settings.MIDDLEWARE; this chain is KUBEDASH_API_MIDDLEWARE, built
    the same way for what that list may hold: middleware that only wrap the response (no view,
    template or exception hooks: refused at start-up), around the handler's view step (sync or
    async)."""
    chain = exception_response(view_step(handler, asynchronous))
    for path in reversed(settings.KUBEDASH_API_MIDDLEWARE):
        middleware = import_string(path)(chain)
        if any(hasattr(middleware, hook) for hook in MIDDLEWARE_HOOKS):
            raise ImproperlyConfigured(f"{path}: the API's middleware may not have {', '.join(MIDDLEWARE_HOOKS)}")
        chain = exception_response(middleware)
    install_middleware_chain(handler, chain)


class APIStreamsHandler(SharedThreadASGIHandler):
    """Watch streams of bearer-token clients: only settings.KUBEDASH_API_MIDDLEWARE, as for their
    other calls (APIWSGIHandler). A session's store, messages and lazy user cost ~2 KB for
    as long as each watch stays open, and a bearer-token watch uses none of them."""

    def load_middleware(self, is_async=False):
        load_api_middleware(self, asynchronous=True)


class APIWSGIHandler(LaneWSGIHandler):
    """The lane handler with only settings.KUBEDASH_API_MIDDLEWARE (security headers); the
    resource paths of bearer-token calls are dispatched directly (kube.views.serve_direct)."""

    def load_middleware(self, is_async=False):
        load_api_middleware(self)

    def direct_response(self, request):
        route = bearer_route(request.method, request.META.get("HTTP_AUTHORIZATION", ""), request.path_info)
        return serve_direct(request, *route) if route is not None else None


def respond(handler, environ) -> tuple[int, list, bytes]:
    """One request through a WSGI handler here: (status, headers, body); what else it found out
    is in its context (environ's, kube/context.py: limits hit, the log's user). A streamed
    response (a whole list) is returned unread as the body, for its caller to read and close."""
    started = {}

    def start_response(status, headers, exc_info=None):
        started["status"] = int(status.split(" ", 1)[0])
        started["headers"] = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]

    try:
        result = handler(environ, start_response)
        if getattr(result, "streaming", False):
            return started["status"], started["headers"], result   # read (and closed) by the caller
        try:
            content = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()
    except RequestAborted:
        return 400, [], b""
    return started["status"], started["headers"], content


def wsgi_environ(scope, body: bytes) -> dict:
    """The WSGI environ of an ASGI HTTP scope whose whole body is `body`, with the scope's
    request context (which learns that its streamed response is sent as it is read:
    dispatch.LanedHTTP._stream, or heavy.RemoteStream's)."""
    ctx = context.in_scope(scope)
    ctx.streams = True
    server = scope.get("server") or ("localhost", 80)
    client = scope.get("client") or ("", 0)
    path = scope["path"]
    root = scope.get("root_path", "")
    environ = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": root.encode("utf-8").decode("latin-1"),
        "PATH_INFO": (path[len(root):] if root and path.startswith(root) else path).encode("utf-8").decode("latin-1"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1]),
        "REMOTE_ADDR": str(client[0]),
        "REMOTE_PORT": str(client[1]),
        "SERVER_PROTOCOL": "HTTP/" + scope.get("http_version", "1.1"),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "CONTENT_LENGTH": str(len(body)),
        context.KEY: ctx,
    }
    for raw_name, raw_value in scope.get("headers", []):
        name = raw_name.decode("latin-1").upper().replace("-", "_")
        value = raw_value.decode("latin-1")
        if name == "CONTENT_TYPE":
            environ["CONTENT_TYPE"] = value
            continue
        if name == "CONTENT_LENGTH":
            continue
        key = "HTTP_" + name
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    return environ

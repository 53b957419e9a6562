"""How HTTP requests reach Django under Daphne: through a lane (dashboard.server.lanes).

Django's ASGI handler runs each request in a fresh ThreadSensitiveContext: two new threads and
a new database connection per request, and one thread hop per sync middleware. For a request
that is answered in one piece (everything but watch streams), kubedash instead runs Django's
sync handler, middleware and view together, in ONE hop to a thread of the request's lane,
whose database connection persists. Streams (watches) keep the ASGI path, with their sync
work (authentication, the starting list) on the fast lane's thread.

Bearer-token API calls skip the middleware only a browser session needs (sessions, CSRF,
messages, share-link confinement): see lanes.wants_full_middleware.
"""
from __future__ import annotations

import io
import sys

import orjson
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.wsgi import WSGIHandler
from django.test.utils import override_settings

from dashboard.kube.errors import ApiError, request_entity_too_large

from .lanes import LaneFull, is_stream, lanes, wants_full_middleware
from .observe import note_user

RETRY_AFTER_SECONDS = 1
JSON_HEADERS = [(b"content-type", b"application/json")]


class SharedThreadASGIHandler(ASGIHandler):
    """Django's ASGI handler without the per-request thread: sync work goes to the thread of
    the ThreadSensitiveContext the caller opened (a lane's)."""

    async def __call__(self, scope, receive, send):
        await self.handle(scope, receive, send)

    async def get_response_async(self, request):
        response = await super().get_response_async(request)
        note_user(request)   # the request log's user (dashboard.server.observe)
        return response


class LaneWSGIHandler(WSGIHandler):
    """Django's WSGI handler, run on a lane's thread.

    An async view that has a sync equivalent for requests that are not streams (the list
    paths' `collection_or_watch`: watches never reach this handler, see is_stream) is
    swapped for it: otherwise Django would run the async view through async_to_sync, a
    round trip through the event loop and back to this thread for every list and create.
    """

    def resolve_request(self, request):
        match = super().resolve_request(request)
        sync_view = getattr(match.func, "sync_view", None)
        if sync_view is not None:
            match.func = sync_view
        return match

    def get_response(self, request):
        response = super().get_response(request)
        note_user(request)   # the request log's user (dashboard.server.observe)
        return response


class APIWSGIHandler(LaneWSGIHandler):
    """The lane handler with only settings.KUBEDASH_API_MIDDLEWARE (security headers)."""

    def load_middleware(self, is_async=False):
        # Built once, at import, before the server takes requests: the override is not seen
        # by any request.
        with override_settings(MIDDLEWARE=settings.KUBEDASH_API_MIDDLEWARE):
            super().load_middleware(is_async)


class LanedHTTP:
    """ASGI app: buffered HTTP requests through Django's WSGI handler, on their lane's thread."""

    def __init__(self, streaming_app):
        self.streaming_app = streaming_app
        self.full = LaneWSGIHandler()
        self.api = APIWSGIHandler()

    async def __call__(self, scope, receive, send):
        lane_set = lanes()
        if is_stream(scope):
            async with ThreadSensitiveContext(executor=lane_set.fast.executor):
                return await self.streaming_app(scope, receive, send)
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
                return await self._status(send, request_entity_too_large(settings.KUBE_MAX_BODY_BYTES))
            if not message.get("more_body", False):
                break
        lane = lane_set.for_request(scope["method"], scope["path"], scope.get("query_string", b""))
        scope.get("kubedash.record", {})["lane"] = lane.name
        try:
            lane.admit()
        except LaneFull:
            return await self._status(send, too_many_requests(), [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])
        try:
            handler = self.full if wants_full_middleware(scope["path"], scope.get("headers", ())) else self.api
            status, headers, content = await sync_to_async(self._respond, thread_sensitive=False, executor=lane.executor)(
                handler, self._environ(scope, bytes(body)))
        finally:
            lane.release()
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    @staticmethod
    async def _status(send, err: ApiError, headers: list = ()) -> None:
        await send({"type": "http.response.start", "status": err.code, "headers": JSON_HEADERS + list(headers)})
        await send({"type": "http.response.body", "body": orjson.dumps(err.status())})

    @staticmethod
    def _respond(handler, environ) -> tuple[int, list, bytes]:
        started = {}

        def start_response(status, headers, exc_info=None):
            started["status"] = int(status.split(" ", 1)[0])
            started["headers"] = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]

        try:
            result = handler(environ, start_response)
            try:
                content = b"".join(result)
            finally:
                if hasattr(result, "close"):
                    result.close()
        except RequestAborted:
            return 400, [], b""
        return started["status"], started["headers"], content

    @staticmethod
    def _environ(scope, body: bytes) -> dict:
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
            "kubedash.record": scope.get("kubedash.record"),
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


class PagesLane:
    """ASGI wrapper for websockets (live pages): their sync work runs on the pages lane's
    thread, never on the fast lane's."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        async with ThreadSensitiveContext(executor=lanes().pages):
            return await self.app(scope, receive, send)


def too_many_requests() -> ApiError:
    return ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                    {"retryAfterSeconds": RETRY_AFTER_SECONDS})

"""How HTTP requests reach Django under Daphne: through a lane (dashboard.server.lanes).

Django's ASGI handler runs each request in a fresh ThreadSensitiveContext: two new threads and
a new database connection per request, and one thread hop per sync middleware. For a request
that is answered in one piece (everything but watch streams), kubedash instead runs Django's
sync handler, middleware and view together, in ONE hop to a thread of the request's lane,
whose database connection persists. Streams (watches) keep the ASGI path, with their sync
work (authentication, the starting list) on the fast lane's thread.

Bearer-token API calls skip the middleware only a browser session needs (sessions, CSRF,
messages, share-link confinement): see lanes.wants_full_middleware.

Bodies are limited before they are read: at the end of a request's headers the HTTP protocol
(dashboard.server.protocol) asks anonymous_refusal (401 for a body that may be large from a
request with no credentials), credentials_valid for such a body (the token or session, checked
on the fast lane's thread), then size_refusal (413 for a declared length over the limit),
before it reads any of it. The body then arrives here in one piece, and stays one copy down to Django.
"""
from __future__ import annotations

import asyncio
import contextvars
import io
import logging
import sys
from importlib import import_module
from types import SimpleNamespace

import orjson
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.core.exceptions import ImproperlyConfigured, RequestAborted
from django.core.handlers.exception import convert_exception_to_response
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.wsgi import WSGIHandler
from django.db import DatabaseError, connection
from django.http.cookie import parse_cookie
from django.utils.module_loading import import_string
from rest_framework.exceptions import AuthenticationFailed

from dashboard.access.authentication import BearerTokenAuthentication
from dashboard.access.principals import Principal, principal_for
from dashboard.access.sessions import reload_session, session_user
from dashboard.kube import codec
from dashboard.kube.errors import ApiError, request_entity_too_large, unauthorized
from dashboard.kube.paths import API_ROOTS
from dashboard.kube.views import INLINE, STREAMS, bearer_route, serve_direct

from . import heavy, tarpit
from .green import GreenLane, loop_hidden
from .lanes import LaneFull, is_stream, lanes, wants_full_middleware
from .observe import note_user
from .streams import abort, current_request, unsent_bytes

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 1
# A streamed response (a whole list) reads its next piece only once the client has taken all
# but this much of what was sent: a slow reader costs this, not the list.
STREAM_BACKLOG_BYTES = 1024 * 1024
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


MIDDLEWARE_HOOKS = ("process_view", "process_template_response", "process_exception")


def load_api_middleware(handler, get_response) -> None:
    """Django's loader reads settings.MIDDLEWARE; this chain is KUBEDASH_API_MIDDLEWARE, built
    the same way for what that list may hold: middleware that only wrap the response (no view,
    template or exception hooks: refused at start-up), around get_response (sync or async)."""
    handler._view_middleware, handler._template_response_middleware, handler._exception_middleware = [], [], []
    chain = convert_exception_to_response(get_response)
    for path in reversed(settings.KUBEDASH_API_MIDDLEWARE):
        middleware = import_string(path)(chain)
        if any(hasattr(middleware, hook) for hook in MIDDLEWARE_HOOKS):
            raise ImproperlyConfigured(f"{path}: the API's middleware may not have {', '.join(MIDDLEWARE_HOOKS)}")
        chain = convert_exception_to_response(middleware)
    handler._middleware_chain = chain


class APIStreamsHandler(SharedThreadASGIHandler):
    """Watch streams of bearer-token clients: only settings.KUBEDASH_API_MIDDLEWARE, as for their
    other calls (APIWSGIHandler). A session's store, messages and lazy user cost ~2 KB for
    as long as each watch stays open, and a bearer-token watch uses none of them."""

    def load_middleware(self, is_async=False):
        load_api_middleware(self, self._get_response_async)


class APIWSGIHandler(LaneWSGIHandler):
    """The lane handler with only settings.KUBEDASH_API_MIDDLEWARE (security headers); the
    resource paths of bearer-token calls are dispatched directly (kube.views.serve_direct)."""

    def load_middleware(self, is_async=False):
        load_api_middleware(self, self._get_response)

    def _get_response(self, request):
        route = bearer_route(request.method, request.META.get("HTTP_AUTHORIZATION", ""), request.path_info)
        if route is not None:
            return serve_direct(request, *route)
        return super()._get_response(request)


class LanedHTTP:
    """ASGI app: buffered HTTP requests through Django's WSGI handler, on their lane's thread
    (or, for the fast lane's bearer-token resource requests on SQLite, on the loop: LoopInline)."""

    def __init__(self, streaming_app):
        self.streaming_app = streaming_app
        self.api_streams = APIStreamsHandler()
        self.full = LaneWSGIHandler()
        self.api = APIWSGIHandler()
        self.inline = LoopInline()

    async def __call__(self, scope, receive, send):
        lane_set = lanes()
        if is_stream(scope):
            app = self.streaming_app if wants_full_middleware(scope["path"], scope.get("headers", ())) else self.api_streams
            async with ThreadSensitiveContext(executor=lane_set.fast.streams):
                return await app(scope, receive, send)
        # The protocol has bounded the body already and hands it over in one message: keep
        # that one bytes object (joining only if a server sends it in pieces).
        chunks, size, limit = [], 0, body_limit(scope["path"])
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return await self._status(send, request_entity_too_large(limit))
            if chunk:
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        lane = lane_set.for_request(scope["method"], scope["path"], scope.get("query_string", b""))
        scope.get("kubedash.record", {})["lane"] = lane.name
        try:
            lane.admit()
        except LaneFull:
            return await self._status(send, too_many_requests(), [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])
        try:
            if lane is lane_set.fast:
                lane_set.fast_started()
            elif lane is lane_set.background:
                await lane_set.yield_to_fast()   # (an Event write lets waiting renewals go first)
            handler = self.full if wants_full_middleware(scope["path"], scope.get("headers", ())) else self.api
            answer = None
            if lane in (lane_set.fast, lane_set.background) and self.inline.takes(scope, bare=handler is self.api):
                answer = await self.inline.serve(self._respond, handler, lambda: self._environ(scope, body),
                                                 writes=scope["method"] not in ("GET", "HEAD"))
                if answer is not None:
                    scope.get("kubedash.record", {})["lane"] = f"{lane.name}-loop"
            if answer is None and lane is lane_set.expensive and lane_set.heavy and heavy.takes(scope):
                answer = await lane_set.heavy.respond(heavy.FULL if handler is self.full else heavy.API,
                                                      self._environ(scope, body), lane.executor)
                scope.get("kubedash.record", {})["lane"] = f"{lane.name}-process"
            if answer is None:   # (a fresh environ: an inline try has read the body)
                answer = await sync_to_async(self._respond, thread_sensitive=False, executor=lane.executor)(
                    handler, self._environ(scope, body))
            status, headers, content, over_limit = answer
            if not isinstance(content, bytes):   # a streamed response: sent as it is read, in its lane
                return await self._stream(send, status, headers, content, lane)
        finally:
            lane.release()
        if over_limit:   # a body no honest client sends: answered slowly, off the lane
            await tarpit.hold("body")
        if not any(name.lower() == b"content-length" for name, _ in headers):
            # The whole body is here: say its length (else Twisted frames it as chunks).
            headers.append((b"content-length", b"%d" % len(content)))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    @staticmethod
    async def _stream(send, status: int, headers: list, response, lane) -> None:
        """Send a streaming response (kube.views.stream_list) piece by piece: each piece is read
        on the lane's thread (its database work stays off the loop; a heavy.RemoteStream's on
        the loop: the child does that work), the next one while this
        one is sent, as long as the client has taken all but STREAM_BACKLOG_BYTES of what was
        sent (at most two pieces and that backlog are held). No Content-Length: HTTP/1.1
        chunks. A failure after the headers cannot become a Status any more: the connection is
        cut."""
        remote = getattr(response, "aclose", None) is not None   # (heavy.RemoteStream: read on the loop)
        read = (lambda _pieces, _end: response.read()) if remote else \
            sync_to_async(next, thread_sensitive=False, executor=lane.executor)
        request = current_request.get()
        pieces = None if remote else iter(response)
        reading = None   # the next piece, being read
        try:
            await send({"type": "http.response.start", "status": status, "headers": headers})
            reading = asyncio.ensure_future(read(pieces, None))
            while (piece := await reading) is not None:
                # Read ahead before sending: otherwise the lane's thread idles for every piece
                # while the loop takes its result, sends it and hands it the next read.
                reading = None
                behind = unsent_bytes(request)
                if 0 <= behind <= STREAM_BACKLOG_BYTES:
                    reading = asyncio.ensure_future(read(pieces, None))
                await send({"type": "http.response.body", "body": piece, "more_body": True})
                del piece
                while (behind := unsent_bytes(request)) > STREAM_BACKLOG_BYTES:
                    await asyncio.sleep(0.002)
                if behind < 0:
                    return   # the client went away
                if reading is None:
                    reading = asyncio.ensure_future(read(pieces, None))
            reading = None
            await send({"type": "http.response.body", "body": b""})
        except Exception:   # noqa: BLE001 - the status is out: end the response broken, not complete
            log.exception("streamed response failed after its headers")
            abort(request)
        finally:
            if reading is not None:   # (the generator cannot be closed while it runs)
                await asyncio.wait([reading])
                if not reading.cancelled():
                    reading.exception()   # (retrieved: its failure, if any, is moot now)
            if remote:
                await response.aclose()
            else:
                await sync_to_async(response.close, thread_sensitive=False, executor=lane.executor)()

    @staticmethod
    async def _status(send, err: ApiError, headers: list = ()) -> None:
        body = orjson.dumps(err.status())
        await send({"type": "http.response.start", "status": err.code,
                    "headers": [*JSON_HEADERS, *headers, (b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})

    @staticmethod
    def _respond(handler, environ) -> tuple[int, list, bytes, bool]:
        """(status, headers, body, whether the body met a decoding limit: codec.over_limit, read
        here, in the context the handler ran in, whichever lane's)."""
        started = {}
        over_limit = codec.over_limit.set(False)

        def start_response(status, headers, exc_info=None):
            started["status"] = int(status.split(" ", 1)[0])
            started["headers"] = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]

        try:
            result = handler(environ, start_response)
            if getattr(result, "streaming", False):
                return started["status"], started["headers"], result, False   # read (and closed) by _stream
            try:
                content = b"".join(result)
            finally:
                if hasattr(result, "close"):
                    result.close()
        except RequestAborted:
            return 400, [], b"", False
        finally:
            hostile = codec.over_limit.get()
            codec.over_limit.reset(over_limit)
        return started["status"], started["headers"], content, hostile

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
            STREAMS: True,   # a streaming response is sent as it is read (_stream)
            "kubedash.cluster": scope.get("kubedash.cluster"),   # served under /clusters/<name>/ (read-only)
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


class LoopInline:
    """The fast lane's requests (a renewal, a GET of one object), run on
    the event loop itself instead of a hop to the lane's thread: no thread hand-over, no GIL
    ping-pong between the two (a fifth of a renewal's CPU).

    SQLite: as sync code, and only while it cannot wait: its connection waits neither for the
    writers' turn (kube/sqlite/base.py) nor in SQLite's busy handler, so a write that finds
    either taken at BEGIN gets "database is locked" before writing anything, and is run again
    on the lane's thread, which may wait. A write that sees the turn taken before it starts
    looks again a little later instead. The work runs (the loop hidden: Django's ORM refuses
    to run under a running loop) in one long-lived context, so it keeps one database connection.

    PostgreSQL: every request of the fast and background lanes (sessions' and followed
    clusters' too), each in a greenlet (green.GreenLane) whose round trips the loop waits for
    while it serves others; several at once, each with its own connection.

    KUBEDASH_INLINE_FAST_LANE=0 turns it off (the thread serves every request).
    """

    def __init__(self):
        engine = settings.DATABASES["default"]["ENGINE"]
        self.enabled = settings.KUBEDASH_INLINE_FAST_LANE and engine in ("dashboard.kube.sqlite", "dashboard.kube.postgresql")
        self.green = GreenLane(settings.KUBEDASH_FAST_LANE_THREADS) if self.enabled and engine.endswith("postgresql") else None
        self.context = contextvars.Context()

    def takes(self, scope, bare: bool) -> bool:
        """bare: the request needs no more than the API's middleware (bearer token)."""
        if not self.enabled:
            return False
        if self.green is not None:
            return True    # (each in a copy of its own context, as on a thread)
        if not bare or "kubedash.cluster" in scope:
            return False   # (a followed cluster's reads need the request's context: cluster_paths.py)
        authorization = next((v for n, v in scope.get("headers", ()) if n == b"authorization"), b"")
        return bearer_route(scope["method"], authorization.decode("latin-1"), scope["path"]) is not None

    # Another worker's write holds the turn (or SQLite's lock) for a few hundred µs: look again
    # after these pauses (the loop serves others meanwhile) before handing the request to the
    # thread, which waits.
    RETRY_SECONDS = (0.0002, 0.0004, 0.0008, 0.0016, 0.0032)

    async def serve(self, respond, handler, make_environ, *, writes: bool) -> tuple | None:
        """respond(handler, make_environ()) on the loop, or None: it would have waited."""
        if self.green is not None:
            answer = await self.green.serve(self._answer, respond, handler, make_environ, "green")
            return None if answer is WOULD_WAIT else answer
        answer = self.run(respond, handler, make_environ, writes)
        for pause in self.RETRY_SECONDS:
            if answer is not WOULD_WAIT:
                return answer
            await asyncio.sleep(pause)
            answer = self.run(respond, handler, make_environ, writes)
        return None if answer is WOULD_WAIT else answer

    def run(self, respond, handler, make_environ, writes: bool):
        with loop_hidden():
            return self.context.run(self._run, respond, handler, make_environ, writes)

    @staticmethod
    def _run(respond, handler, make_environ, writes):
        try:
            connection.never_wait()
            if writes and not connection.writers_turn_free():
                return WOULD_WAIT    # another writer has the turn: look again soon
        except DatabaseError:
            return None
        return LoopInline._answer(respond, handler, make_environ, "yes")

    @staticmethod
    def _answer(respond, handler, make_environ, mark: str):
        environ = make_environ()
        environ[INLINE] = mark   # (views: no streamed answers; a SQLite lock is "would wait")
        answer = respond(handler, environ)
        return WOULD_WAIT if environ[INLINE] == "would wait" else answer


WOULD_WAIT = object()   # LoopInline: the turn or SQLite's lock is taken right now


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


# --------------------------------------------------------------------------------------------
# Bodies limited before they are read (asked by dashboard.server.protocol after the headers)


def body_limit(path: str) -> int:
    """The largest body a request to this path may send: the API's (kube's 3 MiB), or a page
    form's (Django's DATA_UPLOAD_MAX_MEMORY_SIZE)."""
    return settings.KUBE_MAX_BODY_BYTES if path.startswith(API_ROOTS) else settings.DATA_UPLOAD_MAX_MEMORY_SIZE


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

"""How an HTTP request reaches Django under Daphne: through a lane (dashboard.server.lanes).

LanedHTTP takes the request's body (bounded already by the protocol, dashboard.server.admission),
picks its lane and admits it (429 when the lane is full), then answers it in one call of
Django's handler (handlers.respond): on the event loop when it cannot wait (inline.LoopInline),
in the heavy child (heavy.py), or in one hop to its lane's thread. A streamed response (a whole
list) is sent piece by piece as the client takes it. Watch streams keep Django's ASGI path.
"""
from __future__ import annotations

import asyncio
import logging

import orjson
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings

from dashboard.kube import context
from dashboard.kube.errors import ApiError, request_entity_too_large

from . import heavy, tarpit
from .admission import body_limit
from .handlers import APIStreamsHandler, APIWSGIHandler, LaneWSGIHandler, respond, wsgi_environ
from .inline import LoopInline
from .lanes import LaneFull, is_stream, lanes, wants_full_middleware
from .streams import abort, unsent_bytes

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 1
# A streamed response (a whole list) reads its next piece only once the client has taken all
# but this much of what was sent: a slow reader costs this, not the list.
STREAM_BACKLOG_BYTES = 1024 * 1024
JSON_HEADERS = [(b"content-type", b"application/json")]


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
        ctx = context.in_scope(scope)
        lane = lane_set.for_request(scope["method"], scope["path"], scope.get("query_string", b""))
        ctx.record["lane"] = lane.name
        if lane is lane_set.background and not lane_set.event_budget():
            return await self._status(send, events_over_budget(), [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())])
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
            if lane in (lane_set.fast, lane_set.background) and self.inline.takes(scope, ctx,
                                                                                  bare=handler is self.api):
                answer = await self.inline.serve(handler, lambda: wsgi_environ(scope, body), ctx,
                                                 writes=scope["method"] not in ("GET", "HEAD"))
                if answer is not None:
                    ctx.record["lane"] = f"{lane.name}-loop"
            if answer is None and lane is lane_set.expensive and lane_set.heavy and heavy.takes(scope, ctx):
                answer = await lane_set.heavy.respond(heavy.FULL if handler is self.full else heavy.API,
                                                      wsgi_environ(scope, body), lane.executor)
                ctx.record["lane"] = f"{lane.name}-process"
            if answer is None:   # (a fresh environ: an inline try has read the body)
                answer = await sync_to_async(respond, thread_sensitive=False, executor=lane.executor)(
                    handler, wsgi_environ(scope, body))
            status, headers, content = answer
            if not isinstance(content, bytes):   # a streamed response: sent as it is read, in its lane
                return await self._stream(send, status, headers, content, lane, ctx.stream)
        finally:
            lane.release()
        if ctx.limits_hit:   # a body no honest client sends: answered slowly, off the lane
            await tarpit.hold("body")
        if not any(name.lower() == b"content-length" for name, _ in headers):
            # The whole body is here: say its length (else Twisted frames it as chunks).
            headers.append((b"content-length", b"%d" % len(content)))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    @staticmethod
    async def _stream(send, status: int, headers: list, response, lane, request) -> None:
        """Send a streaming response (kube.views.stream_list) piece by piece: each piece is read
        on the lane's thread (its database work stays off the loop; a heavy.RemoteStream's on
        the loop: the child does that work), the next one while this
        one is sent, as long as the client has taken all but STREAM_BACKLOG_BYTES of what was
        sent (at most two pieces and that backlog are held). No Content-Length: HTTP/1.1
        chunks. A failure after the headers cannot become a Status any more: the connection is
        cut. request: the Twisted request it goes to (the request context's stream; None under
        another server)."""
        remote = getattr(response, "aclose", None) is not None   # (heavy.RemoteStream: read on the loop)
        read = (lambda _pieces, _end: response.read()) if remote else \
            sync_to_async(next, thread_sensitive=False, executor=lane.executor)
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


def events_over_budget() -> ApiError:
    rate = settings.KUBEDASH_EVENT_WRITES_PER_SECOND
    return ApiError(429, "TooManyRequests", f"too many Event writes: this server takes {rate:g} a second "
                    f"(KUBEDASH_EVENT_WRITES_PER_SECOND); try again after {RETRY_AFTER_SECONDS} s",
                    {"retryAfterSeconds": RETRY_AFTER_SECONDS})


def too_many_requests() -> ApiError:
    return ApiError(429, "TooManyRequests", "Too many requests, please try again later.",
                    {"retryAfterSeconds": RETRY_AFTER_SECONDS})

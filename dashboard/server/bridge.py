"""How HTTP requests reach Django under Daphne, tuned for the API's request rate.

Django's ASGI handler runs each request in a fresh ThreadSensitiveContext: two new threads and
a new database connection per request, and one thread hop per sync middleware. For a request
that is answered in one piece (everything but watch streams), kubedash instead runs Django's
sync handler, middleware and view together, in ONE hop to the single long-lived sync thread,
with its persistent database connection. Streams (watches) and websockets keep the ASGI path,
also without the per-request thread context.
"""
from __future__ import annotations

import io
import sys

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.wsgi import WSGIHandler
from django.core.exceptions import RequestAborted


class SharedThreadASGIHandler(ASGIHandler):
    """Django's ASGI handler without the per-request thread: sync work shares one thread."""

    async def __call__(self, scope, receive, send):
        await self.handle(scope, receive, send)


def is_stream(scope) -> bool:
    """Requests that may answer with a long stream: watches (?watch=... or /watch/ paths)."""
    return b"watch=" in scope.get("query_string", b"") or "/watch/" in scope["path"]


class OneHopHTTP:
    """ASGI app: buffered HTTP requests through Django's WSGI handler in one sync call."""

    def __init__(self, streaming_app):
        self.streaming_app = streaming_app
        self.wsgi = WSGIHandler()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or is_stream(scope):
            return await self.streaming_app(scope, receive, send)
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        status, headers, content = await sync_to_async(self._respond)(self._environ(scope, bytes(body)))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    def _respond(self, environ) -> tuple[int, list, bytes]:
        started = {}

        def start_response(status, headers, exc_info=None):
            started["status"] = int(status.split(" ", 1)[0])
            started["headers"] = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]

        try:
            result = self.wsgi(environ, start_response)
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

"""Real receivers on 127.0.0.1 for the notification tests: a webhook (HTTP) and an SMTP server."""
from __future__ import annotations

import hashlib
import hmac
import email
import json
import socket
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Webhook:
    """An HTTP receiver: records every POST (headers, body); answers 500 to the first `fail_first`,
    then 200. `received` are the bodies it accepted (2xx), `tries` every request."""

    def __init__(self, fail_first: int = 0, secret: bytes | None = None, port: int = 0, hold_first: bool = False):
        self.fail_first = fail_first
        # hold_first: the first request is read and recorded, then left unanswered until `release` is set.
        self.hold_first = hold_first
        self.held = threading.Event()
        self.release = threading.Event()
        self.secret = secret
        self.tries: list[tuple[dict, bytes]] = []
        self.received: list[dict] = []
        self.bad_signatures = 0
        self.lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with hook.lock:
                    hook.tries.append((dict(self.headers), body))
                    failing = len(hook.tries) <= hook.fail_first
                    if hook.secret is not None:
                        want = "sha256=" + hmac.new(hook.secret, body, hashlib.sha256).hexdigest()
                        if self.headers.get("X-Kubedash-Signature") != want:
                            hook.bad_signatures += 1
                            failing = True
                    if not failing:
                        hook.received.append(json.loads(body))
                    holding = hook.hold_first and len(hook.tries) == 1
                if holding:
                    hook.held.set()
                    hook.release.wait(60)
                    return
                self.send_response(500 if failing else 200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"no" if failing else b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def ids(self) -> list[str]:
        with self.lock:
            return [m["id"] for m in self.received]

    def states(self, rule: str | None = None) -> list[tuple[str, str]]:
        """(state, name) of each accepted message (of one rule)."""
        with self.lock:
            return [(m["state"], m["name"]) for m in self.received if rule is None or m["rule"] == rule]


def query(server, sql: str, params: tuple = ()) -> list[tuple]:
    """A read of a test server's SQLite database (what the delivery log and episodes hold)."""
    with sqlite3.connect(server.data_dir / "kubedash.sqlite3", timeout=30) as db:
        return db.execute(sql, params).fetchall()


class Mailbox:
    """An SMTP server (aiosmtpd) on 127.0.0.1: `messages` are the email.message.Message it accepted."""

    def __init__(self):
        from aiosmtpd.controller import Controller

        box = self
        self.messages = []

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                box.messages.append(email.message_from_bytes(envelope.content))
                return "250 OK"

        with socket.socket() as probe:   # (the controller's own check needs a port chosen first)
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)

    def __enter__(self):
        self.controller.start()
        return self

    def __exit__(self, *exc):
        self.controller.stop()

    def url(self, to="ops@example.com") -> str:
        """Apprise's mailto:// for this server: its host and port, `smtp=` the host to send through."""
        return f"mailto://127.0.0.1:{self.port}?smtp=127.0.0.1&from=kubedash@example.com&to={to}"

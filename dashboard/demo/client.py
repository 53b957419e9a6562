"""The simulator's HTTP client: the API over one keep-alive connection (Client, Response),
and the tally of what happened (Stats)."""
from __future__ import annotations

import http.client
import json
import ssl
import sys
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlsplit


@dataclass
class Response:
    status: int            # 0: no HTTP answer (connection refused, reset, timeout)
    body: Any              # parsed JSON, or the raw text / the exception message

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def reason(self) -> str:
        return self.body.get("reason", "") if isinstance(self.body, dict) else ""


@dataclass
class Stats:
    """Accepted writes, reads, 409s (normal for optimistic concurrency), and errors by kind."""

    log: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
    writes: int = 0
    reads: int = 0
    conflicts: int = 0
    errors: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)

    def error(self, kind: str, detail: str) -> None:
        """Count an error; log only the first of each kind, so a broken server is not a flood."""
        self.errors += 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        if self.by_kind[kind] == 1:
            self.log(f"simulator: {kind}: {detail} (further ones are counted, not logged)")

    def summary(self, seconds: float) -> str:
        return (f"simulator summary: writes={self.writes} conflicts={self.conflicts} "
                f"errors={self.errors} reads={self.reads} seconds={seconds:.1f}")


class Client:
    """The API over one persistent HTTP(S) connection, with a bearer token."""

    WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

    def __init__(self, server: str, token: str, stats: Stats, timeout: float = 15.0,
                 ca_file: str | None = None):
        parts = urlsplit(server)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--server must be an http:// or https:// URL, not {server!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.token = token
        self.stats = stats
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=ca_file) if self.https else None
        self.conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if self.conn is None:
            if self.https:
                self.conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                                        context=self.context)
            else:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return self.conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def raw(self, method: str, path: str, body: Any = None,
            content_type: str = "application/json") -> Response:
        """One request, no bookkeeping. A kept-alive connection the server closed meanwhile
        is reopened once; other network errors come back as status 0."""
        # The User-Agent names the field manager of the simulator's writes (kube derives it from
        # the agent's first segment), so pages' History reads "kubedash-simulator".
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json",
                   "User-Agent": "kubedash-simulator/0.1"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        for attempt in (1, 2):
            try:
                conn = self._connect()
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (http.client.RemoteDisconnected, http.client.CannotSendRequest,
                    BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if attempt == 2:
                    return Response(0, f"{type(exc).__name__}: {exc}")
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                return Response(0, f"{type(exc).__name__}: {exc}")
        if resp.getheader("Connection", "").lower() == "close":
            self.close()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode("utf-8", "replace")[:200]
        return Response(resp.status, parsed)

    def call(self, method: str, path: str, body: Any = None, *, what: str,
             expect: tuple[int, ...] = (), content_type: str = "application/json") -> Response:
        """A request the caller understands: 2xx and `expect` are normal, 409 is a conflict
        (counted apart: losing an optimistic-concurrency race is part of the game), anything
        else an error, logged once per kind."""
        resp = self.raw(method, path, body, content_type)
        if resp.ok:
            if method in self.WRITES:
                self.stats.writes += 1
            else:
                self.stats.reads += 1
        elif resp.status == 409:
            self.stats.conflicts += 1
        elif resp.status not in expect:
            if resp.status == 0:
                self.stats.error(f"{method} {what}: no response", str(resp.body))
            else:
                message = resp.body.get("message", "") if isinstance(resp.body, dict) else resp.body
                self.stats.error(f"{method} {what}: {resp.status} {resp.reason}".rstrip(), f"{message} [{path}]")
        return resp

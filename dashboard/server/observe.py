"""What each request did, for operators: kube-apiserver's request metrics, one JSON log line
per request, and an Audit-ID response header.

`Observed` wraps the HTTP application (dashboard.server.asgi): it names the request as
kube-apiserver's RequestInfo does (verb LIST/WATCH/GET/POST/..., group, version, resource,
subresource, scope, namespace, name), times it, counts it in `apiserver_request_total` and
`apiserver_request_duration_seconds` (kube's names, labels and buckets), keeps
`apiserver_longrunning_requests` for open watches, and writes the log line. It makes the
request's context (kube/context.py), whose record the line is made of: the dispatch adds what
only it knows (the lane), the views an impersonation, and the handlers the user (note_user).
`ObservedWebsocket` does the same for page websockets (a gauge of open ones, a line at close).

The log line never holds a token, an Authorization header, a cookie, a query string or a
share-link secret: share paths (/s/<secret>/) are redacted.
"""
from __future__ import annotations

import functools
import os
import time
import uuid
from urllib.parse import parse_qsl

import orjson
from django.conf import settings
from prometheus_client import Counter, Gauge, Histogram

from dashboard.compat.daphne import REQUEST
from dashboard.kube import context, registry
from dashboard.kube.context import RequestContext

from .logs import now

COMPONENT = "apiserver"
# kube-apiserver's request latency buckets (k8s.io/apiserver/pkg/endpoints/metrics).
DURATION_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15,
                    20, 30, 45, 60)
LABELS = ("verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component")

REQUESTS = Counter("apiserver_request_total",
                   "Counter of apiserver requests broken out for each verb, dry run value, group, version, "
                   "resource, scope, component, and HTTP response code.", LABELS + ("code",))
DURATION = Histogram("apiserver_request_duration_seconds",
                     "Response latency distribution in seconds for each verb, dry run value, group, version, "
                     "resource, subresource, scope and component.", LABELS, buckets=DURATION_BUCKETS)
LONGRUNNING = Gauge("apiserver_longrunning_requests",
                    "Gauge of all active long-running apiserver requests broken out by verb, group, version, "
                    "resource, scope and component.",
                    ("verb", "group", "version", "resource", "subresource", "scope", "component"),
                    multiprocess_mode="livesum")
WEBSOCKETS = Gauge("kubedash_websockets_open", "Open live-page websockets", multiprocess_mode="livesum")

_out = 1   # stdout
SHARE_PREFIX = "/s/"
WATCH_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})   # Go's strconv.ParseBool


def request_info(method: str, path: str, query: bytes) -> dict:
    """kube-apiserver's RequestInfo for a path (resource fields empty for non-resource paths)."""
    info = {"verb": method, "dry_run": "", "group": "", "version": "", "resource": "", "subresource": "",
            "scope": "", "namespace": "", "name": ""}
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        info["version"], rest = parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        info["group"], info["version"], rest = parts[1], parts[2], parts[3:]
    else:
        return info
    watch = bool(rest) and rest[0] == "watch"
    if watch:
        rest = rest[1:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        info["namespace"], rest = rest[1], rest[2:]
    if not rest:
        return info   # discovery
    info["resource"] = rest[0]
    if len(rest) > 1:
        info["name"] = rest[1]
    if len(rest) > 2:
        info["subresource"] = rest[2]
    info["scope"] = "resource" if info["name"] else "namespace" if info["namespace"] else "cluster"
    params = _params(query)
    if not watch and method == "GET" and params.get("watch") in WATCH_TRUE:
        watch = True
    if method in ("GET", "HEAD"):
        info["verb"] = "WATCH" if watch else ("GET" if info["name"] else "LIST")
    elif method == "DELETE" and not info["name"]:
        info["verb"] = "DELETECOLLECTION"
    if params.get("dryRun"):
        info["dry_run"] = params["dryRun"]
    return info


# Metric labels come from fixed sets (kube-apiserver's cleanVerb and its known resources): a
# client choosing a method, a path or a dryRun value must not choose new time series (200 junk
# anonymous requests grew /metrics from 34 to 234 series). The log line keeps what was asked.
VERBS = frozenset({"LIST", "WATCH", "GET", "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "HEAD",
                   "OPTIONS", "CONNECT"})
OTHER = "other"


@functools.cache
def _served() -> tuple[frozenset, frozenset, frozenset]:
    """(group, version) pairs, (group, version, resource) triples and subresources served."""
    resources = list(registry.all_resources())
    versions = {(r.group, r.version) for r in resources} | {("", "v1")}
    triples = {(r.group, r.version, r.plural) for r in resources}
    subresources = {""} | {"status" for r in resources if r.has_status}
    return frozenset(versions), frozenset(triples), frozenset(subresources)


def metric_labels(info: dict) -> tuple:
    """The request's LABELS values, each from a fixed set ("other" for anything not served)."""
    versions, triples, subresources = _served()
    verb = info["verb"] if info["verb"] in VERBS else OTHER
    group, version, resource, subresource = info["group"], info["version"], info["resource"], info["subresource"]
    if resource:
        if (group, version, resource) not in triples:
            group, version, resource = (group, version, OTHER) if (group, version) in versions else (OTHER,) * 3
        if subresource not in subresources:
            subresource = OTHER
    elif (group or version) and (group, version) not in versions:
        group, version = OTHER, OTHER
    dry_run = info["dry_run"] if info["dry_run"] in ("", "All") else OTHER
    return verb, dry_run, group, version, resource, subresource, info["scope"], COMPONENT


def _params(query: bytes) -> dict:
    if not query:
        return {}

    return dict(parse_qsl(query.decode("latin-1")))


def safe_path(path: str) -> str:
    """The path as logged: a share link's secret is its path segment."""
    if path.startswith(SHARE_PREFIX) and path != "/s/leave/":
        return SHARE_PREFIX + "REDACTED/"
    return path


def note_user(request) -> None:
    """Called by the handlers (handlers.py) once Django has answered the request: who asked (the
    principal the API acted as, else the session's user)."""
    ctx = context.of(request)
    user = ctx.principal or getattr(request, "user", None)
    if user is not None and getattr(user, "is_authenticated", False):
        # Impersonated: "user" is who really asked, as in kube's audit events.
        ctx.record["user"] = getattr(user, "impersonator", None) or getattr(user, "username", None) \
            or user.get_username()


def _write(line: dict) -> None:
    """One write(2) per line, not the logging module (a fifth of a renewal's cost): a line
    under PIPE_BUF is never interleaved with another process's, and nothing is buffered. Its
    first fields are the other log lines' (server/logs.py), at level INFO of kubedash.request."""
    if settings.KUBEDASH_REQUEST_LOG:
        try:
            os.write(_out, orjson.dumps({"ts": now(), "level": "INFO", "logger": "kubedash.request", **line}) + b"\n")
        except OSError:
            pass   # stdout gone (closed pipe): never fail a request over its log line


def client_of(scope) -> tuple[str, str]:
    """(client address, User-Agent) of an ASGI scope, for its log line: the address is the
    forwarded one when `serve --proxy-headers` trusts the proxy (Daphne puts it in the scope)."""
    client = scope.get("client") or ("", 0)
    agent = b""
    for name, value in scope.get("headers", ()):
        if name == b"user-agent":
            agent = value
            break
    return str(client[0] or ""), agent.decode("latin-1")[:256]


_children: dict = {}


def _child(metric, values: tuple):
    """metric.labels(*values), cached: prometheus_client's labels() costs more than the inc."""
    key = (id(metric), values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*values)
    return child


class Observed:
    """ASGI wrapper for HTTP: Audit-ID, metrics, the JSON log line."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        started = time.perf_counter()
        audit_id = str(uuid.uuid4())   # never one from the client, as kube-apiserver
        # The request's context, with the Twisted request it answers (Daphne's server hands it
        # over in the scope: compat/daphne.py Server).
        ctx = scope[context.KEY] = RequestContext(stream=scope.pop(REQUEST, None))
        record = ctx.record
        record["auditID"] = audit_id   # (what else is logged about the request names it: server/logs.py)
        info = request_info(scope["method"], scope["path"], scope.get("query_string", b""))
        code = 0
        audit_header = (b"audit-id", audit_id.encode())

        async def observed_send(message):
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
                message = {**message, "headers": [*message.get("headers", ()), audit_header]}
            await send(message)

        watch = info["verb"] == "WATCH"
        labels = metric_labels(info)
        gauge = None
        if watch:
            gauge = _child(LONGRUNNING, labels[:1] + labels[2:])
            gauge.inc()
        try:
            await self.app(scope, receive, observed_send)
        finally:
            client, agent = client_of(scope)
            line = {"auditID": audit_id, "user": record["user"], "verb": info["verb"],
                    "method": scope["method"], "path": safe_path(scope["path"]), "group": info["group"],
                    "resource": info["resource"], "subresource": info["subresource"],
                    "namespace": info["namespace"], "name": info["name"], "code": code,
                    "lane": record["lane"], "pid": os.getpid(), "client": client, "userAgent": agent}
            if "impersonatedUser" in record:
                line["impersonatedUser"] = record["impersonatedUser"]
                line["impersonatedGroups"] = record["impersonatedGroups"]
            if "paced" in record:   # (seconds the heavy child paused for the fast lane: heavy_child.Pacer)
                line["paced"] = record["paced"]
            stream = ctx.stream if watch else None
            if getattr(stream, "watch", None) is not None:
                # A watch that outlives its application (streams.py): counted and logged at its
                # end, holding only this meanwhile.
                stream.when_ended(functools.partial(_done, started, labels, gauge, line))
            else:
                _done(started, labels, gauge, line)


def _done(started: float, labels: tuple, gauge, line: dict) -> None:
    """A request is over: its metrics and its log line (`line`: all but the time and latency)."""
    if gauge is not None:
        gauge.dec()
    elapsed = time.perf_counter() - started
    _child(REQUESTS, (*labels, str(line["code"]))).inc()
    _child(DURATION, labels).observe(elapsed)
    _write({**line, "latency": round(elapsed, 6)})


def refused(method: str, path: str, query: bytes, code: int, started: float | None, client: str = "") -> bytes:
    """A request the protocol answered itself, before Django (414, 431, 401 or 413 decided from
    the headers): counted and logged like any other. Returns its Audit-ID header line."""
    audit_id = str(uuid.uuid4())
    info = request_info(method, path, query)
    labels = metric_labels(info)
    elapsed = time.perf_counter() - started if started is not None else 0.0
    _child(REQUESTS, (*labels, str(code))).inc()
    _child(DURATION, labels).observe(elapsed)
    _write({"auditID": audit_id, "user": "", "verb": info["verb"], "method": method,
            "path": safe_path(path), "group": info["group"], "resource": info["resource"],
            "subresource": info["subresource"], "namespace": info["namespace"], "name": info["name"],
            "code": code, "latency": round(elapsed, 6), "lane": "protocol", "pid": os.getpid(), "client": client,
            "userAgent": ""})
    return f"Audit-Id: {audit_id}\r\n".encode("latin-1")


_OPEN_SOCKETS: dict[int, dict] = {}   # the records of this process's open page sockets


def closed_by_protocol(code: int) -> None:
    """The protocol closed every open page socket itself (shutdown's 1012 "service restart"):
    their log lines give that code, not whatever the application sends after it (a consumer's
    own close when its subscription ends), which the socket never got."""
    for record in list(_OPEN_SOCKETS.values()):
        record.setdefault("close", code)


class ObservedWebsocket:
    """ASGI wrapper for page websockets: the open-socket gauge and a log line at close."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        started = time.perf_counter()
        audit_id = str(uuid.uuid4())
        # Channels' auth middleware copies the scope, so the user it finds is not visible here:
        # the consumer writes its principal's name into this record (the context is shared by
        # reference). "close": the first close code the socket got (its application's, or the
        # protocol's).
        ctx = scope[context.KEY] = RequestContext(record={"user": "", "auditID": audit_id})
        record = ctx.record

        async def observed_send(message):
            if message["type"] == "websocket.close":
                record.setdefault("close", message.get("code", 1000))
            await send(message)

        WEBSOCKETS.inc()
        _OPEN_SOCKETS[id(record)] = record
        try:
            await self.app(scope, receive, observed_send)
        finally:
            WEBSOCKETS.dec()
            _OPEN_SOCKETS.pop(id(record), None)
            client, agent = client_of(scope)
            _write({"auditID": audit_id, "user": record["user"],
                    "verb": "WEBSOCKET", "method": "GET", "path": safe_path(scope["path"]),
                    "code": record.get("close", 1000), "latency": round(time.perf_counter() - started, 6),
                    "lane": "pages", "pid": os.getpid(), "client": client, "userAgent": agent})

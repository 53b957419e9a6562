"""Watch streams over HTTP: `?watch=true` on list paths and the deprecated /watch/ paths.

Async views under Daphne: newline-delimited JSON events, headers sent at once, bookmarks on a
timer, a clean end at timeoutSeconds. Parameter rules follow kube-apiserver's ListOptions
validation for watches.
"""
from __future__ import annotations

import asyncio
import random
import time
from types import MappingProxyType

import orjson
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError
from django.http import StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from dashboard.access import impersonation
from dashboard.access.authentication import BearerTokenAuthentication, bearer_principal
from dashboard.access.models import username_subject
from dashboard.access.principals import principal_for
from dashboard.access.sessions import reload_session, session_deadline, session_user
from dashboard.compat.django import logged_already

from . import context, lists, revlog, schema_state, store
from .errors import ApiError, forbidden_request, gone, method_not_allowed, unauthorized
from .hub import CLOSE, Guard, LogEntry, Subscriber, hub, read_after
from .meta import now, parse_bool
from .registry import backend
from .metrics import WATCH_EVENTS, counted
from .tables import build_table, negotiate_output
from .views import acting, authorize, collection, impersonated, list_query, resolve, status_response

TICK = object()  # queue item from the stream's own timer: bookmark or deadline may be due

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
NOT_IMPERSONATING = MappingProxyType({})   # (the impersonation headers of a watch that sends none: one for all)


def _invalid_options(causes: list[tuple[str, str]]) -> ApiError:
    text = ", ".join(f"{f}: Forbidden: {m}" for f, m in causes)
    return ApiError(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: ' + (text if len(causes) == 1 else f"[{text}]"),
                    {"group": "meta.k8s.io", "kind": "ListOptions",
                     "causes": [{"reason": "FieldValueForbidden", "message": f"Forbidden: {m}", "field": f}
                                for f, m in causes]})


def _watch_options(request) -> dict:
    params = request.GET
    send_initial = params.get("sendInitialEvents")
    send_initial = None if send_initial in (None, "") else parse_bool(send_initial, "sendInitialEvents")
    bookmarks = parse_bool(params.get("allowWatchBookmarks"), "allowWatchBookmarks")
    match = params.get("resourceVersionMatch", "")
    causes = []
    if send_initial is not None:
        if match != "NotOlderThan":
            causes.append(("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
        if send_initial and not bookmarks:
            causes.append(("allowWatchBookmarks", "sendInitialEvents requires setting allowWatchBookmarks to true"))
    elif match:
        causes.append(("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
    if causes:
        raise _invalid_options(causes)
    timeout = params.get("timeoutSeconds", "")
    if timeout:
        if not timeout.isdigit():
            raise ApiError(400, "BadRequest", f'invalid value for query parameter "timeoutSeconds": "{timeout}" is not a non-negative integer')
        seconds = float(timeout) or None
    else:
        seconds = None
    if seconds is None:
        # kube-apiserver spreads watch lifetimes over [min, 2*min) so clients don't reconnect in step.
        low = settings.KUBEDASH_WATCH_MIN_TIMEOUT_SECONDS
        seconds = low * (1 + random.random())
    return {"send_initial": send_initial, "bookmarks": bookmarks, "timeout": seconds}


def _access(request):
    """Authenticate outside DRF (this view is async): bearer token, then session; then
    impersonation (views.acting: the principal in the request's context).

    Returns (principal, subjects, deadline, refresh): refresh() re-resolves the same credential
    now, as (principal or None, subjects, deadline) - what the stream's access Guard re-checks
    (it may raise the ApiError of an impersonation no longer allowed).
    """
    try:
        result = BearerTokenAuthentication().authenticate(Request(request))
    except AuthenticationFailed:
        raise unauthorized() from None
    # What refresh() re-reads of the request: its impersonation headers only (the stream
    # outlives the request, which must not be kept for it).
    asked = {k: v for k, v in request.META.items() if k.startswith(impersonation.PREFIX)} or NOT_IMPERSONATING
    if result is not None:
        bearer = request.META["HTTP_AUTHORIZATION"].partition(" ")[2].strip()

        def resolved(acting_as, row):
            return acting_as, _subjects(acting_as, f"token:{row.pk}", f"user:{row.user_id}"), \
                row.expires and row.expires.timestamp()

        def refresh():
            found = bearer_principal(bearer)   # (a JWT: until it expires, the stream's deadline)
            if found is None:   # revoked, expired, deleted, or its user deactivated
                return None, (), None
            return resolved(impersonated(asked, *found), found[1])

        return (*resolved(acting(request, *result), result[1]), refresh)
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        session_key = request.session.session_key

        def resolved_session(acting_as, user, deadline):
            return acting_as, _subjects(acting_as, f"user:{user.pk}"), deadline

        def refresh():
            session = reload_session(session_key)
            user = session_user(session)
            if user is None:
                return None, (), None
            return resolved_session(impersonated(asked, principal_for(user), None), user, session_deadline(session))

        return (*resolved_session(acting(request, principal_for(user), None), user, session_deadline(request.session)),
                refresh)
    raise unauthorized()


def _subjects(principal, *caller: str) -> tuple[str, ...]:
    """What the stream's access depends on: the caller's token and user, and the impersonated
    identity's: a kubedash user's (its role or limits may change), and by name (a name that is
    no user yet may become one, whose grant then applies: access/signals.py)."""
    if not principal.impersonator:
        return caller
    by_name = username_subject(principal.username)
    return (*caller, f"user:{principal.user_id}", by_name) if principal.user_id is not None else (*caller, by_name)


def _prepare(request, kw: dict, single_name: str | None, make_subscriber):
    """Everything that needs the database before the stream starts (runs in a thread).
    make_subscriber: the server's direct subscriber (its stream's watch_subscriber) or Subscriber."""
    res = resolve(kw)
    namespace = kw.get("namespace")
    _, subjects, deadline, refresh = _access(request)
    authorize(request, res, "watch", namespace)
    negotiate_output(request.META.get("HTTP_ACCEPT", ""))  # 406 before the stream starts, as for lists
    options = _watch_options(request)
    q = list_query(request, res, namespace, watch=True)
    q.limit, q.continue_token = None, ""
    if single_name is not None:
        q.names = (single_name,)
    sub = make_subscriber(resource=backend(res), namespace=q.namespace, names=q.names, label_selector=q.label_selector,
                          field_selector=q.field_selector)
    if sub.stateful:
        sub.matching = set()
    rv = q.resource_version
    initial: list[bytes] = []
    want_initial = options["send_initial"] if options["send_initial"] is not None else not rv
    if want_initial or (options["send_initial"] is not None and not rv):
        # Start from the current state (a consistent list), optionally sending it as ADDED events.
        q.resource_version, q.resource_version_match = None, ""
        page = lists.list_objects(backend(res), q)
        start = page.resource_version
        if want_initial:
            initial = page.items
        if sub.matching is not None:
            sub.matching.update(_keys(page.items))
    else:
        compacted = revlog.compacted_revision()
        if rv < compacted:
            raise gone(f"too old resource version: {rv} ({compacted})")
        _wait_for_revision(rv)
        start = rv
        if sub.matching is not None:
            q.resource_version, q.resource_version_match = rv, "Exact"
            sub.matching.update(_keys(lists.list_objects(backend(res), q).items))
    sub.start_rv = start
    return res, sub, options, initial, _guard(res, sub, refresh, subjects, deadline)


def _keys(items: list[bytes]) -> set[tuple[str, str]]:
    out = set()
    for text in items:
        m = orjson.loads(text)["metadata"]
        out.add((m.get("namespace", ""), m["name"]))
    return out


def _wait_for_revision(rv: int, seconds: float = 3.0) -> None:
    """A resourceVersion from the future: wait briefly for it, as kube-apiserver does."""
    deadline = time.monotonic() + seconds
    while True:
        current = store.current_revision()
        if rv <= current:
            return
        if time.monotonic() > deadline:
            raise ApiError(504, "Timeout", f"Too large resource version: {rv}, current: {current}",
                           {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                            "retryAfterSeconds": 1})
        time.sleep(0.1)


def _error_line(err: ApiError) -> bytes:
    return orjson.dumps({"type": "ERROR", "object": err.status()}) + b"\n"


class _Encoder:
    """Turns (type, event) into stream bytes: plain JSON, one-row Tables for `kubectl get -w`,
    or PartialObjectMetadata for metadata informers (`as=PartialObjectMetadata;g=meta.k8s.io`)."""

    __slots__ = ("res", "table", "partial", "first")

    def __init__(self, request, res):
        self.res = res
        shape, version = negotiate_output(request.META.get("HTTP_ACCEPT", ""))
        self.table = version if shape == "Table" else None
        self.partial = version if shape == "PartialObjectMetadata" else None
        self.first = True

    @property
    def shared(self):
        """A key naming this encoder's format when its lines depend on the event alone (the same
        bytes for every watcher with that key: they share them, hub.join), else None (a Table's
        rows: its first one has the columns, and their ages are computed as it is sent)."""
        if self.table is not None:
            return None
        return self.res.group, self.res.version, self.res.kind, self.partial

    def event(self, kind: str, ev: LogEntry) -> bytes:
        if self.table is None and self.partial is None:
            if self.res.storage is not None:   # another version of the stored kind
                return orjson.dumps({"type": kind, "object": self.res.from_storage(orjson.loads(ev.text))}) + b"\n"
            return ev.line(kind)
        return self._line(kind, ev.obj)

    def added(self, text: bytes) -> bytes:
        if self.table is None and self.partial is None:
            if self.res.storage is not None:
                return orjson.dumps({"type": "ADDED", "object": self.res.from_storage(orjson.loads(text))}) + b"\n"
            return b'{"type":"ADDED","object":' + text + b"}\n"
        return self._line("ADDED", orjson.loads(text))

    def _line(self, kind: str, obj: dict) -> bytes:
        if self.partial is not None:
            return orjson.dumps({"type": kind, "object": self._partial(obj["metadata"])}) + b"\n"
        table = build_table(self.res, [obj], include_object="Metadata", now=now(), version=self.table,
                            with_columns=self.first)
        self.first = False
        return orjson.dumps({"type": kind, "object": table}) + b"\n"

    def _partial(self, meta: dict) -> dict:
        return {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{self.partial}", "metadata": meta}

    def bookmark(self, rv: int, initial_end: bool = False) -> bytes:
        meta = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        obj = (self._partial(meta) if self.partial is not None
               else {"kind": self.res.kind, "apiVersion": self.res.api_version, "metadata": meta})
        return orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n"


def _guard(res, sub: Subscriber, refresh, subjects, deadline) -> Guard:
    """The stream's access Guard: when its token / user / session changes or expires, the
    stream re-checks it and, if it no longer works, ends with an ERROR event (401, or 403 when
    the principal may no longer watch this), as kube-apiserver ends a watch it cannot continue.
    The hub re-checks it about the cluster it subscribed to (/clusters/<name>/...)."""
    namespace = sub.namespace

    async def recheck():
        try:
            principal, subjects, deadline = await sync_to_async(refresh)()
        except ApiError as refused:   # an impersonation no longer allowed
            err = refused
        else:
            err = None if principal is not None else unauthorized()
        if err is None and not principal.can("watch", namespace):
            err = forbidden_request(principal.username, "watch", res.group, res.plural, namespace)
        if err is None:
            hub.guard(g, subjects, deadline)
            return
        hub.unguard(g)
        sub.close(_error_line(err))

    g = Guard(frozenset(subjects), deadline, recheck, sub.cluster)
    return g


class _Clock:
    """A stream's clock: periodic bookmarks (when asked for), the deadline, and one second
    before it the final bookmark. Small: a watch handed to its subscriber keeps it for its life."""

    __slots__ = ("enc", "deadline", "interval", "bookmarks", "final_bookmark", "next_bookmark")

    def __init__(self, enc: "_Encoder", options: dict, now: float):
        self.enc = enc
        self.deadline = now + options["timeout"]
        self.interval = settings.KUBEDASH_WATCH_BOOKMARK_SECONDS
        self.bookmarks = options["bookmarks"]
        self.final_bookmark = options["bookmarks"] and options["timeout"] >= 2
        self.next_bookmark = now + self.interval

    def wake_time(self) -> float:
        end = self.deadline - (1 if self.final_bookmark else 0)
        return min(end, self.next_bookmark) if self.bookmarks else end

    def __call__(self, now: float, quiet: bool = True) -> tuple[bytes | None, bool]:
        """A bookmark to send now (or None), and whether the stream has ended. Periodic
        bookmarks only when the stream is `quiet` (nothing else waiting to be sent)."""
        if now >= self.deadline - (1 if self.final_bookmark else 0):
            if self.final_bookmark:
                self.final_bookmark = False
                return self.enc.bookmark(hub.last_rv), now >= self.deadline
            return None, True
        if self.bookmarks and now >= self.next_bookmark and quiet:
            self.next_bookmark = now + self.interval
            return self.enc.bookmark(hub.last_rv), False
        return None, False


async def _stream(request, res, sub: Subscriber, options: dict, initial: list[bytes], guard: Guard | None = None,
                  generation: int = 0):
    enc = _Encoder(request, res)
    loop = asyncio.get_running_loop()
    if guard is not None:
        hub.guard(guard)
        if hub.access_generation != generation:
            await guard.recheck()   # a notice may have come between authenticating and guarding
    clock = _Clock(enc, options, loop.time())
    handed_over = False
    try:
        yield b""  # send the headers now: clients learn the watch is established
        # From here on, events go straight to the connection when the server allows it
        # (Daphne, HTTP/1.1 chunked): appended by the hub's dispatch, flushed by the hub (hub.py).
        direct = sub.attach(enc.event, WATCH_EVENTS.labels(res.group, res.version, res.kind), enc.shared)
        if initial:
            data = b"".join(enc.added(text) for text in initial)
            if direct:
                sub.sent(len(initial), len(data))
            yield data
        # Revisions committed between the starting point and registration come from the log.
        registered_at = hub.register(sub)
        after = sub.start_rv
        while after < registered_at:
            batch = await sync_to_async(read_after)(after, 2000, registered_at)
            if not batch:
                break
            lines = [enc.event(kind, ev) for ev in batch if sub.wants(ev) and (kind := sub.decide(ev))]
            if lines:
                data = b"".join(lines)
                if direct:
                    sub.sent(len(lines), len(data))
                yield data
            after = batch[-1].rv
        sub.release_buffer()   # (direct: queued for the hub's next flush, after what is yielded now)
        if options["send_initial"]:
            yield enc.bookmark(max(sub.start_rv, after), initial_end=True)
        clock.next_bookmark = loop.time() + clock.interval

        if direct:
            if sub.closed:   # (overflowed or refused while catching up)
                if sub.final is not None:
                    yield sub.final   # the final ERROR event (access ended)
                return
            # Caught up: the subscriber drives the rest (hub dispatch, its timer, close) and
            # ends the response itself; this request, its view and its task end now, and
            # their ~25 KB with them (docs/SERVING.md, "Watch streams").
            sub.hand_over(clock, guard)
            handed_over = True
            return

        # Without a direct writer: events come through the subscriber's queue.
        queue = sub.inbox()
        # One timer per stream, re-armed only when it fires (not one timeout per event): it
        # drops a TICK into the queue, which the loop below treats as "check the clock".
        def tick() -> None:
            try:
                queue.put_nowait((TICK, None))
            except asyncio.QueueFull:
                pass  # the stream is busy anyway; it checks the clock after each batch
            wake = clock.wake_time()
            timer[0] = loop.call_at(wake if wake > loop.time() else loop.time() + 0.5, tick)

        timer = [loop.call_at(clock.wake_time(), tick)]
        while True:
            kind, ev = await queue.get()
            lines = []
            while True:
                if kind is CLOSE:
                    if ev is not None:
                        lines.append(ev)   # the final ERROR event (access ended)
                    if lines:
                        yield b"".join(lines)
                    return
                if kind is not TICK:
                    lines.append(enc.event(kind, ev))
                if queue.empty():
                    break
                kind, ev = queue.get_nowait()  # send what has piled up in one write
            if lines:
                yield b"".join(lines)
            bookmark, ended = clock(loop.time(), quiet=queue.empty())
            if bookmark is not None:
                yield bookmark
            if ended:
                return
    finally:
        if not handed_over:
            if "timer" in locals():
                timer[0].cancel()
            sub.closed = True   # nothing more is written for it (a flush may be pending this turn)
            hub.unregister(sub)
            if guard is not None:
                hub.unguard(guard)


async def watch(request, single_name: str | None = None, **kw):
    try:
        await hub.start()
        generation = hub.access_generation
        stream = context.of(request).stream   # (kubedash's server: the watch writes to it directly)
        make_subscriber = stream.watch_subscriber if stream is not None else Subscriber
        res, sub, options, initial, guard = await sync_to_async(_prepare)(request, kw, single_name, make_subscriber)
    except ApiError as err:
        if err.code == 410:
            # Too old: kube-apiserver answers 200 and a single ERROR event, then closes.
            return StreamingHttpResponse(iter([_error_line(err)]), content_type="application/json")
        return status_response(err, request)
    except DatabaseError as err:
        unmigrated = await sync_to_async(schema_state.not_migrated_error)(err)
        if unmigrated is None:
            raise
        return logged_already(status_response(unmigrated, request))
    match = getattr(request, "resolver_match", None)
    if match is not None:
        # Every URL pattern tried before this one (~70 small lists, 2.5 KB), kept as long as
        # the request, which a watch keeps open for minutes: nothing reads it after routing.
        match.tried = []
    stream = _stream(request, res, sub, options, initial, guard, generation)
    response = StreamingHttpResponse(counted(stream, res), content_type="application/json")
    response["Cache-Control"] = "no-cache, private"
    return response


@csrf_exempt  # the DRF view it hands writes to enforces CSRF for session (browser) clients
async def collection_or_watch(request, **kw):
    """List paths: `?watch=true` (Go ParseBool) streams, anything else is the list/create view."""
    try:
        wants_watch = request.method == "GET" and parse_bool(request.GET.get("watch"), "watch")
    except ApiError as err:
        return status_response(err, request)
    if wants_watch:
        return await watch(request, **kw)
    return await sync_to_async(collection)(request, **kw)


# What a handler that never serves streams may call instead (dashboard.server.handlers).
collection_or_watch.sync_view = collection


@csrf_exempt
async def watch_path(request, name: str | None = None, **kw):
    """The deprecated /watch/... paths (a name narrows it to one object)."""
    if request.method != "GET":
        return status_response(method_not_allowed(request.method), request)
    return await watch(request, single_name=name, **kw)

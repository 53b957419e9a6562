"""One request's context: what the layers a request passes through tell each other.

The server's outermost layer (server/observe.py) makes one RequestContext per request and
carries it in the ASGI scope, and from there in the WSGI environ, under one key (KEY). Django
code reaches it through `of(request)`, ASGI code through `in_scope(scope)`; nothing else is
kept for a request beside the call chain. Work that is not a request (the follower,
maintenance, management commands, tests) gets a default context (local, no server around it).

The cluster is also a context variable (access/clusters.py), for the code that cannot take an
argument (Django's managers, a model field's default, template tags): `within_cluster` sets
both, at each entry point (an API path under /clusters/<name>/, a page's ?cluster=, a page
socket), and the hub enters a channel's cluster for its re-checks itself (hub.Guard). It is the
only context variable: the moment a page is as of (`?at=`, `at` below) is the context's, and the
code that needs it takes it as an argument (a template tag: from the template's context).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dashboard.access import clusters

KEY = "kubedash.context"   # the one scope and environ key


def _record() -> dict:
    return {"user": "", "lane": ""}


@dataclass(eq=False, slots=True)
class RequestContext:
    # Which cluster the request is about, and whether it came by /clusters/<name>/
    # (server/cluster_paths.py: read-only, "local" too).
    cluster: str = clusters.LOCAL
    cluster_path: bool = False
    # Who the request acts as, once the API authenticated it (kube/views.py acting): what
    # authorize() asks, and the request log's user (server/observe.py note_user).
    principal: Any = None
    # The request log's record (server/observe.py): the dispatch adds the lane, the views an
    # impersonation asked for, the heavy child how long it paused.
    record: dict = field(default_factory=_record)
    # Run on the event loop (server/inline.py): no streamed answers; and would_wait, SQLite's
    # lock was taken: nothing was written, run it again on the lane's thread.
    inline: bool = False
    would_wait: bool = False
    # The server sends a streamed response as it is read (server/dispatch.py, heavy.py).
    streams: bool = False
    # The Twisted request the response goes to, when kubedash's server serves it
    # (server/protocol.py LimitedRequest): a watch's direct subscriber writes to it
    # (watch_subscriber(**Subscriber's fields)), a streamed list asks how much is unsent.
    stream: Any = None
    # The body met a decoding limit no honest client meets (codec.OverLimit): the server
    # answers slowly (server/tarpit.py). Marked where the refusal is answered.
    limits_hit: bool = False
    # A followed cluster's writer (follow/writes.py) for the pages' writes in a cluster that
    # takes them from this user (web/edit_views.py editor_view): handed to the store.
    write_through: Any = None
    # A page as of a past moment (`?at=`, issue 38): its kube/asof.At, set by web/timetravel.py
    # while the request runs within asof.pinned(at) (None: live). The views hand it on to what
    # reads it (queries, lists, cluster_scope.moment, links); a streamed body read after the
    # pinned block pins it again itself (web/export.py).
    at: Any = None

    def portable(self) -> RequestContext:
        """What another process can take (server/heavy.py's child): plain data only."""
        return RequestContext(cluster=self.cluster, cluster_path=self.cluster_path, record=self.record,
                              streams=self.streams)

    @contextmanager
    def within_cluster(self, name: str):
        """Inside: the request is about cluster `name` (and so are the ORM's managers)."""
        self.cluster = name
        with clusters.within(name):
            yield

    def enter_cluster(self, name: str) -> None:
        """The rest of this task is about cluster `name` (a page socket's consumer)."""
        self.cluster = name
        clusters.enter(name)


def in_scope(scope: dict) -> RequestContext:
    """An ASGI request's context (one made here when no server layer made it: a bare app)."""
    ctx = scope.get(KEY)
    if ctx is None:
        ctx = scope[KEY] = RequestContext()
    return ctx


def of(request) -> RequestContext:
    """A Django request's context: its environ's (WSGI), else its scope's (ASGI), else a
    default one (Django's test client)."""
    meta = request.META
    ctx = meta.get(KEY)
    if ctx is None:
        scope = getattr(request, "scope", None)
        ctx = meta[KEY] = in_scope(scope) if scope is not None else RequestContext()
    return ctx

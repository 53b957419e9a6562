"""One context per request (kube/context.py), and no request state kept beside the call chain.

server/inline.py answers the fast lane's SQLite requests on the event loop in one long-lived
contextvars.Context: whatever a request left there, the next one would find. Here requests that
leave as much behind as a request can (an impersonation for the log, a body over a decoding limit
for the tarpit, SQLite's lock taken) are served that way one after another, and each must start
from a context of its own.
"""
from __future__ import annotations

import sqlite3

import orjson
import pytest
from django.db import connection

from dashboard.access import clusters
from dashboard.access.tokens import issue_token
from dashboard.kube import context, storage
from dashboard.kube.codec import MAX_DEPTH
from dashboard.server.handlers import APIWSGIHandler, respond, wsgi_environ
from dashboard.server.inline import WOULD_WAIT, LoopInline

LEASES = "/apis/coordination.k8s.io/v1/namespaces/team/leases"


def scope(method, path, token, headers=()):
    return {"type": "http", "method": method, "path": path, "query_string": b"",
            "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {token}".encode()),
                        (b"content-type", b"application/json"), *headers],
            "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 40000)}


def lease(rv=None, holder="a"):
    meta = {"name": "one", "namespace": "team", **({"resourceVersion": rv} if rv else {})}
    return orjson.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                         "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}})


@pytest.fixture
def inline(transactional_db, settings):
    if storage.backend().loop_mode != "inline":
        pytest.skip("the event loop serves SQLite's requests in one long-lived context; PostgreSQL's each in its own")
    settings.KUBEDASH_INLINE_FAST_LANE = True
    served = LoopInline()
    try:
        yield served
    finally:
        served.context.run(connection.close)   # (its own connection: the next test's database is flushed)


def test_requests_served_inline_on_sqlite_leave_nothing_to_the_next(inline):
    handler = APIWSGIHandler()
    admin = issue_token("admin-c", "admin", impersonate=True)
    editor = issue_token("editor-c", "editor")

    def serve(method, path, token, body=b"", headers=()):
        request = scope(method, path, token, headers)
        ctx = context.in_scope(request)
        answer = inline.run(handler, lambda: wsgi_environ(request, body), ctx, writes=method != "GET")
        return answer, ctx, request

    (status, _, body), _, _ = serve("POST", LEASES, admin, lease())
    assert status == 201, body
    rv = orjson.loads(body)["metadata"]["resourceVersion"]

    # A body nested past the limit, impersonating: the tarpit's mark and the log's impersonation.
    deep = b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1)
    impersonating = [(b"impersonate-user", b"someone"), (b"impersonate-group", b"kubedash:role:editor")]
    (status, _, _), hostile, _ = serve("PUT", f"{LEASES}/one", admin, deep, impersonating)
    assert status == 400
    assert hostile.limits_hit and hostile.record["impersonatedUser"] == "someone"

    # The next request, another caller's, finds none of it.
    (status, _, body), plain, _ = serve("PUT", f"{LEASES}/one", editor, lease(rv, holder="b"))
    assert status == 200, body
    assert not plain.limits_hit and "impersonatedUser" not in plain.record
    assert plain.principal.username == "editor-c" and not plain.inline and not plain.would_wait
    rv = orjson.loads(body)["metadata"]["resourceVersion"]

    # SQLite's lock taken by another writer: nothing written, the request would wait; run again on
    # a thread (as dispatch.py does), with the same context, it is served as any thread's request.
    other = sqlite3.connect(connection.settings_dict["NAME"])
    other.execute("BEGIN IMMEDIATE")
    try:
        answer, waiting, request = serve("PUT", f"{LEASES}/one", editor, lease(rv, holder="c"))
    finally:
        other.rollback()
        other.close()
    assert answer is WOULD_WAIT and waiting.would_wait and not waiting.inline
    status, _, body = respond(handler, wsgi_environ(request, lease(rv, holder="c")))
    assert status == 200, body

    # And the long-lived context itself holds no request's state: no kubedash context variable
    # was set in it (the cluster is the one there is: requests about a followed cluster are not
    # served there).
    assert not [var.name for var in inline.context if var.name.startswith("kubedash")]
    assert inline.context.run(clusters.current) == clusters.LOCAL

"""Direct dispatch (kube.views.serve_direct): bearer-token calls to resource paths skip Django's
URL resolver and DRF's dispatch. They must be answered exactly as the resolved path answers
them: the same status, body, content type and headers, for successes and for every error.

Each request goes through the server's own handler (dashboard/server/handlers.py, as Daphne's
lanes call it) twice: once as served (direct) and once with direct dispatch turned off.
"""
from __future__ import annotations

import orjson
import pytest

from dashboard.access.tokens import issue_token
from dashboard.kube import views
from dashboard.server.handlers import APIWSGIHandler, respond, wsgi_environ

LEASES = "/apis/coordination.k8s.io/v1/namespaces/team/leases"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
PARTIAL = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"


class Resolved(APIWSGIHandler):
    """The same handler and middleware, with every path through Django's resolver and DRF."""

    def direct_response(self, request):
        return None


@pytest.fixture
def handlers(db):
    # As Django's test client does: the request signals must not close the test's connection
    # (it holds the test's transaction).
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield APIWSGIHandler(), Resolved()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def call(handler, method, path, body=b"", token="", headers=(), query=b""):
    all_headers = [(b"host", b"127.0.0.1")]
    if token:
        all_headers.append((b"authorization", f"Bearer {token}".encode()))
    all_headers += [(k.encode(), v.encode()) for k, v in headers]
    scope = {"type": "http", "method": method, "path": path, "query_string": query, "headers": all_headers,
             "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 40000)}
    status, head, content = respond(handler, wsgi_environ(scope, body))
    if not isinstance(content, bytes):   # a streamed list (the dispatch sends it as it is read)
        response, content = content, b"".join(content)
        response.close()
    head = {k.decode().lower(): v.decode() for k, v in head}
    head.pop("allow", None)   # DRF lists the view's methods; kube-apiserver sends no Allow header
    return status, head, content


def lease(name, rv=None, holder="a"):
    meta = {"name": name, "namespace": "team"}
    if rv:
        meta["resourceVersion"] = rv
    return orjson.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                         "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}})


JSON = [("content-type", "application/json")]


def ageless(answer):
    """A Table's Age cells blanked: the two calls may fall on either side of a second."""
    status, head, body = answer
    if body.startswith(b'{"kind":"Table"'):
        table = orjson.loads(body)
        ages = [i for i, column in enumerate(table["columnDefinitions"]) if column["name"] == "Age"]
        for row in table["rows"]:
            for i in ages:
                row["cells"][i] = None
        body = orjson.dumps(table)
    return status, head, body


def test_direct_dispatch_answers_every_request_as_the_resolved_path(handlers):
    direct, resolved = handlers
    admin, viewer = issue_token("admin-d", "admin"), issue_token("viewer-d", "viewer")
    status, _, body = call(direct, "POST", LEASES, lease("one"), admin, JSON)
    assert status == 201, body
    rv = orjson.loads(body)["metadata"]["resourceVersion"]
    one = f"{LEASES}/one"

    # Requests that change nothing (reads, refusals, dry runs): both paths see the same state.
    cases = [
        ("GET", one, b"", admin, (), b""),
        ("GET", one, b"", admin, (), b"pretty=true"),
        ("HEAD", one, b"", admin, (), b""),
        ("GET", one, b"", admin, [("accept", TABLE)], b""),
        ("GET", one, b"", admin, [("accept", PARTIAL)], b""),
        ("GET", one, b"", admin, [("accept", "application/yaml")], b""),
        ("GET", one, b"", admin, [("accept", "text/html")], b""),             # 406
        ("GET", f"{LEASES}/missing", b"", admin, (), b""),                    # 404
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/team/nothings/x", b"", admin, (), b""),
        ("GET", f"{one}/status", b"", admin, (), b""),                        # Lease has no status
        ("GET", one, b"", "not-a-token", (), b""),                            # 401
        ("GET", LEASES, b"", admin, (), b""),
        ("GET", LEASES, b"", admin, (), b"limit=1"),
        ("GET", LEASES, b"", admin, [("accept", TABLE)], b""),
        ("GET", "/apis/coordination.k8s.io/v1/leases", b"", admin, (), b"labelSelector=a%3Db"),
        ("GET", LEASES, b"", admin, (), b"limit=x"),                          # 400
        ("GET", LEASES, b"", admin, (), b"resourceVersionMatch=Exact"),       # 422
        ("PUT", LEASES, lease("one"), admin, JSON, b""),                      # 405
        ("POST", "/apis/coordination.k8s.io/v1/leases", lease("two"), admin, JSON, b""),   # 405
        ("DELETE", f"{one}/status", b"", admin, (), b""),                     # 404: no such subresource
        ("PUT", one, lease("one", rv="1"), admin, JSON, b""),                 # 409: stale
        ("PUT", one, lease("one", rv=rv, holder="b"), viewer, JSON, b""),    # 403
        ("PUT", one, b"{not json", admin, JSON, b""),                         # 400
        ("PUT", one, lease("one", rv=rv), admin, [("content-type", "text/plain")], b""),   # 415
        ("PUT", one, orjson.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                   "metadata": {"name": "one", "namespace": "team", "resourceVersion": rv},
                                   "spec": {"leaseDurationSeconds": -1}}), admin, JSON, b""),   # 422
        ("PUT", one, lease("one", rv=rv, holder="b"), admin, JSON, b"dryRun=All"),
        ("PUT", one, lease("one", rv=rv, holder="b"), admin, JSON, b"dryRun=Some"),       # 400
        ("PATCH", one, b'{"spec":{"holderIdentity":"c"}}', admin,
         [("content-type", "application/merge-patch+json")], b"dryRun=All"),
        ("PATCH", one, b'{"spec":1}', admin, [("content-type", "application/merge-patch+json")], b""),
        ("DELETE", one, b"", admin, (), b"dryRun=All"),
        ("DELETE", one, b'{"preconditions":{"uid":"other"}}', admin, JSON, b""),           # 409
        # 406 is decided before anything is done: the write must not happen.
        ("PUT", one, lease("one", rv=rv, holder="b"), admin, [*JSON, ("accept", "text/html")], b""),
    ]
    for method, path, body, token, headers, query in cases:
        got = ageless(call(direct, method, path, body, token, headers, query))
        want = ageless(call(resolved, method, path, body, token, headers, query))
        assert got == want, (method, path, query, got[0], want[0], got[2][:300], want[2][:300])
        assert got[0] != 500, got
    status, _, body = call(direct, "GET", one, b"", admin)
    assert orjson.loads(body)["metadata"]["resourceVersion"] == rv, "a refused or dry-run request wrote"


def test_direct_dispatch_writes_like_the_resolved_path(handlers):
    direct, resolved = handlers
    admin = issue_token("admin-w", "admin")
    for handler, name in ((direct, "d"), (resolved, "r")):
        status, _, created = call(handler, "POST", LEASES, lease(name), admin, JSON)
        assert status == 201, created
        renewed = orjson.loads(created)
        renewed["spec"]["renewTime"] = "2026-11-25T10:00:00.000001Z"
        status, head, body = call(handler, "PUT", f"{LEASES}/{name}", orjson.dumps(renewed), admin, JSON)
        assert status == 200, body
        after = orjson.loads(body)
        assert int(after["metadata"]["resourceVersion"]) > int(renewed["metadata"]["resourceVersion"])
        assert after["spec"]["renewTime"] == "2026-11-25T10:00:00.000001Z"
        assert head["content-type"] == "application/json" and head["x-content-type-options"] == "nosniff"
        status, _, body = call(handler, "DELETE", f"{LEASES}/{name}", b"", admin)
        assert status == 200 and orjson.loads(body)["status"] == "Success", body
        assert call(handler, "GET", f"{LEASES}/{name}", b"", admin)[0] == 404


def test_only_resource_paths_of_bearer_calls_are_dispatched_directly():
    assert views.direct_route("/apis/coordination.k8s.io/v1/namespaces/a/leases/b") == (
        views.ObjectView, {"group": "coordination.k8s.io", "version": "v1", "namespace": "a", "plural": "leases",
                           "name": "b"})
    assert views.direct_route("/api/v1/namespaces/a/endpoints/b/status")[1]["subresource"] == "status"
    assert views.direct_route("/apis/batch/v1/jobs") == (views.CollectionView, {"group": "batch", "version": "v1",
                                                                               "plural": "jobs"})
    for path in ("/apis/batch/v1", "/apis/batch/v1/", "/api/v1/watch/leases", "/apis/batch/v1/namespaces/a/jobs/",
                 "/apis/batch/v1/namespaces/a/jobs/b/status/x", "/healthz", "/openapi/v3", "/leases/",
                 "/apis//v1/jobs", "/api"):
        assert views.direct_route(path) is None, path

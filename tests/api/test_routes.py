"""No path answers 500: malformed and unknown routes against a live `manage.py serve`, on both
listeners (plain HTTP and HTTPS), with a valid bearer token (the server's direct dispatch),
a wrong one and none (Django's resolver), for every method. API paths answer a metav1.Status."""
from __future__ import annotations

import http.client
import itertools
import ssl

import orjson
import pytest

# Paths that once failed (IndexError in kube/views.direct_route: /namespaces/<ns> of a server
# without Namespaces) and their neighbours: too short, too long, empty segments, watch shapes,
# odd characters, the followed-cluster prefix.
PATHS = [
    "/api/v1/namespaces/team", "/apis/coordination.k8s.io/v1/namespaces/team",
    "/apis/batch/v1/namespaces/team", "/api/v1/namespaces/team/", "/api/v1/namespaces/",
    "/api/v1/namespaces//leases", "/api/v1/namespaces/team//x", "/api//", "/api//v1", "/apis//v1/leases",
    "/apis/coordination.k8s.io", "/apis/coordination.k8s.io/v1/leases/x",
    "/apis/coordination.k8s.io/v1/namespaces/team/leases/a/status/x",
    "/apis/coordination.k8s.io/v1/namespaces/team/leases/a/b/c/d",
    "/apis/coordination.k8s.io/v2/namespaces/team/leases", "/apis/nope.io/v1/namespaces/team/things/x",
    "/api/v1/watch", "/api/v1/watch/", "/api/v1/watch/namespaces", "/api/v1/watch/namespaces/team",
    "/apis/coordination.k8s.io/v1/watch/namespaces/team/leases/a/b",
    "/api/v1/namespaces/team/leases", "/api/v1/namespaces/a%2Fb/endpoints", "/api/v1/namespaces/%00/endpoints",
    "/api/v1/namespaces/t%C3%A9am/endpoints/%FF", "/apis/%zz/v1", "/api/v1/namespaces/team/endpoints/x/status",
    "/clusters/local/api/v1/namespaces/team", "/clusters/nope/api/v1/namespaces/team",
    "/clusters//api", "/openapi/v3/apis/nope/v1", "/openapi/v3/api", "/openapi/v2/x", "/version/x",
    "/readyz/nope", "/api/v1/namespaces/team/endpoints/x/y/z",
]
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


def _requests(server, port: int, tls: bool, tokens: dict):
    """Every (path, method, token) on one listener, one kept-alive connection per token (a new
    one when the server closed it): yields (label, status, content type, body)."""
    for who, token in tokens.items():
        if tls:
            context = ssl.create_default_context(cafile=server.ca_file)
            conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
        else:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for path, method in itertools.product(PATHS, METHODS):
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            body = b"{}" if method in ("POST", "PUT", "PATCH") else None
            if body is not None:
                headers["Content-Type"] = ("application/merge-patch+json" if method == "PATCH"
                                           else "application/json")
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
            if resp.will_close:
                conn.close()
            yield (f"{method} {path} ({who}, {'https' if tls else 'http'})", resp.status,
                   resp.getheader("Content-Type", ""), raw)
        conn.close()


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_malformed_and_unknown_paths_never_500(kube_server, tls):
    port = int((kube_server.https_url if tls else kube_server.http_url).rsplit(":", 1)[1])
    tokens = {"token": kube_server.admin_token, "bad token": "not-a-token", "anonymous": None}
    for label, status, ctype, raw in _requests(kube_server, port, tls, tokens):
        assert status < 500, f"{label}: {status} {raw[:300]!r}"
        path = label.split()[1]
        if raw and path.startswith(("/api", "/clusters/")) and ctype.startswith("application/json"):
            status_obj = orjson.loads(raw)
            if status >= 400:
                assert status_obj["kind"] == "Status" and status_obj["code"] == status, label
                assert status_obj["message"], label


def test_namespace_paths_answer_as_a_server_without_namespaces(kube_server):
    """kube-apiserver's answer for a resource it does not serve: 404 NotFound, as a Status."""
    for path in ("/api/v1/namespaces/team", "/apis/coordination.k8s.io/v1/namespaces/team",
                 "/apis/batch/v1/namespaces/team", "/api/v1/namespaces"):
        status, _, body = kube_server.request("GET", path)
        assert status == 404, (path, body)
        assert body["kind"] == "Status" and body["reason"] == "NotFound", (path, body)
        assert body["message"] == "the server could not find the requested resource"

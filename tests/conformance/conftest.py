"""Upstream Kubernetes e2e / integration tests, ported: the official Python client (as client-go
is used upstream) against a live `manage.py serve` (the session's `kube_server`).

Each test names its upstream test in the docstring; docs/COMPATIBILITY.md keeps the table.
kubedash runs no controllers and no pods: where upstream waits for a controller, the port writes
the status a Job controller would write, by hand, through /status.
"""
from __future__ import annotations

import itertools
import json

import pytest
from kubernetes import client as k8s

_counter = itertools.count()


@pytest.fixture
def ns(request):
    """A fresh namespace name per test (namespaces exist implicitly here)."""
    base = request.node.name.split("[")[0].removeprefix("test_").replace("_", "-")[:40].strip("-")
    return f"{base}-{next(_counter)}"


@pytest.fixture(scope="module")
def leases(api_client):
    return k8s.CoordinationV1Api(api_client)


@pytest.fixture(scope="module")
def core(api_client):
    return k8s.CoreV1Api(api_client)


@pytest.fixture(scope="module")
def batch(api_client):
    return k8s.BatchV1Api(api_client)


@pytest.fixture(scope="module")
def raw(api_client):
    """raw(method, path, body=None, accept=..., content_type=..., query=[...]) -> (status, headers, body)
    through the client's own REST layer, for what the typed API does not expose (Accept headers)."""
    from kubernetes.client.rest import ApiException

    def call(method, path, body=None, accept="application/json", content_type="application/json", query=None):
        headers = {"Accept": accept, "Content-Type": content_type}
        data = body if isinstance(body, (bytes, str)) or body is None else json.loads(json.dumps(body))
        _, url, headers, _, _ = api_client.param_serialize(method, path, query_params=query or [],
                                                           header_params=headers, auth_settings=["BearerToken"])
        try:
            if isinstance(body, (bytes, str)):
                # Bytes as given (repeated keys and all): the client's REST layer would re-encode
                # them, so they go through its connection pool directly.
                resp = api_client.rest_client.pool_manager.request(method, url, body=data, headers=headers)
                status, hdrs, text = resp.status, dict(resp.headers), resp.data
            else:
                resp = api_client.call_api(method, url, header_params=headers, body=data)
                resp.read()
                status, hdrs, text = resp.status, dict(resp.getheaders()), resp.data
        except ApiException as err:
            status, hdrs, text = err.status, dict(err.headers or {}), err.body
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = text
        return status, hdrs, parsed

    return call


@pytest.fixture(scope="module")
def compact(kube_server):
    """Compact the revision log up to (and including) revision `upto`, as upstream's
    kvClient.Compact does on etcd."""
    def run(upto: int, current: int) -> None:
        kube_server.manage("compact", "--keep", str(max(current - upto, 0)), "--keep-seconds", "0")
    return run

"""Small object factories for tests, the paths their collections live at, and one checked write
to a live server."""
from __future__ import annotations

from datetime import datetime, timezone


def micro(moment: datetime) -> str:
    """A MicroTime's text (renewTime, acquireTime), as clients write it."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease(name="l1", holder="node-a", duration=15, ns="default", **meta):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": ns, **meta},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                     "renewTime": "2026-11-22T03:00:00.000000Z"}}


def endpoints(name="svc", ns="default", ips=("10.0.0.1",), not_ready=(), ports=({"port": 80},), **meta):
    subset = {"addresses": [{"ip": ip} for ip in ips], "ports": [dict(p) for p in ports]}
    if not_ready:
        subset["notReadyAddresses"] = [{"ip": ip} for ip in not_ready]
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name, "namespace": ns, **meta},
            "subsets": [subset]}


def job(name="j1", ns="default", image="busybox", **spec):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": image, "command": ["true"]}]}},
                     **spec}}


LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
ENDPOINTS = "/api/v1/namespaces/default/endpoints"
JOBS = "/apis/batch/v1/namespaces/default/jobs"

PATHS = {
    "Lease": ("/apis/coordination.k8s.io/v1", "leases", lease),
    "Endpoints": ("/api/v1", "endpoints", endpoints),
    "Job": ("/apis/batch/v1", "jobs", job),
}


def collection(kind: str, ns: str | None = None) -> str:
    """A kind's collection path, in a namespace or across all."""
    prefix, plural, _ = PATHS[kind]
    return f"{prefix}/namespaces/{ns}/{plural}" if ns else f"{prefix}/{plural}"


def make(kind: str, ns: str, name: str) -> dict:
    return PATHS[kind][2](name, ns=ns)


def write(server, method: str, kind: str, ns: str, name: str, body=None) -> dict:
    """One write to a live server (POST, PATCH as a merge patch, DELETE), asserting it worked;
    returns the object the server answered with (its resourceVersion is the write's)."""
    path = collection(kind, ns) + ("" if method == "POST" else f"/{name}")
    ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
    status, _, out = server.request(method, path, body, content_type=ctype)
    expected = {"POST": 201, "PATCH": 200, "DELETE": 200}[method]
    assert status == expected, (method, path, status, out)
    return out

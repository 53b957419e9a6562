"""Small object factories for tests."""


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

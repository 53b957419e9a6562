"""test/e2e/network/service.go: the Endpoint lifecycle, ported."""
from __future__ import annotations

from kubernetes import client as k8s
from kubernetes import watch


def test_lifecycle_of_an_endpoint(core, ns):
    """[sig-network] Services should test the lifecycle of an Endpoint [Conformance]

    Create a labelled Endpoints; watch for it; list across namespaces by label; update a
    label; strategic-merge-patch a label and the subsets; delete the collection by label;
    watch the deletion; relist."""
    name = "testservice"
    labels = {"test-endpoint-static": "true"}
    core.create_namespaced_endpoints(ns, k8s.V1Endpoints(
        metadata=k8s.V1ObjectMeta(name=name, labels=labels),
        subsets=[k8s.V1EndpointSubset(addresses=[k8s.V1EndpointAddress(ip="10.0.0.24")],
                                      ports=[k8s.CoreV1EndpointPort(name="http", port=80, protocol="TCP")])]))
    w = watch.Watch()
    events = w.stream(core.list_namespaced_endpoints, ns, label_selector="test-endpoint-static", timeout_seconds=30)
    ev = next(events)
    assert ev["type"] == "ADDED" and ev["object"].metadata.name == name

    everywhere = core.list_endpoints_for_all_namespaces(label_selector="test-endpoint-static")
    assert any(e.metadata.name == name and e.metadata.namespace == ns for e in everywhere.items)

    current = core.read_namespaced_endpoints(name, ns)
    current.metadata.labels["test-service"] = "updated"
    core.replace_namespaced_endpoints(name, ns, current)
    assert core.read_namespaced_endpoints(name, ns).metadata.labels["test-service"] == "updated"

    patch = {"metadata": {"labels": {"test-service": "patched"}},
             "subsets": [{"addresses": [{"ip": "10.0.0.25"}], "ports": [{"name": "http-test", "port": 8080}]}]}
    core.patch_namespaced_endpoints(name, ns, patch)
    got = core.read_namespaced_endpoints(name, ns)
    assert got.metadata.labels["test-service"] == "patched"
    assert got.subsets[0].addresses[0].ip == "10.0.0.25"
    assert (got.subsets[0].ports[0].name, got.subsets[0].ports[0].port) == ("http-test", 8080)

    core.delete_collection_namespaced_endpoints(ns, label_selector="test-endpoint-static")
    kinds = []
    for ev in events:
        kinds.append(ev["type"])
        if ev["type"] == "DELETED":
            break
    w.stop()
    assert kinds[-1] == "DELETED"
    assert all(e.metadata.name != name for e in core.list_namespaced_endpoints(ns, label_selector="test-endpoint-static").items)

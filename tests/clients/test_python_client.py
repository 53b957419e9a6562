"""The official `kubernetes` Python client against a live server: CRUD, status, errors."""
from __future__ import annotations

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException


def test_lease_crud(api_client):
    api = k8s.CoordinationV1Api(api_client)
    body = k8s.V1Lease(metadata=k8s.V1ObjectMeta(name="py-lease", labels={"a": "b"}),
                       spec=k8s.V1LeaseSpec(holder_identity="me", lease_duration_seconds=10))
    created = api.create_namespaced_lease("py", body)
    assert created.metadata.uid and created.spec.holder_identity == "me"
    created.spec.holder_identity = "you"
    replaced = api.replace_namespaced_lease("py-lease", "py", created)
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    with pytest.raises(ApiException) as err:
        api.replace_namespaced_lease("py-lease", "py", created)  # stale resourceVersion
    assert err.value.status == 409
    patched = api.patch_namespaced_lease("py-lease", "py", {"spec": {"leaseTransitions": 2}})
    assert patched.spec.lease_transitions == 2 and patched.spec.holder_identity == "you"
    listed = api.list_namespaced_lease("py", label_selector="a=b")
    assert [i.metadata.name for i in listed.items] == ["py-lease"]
    assert any(i.metadata.name == "py-lease" for i in api.list_lease_for_all_namespaces().items)
    api.delete_namespaced_lease("py-lease", "py")
    with pytest.raises(ApiException) as err:
        api.read_namespaced_lease("py-lease", "py")
    assert err.value.status == 404


def test_endpoints_crud(api_client):
    api = k8s.CoreV1Api(api_client)
    body = k8s.V1Endpoints(metadata=k8s.V1ObjectMeta(name="py-ep"), subsets=[k8s.V1EndpointSubset(
        addresses=[k8s.V1EndpointAddress(ip="10.2.0.1")], ports=[k8s.CoreV1EndpointPort(port=443, name="https")])])
    created = api.create_namespaced_endpoints("py", body)
    assert created.subsets[0].ports[0].protocol == "TCP"
    created.subsets[0].not_ready_addresses = [k8s.V1EndpointAddress(ip="10.2.0.2")]
    updated = api.replace_namespaced_endpoints("py-ep", "py", created)
    assert updated.subsets[0].not_ready_addresses[0].ip == "10.2.0.2"
    with pytest.raises(ApiException) as err:
        api.create_namespaced_endpoints("py", k8s.V1Endpoints(
            metadata=k8s.V1ObjectMeta(name="bad-ep"),
            subsets=[k8s.V1EndpointSubset(addresses=[k8s.V1EndpointAddress(ip="127.0.0.1")],
                                          ports=[k8s.CoreV1EndpointPort(port=80)])]))
    assert err.value.status == 422
    api.delete_collection_namespaced_endpoints("py")
    assert api.list_namespaced_endpoints("py").items == []


def test_job_crud_and_status(api_client):
    api = k8s.BatchV1Api(api_client)
    body = k8s.V1Job(metadata=k8s.V1ObjectMeta(name="py-job"), spec=k8s.V1JobSpec(
        completions=3, parallelism=2, completion_mode="Indexed",
        template=k8s.V1PodTemplateSpec(spec=k8s.V1PodSpec(restart_policy="Never", containers=[
            k8s.V1Container(name="c", image="busybox")]))))
    created = api.create_namespaced_job("py", body)
    assert created.spec.backoff_limit == 6 and created.metadata.generation == 1
    assert created.spec.selector.match_labels["batch.kubernetes.io/controller-uid"] == created.metadata.uid
    assert created.spec.template.metadata.labels["job-name"] == "py-job"
    status = api.patch_namespaced_job_status("py-job", "py", {"status": {"succeeded": 2, "completedIndexes": "0-1"}})
    assert status.status.succeeded == 2
    assert api.read_namespaced_job_status("py-job", "py").status.completed_indexes == "0-1"
    with pytest.raises(ApiException) as err:
        api.patch_namespaced_job("py-job", "py", {"spec": {"completionMode": "NonIndexed"}})
    assert err.value.status == 422
    api.delete_namespaced_job("py-job", "py", propagation_policy="Background")
    assert api.list_namespaced_job("py").items == []


def test_errors_are_status_objects(api_client):
    api = k8s.CoordinationV1Api(api_client)
    with pytest.raises(ApiException) as err:
        api.create_namespaced_lease("py", k8s.V1Lease(metadata=k8s.V1ObjectMeta(name="neg"),
                                                      spec=k8s.V1LeaseSpec(lease_duration_seconds=-1)))
    assert err.value.status == 422
    import json
    status = json.loads(err.value.body)
    assert status["kind"] == "Status" and status["details"]["causes"][0]["field"] == "spec.leaseDurationSeconds"


def test_watch_stream(api_client):
    """watch.Watch().stream: the official client's list-then-watch helper."""
    import threading

    from kubernetes import watch

    api = k8s.CoordinationV1Api(api_client)
    api.create_namespaced_lease("pyw", k8s.V1Lease(metadata=k8s.V1ObjectMeta(name="w0"), spec=k8s.V1LeaseSpec()))
    listed = api.list_namespaced_lease("pyw")

    def writes():
        api.create_namespaced_lease("pyw", k8s.V1Lease(metadata=k8s.V1ObjectMeta(name="w1"), spec=k8s.V1LeaseSpec()))
        api.patch_namespaced_lease("w1", "pyw", {"spec": {"holderIdentity": "h"}})
        api.delete_namespaced_lease("w0", "pyw")

    w = watch.Watch()
    seen = []
    writer = threading.Timer(0.5, writes)
    writer.start()
    for event in w.stream(api.list_namespaced_lease, "pyw", resource_version=listed.metadata.resource_version,
                          timeout_seconds=10):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 3:
            w.stop()
    writer.join()
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w0")]
    assert isinstance(event["object"], k8s.V1Lease)

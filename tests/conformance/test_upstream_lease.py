"""test/e2e/apimachinery/lease.go, ported."""
from __future__ import annotations

import datetime

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException


def test_lease_api_should_be_available(leases, ns):
    """[sig-api-machinery] Lease lease API should be available [Conformance]

    Create, get, update, patch a Lease; a second Lease with a label; list across all
    namespaces, delete the collection by label, delete the first Lease; all through the
    coordination/v1 client."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=123456)  # MicroTime
    lease = k8s.V1Lease(metadata=k8s.V1ObjectMeta(name="lease"), spec=k8s.V1LeaseSpec(
        holder_identity="holder", lease_duration_seconds=30, acquire_time=now, renew_time=now,
        lease_transitions=0))
    created = leases.create_namespaced_lease(ns, lease)
    got = leases.read_namespaced_lease("lease", ns)
    assert got.spec == created.spec and got.spec.acquire_time == now and got.spec.renew_time == now

    got.spec.holder_identity = "holder2"
    got.spec.lease_duration_seconds = 60
    got.spec.lease_transitions = 1
    updated = leases.replace_namespaced_lease("lease", ns, got)
    assert leases.read_namespaced_lease("lease", ns).spec == updated.spec
    assert updated.spec.holder_identity == "holder2" and updated.spec.lease_transitions == 1

    patch = {"spec": {"holderIdentity": "anotherholder", "leaseTransitions": 2,
                      "acquireTime": "2026-01-01T00:00:00.000000Z"}}
    patched = leases.patch_namespaced_lease("lease", ns, patch)
    assert patched.spec.holder_identity == "anotherholder" and patched.spec.lease_transitions == 2
    assert patched.spec.lease_duration_seconds == 60
    assert leases.read_namespaced_lease("lease", ns).spec == patched.spec

    other_ns = ns + "-2"
    leases.create_namespaced_lease(other_ns, k8s.V1Lease(
        metadata=k8s.V1ObjectMeta(name="lease2", labels={"deletecollection": "true"}),
        spec=k8s.V1LeaseSpec(holder_identity="holder", lease_duration_seconds=30)))
    everywhere = leases.list_lease_for_all_namespaces()
    mine = [i for i in everywhere.items if i.metadata.namespace in (ns, other_ns)]
    assert sorted(i.metadata.name for i in mine) == ["lease", "lease2"]

    leases.delete_collection_namespaced_lease(other_ns, label_selector="deletecollection=true")
    assert leases.list_namespaced_lease(other_ns).items == []

    leases.delete_namespaced_lease("lease", ns)
    with pytest.raises(ApiException) as err:
        leases.read_namespaced_lease("lease", ns)
    assert err.value.status == 404

"""Lease (coordination.k8s.io/v1) strategy: defaults, validation, columns (coordination/strategy.py).

Plain functions on dicts: no database, no Django settings.
"""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from dashboard.coordination import strategy as leases
from dashboard.kube.errors import ApiError
from rule_helpers import NOW, texts


def lease(**spec):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "l1", "namespace": "default"},
            "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 15,
                     "acquireTime": "2026-11-22T03:00:00.000000Z", "renewTime": "2026-11-22T03:00:10.250000Z",
                     "leaseTransitions": 0, **spec}}


def test_lease_valid_and_normalized():
    obj = lease(renewTime="2026-11-22T05:00:10.250000+02:00")
    leases.default(obj)
    assert obj["spec"]["renewTime"] == "2026-11-22T03:00:10.250000Z"
    assert leases.validate(obj) == [] and leases.validate_update(obj, lease()) == []
    empty = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "x"}}
    leases.default(empty)
    assert empty["spec"] == {} and leases.validate(empty) == []


def test_lease_bad_micro_time_is_400():
    obj = lease(renewTime="2026-11-22T03:00:10Z")
    with pytest.raises(ApiError) as exc:
        leases.default(obj)
    assert exc.value.code == 400 and exc.value.reason == "BadRequest"
    assert exc.value.message == ('Lease in version "v1" cannot be handled as a Lease: parsing time '
                                 '"2026-11-22T03:00:10Z" as "2006-01-02T15:04:05.000000Z07:00": '
                                 'cannot parse "Z" as ".000000"')


def test_lease_spec_rules():
    assert texts(leases.validate(lease(leaseDurationSeconds=0))) == [
        "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]
    assert texts(leases.validate(lease(leaseDurationSeconds=-5, leaseTransitions=-1))) == [
        "spec.leaseDurationSeconds: Invalid value: -5: must be greater than 0",
        "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"]
    assert leases.validate(lease(strategy="OldestEmulationVersion", preferredHolder="node-b")) == []
    assert leases.validate(lease(strategy="example.com/custom")) == []
    assert texts(leases.validate(lease(strategy="Newest"))) == [
        'spec.strategy.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion"']
    assert texts(leases.validate(lease(preferredHolder="node-b"))) == [
        "spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"]


def test_lease_coordinated_fields_served():
    # kubedash serves 1.32's strategy / preferredHolder (as with CoordinatedLeaderElection on).
    obj = lease(strategy="OldestEmulationVersion", preferredHolder="b")
    leases.prepare_for_create(obj)
    assert obj["spec"]["strategy"] == "OldestEmulationVersion" and obj["spec"]["preferredHolder"] == "b"


def test_lease_coordinated_fields_gated_off(monkeypatch):
    monkeypatch.setattr(leases, "COORDINATED_LEADER_ELECTION", False)
    obj = lease(strategy="OldestEmulationVersion", preferredHolder="b")
    leases.prepare_for_create(obj)
    assert "strategy" not in obj["spec"] and "preferredHolder" not in obj["spec"]
    old = lease(strategy="OldestEmulationVersion")
    new = lease(strategy="OldestEmulationVersion", preferredHolder="b")
    leases.prepare_for_update(new, old)
    assert new["spec"]["strategy"] == "OldestEmulationVersion" and "preferredHolder" not in new["spec"]


def test_lease_columns():
    cols = leases.typed_columns(lease())
    assert cols == {"holder_identity": "node-a", "lease_duration_seconds": 15,
                    "acquire_time": datetime(2026, 11, 22, 3, 0, tzinfo=timezone.utc),
                    "renew_time": datetime(2026, 11, 22, 3, 0, 10, 250000, tzinfo=timezone.utc),
                    "lease_transitions": 0}
    assert leases.typed_columns({"spec": {}})["holder_identity"] == ""
    assert [c.name for c in leases.columns] == ["Holder"]
    assert leases.columns[0].cell(lease(), NOW) == "node-a"
    assert leases.columns[0].cell({"spec": {}}, NOW) == ""

"""Endpoints actions (dashboard/core/actions.py): moving an address between ready and not ready."""
from __future__ import annotations

import pytest

from dashboard.core.actions import do_set_address_readiness, with_readiness
from manifests import endpoints


def test_with_readiness_moves_the_address_in_every_subset():
    obj = {"subsets": [{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}]},
                       {"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 81}]}]}
    moved = with_readiness(obj, "10.0.0.1", False)
    assert moved["subsets"] == [
        {"addresses": [{"ip": "10.0.0.2"}], "ports": [{"port": 80}], "notReadyAddresses": [{"ip": "10.0.0.1"}]},
        {"ports": [{"port": 81}], "notReadyAddresses": [{"ip": "10.0.0.1"}]}]
    assert obj["subsets"][1]["addresses"] == [{"ip": "10.0.0.1"}]         # the given object is untouched
    assert with_readiness(moved, "10.0.0.1", False) == moved                # already there: found, unchanged
    assert with_readiness(obj, "10.9.9.9", True) is None                    # no such address


def test_do_set_address_readiness(db):
    from dashboard.kube import store
    from dashboard.kube.errors import ApiError
    from dashboard.kube.registry import by_kind

    res = by_kind("Endpoints")
    store.create(res, "default", endpoints("svc", ips=("10.0.0.1",), not_ready=("10.0.0.2",)))
    result = do_set_address_readiness("default", "svc", ip="10.0.0.2", ready=True)
    assert result.changed
    assert {a["ip"] for s in store.get(res, "default", "svc")["subsets"] for a in s.get("addresses", [])} == \
        {"10.0.0.1", "10.0.0.2"}
    assert not do_set_address_readiness("default", "svc", ip="10.0.0.2", ready=True).changed
    with pytest.raises(ApiError) as refused:
        do_set_address_readiness("default", "svc", ip="10.9.9.9", ready=True)
    assert refused.value.code == 409 and "no address 10.9.9.9" in refused.value.message

"""Lease pages (dashboard/coordination/web.py) and actions: the holder timeline, releasing."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from dashboard.coordination import web as p
from dashboard.coordination.actions import do_release_lease, released
from manifests import lease, micro

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def test_holder_history_spans_and_gaps():
    t0 = NOW

    def rev(holder, renew_s, acquire_s=None, event="MODIFIED", duration=10):
        spec = {"holderIdentity": holder, "leaseDurationSeconds": duration,
                "renewTime": micro(t0 + timedelta(seconds=renew_s))}
        if acquire_s is not None:
            spec["acquireTime"] = micro(t0 + timedelta(seconds=acquire_s))
        return event, {"spec": spec}, t0 + timedelta(seconds=renew_s)

    revisions = [
        rev("a", 0, 0, "ADDED"), rev("a", 5), rev("a", 10),
        # a stops renewing at 10 (expires at 20); b takes over at 40: a gap from 20 to 40.
        rev("b", 40, 40), rev("b", 45),
        rev("", 50),                       # b releases at 50
    ]
    history = p.holder_history(revisions, t0 + timedelta(seconds=100))
    summary = [(e["holder"], e["gap"], e["end_reason"], e["ongoing"]) for e in history["entries"]]
    assert summary == [("a", False, "expired", False), ("", True, "", False),
                       ("b", False, "released", False), ("", True, "", True)]
    a = history["entries"][0]
    assert a["renewals"] == 2 and a["to"] == p.clock(t0 + timedelta(seconds=20))
    assert history["entries"][1]["length"] == "20s"
    # Still holding: the last span is ongoing.
    ongoing = p.holder_history([rev("c", 0, 0, "ADDED"), rev("c", 95)], t0 + timedelta(seconds=100))
    assert [(e["holder"], e["ongoing"]) for e in ongoing["entries"]] == [("c", True)]


def test_release_spec_follows_client_go():
    spec = {"holderIdentity": "a", "leaseDurationSeconds": 15, "leaseTransitions": 4,
            "acquireTime": "2020-01-01T00:00:00.000000Z", "renewTime": "2020-01-01T00:00:10.000000Z"}
    out = released(spec, datetime(2030, 1, 1, tzinfo=timezone.utc))
    assert out == {"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 4,
                   "acquireTime": "2030-01-01T00:00:00.000000Z", "renewTime": "2030-01-01T00:00:00.000000Z"}


def test_do_release_lease(db):
    from dashboard.kube import store
    from dashboard.kube.errors import ApiError
    from dashboard.kube.registry import by_kind

    leases = by_kind("Lease")
    store.create(leases, "default", lease(name="l1", holder="node-a", duration=15))
    with pytest.raises(ApiError) as refused:
        do_release_lease("default", "l1", holder="node-b")          # not the holder the user saw
    assert refused.value.code == 409 and "node-a" in refused.value.message
    result = do_release_lease("default", "l1", holder="node-a")
    spec = store.get(leases, "default", "l1")["spec"]
    assert result.changed and spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
    with pytest.raises(ApiError) as gone:
        do_release_lease("default", "missing", holder="node-a")
    assert gone.value.code == 404

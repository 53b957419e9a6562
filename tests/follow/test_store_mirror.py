"""kube/mirror.py: a followed cluster's changes, batched into one transaction, are logged one
revision each, in order, with the typed rows as the batch leaves them; repeats write nothing."""
from __future__ import annotations

import orjson
import pytest

from dashboard.access import clusters
from dashboard.kube import registry, revlog, store
from dashboard.kube.errors import ApiError
from dashboard.kube.mirror import Mirrored, mirror
from dashboard.kube.models import Revision

# CI runs this module again on PostgreSQL, and through PgBouncer (.ci/run selects it by the markers).
pytestmark = [pytest.mark.portable, pytest.mark.pgbouncer]


def lease(name: str, holder: str, upstream_rv: int, ns: str = "team") -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": str(upstream_rv),
                         "creationTimestamp": "2026-01-02T03:04:05Z", "labels": {"app": "a"}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}}


@pytest.fixture
def leases():
    return registry.lookup("coordination.k8s.io", "v1", "leases")


def change(res, obj=None, name=None):
    return Mirrored(res, "team", name or obj["metadata"]["name"], obj)


def logged(after: int) -> list[tuple]:
    return [(r.type, r.name, orjson.loads(r.object)["spec"]["holderIdentity"], r.upstream_rv, r.rv)
            for r in Revision.everywhere.filter(cluster="prod", rv__gt=after).order_by("rv")]


@pytest.mark.django_db(transaction=True)
def test_a_mixed_batch_is_logged_in_order_and_leaves_the_rows_it_should(leases):
    assert mirror("prod", [change(leases, lease("a", "h1", 10)), change(leases, lease("b", "h1", 11))]) == 2
    before = store.current_revision()
    written = mirror("prod", [
        change(leases, lease("a", "h1", 10)),     # a repeat of what is stored: nothing
        change(leases, lease("a", "h2", 12)),     # modified
        change(leases, lease("c", "h1", 13)),     # added...
        change(leases, lease("c", "h3", 14)),     # ...modified in the same batch
        change(leases, name="b"),                  # deleted (stored before the batch)
        change(leases, lease("d", "h1", 15)),     # added and deleted in the same batch
        change(leases, name="d"),
        change(leases, name="zz"),                 # a delete of nothing: nothing
    ])
    assert written == 6
    rows = logged(before)
    assert [r[:4] for r in rows] == [
        ("MODIFIED", "a", "h2", "12"), ("ADDED", "c", "h1", "13"), ("MODIFIED", "c", "h3", "14"),
        ("DELETED", "b", "h1", ""), ("ADDED", "d", "h1", "15"), ("DELETED", "d", "h1", "")]
    assert [r[4] for r in rows] == list(range(before + 1, before + 7))   # one block of revisions
    assert store.current_revision() == before + 6
    with clusters.within("prod"):
        stored = {m.name: m for m in leases.model.objects.all()}
        assert sorted(stored) == ["a", "c"]
        assert stored["c"].holder_identity == "h3" and stored["c"].current_id == before + 3
        served = orjson.loads(store.get_raw(leases, "team", "c"))
        # As upstream served it, with kubedash's revision as its resourceVersion.
        assert served["metadata"]["resourceVersion"] == str(before + 3) and served["metadata"]["uid"] == "uid-c"
        assert revlog.text_as_of("Lease", "team", "b", before) is not None   # history kept
    # Nothing of it in the local store.
    assert not leases.model.objects.filter(name__in=["a", "c"]).exists()


@pytest.mark.django_db(transaction=True)
def test_nothing_is_written_once_the_cluster_is_no_longer_followed(leases):
    before = store.current_revision()
    assert mirror("prod", [change(leases, lease("a", "h1", 10))], still_followed=lambda: False) == 0
    assert store.current_revision() == before and logged(0) == []


@pytest.mark.django_db(transaction=True)
def test_clients_cannot_write_a_followed_cluster(leases):
    with clusters.within("prod"), pytest.raises(ApiError) as info:
        store.create(leases, "team", lease("x", "h", 1))
    assert info.value.code == 405 and "read-only" in info.value.message

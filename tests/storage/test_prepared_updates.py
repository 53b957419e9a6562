"""PostgreSQL's optimistic update as a prepared statement (kube/storage/postgresql.py, _prepared):
the revision lock and the conditional update in one pipeline (one transaction), the update bound
on the server's side and prepared, so that PostgreSQL neither parses nor plans it again.
In-process, on the test database: runs in CI's PostgreSQL stage (`-m portable`); on SQLite there
is nothing to prepare."""
from __future__ import annotations

import orjson
import pytest
from django.db import connection

from dashboard.kube import store
from dashboard.kube.registry import by_kind
from manifests import lease

pytestmark = [pytest.mark.portable, pytest.mark.django_db(transaction=True)]


def _renew(name: str, n: int) -> None:
    def fn(current):
        new = orjson.loads(orjson.dumps(current))
        new["spec"]["leaseTransitions"] = n
        return new
    store.update(by_kind("Lease"), "prep", name, fn)


def test_renewals_use_a_prepared_update_and_keep_dense_revisions():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite prepares nothing")
    created = store.create(by_kind("Lease"), "prep", lease("a", holder="node-a", ns="prep"))
    first = int(created.object["metadata"]["resourceVersion"])
    for n in range(1, 9):
        _renew("a", n)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
                       ["%kube_revision_counter%coordination_lease%"])
        assert cursor.fetchone()[0] == 1, "the update was not prepared (once)"
        cursor.execute("SELECT rv FROM kube_revision WHERE name = 'a' AND namespace = 'prep' ORDER BY rv")
        rvs = [rv for (rv,) in cursor.fetchall()]
    assert rvs == list(range(first, first + 9))   # (each renewal one revision, none lost, in order)
    obj = store.get(by_kind("Lease"), "prep", "a")
    assert obj["spec"]["leaseTransitions"] == 8 and int(obj["metadata"]["resourceVersion"]) == rvs[-1]


def test_a_stale_update_writes_nothing_and_the_connection_stays_usable():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    store.create(by_kind("Lease"), "prep", lease("b", holder="node-a", ns="prep"))
    for n in range(1, 7):
        _renew("b", n)
    # Another writer changes the row behind the update's read: the conditional update answers no
    # row (nothing written, transaction committed empty), and the store reads again and writes.
    calls = []

    def fn(current):
        if not calls:
            _renew("b", 100)   # (inside the first try: its read is now stale)
        calls.append(current["metadata"]["resourceVersion"])
        new = orjson.loads(orjson.dumps(current))
        new["spec"]["holderIdentity"] = "node-b"
        return new
    out = store.update(by_kind("Lease"), "prep", "b", fn)
    assert len(calls) >= 2 and out.object["spec"]["holderIdentity"] == "node-b"
    assert out.object["spec"]["leaseTransitions"] == 100   # (computed from the second read)
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)
        assert connection.connection.info.transaction_status == 0   # (idle: nothing left open)

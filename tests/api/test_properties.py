"""Property-based tests (hypothesis): storage stays consistent under random writes, and
label selectors match as Kubernetes defines them."""
from __future__ import annotations

from urllib.parse import quote

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manifests import LEASES, lease

# CI runs this module again on PostgreSQL (.ci/run selects it by the marker).
pytestmark = [pytest.mark.django_db, pytest.mark.portable]

NAMES = st.sampled_from(["a", "b", "c", "d"])
KEYS = st.sampled_from(["app", "tier", "example.com/team"])
VALUES = st.sampled_from(["x", "y", "z"])
LABELS = st.dictionaries(KEYS, VALUES, max_size=3)

OPS = st.one_of(
    st.tuples(st.just("create"), NAMES, LABELS),
    st.tuples(st.just("put"), NAMES, LABELS),
    st.tuples(st.just("patch"), NAMES, LABELS),
    st.tuples(st.just("delete"), NAMES, st.just({})),
)

PROFILE = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _reset():
    from dashboard.coordination.models import Lease
    from dashboard.kube.models import Revision

    Lease.objects.all().delete()
    Revision.objects.all().delete()


@PROFILE
@given(ops=st.lists(OPS, min_size=1, max_size=25))
def test_random_writes_keep_rows_log_and_snapshots_consistent(api, ops):
    from dashboard.coordination.models import Lease
    from dashboard.coordination.resource import LEASES as RES
    from dashboard.kube.models import Revision

    _reset()
    model: dict[str, dict] = {}           # what we believe is stored
    snapshots: list[tuple[str, dict]] = []  # (list rv, {name: object}) after each successful write
    for op, name, labels in ops:
        path = f"{LEASES}/{name}"
        if op == "create":
            r = api.post(LEASES, lease(name, labels=labels))
            assert r.status_code == (409 if name in model else 201)
        elif op == "put":
            if name not in model:   # a Lease PUT creates a missing one (kube's AllowCreateOnUpdate)
                r = api.put(path, lease(name, labels=labels))
                assert r.status_code == 201
            else:
                body = dict(model[name], metadata={**model[name]["metadata"], "labels": labels})
                r = api.put(path, body)
                assert r.status_code == 200
        elif op == "patch":
            r = api.patch(path, {"metadata": {"labels": labels or None}})
            assert r.status_code == (200 if name in model else 404)
        else:
            r = api.delete(path)
            assert r.status_code == (200 if name in model else 404)
            if name in model:
                del model[name]
                snapshots.append((api.get(LEASES).json()["metadata"]["resourceVersion"], dict(model)))
            continue
        if r.status_code in (200, 201):
            model[name] = r.json()
            snapshots.append((api.get(LEASES).json()["metadata"]["resourceVersion"], dict(model)))

    # Typed rows mirror the objects and point at their latest revision.
    rows = {row.name: row for row in Lease.objects.select_related("current")}
    assert set(rows) == set(model)
    for name, obj in model.items():
        row = rows[name]
        assert orjson.loads(row.current.object) == obj
        assert str(row.current_id) == obj["metadata"]["resourceVersion"]
        assert row.labels == obj["metadata"].get("labels", {})
        for column, value in RES.typed_columns(obj).items():
            assert getattr(row, column) == value
        latest = Revision.objects.filter(kind="Lease", name=name).order_by("-rv").first()
        assert latest.rv == row.current_id and latest.type != "DELETED"
    # The log is strictly increasing and every deleted key ends with a DELETED revision.
    for name in {"a", "b", "c", "d"} - set(model):
        latest = Revision.objects.filter(kind="Lease", name=name).order_by("-rv").first()
        assert latest is None or latest.type == "DELETED"
    # A list at any earlier revision shows exactly the objects of that moment.
    for rv, expected in snapshots:
        body = api.get(f"{LEASES}?resourceVersion={rv}&resourceVersionMatch=Exact").json()
        assert {i["metadata"]["name"]: i for i in body["items"]} == expected


REQUIREMENT = st.one_of(
    st.tuples(st.just("="), KEYS, st.sets(VALUES, min_size=1, max_size=1)),
    st.tuples(st.just("!="), KEYS, st.sets(VALUES, min_size=1, max_size=1)),
    st.tuples(st.just("in"), KEYS, st.sets(VALUES, min_size=1, max_size=3)),
    st.tuples(st.just("notin"), KEYS, st.sets(VALUES, min_size=1, max_size=3)),
    st.tuples(st.just("exists"), KEYS, st.just(set())),
    st.tuples(st.just("!exists"), KEYS, st.just(set())),
)


def _render(req) -> str:
    op, key, values = req
    vals = sorted(values)
    return {"=": f"{key}={vals[0] if vals else ''}", "!=": f"{key}!={vals[0] if vals else ''}",
            "in": f"{key} in ({','.join(vals)})", "notin": f"{key} notin ({','.join(vals)})",
            "exists": key, "!exists": f"!{key}"}[op]


def _oracle(req, labels: dict) -> bool:
    """The Kubernetes definition of each operator (apimachinery labels.Requirement.Matches)."""
    op, key, values = req
    if op in ("=", "in"):
        return key in labels and labels[key] in values
    if op in ("!=", "notin"):
        return key not in labels or labels[key] not in values
    if op == "exists":
        return key in labels
    return key not in labels


@PROFILE
@given(reqs=st.lists(REQUIREMENT, min_size=1, max_size=3), label_sets=st.lists(LABELS, min_size=1, max_size=6))
def test_label_selectors_match_like_kubernetes(api, reqs, label_sets):
    from dashboard.kube.selectors import parse_label_selector

    _reset()
    text = ",".join(_render(r) for r in reqs)
    selector = parse_label_selector(text)
    expected = set()
    for i, labels in enumerate(label_sets):
        assert selector.matches(labels) == all(_oracle(r, labels) for r in reqs), (text, labels)
        assert api.post(LEASES, lease(f"o{i}", labels=labels)).status_code == 201
        if all(_oracle(r, labels) for r in reqs):
            expected.add(f"o{i}")
    # The same selector through the API (database pushdown + Python check) agrees.
    got = api.get(f"{LEASES}?labelSelector={quote(text)}").json()["items"]
    assert {i["metadata"]["name"] for i in got} == expected

"""Lists: selectors, chunking with consistent snapshots, resourceVersion semantics, 410."""
import pytest

from manifests import JOBS, LEASES, job, lease

# CI runs this module again on PostgreSQL, and through PgBouncer (.ci/run selects it by the markers).
pytestmark = [pytest.mark.django_db, pytest.mark.portable, pytest.mark.pgbouncer]


def names(body):
    return [i["metadata"]["name"] for i in body["items"]]


@pytest.fixture
def five(api):
    for i in range(5):
        api.post(LEASES, lease(f"l{i}", labels={"tier": "web" if i % 2 else "db", "idx": str(i)}))
    return api


@pytest.mark.parametrize("selector,expected", [
    ("tier=web", ["l1", "l3"]),
    ("tier==db", ["l0", "l2", "l4"]),
    ("tier!=web", ["l0", "l2", "l4"]),
    ("idx in (1,2)", ["l1", "l2"]),
    ("idx notin (1,2)", ["l0", "l3", "l4"]),
    ("tier", ["l0", "l1", "l2", "l3", "l4"]),
    ("!tier", []),
    ("tier=web,idx=3", ["l3"]),
])
def test_label_selectors(five, selector, expected):
    from urllib.parse import quote
    r = five.get(f"{LEASES}?labelSelector={quote(selector)}")
    assert r.status_code == 200
    assert names(r.json()) == expected


@pytest.mark.parametrize("bad", ["tier in (a", "=x", "a b", "tier notin", "!!x", "k=v=w"])
def test_malformed_label_selector_is_400(five, bad):
    from urllib.parse import quote
    r = five.get(f"{LEASES}?labelSelector={quote(bad)}")
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"


def test_field_selectors(five, api):
    assert names(five.get(f"{LEASES}?fieldSelector=metadata.name%3Dl2").json()) == ["l2"]
    assert len(five.get(f"{LEASES}?fieldSelector=metadata.name!%3Dl2").json()["items"]) == 4
    all_ns = five.get("/apis/coordination.k8s.io/v1/leases?fieldSelector=metadata.namespace%3Ddefault").json()
    assert len(all_ns["items"]) == 5
    r = five.get(f"{LEASES}?fieldSelector=spec.holderIdentity%3Dx")
    assert r.status_code == 400


def test_job_status_successful_field_selector(api):
    api.post(JOBS, job("a"))
    api.post(JOBS, job("b"))
    api.patch(f"{JOBS}/b/status", {"status": {"succeeded": 1}})
    assert names(api.get(f"{JOBS}?fieldSelector=status.successful%3D1").json()) == ["b"]
    assert names(api.get(f"{JOBS}?fieldSelector=status.successful%3D0").json()) == ["a"]


def test_chunked_list_is_one_snapshot(five):
    first = five.get(f"{LEASES}?limit=2").json()
    assert names(first) == ["l0", "l1"]
    token = first["metadata"]["continue"]
    rv = first["metadata"]["resourceVersion"]
    # Writes after the first page are not seen by later pages.
    five.delete(f"{LEASES}/l3")
    five.post(LEASES, lease("l25"))
    five.patch(f"{LEASES}/l4", {"spec": {"holderIdentity": "changed"}})
    second = five.get(f"{LEASES}?limit=2&continue={token}").json()
    assert names(second) == ["l2", "l3"]
    assert second["metadata"]["resourceVersion"] == rv
    third = five.get(f"{LEASES}?limit=2&continue={second['metadata']['continue']}").json()
    assert names(third) == ["l4"]
    assert third["items"][0]["spec"]["holderIdentity"] == "node-a"
    assert "continue" not in third["metadata"]


def test_garbage_continue_is_400(five):
    r = five.get(f"{LEASES}?limit=2&continue=garbage!!")
    assert r.status_code == 400


def test_compacted_continue_is_410_with_fresh_token(five):
    from dashboard.kube.compaction import compact

    first = five.get(f"{LEASES}?limit=2").json()
    five.patch(f"{LEASES}/l3", {"spec": {"holderIdentity": "x"}})
    compact(keep=0)
    r = five.get(f"{LEASES}?limit=2&continue={first['metadata']['continue']}")
    assert r.status_code == 410
    s = r.json()
    assert s["reason"] == "Expired" and s["metadata"]["continue"]
    nxt = five.get(f"{LEASES}?limit=2&continue={s['metadata']['continue']}").json()
    assert names(nxt) == ["l2", "l3"]


def test_list_at_exact_revision(five):
    rv = five.get(LEASES).json()["metadata"]["resourceVersion"]
    five.delete(f"{LEASES}/l0")
    r = five.get(f"{LEASES}?resourceVersion={rv}&resourceVersionMatch=Exact").json()
    assert names(r)[0] == "l0" and r["metadata"]["resourceVersion"] == rv
    assert "l0" not in names(five.get(LEASES).json())


def test_resource_version_parameter_errors(five):
    r = five.get(f"{LEASES}?resourceVersion=abc")
    assert r.status_code == 400
    assert r.json()["message"] == 'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax'
    # ListOptions rules are a 422 Invalid ListOptions.meta.k8s.io, as kube-apiserver answers.
    assert five.get(f"{LEASES}?resourceVersionMatch=Exact").status_code == 422
    assert five.get(f"{LEASES}?resourceVersion=0&resourceVersionMatch=Exact").status_code == 422
    assert five.get(f"{LEASES}?resourceVersion=1&resourceVersionMatch=Sometimes").status_code == 422
    assert five.get(f"{LEASES}?resourceVersion=99999999&resourceVersionMatch=Exact").status_code == 504
    assert five.get(f"{LEASES}?resourceVersion=0").status_code == 200


def test_exact_list_older_than_compaction_is_410(five):
    from dashboard.kube.compaction import compact

    rv = five.get(LEASES).json()["metadata"]["resourceVersion"]
    five.patch(f"{LEASES}/l1", {"spec": {"holderIdentity": "x"}})
    compact(keep=0)
    r = five.get(f"{LEASES}?resourceVersion={rv}&resourceVersionMatch=Exact")
    assert r.status_code == 410 and r.json()["message"] == "The resourceVersion for the provided list is too old."
    # limit + resourceVersion without resourceVersionMatch is the legacy exact list: 410 too.
    r = five.get(f"{LEASES}?resourceVersion={rv}&limit=2")
    assert r.status_code == 410 and r.json()["message"] == "The resourceVersion for the provided list is too old."
    assert five.get(f"{LEASES}?resourceVersion={rv}").status_code == 200


def test_list_options_errors_are_aggregated_in_kube_order(five):
    body = five.get(f"{LEASES}?resourceVersionMatch=Bogus&continue=x").json()
    assert body["code"] == 422 and body["reason"] == "Invalid" and body["details"]["kind"] == "ListOptions"
    assert body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: [resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden '
        'unless resourceVersion is provided, resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when '
        'continue is provided, resourceVersionMatch: Unsupported value: "Bogus": supported values: "Exact", '
        '"NotOlderThan", ""]')
    assert len(body["details"]["causes"]) == 3
    body = five.get(f"{LEASES}?sendInitialEvents=false").json()
    assert body["code"] == 422 and body["message"] == (
        'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list')
    # The continue token is decoded before the resourceVersion rule is applied.
    r = five.get(f"{LEASES}?continue=garbage&resourceVersion=5")
    assert r.status_code == 400 and "continue key is not valid" in r.json()["message"]
    token = five.get(f"{LEASES}?limit=2").json()["metadata"]["continue"]
    r = five.get(f"{LEASES}?continue={token}&resourceVersion=5")
    assert r.status_code == 400 and r.json()["message"] == "specifying resource version is not allowed when using continue"


def test_remaining_item_count(five):
    page = five.get(f"{LEASES}?limit=2").json()
    assert page["metadata"]["remainingItemCount"] == 3
    five.delete(f"{LEASES}/l4")  # after the snapshot: the count is of the snapshot
    nxt = five.get(f"{LEASES}?limit=2&continue={page['metadata']['continue']}").json()
    assert nxt["metadata"]["remainingItemCount"] == 1
    last = five.get(f"{LEASES}?limit=2&continue={nxt['metadata']['continue']}").json()
    assert "remainingItemCount" not in last["metadata"] and "continue" not in last["metadata"]
    # With a selector kube omits it (a key count would overcount).
    sel = five.get(f"{LEASES}?limit=1&labelSelector=x%21%3Dy").json()
    assert sel["metadata"]["continue"] and "remainingItemCount" not in sel["metadata"]


def test_compaction_keeps_live_objects(five):
    from dashboard.kube.compaction import compact

    for i in range(3):
        five.patch(f"{LEASES}/l1", {"spec": {"holderIdentity": f"h{i}"}})
    five.delete(f"{LEASES}/l2")
    removed = compact(keep=0, history_seconds=0)   # (no pages history kept: issue 38)
    assert removed >= 4
    assert len(five.get(LEASES).json()["items"]) == 4
    assert five.get(f"{LEASES}/l1").json()["spec"]["holderIdentity"] == "h2"


def test_unknown_query_parameters_ignored(five):
    assert five.get(f"{LEASES}?whatever=1&timeout=32s").status_code == 200


def test_watch_param_bool_parsing(five):
    assert five.get(f"{LEASES}?watch=maybe").status_code == 400

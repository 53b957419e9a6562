"""test/e2e/apimachinery/table_conversion.go, ported (upstream reads Pods, PodTemplates and
Nodes as Tables; these read Leases and Jobs)."""
from __future__ import annotations

from conformance.helpers import job_body, lease_body

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def test_return_pod_details(leases, batch, ns, raw):
    """[sig-api-machinery] Servers with support for Table transformation should return pod details

    GET one object as a Table: the printer's columns (with descriptions) and one row with the
    object's name and its values; the row's object is PartialObjectMetadata."""
    leases.create_namespaced_lease(ns, lease_body("pod-1", holder="node-1"))
    status, headers, table = raw("GET", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/pod-1", accept=TABLE)
    assert status == 200 and headers["Content-Type"].startswith("application/json;as=Table")
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Holder", "Age"]
    assert all(c["description"] for c in table["columnDefinitions"] if c["name"] in ("Name", "Age"))
    assert len(table["rows"]) == 1 and table["rows"][0]["cells"][:2] == ["pod-1", "node-1"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    batch.create_namespaced_job(ns, job_body("job-1"))
    status, _, table = raw("GET", f"/apis/batch/v1/namespaces/{ns}/jobs/job-1", accept=TABLE)
    assert status == 200 and [c["name"] for c in table["columnDefinitions"]][:5] == [
        "Name", "Status", "Completions", "Duration", "Age"]


def test_return_chunks_of_table_results_for_list_calls(leases, ns, raw):
    """[sig-api-machinery] Servers with support for Table transformation should return chunks of table results for list calls

    Upstream: 2 pages of PodTemplates as Tables with limit=2: a continue token on the first,
    the second continues it, and rows are the objects in order."""
    for i in range(3):
        leases.create_namespaced_lease(ns, lease_body(f"template-{i:04d}"))
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    status, _, page = raw("GET", path, accept=TABLE, query=[("limit", 2)])
    assert status == 200 and len(page["rows"]) == 2 and page["metadata"]["continue"]
    assert page["columnDefinitions"]
    status, _, rest = raw("GET", path, accept=TABLE, query=[("limit", 2), ("continue", page["metadata"]["continue"])])
    assert status == 200 and [r["cells"][0] for r in rest["rows"]] == ["template-0002"]
    assert not rest["metadata"].get("continue")


def test_return_generic_metadata_details_across_all_namespaces(leases, ns, raw):
    """[sig-api-machinery] Servers with support for Table transformation should return generic metadata details across all namespaces for nodes

    Adapted: Nodes are cluster-scoped and not served; the same check on the all-namespaces
    Lease list: Name and Age columns, one row per object, resourceVersion set."""
    leases.create_namespaced_lease(ns, lease_body("anywhere"))
    status, _, table = raw("GET", "/apis/coordination.k8s.io/v1/leases", accept=TABLE)
    assert status == 200 and table["metadata"]["resourceVersion"]
    names = {c["name"] for c in table["columnDefinitions"]}
    assert {"Name", "Age"} <= names
    assert any(r["cells"][0] == "anywhere" and r["object"]["metadata"]["namespace"] == ns for r in table["rows"])


def test_return_406_for_backend_which_does_not_implement_metadata(leases, ns, raw):
    """[sig-api-machinery] Servers with support for Table transformation should return a 406 for a backend which does not implement metadata [Conformance]

    Adapted: every kubedash resource has a table convertor, so the 406 is asked for the way
    kube gives it to any backend: a Table in a serialization it cannot produce (protobuf) and
    a transform target it does not know."""
    leases.create_namespaced_lease(ns, lease_body("l"))
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/l"
    for accept in ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
                   "application/json;as=Foo;v=v1;g=meta.k8s.io"):
        status, _, body = raw("GET", path, accept=accept)
        assert status == 406 and body["kind"] == "Status" and body["reason"] == "NotAcceptable"

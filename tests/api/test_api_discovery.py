"""Discovery, version, OpenAPI and Table output as kubectl 1.32 consumes them."""
import pytest

from manifests import ENDPOINTS, JOBS, LEASES, endpoints, job, lease

# CI runs this module again on PostgreSQL (.ci/run selects it by the marker).
pytestmark = [pytest.mark.django_db, pytest.mark.portable]
AGG = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"


def test_version(client):
    body = client.get("/version").json()
    assert body["major"] == "1" and body["minor"] == "32"


def test_aggregated_discovery(client):
    r = client.get("/apis", HTTP_ACCEPT=AGG)
    assert r["Content-Type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    groups = {g["metadata"]["name"]: g for g in r.json()["items"]}
    jobs = groups["batch"]["versions"][0]["resources"][0]
    assert jobs["resource"] == "jobs" and jobs["categories"] == ["all"] and jobs["scope"] == "Namespaced"
    assert jobs["responseKind"] == {"group": "batch", "version": "v1", "kind": "Job"}
    core = client.get("/api", HTTP_ACCEPT=AGG).json()
    ep = core["items"][0]["versions"][0]["resources"][0]
    assert ep["shortNames"] == ["ep"] and "watch" in ep["verbs"]


def test_legacy_discovery(client):
    assert client.get("/api", HTTP_ACCEPT="application/json").json()["versions"] == ["v1"]
    groups = client.get("/apis", HTTP_ACCEPT="application/json").json()
    assert {g["name"] for g in groups["groups"]} == {"coordination.k8s.io", "batch", "events.k8s.io",
                                                     "authentication.k8s.io", "authorization.k8s.io"}   # (+ the access reviews)
    res = client.get("/apis/batch/v1").json()
    assert {r["name"] for r in res["resources"]} >= {"jobs", "jobs/status"}
    assert client.get("/api/v1").json()["resources"][0]["shortNames"] == ["ep"]
    assert client.get("/apis/nope/v1").status_code == 404


def test_discovery_with_trailing_slash(client):
    """client-go keeps the slash (upstream "should validate PreferredVersion for each APIGroup")."""
    for group in ("coordination.k8s.io", "batch"):
        body = client.get(f"/apis/{group}/").json()
        assert body["kind"] == "APIGroup" and body["preferredVersion"]["groupVersion"] == f"{group}/v1"
        assert client.get(f"/apis/{group}/v1/").json()["groupVersion"] == f"{group}/v1"
    assert client.get("/api/v1/").json()["kind"] == "APIResourceList"
    assert client.get("/apis/nope/").status_code == 404


def test_openapi_v3(client):
    root = client.get("/openapi/v3").json()
    url = root["paths"]["apis/coordination.k8s.io/v1"]["serverRelativeURL"]
    r = client.get(url)
    assert r["Cache-Control"] == "public, immutable"
    doc = r.json()
    op = doc["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]["patch"]
    assert op["x-kubernetes-group-version-kind"] == {"group": "coordination.k8s.io", "kind": "Lease", "version": "v1"}
    assert any(p.get("name") == "fieldValidation" or "fieldValidation" in p.get("$ref", "") for p in op["parameters"])
    assert "io.k8s.api.coordination.v1.Lease" in doc["components"]["schemas"]


def test_openapi_v2(client):
    assert "io.k8s.api.batch.v1.Job" in client.get("/openapi/v2").json()["definitions"]
    # kubectl's Accept: gnostic's protobuf messages (kube/openapi_proto.py), the same document.
    r = client.get("/openapi/v2", HTTP_ACCEPT="application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
    assert r.status_code == 200
    assert r["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert r.content.startswith(b"\n\x032.0\x12") and b"io.k8s.api.batch.v1.Job" in r.content
    assert b"patchCoordinationV1NamespacedLease" in r.content and b"fieldValidation" in r.content


def test_table_output(api):
    api.post(LEASES, lease())
    api.post(ENDPOINTS, endpoints())
    api.post(JOBS, job())
    t = api.get(LEASES, headers={"Accept": TABLE}).json()
    assert t["kind"] == "Table" and t["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Holder", "Age"]
    row = t["rows"][0]
    assert row["cells"][:2] == ["l1", "node-a"]
    assert row["object"]["kind"] == "PartialObjectMetadata" and row["object"]["metadata"]["namespace"] == "default"
    assert t["metadata"]["resourceVersion"]
    t = api.get(ENDPOINTS, headers={"Accept": TABLE}).json()
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Endpoints", "Age"]
    assert t["rows"][0]["cells"][1] == "10.0.0.1:80"
    t = api.get(JOBS, headers={"Accept": TABLE}).json()
    cols = [(c["name"], c.get("priority", 0)) for c in t["columnDefinitions"]]
    assert cols[:5] == [("Name", 0), ("Status", 0), ("Completions", 0), ("Duration", 0), ("Age", 0)]
    assert {n for n, p in cols if p == 1} == {"Containers", "Images", "Selector"}
    full = api.get(f"{JOBS}?includeObject=Object", headers={"Accept": TABLE}).json()
    assert full["rows"][0]["object"]["kind"] == "Job"
    one = api.get(f"{LEASES}/l1", headers={"Accept": TABLE}).json()
    assert one["kind"] == "Table" and len(one["rows"]) == 1


@pytest.mark.parametrize("accept", [
    "application/json;as=Foo;v=v1;g=meta.k8s.io",
    "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
    "application/json;as=Table;v=v2;g=meta.k8s.io",
    "text/html",
])
def test_unsupported_transform_is_406(api, accept):
    """kube-apiserver refuses an Accept it cannot honour, before doing anything."""
    api.post(LEASES, lease())
    for method, path, body in (("GET", LEASES, None), ("GET", f"{LEASES}/l1", None),
                               ("POST", LEASES, lease("l2")), ("PUT", f"{LEASES}/l1", lease())):
        r = api.request(method, path, body, headers={"Accept": accept})
        assert r.status_code == 406, (method, path, r.content)
        s = r.json()
        assert s["kind"] == "Status" and s["reason"] == "NotAcceptable"
        assert s["message"] == "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    assert api.get(f"{LEASES}/l2").status_code == 404  # the refused create wrote nothing
    # A later range the server can serve wins, as in kube's negotiation.
    assert api.get(LEASES, headers={"Accept": accept + ", application/json"}).json()["kind"] == "LeaseList"


def test_partial_object_metadata(api):
    api.post(LEASES, lease())
    accept = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"
    body = api.get(LEASES, headers={"Accept": accept}).json()
    assert body["kind"] == "PartialObjectMetadataList" and body["apiVersion"] == "meta.k8s.io/v1"
    assert body["items"][0]["kind"] == "PartialObjectMetadata" and "spec" not in body["items"][0]
    one = api.get(f"{LEASES}/l1", headers={"Accept": "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"}).json()
    assert one["kind"] == "PartialObjectMetadata" and one["metadata"]["name"] == "l1"


def test_unsupported_transform_on_watch_is_406(api):
    r = api.get(f"{LEASES}?watch=true&timeoutSeconds=1", headers={"Accept": "application/json;as=Foo;v=v1;g=meta.k8s.io"})
    assert r.status_code == 406 and r.json()["reason"] == "NotAcceptable"

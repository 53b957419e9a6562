"""test/e2e/apimachinery/discovery.go, ported."""
from __future__ import annotations

from kubernetes import client as k8s

GROUPS = ("coordination.k8s.io", "batch")


def test_validate_preferred_version_for_each_api_group(api_client, raw):
    """[sig-api-machinery] Discovery should validate PreferredVersion for each APIGroup [Conformance]

    Upstream lists /apis, then GETs /apis/<group>/ (with the slash, as client-go builds it) and
    checks that the group's preferredVersion is the one /apis announced."""
    groups = k8s.ApisApi(api_client).get_api_versions()
    assert {g.name for g in groups.groups} >= set(GROUPS)
    for group in groups.groups:
        status, _, body = raw("GET", f"/apis/{group.name}/")
        assert status == 200, body
        assert body["preferredVersion"]["groupVersion"] == group.preferred_version.group_version
        assert body["preferredVersion"] == {"groupVersion": group.preferred_version.group_version,
                                            "version": group.preferred_version.version}


def test_locate_group_version_and_resource_within_each_api_group(api_client, raw):
    """[sig-api-machinery] Discovery should locate the groupVersion and a resource within each APIGroup [Conformance]

    Upstream checks /apis/<group>/<version> names the group version and lists a resource; the
    core group's /api/v1 likewise. Adapted: the resources are leases, jobs and endpoints."""
    expected = {"coordination.k8s.io/v1": "leases", "batch/v1": "jobs"}
    for gv, resource in expected.items():
        status, _, body = raw("GET", f"/apis/{gv}")
        assert status == 200 and body["groupVersion"] == gv
        assert resource in {r["name"] for r in body["resources"]}
    resources = k8s.CoreV1Api(api_client).get_api_resources()
    assert resources.group_version == "v1" and "endpoints" in {r.name for r in resources.resources}


def test_accurately_determine_present_and_missing_resources(raw):
    """[sig-api-machinery] Discovery should accurately determine present and missing resources

    Upstream asks discovery for served and unserved group versions: present ones answer, a
    missing one is 404 (a NotFound Status)."""
    assert raw("GET", "/apis/batch/v1")[0] == 200
    status, _, body = raw("GET", "/apis/batch/v2")
    assert status == 404 and body["kind"] == "Status" and body["reason"] == "NotFound"
    assert raw("GET", "/apis/nonexistent.example.com/v1")[0] == 404


def test_support_raw_aggregated_discovery_endpoint_accept_headers(raw):
    """[sig-api-machinery] AggregatedDiscovery should support raw aggregated discovery endpoint Accept headers [Conformance]

    /api and /apis with the aggregated v2 (and v2beta1) Accept headers answer an
    APIGroupDiscoveryList in that media type; a plain Accept gets the legacy documents."""
    for version in ("v2", "v2beta1"):
        accept = f"application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
        for path in ("/api", "/apis"):
            status, headers, body = raw("GET", path, accept=accept)
            assert status == 200 and headers["Content-Type"] == accept, headers
            assert body["kind"] == "APIGroupDiscoveryList" and body["apiVersion"] == f"apidiscovery.k8s.io/{version}"
    assert raw("GET", "/apis")[2]["kind"] == "APIGroupList"
    assert raw("GET", "/api")[2]["kind"] == "APIVersions"

"""test/e2e/apimachinery/chunking.go and the list tests of test/integration/apiserver/apiserver_test.go, ported.

Upstream pages PodTemplates (e2e) and ReplicaSets (integration); these page Leases."""
from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from conformance.helpers import lease_body


def _fill(leases, ns, count, labels=None):
    for i in range(count):
        leases.create_namespaced_lease(ns, lease_body(f"template-{i:04d}", labels=labels(i) if labels else None))


def test_return_chunks_of_results_for_list_calls(leases, ns):
    """[sig-api-machinery] Servers with support for API chunking should return chunks of results for list calls [Conformance]

    Upstream: 400 objects, pages of a random size; every page but the last has a continue
    token and a remainingItemCount that adds up; all pages share one resourceVersion; the pages
    together are the full, ordered list. Here 60 objects in pages of 7."""
    total = 60
    _fill(leases, ns, total)
    found, last_rv, token, lists = 0, "", "", 0
    while True:
        page = leases.list_namespaced_lease(ns, limit=7, _continue=token or None)
        lists += 1
        assert len(page.items) <= 7
        if last_rv:
            assert page.metadata.resource_version == last_rv
        last_rv = page.metadata.resource_version
        for i, item in enumerate(page.items):
            assert item.metadata.name == f"template-{found + i:04d}"
        found += len(page.items)
        token = page.metadata._continue
        if not token:
            assert page.metadata.remaining_item_count is None
            break
        assert page.metadata.remaining_item_count == total - found
    assert found == total and lists == (total + 6) // 7

    # The same with a selector: no remainingItemCount (kube cannot count a filtered rest).
    page = leases.list_namespaced_lease(ns, limit=7, label_selector="!missing")
    assert page.metadata._continue and page.metadata.remaining_item_count is None


def test_continue_listing_after_original_version_compacted(leases, ns, compact):
    """[sig-api-machinery] Servers with support for API chunking should support continue listing from the last key if the original version has been compacted away, though the list is inconsistent [Slow] [Conformance]

    Upstream waits for etcd's periodic compaction; the port compacts explicitly. A continue
    token whose revision is gone answers 410 Expired with a fresh token in the Status; that
    token continues at the current revision, so an object created meanwhile shows up."""
    _fill(leases, ns, 20)
    first = leases.list_namespaced_lease(ns, limit=8)
    token = first.metadata._continue
    assert token and len(first.items) == 8
    leases.create_namespaced_lease(ns, lease_body("template-9999"))  # after the first page
    for i in range(3):  # move past the snapshot, then compact it away
        leases.patch_namespaced_lease("template-0000", ns, {"spec": {"holderIdentity": f"h{i}"}})
    current = int(leases.list_namespaced_lease(ns, limit=1).metadata.resource_version)
    compact(current - 1, current)
    with pytest.raises(ApiException) as err:
        leases.list_namespaced_lease(ns, limit=8, _continue=token)
    assert err.value.status == 410
    status = json.loads(err.value.body)
    assert status["reason"] == "Expired" and "continue parameter is too old" in status["message"]
    fresh = status["metadata"]["continue"]
    rest, token = [], fresh
    while token:
        page = leases.list_namespaced_lease(ns, limit=8, _continue=token)
        rest += [i.metadata.name for i in page.items]
        token = page.metadata._continue
    assert rest == [f"template-{i:04d}" for i in range(8, 20)] + ["template-9999"]


def test_api_list_chunking(leases, ns):
    """TestAPIListChunking (test/integration/apiserver): a pager with page size 1; a create
    between pages does not show up; the result has the first page's resourceVersion."""
    _fill(leases, ns, 4)
    items, calls, token, first_rv = [], 0, None, None
    while True:
        page = leases.list_namespaced_lease(ns, limit=1, _continue=token)
        calls += 1
        if calls == 1:
            first_rv = page.metadata.resource_version
        if calls == 2:
            leases.create_namespaced_lease(ns, lease_body("template-0005"))
        assert page.metadata.resource_version == first_rv
        items += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert calls == 4 and items == [f"template-{i:04d}" for i in range(4)]


def test_api_list_chunking_with_label_selector(leases, ns):
    """TestAPIListChunkingWithLabelSelector (test/integration/apiserver): 10 objects, odd ones
    selected, limit 3: two calls, five items, one resourceVersion."""
    _fill(leases, ns, 10, labels=lambda i: {"odd-index": "true" if i % 2 else "false"})
    items, calls, token, rv = [], 0, None, None
    while True:
        page = leases.list_namespaced_lease(ns, limit=3, label_selector="odd-index=true", _continue=token)
        calls += 1
        rv = rv or page.metadata.resource_version
        assert page.metadata.resource_version == rv
        items += [i.metadata.name for i in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert calls == 2 and items == [f"template-{i:04d}" for i in (1, 3, 5, 7, 9)]


def test_list_resource_version_0(leases, ns):
    """TestListResourceVersion0 (test/integration/apiserver): a pager (page size 3) listing
    at resourceVersion=0 gets all 10 objects. Adapted: kubedash has no watch cache, so it
    pages (kube's cache would answer all at once); both modes are accepted upstream."""
    _fill(leases, ns, 10)
    items, token = [], None
    while True:
        page = leases.list_namespaced_lease(ns, limit=3, resource_version=None if token else "0", _continue=token)
        items += page.items
        token = page.metadata._continue
        if not token:
            break
    assert len(items) == 10


def test_name_in_field_selector(leases, ns):
    """TestNameInFieldSelector (test/integration/apiserver): metadata.name / metadata.namespace
    field selectors across namespaces (upstream uses Secrets; Leases here)."""
    spaces = [f"{ns}-{i}" for i in range(3)]
    for space in spaces:
        leases.create_namespaced_lease(space, lease_body("foo"))
        leases.create_namespaced_lease(space, lease_body("bar"))

    def count(namespace, selector):
        if namespace:
            found = leases.list_namespaced_lease(namespace, field_selector=selector).items
        else:
            found = leases.list_lease_for_all_namespaces(field_selector=selector).items
        return len([i for i in found if i.metadata.namespace in spaces])

    assert count("", "metadata.name=foo") == 3
    assert count("", "metadata.name=foo,metadata.name=bar") == 0
    assert count("", f"metadata.name=foo,metadata.namespace={spaces[1]}") == 1
    assert count(spaces[1], f"metadata.name=foo,metadata.namespace={spaces[1]}") == 1
    assert count(spaces[1], f"metadata.name=foo,metadata.namespace={spaces[2]}") == 0
    assert count(spaces[1], "metadata.name=foo,metadata.namespace=") == 0


def test_list_options(leases, ns, compact):
    """TestListOptions (test/integration/apiserver): every combination of limit (0, 6) x
    continue (none, valid, invalid) x resourceVersion (none, 0, compacted, invalid) x
    resourceVersionMatch (none, NotOlderThan, Exact, invalid) answers as kube-apiserver does,
    checked in upstream's order. Upstream's watch-cache-enabled variant answers some lists
    from memory ignoring limit; kubedash always pages, i.e. the watch-cache-disabled variant."""
    compacted_rv = oldest_uncompacted = None
    for i in range(15):
        created = leases.create_namespaced_lease(ns, lease_body(f"test-{i}"))
        if i == 0:
            compacted_rv = created.metadata.resource_version
        if i < 5:
            leases.delete_namespaced_lease(f"test-{i}", ns)
            oldest_uncompacted = created.metadata.resource_version
    current = int(leases.list_namespaced_lease(ns).metadata.resource_version)
    compact(int(oldest_uncompacted), current)
    valid_token = leases.list_namespaced_lease(ns, limit=6).metadata._continue
    assert valid_token
    failures = []
    for limit in (0, 6):
        for token in ("", valid_token, "invalidContinueToken"):
            for rv in ("", "0", compacted_rv, "invalid"):
                for match in ("", "NotOlderThan", "Exact", "InvalidMatch"):
                    problem = _list_options_case(leases, ns, limit, token, rv, match, compacted_rv)
                    if problem:
                        failures.append(f"limit={limit} continue={'valid' if token == valid_token else token or 'empty'} "
                                        f"rv={rv or 'empty'} match={match or 'empty'}: {problem}")
    assert not failures, "\n".join(failures)


def _list_options_case(leases, ns, limit, token, rv, match, compacted_rv):
    kwargs = {}
    if limit:
        kwargs["limit"] = limit
    if token:
        kwargs["_continue"] = token
    if rv:
        kwargs["resource_version"] = rv
    if match:
        kwargs["resource_version_match"] = match
    try:
        result, err = leases.list_namespaced_lease(ns, **kwargs), ""
    except ApiException as exc:
        result, err = None, json.loads(exc.body)["message"]

    def expect(text):
        return None if text in err else f"expected an error containing {text!r}, got {err or 'success'!r}"

    if rv == "" and match:
        return expect("resourceVersionMatch is forbidden unless resourceVersion is provided")
    if token and match:
        return expect("resourceVersionMatch is forbidden when continue is provided")
    if match == "InvalidMatch":
        return expect("supported values")
    if match == "Exact" and rv == "0":
        return expect('resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
    if rv == "invalid":
        return expect("Invalid value")
    if token == "invalidContinueToken":
        return expect("continue key is not valid")
    if token and rv not in ("", "0"):
        return expect("specifying resource version is not allowed when using continue")
    if rv == compacted_rv and (match == "Exact" or (limit and not match)):
        return expect("The resourceVersion for the provided list is too old")
    if err:
        return f"unexpected error {err!r}"
    count = len(result.items)
    if token:
        return None if count == 4 else f"expected 4 items, got {count}"
    if limit:
        return None if count == limit else f"expected {limit} items, got {count}"
    return None if count == 10 else f"expected 10 items, got {count}"


def test_metadata_client(leases, ns, raw, kube_server):
    """TestMetadataClient (test/integration/apiserver): the metadata client lists, gets and
    watches PartialObjectMetadata. Adapted: the Python client has no metadata client, so the
    same Accept headers client-go's metadata client sends are sent through the raw client."""
    leases.create_namespaced_lease(ns, lease_body("meta", labels={"a": "b"}))
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
    status, _, body = raw("GET", path, accept=accept)
    assert status == 200 and body["kind"] == "PartialObjectMetadataList"
    assert body["items"][0]["kind"] == "PartialObjectMetadata" and body["items"][0]["metadata"]["labels"] == {"a": "b"}
    assert "spec" not in body["items"][0]
    accept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
    status, _, one = raw("GET", f"{path}/meta", accept=accept)
    assert status == 200 and one["kind"] == "PartialObjectMetadata" and one["metadata"]["name"] == "meta"
    # The watch: every event's object is PartialObjectMetadata, bookmarks too.
    with kube_server.watch(f"{path}?watch=true&resourceVersion={one['metadata']['resourceVersion']}"
                           "&allowWatchBookmarks=true",
                           headers={"Accept": accept}) as w:
        assert w.status == 200
        leases.patch_namespaced_lease("meta", ns, {"metadata": {"labels": {"a": "c"}}})
        ev = w.next()
        assert ev["type"] == "MODIFIED" and ev["object"]["kind"] == "PartialObjectMetadata"
        assert ev["object"]["apiVersion"] == "meta.k8s.io/v1" and set(ev["object"]) == {"kind", "apiVersion", "metadata"}
        assert ev["object"]["metadata"]["labels"] == {"a": "c"}
        leases.delete_namespaced_lease("meta", ns)
        ev = w.next()
        assert ev["type"] == "DELETED" and ev["object"]["kind"] == "PartialObjectMetadata"

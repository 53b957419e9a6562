"""test/e2e/apimachinery/watchlist.go, ported (upstream lists Secrets through client-go's
WatchList path; the Python client has no WatchList, so the port makes the same streaming
request: a watch with sendInitialEvents, read with the client's Watch)."""
from __future__ import annotations

from kubernetes import watch

from conformance.helpers import lease_body

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def test_watchlist_requested_by_informers(leases, ns):
    """[sig-api-machinery] API Streaming (aka. WatchList) [Serial] [Feature:WatchList] should be requested by informers when WatchListClient is enabled

    Adapted: the request client-go's reflector makes (watch, sendInitialEvents=true,
    resourceVersionMatch=NotOlderThan, allowWatchBookmarks=true) answers the existing objects as
    ADDED, then a BOOKMARK annotated k8s.io/initial-events-end whose resourceVersion is the
    list's; later changes follow on the same stream."""
    for i in range(5):
        leases.create_namespaced_lease(ns, lease_body(f"secret-{i}"))
    w = watch.Watch()
    events = w.stream(leases.list_namespaced_lease, ns, send_initial_events=True,
                      resource_version_match="NotOlderThan", allow_watch_bookmarks=True, timeout_seconds=30)
    added, bookmark = [], None
    for ev in events:
        if ev["type"] == "BOOKMARK":
            annotations = ev["raw_object"]["metadata"].get("annotations") or {}
            if annotations.get(INITIAL_EVENTS_END) == "true":
                bookmark = ev["raw_object"]
                break
            continue
        assert ev["type"] == "ADDED"
        added.append(ev["object"].metadata)
    assert sorted(m.name for m in added) == [f"secret-{i}" for i in range(5)]
    assert int(bookmark["metadata"]["resourceVersion"]) >= max(int(m.resource_version) for m in added)
    leases.create_namespaced_lease(ns, lease_body("secret-5"))
    for ev in events:
        if ev["type"] != "BOOKMARK":
            assert (ev["type"], ev["object"].metadata.name) == ("ADDED", "secret-5")
            break
    w.stop()

"""Watch streams against a live server (Daphne): order, resume, initial events, bookmarks,
timeouts, selector transitions, single-object watches, 410 after compaction, auth, Tables."""
from __future__ import annotations

import time
import uuid

import pytest

from manifests import lease

GROUP = "/apis/coordination.k8s.io/v1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


@pytest.fixture
def ns():
    return "w-" + uuid.uuid4().hex[:8]


def leases(ns):
    return f"{GROUP}/namespaces/{ns}/leases"


def create(server, ns, name, **meta):
    status, _, body = server.request("POST", leases(ns), lease(name, ns=ns, **meta))
    assert status == 201, body
    return body


def patch(server, ns, name, body):
    status, _, out = server.request("PATCH", f"{leases(ns)}/{name}", body, content_type="application/merge-patch+json")
    assert status == 200, out
    return out


def delete(server, ns, name):
    status, _, out = server.request("DELETE", f"{leases(ns)}/{name}")
    assert status == 200, out


def summary(events):
    return [(e["type"], e["object"]["metadata"].get("name")) for e in events]


def test_initial_added_then_live_events_in_order(kube_server, ns):
    create(kube_server, ns, "a")
    create(kube_server, ns, "b")
    with kube_server.watch(f"{leases(ns)}?watch=true") as w:
        assert w.status == 200
        assert summary(w.events(2)) == [("ADDED", "a"), ("ADDED", "b")]
        create(kube_server, ns, "c")
        patch(kube_server, ns, "a", {"spec": {"holderIdentity": "z"}})
        delete(kube_server, ns, "b")
        events = w.events(3)
    assert summary(events) == [("ADDED", "c"), ("MODIFIED", "a"), ("DELETED", "b")]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3
    assert events[1]["object"]["spec"]["holderIdentity"] == "z"


def test_resume_from_resource_version_sends_each_event_once(kube_server, ns):
    first = create(kube_server, ns, "a")
    patch(kube_server, ns, "a", {"spec": {"holderIdentity": "x"}})
    create(kube_server, ns, "b")
    delete(kube_server, ns, "a")
    rv = first["metadata"]["resourceVersion"]
    with kube_server.watch(f"{leases(ns)}?watch=1&resourceVersion={rv}") as w:
        assert summary(w.events(3)) == [("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
        # No more of those: the next event is a later write's (a repeat would come before it).
        create(kube_server, ns, "later")
        assert summary(w.events(1)) == [("ADDED", "later")], "no more events expected"


def test_zero_resource_version_starts_from_current_state(kube_server, ns):
    create(kube_server, ns, "a")
    with kube_server.watch(f"{leases(ns)}?watch=true&resourceVersion=0") as w:
        assert summary(w.events(1)) == [("ADDED", "a")]


def test_send_initial_events_ends_with_annotated_bookmark(kube_server, ns):
    create(kube_server, ns, "a")
    create(kube_server, ns, "b")
    url = f"{leases(ns)}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    with kube_server.watch(url) as w:
        events = w.events(3)
        assert summary(events)[:2] == [("ADDED", "a"), ("ADDED", "b")]
        mark = events[2]
        assert mark["type"] == "BOOKMARK"
        assert mark["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert int(mark["object"]["metadata"]["resourceVersion"]) >= int(events[1]["object"]["metadata"]["resourceVersion"])
        create(kube_server, ns, "c")
        nxt = w.next()
        while nxt["type"] == "BOOKMARK":
            nxt = w.next()
        assert summary([nxt]) == [("ADDED", "c")]


@pytest.mark.parametrize("query", [
    "sendInitialEvents=true",
    "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
    "resourceVersionMatch=NotOlderThan&resourceVersion=1",
    "sendInitialEvents=true&resourceVersionMatch=Exact&allowWatchBookmarks=true",
])
def test_invalid_initial_events_combinations_are_rejected(kube_server, ns, query):
    status, _, body = kube_server.request("GET", f"{leases(ns)}?watch=true&{query}")
    assert status == 422 and body["reason"] == "Invalid" and body["details"]["kind"] == "ListOptions"


def test_periodic_bookmarks_carry_the_latest_revision(kube_server, ns):
    # The live server sends bookmarks every second (KUBEDASH_WATCH_BOOKMARK_SECONDS=1).
    with kube_server.watch(f"{leases(ns)}?watch=true&allowWatchBookmarks=true") as w:
        created = create(kube_server, ns, "a")
        seen = w.events(3, timeout=5)
    types = [e["type"] for e in seen]
    assert types[0] == "ADDED" and types[1:] == ["BOOKMARK", "BOOKMARK"]
    assert int(seen[-1]["object"]["metadata"]["resourceVersion"]) >= int(created["metadata"]["resourceVersion"])
    assert set(seen[-1]["object"]) == {"kind", "apiVersion", "metadata"}


def test_no_bookmarks_unless_asked(kube_server, ns):
    with kube_server.watch(f"{leases(ns)}?watch=true&timeoutSeconds=3") as w:
        assert w.next(timeout=6) is None  # the stream ends at the timeout, with no event at all


def test_timeout_ends_the_stream_cleanly(kube_server, ns):
    started = time.monotonic()
    with kube_server.watch(f"{leases(ns)}?watch=true&timeoutSeconds=1") as w:
        assert w.next(timeout=5) is None
    assert 0.8 < time.monotonic() - started < 4


def test_connection_is_reused_after_a_watch_times_out(kube_server, ns):
    # An idle watch is ended by its own subscriber, not by its (long returned) application:
    # the chunked body must still be completed so that HTTP/1.1 keep-alive carries on.
    with kube_server.watch(f"{leases(ns)}?watch=true&allowWatchBookmarks=true&timeoutSeconds=2") as w:
        seen = w.events(5, timeout=6)
        assert seen and {e["type"] for e in seen} == {"BOOKMARK"}   # (periodic and final), then the end
        assert w.response.read() == b"" and not w.response.will_close
        sock = w.conn.sock
        create(kube_server, ns, "after")
        w.conn.request("GET", f"{leases(ns)}/after", headers={"Authorization": f"Bearer {kube_server.admin_token}"})
        again = w.conn.getresponse()
        assert again.status == 200 and b'"after"' in again.read()
        assert w.conn.sock is sock   # the same connection, not a silent reconnect


def test_label_selector_transitions(kube_server, ns):
    create(kube_server, ns, "a", labels={"role": "leader"})
    create(kube_server, ns, "b", labels={"role": "standby"})
    with kube_server.watch(f"{leases(ns)}?watch=true&labelSelector=role%3Dleader") as w:
        assert summary(w.events(1)) == [("ADDED", "a")]
        patch(kube_server, ns, "a", {"metadata": {"labels": {"role": "standby"}}})   # stops matching
        patch(kube_server, ns, "b", {"metadata": {"labels": {"role": "leader"}}})    # starts matching
        patch(kube_server, ns, "b", {"spec": {"holderIdentity": "q"}})               # still matching
        patch(kube_server, ns, "a", {"spec": {"holderIdentity": "q"}})               # still not matching
        delete(kube_server, ns, "b")
        events = w.events(4)
    assert summary(events) == [("DELETED", "a"), ("ADDED", "b"), ("MODIFIED", "b"), ("DELETED", "b")]
    assert events[0]["object"]["metadata"]["labels"] == {"role": "standby"}


def test_resumed_selector_watch_knows_what_matched(kube_server, ns):
    first = create(kube_server, ns, "a", labels={"role": "leader"})
    with kube_server.watch(f"{leases(ns)}?watch=true&labelSelector=role%3Dleader"
                           f"&resourceVersion={first['metadata']['resourceVersion']}") as w:
        patch(kube_server, ns, "a", {"metadata": {"labels": {"role": "standby"}}})
        assert summary(w.events(1)) == [("DELETED", "a")]


@pytest.mark.parametrize("style", ["path", "field"])
def test_single_object_watch(kube_server, ns, style):
    create(kube_server, ns, "a")
    create(kube_server, ns, "b")
    url = (f"{GROUP}/watch/namespaces/{ns}/leases/a" if style == "path"
           else f"{leases(ns)}?watch=true&fieldSelector=metadata.name%3Da")
    with kube_server.watch(url) as w:
        assert summary(w.events(1)) == [("ADDED", "a")]
        patch(kube_server, ns, "b", {"spec": {"holderIdentity": "x"}})
        patch(kube_server, ns, "a", {"spec": {"holderIdentity": "y"}})
        assert summary(w.events(1)) == [("MODIFIED", "a")]


def test_deprecated_watch_paths(kube_server, ns):
    create(kube_server, ns, "a")
    for url in (f"{GROUP}/watch/namespaces/{ns}/leases", f"{GROUP}/watch/leases?fieldSelector=metadata.namespace%3D{ns}"):
        with kube_server.watch(url) as w:
            assert summary(w.events(1)) == [("ADDED", "a")]


def test_too_old_resource_version_is_an_error_event(kube_server, ns):
    first = create(kube_server, ns, "a")
    patch(kube_server, ns, "a", {"spec": {"holderIdentity": "x"}})
    kube_server.manage("compact", "--keep", "0", "--keep-seconds", "0")
    with kube_server.watch(f"{leases(ns)}?watch=true&resourceVersion={first['metadata']['resourceVersion']}") as w:
        assert w.status == 200
        ev = w.next()
        assert ev["type"] == "ERROR"
        assert ev["object"]["code"] == 410 and ev["object"]["reason"] == "Expired"
        assert ev["object"]["message"].startswith(f"too old resource version: {first['metadata']['resourceVersion']} (")
        assert w.next(timeout=3) is None


def test_future_resource_version_is_rejected(kube_server, ns):
    status, _, body = kube_server.request("GET", f"{leases(ns)}?watch=true&resourceVersion=999999999")
    assert status == 504 and "Too large resource version" in body["message"]


def test_watch_auth(kube_server, ns):
    status, _, body = kube_server.request("GET", f"{leases(ns)}?watch=true", token="bogus")
    assert status == 401 and body["reason"] == "Unauthorized"
    kube_server.manage("issue_token", "w-viewer", "--role", "viewer")
    viewer = kube_server.token("w-viewer", "viewer")
    with kube_server.watch(f"{leases(ns)}?watch=true&timeoutSeconds=1", token=viewer) as w:
        assert w.status == 200


def test_table_watch_sends_column_definitions_first(kube_server, ns):
    create(kube_server, ns, "a")
    with kube_server.watch(f"{leases(ns)}?watch=true", headers={"Accept": TABLE}) as w:
        first = w.next()
        assert first["object"]["kind"] == "Table" and first["object"]["columnDefinitions"]
        assert first["object"]["rows"][0]["cells"][:2] == ["a", "node-a"]
        create(kube_server, ns, "b")
        second = w.next()
        assert second["type"] == "ADDED" and not second["object"].get("columnDefinitions")
        assert second["object"]["rows"][0]["cells"][0] == "b"


def test_stale_state_plus_events_equals_fresh_state(kube_server, ns):
    """The invariant informers rely on, with writes racing the list and the watch."""
    import random
    import threading

    for i in range(10):
        create(kube_server, ns, f"o{i}")

    written = threading.Semaphore(0)   # one release per acknowledged write

    def writer(seed):
        rnd = random.Random(seed)
        for _ in range(30):
            name = f"o{rnd.randrange(14)}"
            op = rnd.choice(["patch", "create", "delete"])
            if op == "create":
                kube_server.request("POST", leases(ns), lease(name, ns=ns))
            elif op == "delete":
                kube_server.request("DELETE", f"{leases(ns)}/{name}")
            else:
                kube_server.request("PATCH", f"{leases(ns)}/{name}", {"spec": {"holderIdentity": f"h{rnd.random()}"}},
                                    content_type="application/merge-patch+json")
            written.release()

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for _ in range(5):   # the list and the watch start while the writers are under way
        assert written.acquire(timeout=30), "the writers did not get going"
    _, _, stale = kube_server.request("GET", leases(ns))
    state = {i["metadata"]["name"]: i for i in stale["items"]}
    with kube_server.watch(f"{leases(ns)}?watch=true&resourceVersion={stale['metadata']['resourceVersion']}") as w:
        for t in threads:
            t.join()
        marker = create(kube_server, ns, "zz-marker")   # the last write in this namespace
        _, _, fresh = kube_server.request("GET", leases(ns))
        last = int(stale["metadata"]["resourceVersion"])
        while True:
            ev = w.next(timeout=5)
            assert ev is not None, "stream ended before the marker arrived"
            rv = int(ev["object"]["metadata"]["resourceVersion"])
            assert rv > last  # in order, each once
            last = rv
            name = ev["object"]["metadata"]["name"]
            if ev["type"] == "DELETED":
                state.pop(name, None)
            else:
                state[name] = ev["object"]
            if name == "zz-marker":
                assert ev["object"] == marker
                break
    assert state == {i["metadata"]["name"]: i for i in fresh["items"]}


def test_resumed_watch_sees_only_its_kind(kube_server, ns):
    first = create(kube_server, ns, "a")
    status, _, _ = kube_server.request("POST", f"/api/v1/namespaces/{ns}/endpoints",
                                       {"metadata": {"name": "svc"}, "subsets": [{"addresses": [{"ip": "10.9.0.1"}],
                                                                                   "ports": [{"port": 80}]}]})
    assert status == 201
    create(kube_server, ns, "b")
    with kube_server.watch(f"{leases(ns)}?watch=true&resourceVersion={first['metadata']['resourceVersion']}") as w:
        assert summary(w.events(1)) == [("ADDED", "b")]
        # Nothing of the Endpoints: the next event is a later Lease write's.
        create(kube_server, ns, "c")
        assert summary(w.events(1)) == [("ADDED", "c")]

"""The watch hub rests while nobody watches (dashboard/kube/hub.py, notify.Follower): its
follower stops reading the revision log when the last watcher leaves, and a watch opened later
from an older resourceVersion still gets exactly the events after it (read from the log), then
the live ones; 410 when that version was compacted away meanwhile."""
from __future__ import annotations

import http.client
import re
import uuid

import pytest

from conftest import eventually, served
from manifests import lease

GROUP = "/apis/coordination.k8s.io/v1"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # Its own server: the follower is per process, and the shared one has other tests' watches.
    with served(tmp_path_factory.mktemp("kubedash-rest")) as server:
        yield server


def leases(ns):
    return f"{GROUP}/namespaces/{ns}/leases"


def gauge(server, name: str) -> float | None:
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {server.admin_token}"})
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    assert resp.status == 200, text
    found = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    return float(found.group(1)) if found else None


def write(server, method, ns, name="", body=None, expect=(200, 201)):
    path = f"{leases(ns)}/{name}" if name else leases(ns)
    ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
    status, _, out = server.request(method, path, body, content_type=ctype)
    assert status in expect, out
    return int(out["metadata"]["resourceVersion"]) if method != "DELETE" else None


def summary(events):
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


def test_follower_rests_without_watchers_and_a_later_watch_misses_nothing(server):
    ns = "rest-" + uuid.uuid4().hex[:6]
    start = write(server, "POST", ns, body=lease("first", ns=ns))
    with server.watch(f"{leases(ns)}?watch=true&resourceVersion={start}") as w:
        assert w.status == 200
        eventually(lambda: gauge(server, "kubedash_watch_follower_running") == 1, what="the follower reading")
        seen = write(server, "POST", ns, body=lease("a", ns=ns))
        assert summary(w.events(1)) == [("ADDED", "a")]
    eventually(lambda: gauge(server, "kubedash_watch_follower_running") == 0, what="the follower resting")

    # Written while nobody watches: the follower does not read them (it stays at rest, and the
    # hub reports nothing left to fan out).
    write(server, "POST", ns, body=lease("b", ns=ns))
    write(server, "PATCH", ns, "a", {"spec": {"holderIdentity": "x"}})
    write(server, "DELETE", ns, "b")
    write(server, "POST", ns, body=lease("c", ns=ns))
    assert gauge(server, "kubedash_watch_follower_running") == 0
    assert gauge(server, "kubedash_watch_hub_lag_revisions") == 0

    # From the last version the first watch saw: exactly what came after it, once, in order;
    # then the live events (the follower is back).
    with server.watch(f"{leases(ns)}?watch=true&resourceVersion={seen}") as w:
        assert w.status == 200
        events = w.events(4)
        assert summary(events) == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b"), ("ADDED", "c")]
        assert events[1]["object"]["spec"]["holderIdentity"] == "x"
        assert gauge(server, "kubedash_watch_follower_running") == 1
        write(server, "POST", ns, body=lease("d", ns=ns))
        write(server, "PATCH", ns, "c", {"spec": {"holderIdentity": "y"}})
        assert summary(w.events(2)) == [("ADDED", "d"), ("MODIFIED", "c")]
        # A second watcher from now on, while the first keeps its own: no replay for either.
        now = write(server, "PATCH", ns, "d", {"spec": {"holderIdentity": "z"}})
        assert summary(w.events(1)) == [("MODIFIED", "d")]
        with server.watch(f"{leases(ns)}?watch=true&resourceVersion={now}") as w2:
            assert w2.status == 200
            write(server, "DELETE", ns, "c")
            assert summary(w.events(1)) == summary(w2.events(1)) == [("DELETED", "c")]
    eventually(lambda: gauge(server, "kubedash_watch_follower_running") == 0, what="the follower resting again")


def test_a_watch_from_a_version_compacted_while_resting_gets_410(server):
    ns = "rest-" + uuid.uuid4().hex[:6]
    old = write(server, "POST", ns, body=lease("a", ns=ns))
    with server.watch(f"{leases(ns)}?watch=true&resourceVersion={old}") as w:
        write(server, "PATCH", ns, "a", {"spec": {"holderIdentity": "x"}})
        assert summary(w.events(1)) == [("MODIFIED", "a")]
    eventually(lambda: gauge(server, "kubedash_watch_follower_running") == 0, what="the follower resting")
    write(server, "PATCH", ns, "a", {"spec": {"holderIdentity": "y"}})
    server.manage("compact", "--keep", "0", "--keep-seconds", "0")
    with server.watch(f"{leases(ns)}?watch=true&resourceVersion={old}") as w:
        assert w.status == 200
        ev = w.next()
        assert ev["type"] == "ERROR" and ev["object"]["code"] == 410
        assert w.next(timeout=3) is None
    # ... and the newest version still works: the next write arrives, nothing before it.
    newest = write(server, "PATCH", ns, "a", {"spec": {"holderIdentity": "z"}})
    with server.watch(f"{leases(ns)}?watch=true&resourceVersion={newest}") as w:
        assert w.status == 200
        write(server, "POST", ns, body=lease("b", ns=ns))
        assert summary(w.events(1)) == [("ADDED", "b")]

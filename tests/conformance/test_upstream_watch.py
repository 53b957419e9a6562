"""test/e2e/apimachinery/watch.go, ported (upstream watches ConfigMaps; these watch Leases).

Upstream's watchConfigMap/expectEvent helpers become `_watch` + `_expect` here: a watch with
the official client's raw stream (Watch().stream on the list function), read with a timeout.
Where upstream expects no notification for a while, the port makes a later change and expects
its event next: nothing that should not come came before it (no fixed wait)."""
from __future__ import annotations

import queue
import threading

import pytest
from kubernetes import watch

from conformance.helpers import lease_body

LABEL = "watch-this-lease"


class Watcher:
    """A background watch (the official client's Watch.stream) feeding a queue."""

    def __init__(self, list_fn, **kwargs):
        self.events: queue.Queue = queue.Queue()
        self.w = watch.Watch()
        kwargs.setdefault("timeout_seconds", 60)
        self.thread = threading.Thread(target=self._run, args=(list_fn, kwargs), daemon=True)
        self.thread.start()

    def _run(self, list_fn, kwargs):
        try:
            for ev in self.w.stream(list_fn, **kwargs):
                self.events.put(ev)
        except Exception as exc:  # surfaces in expect()
            self.events.put(exc)

    def expect(self, kind: str, name: str, timeout: float = 10.0, **check):
        ev = self.events.get(timeout=timeout)
        assert not isinstance(ev, Exception), ev
        assert (ev["type"], ev["object"].metadata.name) == (kind, name), (ev["type"], ev["object"].metadata.name)
        return ev["object"]

    def stop(self):
        self.w.stop()


@pytest.fixture
def watchers():
    started = []

    def start(list_fn, **kwargs):
        # From the current revision, not "now" as the server sees it: no event can slip
        # between starting the thread and the stream opening.
        kwargs.setdefault("resource_version", list_fn(namespace=kwargs["namespace"]).metadata.resource_version)
        w = Watcher(list_fn, **kwargs)
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()


def _mutate(leases, ns, name, holder):
    return leases.patch_namespaced_lease(name, ns, {"spec": {"holderIdentity": holder}})


def test_observe_add_update_delete_notifications(leases, ns, watchers):
    """[sig-api-machinery] Watchers should observe add, update, and delete watch notifications on configmaps [Conformance]

    Three label-selected watches (A, B, A or B); create/modify/delete objects labelled A and
    B; each watch sees exactly its own events."""
    sel = f"{LABEL}"
    wa = watchers(leases.list_namespaced_lease, namespace=ns, label_selector=f"{sel}=multiple-watchers-A")
    wb = watchers(leases.list_namespaced_lease, namespace=ns, label_selector=f"{sel}=multiple-watchers-B")
    wab = watchers(leases.list_namespaced_lease, namespace=ns, label_selector=f"{sel} in (multiple-watchers-A,multiple-watchers-B)")
    leases.create_namespaced_lease(ns, lease_body("a", labels={sel: "multiple-watchers-A"}))
    wa.expect("ADDED", "a"); wab.expect("ADDED", "a")
    _mutate(leases, ns, "a", "h1")
    wa.expect("MODIFIED", "a"); wab.expect("MODIFIED", "a")
    _mutate(leases, ns, "a", "h2")
    wa.expect("MODIFIED", "a"); wab.expect("MODIFIED", "a")
    leases.delete_namespaced_lease("a", ns)
    wa.expect("DELETED", "a"); wab.expect("DELETED", "a")
    leases.create_namespaced_lease(ns, lease_body("b", labels={sel: "multiple-watchers-B"}))
    wb.expect("ADDED", "b"); wab.expect("ADDED", "b")   # (B's first event: none of a's came before it)
    leases.delete_namespaced_lease("b", ns)
    wb.expect("DELETED", "b"); wab.expect("DELETED", "b")
    leases.create_namespaced_lease(ns, lease_body("a-again", labels={sel: "multiple-watchers-A"}))
    wa.expect("ADDED", "a-again")   # (A's next event: none of b's came before it)


def test_start_watching_from_a_specific_resource_version(leases, ns, watchers):
    """[sig-api-machinery] Watchers should be able to start watching from a specific resource version [Conformance]

    Create, modify twice, delete; a watch from the first modification's resourceVersion sees
    the second modification and the deletion, nothing earlier."""
    leases.create_namespaced_lease(ns, lease_body("rv"))
    first = _mutate(leases, ns, "rv", "h1")
    _mutate(leases, ns, "rv", "h2")
    leases.delete_namespaced_lease("rv", ns)
    w = watchers(leases.list_namespaced_lease, namespace=ns, resource_version=first.metadata.resource_version)
    assert w.expect("MODIFIED", "rv").spec.holder_identity == "h2"
    assert w.expect("DELETED", "rv").spec.holder_identity == "h2"


def test_restart_watching_from_last_resource_version_observed(leases, ns, watchers):
    """[sig-api-machinery] Watchers should be able to restart watching from the last resource version observed by the previous watch [Conformance]

    Watch, see ADDED and two MODIFIED, stop; change the object while no one watches; a new
    watch from the last seen resourceVersion gets exactly the missed events."""
    sel = f"{LABEL}=watch-closed-and-restarted"
    w = watchers(leases.list_namespaced_lease, namespace=ns, label_selector=sel)
    leases.create_namespaced_lease(ns, lease_body("restart", labels={LABEL: "watch-closed-and-restarted"}))
    w.expect("ADDED", "restart")
    _mutate(leases, ns, "restart", "h1")
    w.expect("MODIFIED", "restart")
    _mutate(leases, ns, "restart", "h2")
    seen = w.expect("MODIFIED", "restart")
    w.stop()
    _mutate(leases, ns, "restart", "h3")
    leases.delete_namespaced_lease("restart", ns)
    again = watchers(leases.list_namespaced_lease, namespace=ns, label_selector=sel,
                     resource_version=seen.metadata.resource_version)
    assert again.expect("MODIFIED", "restart").spec.holder_identity == "h3"
    again.expect("DELETED", "restart")


def test_observe_deletion_when_object_stops_matching_selector(leases, ns, watchers):
    """[sig-api-machinery] Watchers should observe an object deletion if it stops meeting the requirements of the selector [Conformance]

    Relabel the object out of the selector: the watch sees DELETED; modify it unseen; relabel
    it back: ADDED; then its deletion."""
    sel_value = "label-changed-and-restored"
    w = watchers(leases.list_namespaced_lease, namespace=ns, label_selector=f"{LABEL}={sel_value}")
    leases.create_namespaced_lease(ns, lease_body("sel", labels={LABEL: sel_value}))
    w.expect("ADDED", "sel")
    _mutate(leases, ns, "sel", "h1")
    w.expect("MODIFIED", "sel")
    leases.patch_namespaced_lease("sel", ns, {"metadata": {"labels": {LABEL: "wrong-value"}}})
    w.expect("DELETED", "sel")
    _mutate(leases, ns, "sel", "h2")
    leases.patch_namespaced_lease("sel", ns, {"metadata": {"labels": {LABEL: sel_value}}})
    # The next event is the relabel's ADDED: the change made outside the selector sent nothing.
    assert w.expect("ADDED", "sel").spec.holder_identity == "h2"
    _mutate(leases, ns, "sel", "h3")
    w.expect("MODIFIED", "sel")
    leases.delete_namespaced_lease("sel", ns)
    w.expect("DELETED", "sel")


def test_receive_events_on_concurrent_watches_in_same_order(leases, ns, watchers):
    """[sig-api-machinery] Watchers should receive events on concurrent watches in same order [Conformance]

    Many writes from a background producer; watches started at successive resourceVersions
    must see the same events in the same order (each a suffix of the first)."""
    leases.create_namespaced_lease(ns, lease_body("seed"))
    start = leases.list_namespaced_lease(ns).metadata.resource_version
    done = threading.Event()

    def produce():
        for i in range(30):
            name = f"l{i % 5}"
            try:
                leases.create_namespaced_lease(ns, lease_body(name))
            except Exception:
                leases.delete_namespaced_lease(name, ns)
        done.set()

    threading.Thread(target=produce, daemon=True).start()
    done.wait(60)
    final = int(leases.list_namespaced_lease(ns).metadata.resource_version)
    # Watches from several starting points, each read until it reaches the final revision.
    sequences = []
    rvs = [start]
    first = Watcher(leases.list_namespaced_lease, namespace=ns, resource_version=start)
    try:
        seq = []
        while not seq or int(seq[-1][1]) < final:
            ev = first.events.get(timeout=10)
            seq.append((ev["type"], ev["object"].metadata.resource_version, ev["object"].metadata.name))
        sequences.append(seq)
    finally:
        first.stop()
    rvs += [seq[i][1] for i in (3, 10, 20)]
    for rv in rvs[1:]:
        w = Watcher(leases.list_namespaced_lease, namespace=ns, resource_version=rv)
        try:
            got = []
            while not got or int(got[-1][1]) < final:
                ev = w.events.get(timeout=10)
                got.append((ev["type"], ev["object"].metadata.resource_version, ev["object"].metadata.name))
        finally:
            w.stop()
        assert got == [e for e in sequences[0] if int(e[1]) > int(rv)]

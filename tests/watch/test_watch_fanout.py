"""Watch fan-out against a live server (Daphne): events written straight to each watcher's
connection (dashboard.server.streams: StreamSubscriber, StreamWriter).

Many watchers each get every event once and in order; a watcher that stops reading falls
behind, is closed cleanly (its response ends) without holding up the writers, and resumes
from the last resourceVersion it got with nothing missing; the same over TLS; and the
fallback for a client that cannot take chunks (HTTP/1.0)."""
from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
import uuid

import orjson
import pytest

from conftest import served, server_env
from manifests import lease

GROUP = "/apis/coordination.k8s.io/v1"


def leases(ns):
    return f"{GROUP}/namespaces/{ns}/leases"


@pytest.fixture
def ns():
    return "f-" + uuid.uuid4().hex[:8]


class RawWatch:
    """A watch over a raw socket (HTTP/1.1 chunked, decoded here), for many at once."""

    def __init__(self, port: int, path: str, token: str, rcvbuf: int | None = None, version: str = "1.1",
                 accept: str | None = None):
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect(("127.0.0.1", port))
        extra = f"Accept: {accept}\r\n" if accept else ""
        self.sock.sendall(f"GET {path} HTTP/{version}\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n{extra}\r\n"
                          .encode())
        self.file = self.sock.makefile("rb")
        self.chunked = False
        while True:
            line = self.file.readline()
            if line.lower().startswith(b"transfer-encoding: chunked"):
                self.chunked = True
            if line in (b"\r\n", b""):
                break
        self.pending = b""
        self.ended = False   # the server ended the response cleanly (last chunk)

    def next(self, timeout: float = 10.0):
        """The next event, or None at the end of the response."""
        self.sock.settimeout(timeout)
        while b"\n" not in self.pending:
            if self.ended:
                return None
            if not self.chunked:
                data = self.file.readline()
                if not data:
                    self.ended = True
                self.pending += data
                continue
            size = int(self.file.readline().split(b";")[0], 16)
            if size == 0:
                assert self.file.readline() == b"\r\n"
                self.ended = True
                continue
            self.pending += self.file.read(size)
            assert self.file.read(2) == b"\r\n"
        line, _, self.pending = self.pending.partition(b"\n")
        return orjson.loads(line)

    def close(self):
        self.file.close()
        self.sock.close()


def rv_of(event) -> int:
    return int(event["object"]["metadata"]["resourceVersion"])


def test_many_watchers_each_get_every_event_in_order(kube_server, ns):
    """40 watchers (namespaced and cluster-wide) while 4 writers create and patch concurrently."""
    token = kube_server.admin_token
    _, _, listed = kube_server.request("GET", leases(ns))
    start = listed["metadata"]["resourceVersion"]
    watches = [RawWatch(kube_server.http_port, f"{leases(ns)}?watch=true&resourceVersion={start}", token)
               for _ in range(30)]
    watches += [RawWatch(kube_server.http_port,
                         f"{GROUP}/leases?watch=true&resourceVersion={start}&fieldSelector=metadata.namespace%3D{ns}",
                         token) for _ in range(5)]
    watches += [RawWatch(kube_server.http_port, f"{GROUP}/leases?watch=true&resourceVersion={start}", token)
                for _ in range(5)]
    written = []
    lock = threading.Lock()

    def writer(w):
        for i in range(15):
            status, _, body = kube_server.request("POST", leases(ns), lease(f"o{w}-{i}", ns=ns))
            assert status == 201, body
            status, _, body = kube_server.request("PATCH", f"{leases(ns)}/o{w}-{i}", {"spec": {"holderIdentity": "x"}},
                                                  content_type="application/merge-patch+json")
            assert status == 200, body
            with lock:
                written.extend([f"o{w}-{i}"] * 2)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _, _, fresh = kube_server.request("GET", leases(ns))
    expected = None
    try:
        for w in watches:
            got = []
            while len(got) < len(written):
                ev = w.next()
                assert ev is not None, f"stream ended after {len(got)} events"
                if ev["object"]["metadata"].get("namespace") != ns:
                    continue   # a cluster-wide watcher also sees other tests' leases
                got.append((ev["type"], ev["object"]["metadata"]["name"], rv_of(ev)))
            rvs = [rv for _, _, rv in got]
            assert rvs == sorted(set(rvs)), "each event once, in order"
            assert rvs[-1] <= int(fresh["metadata"]["resourceVersion"])
            if expected is None:
                expected = got
                assert sorted(name for _, name, _ in got) == sorted(written)
                assert [t for t, _, _ in got].count("ADDED") == 60
            assert got == expected, "every watcher saw the same events"
    finally:
        for w in watches:
            w.close()


@pytest.fixture(scope="module")
def one_worker_server(tmp_path_factory):
    """Every watcher in one process (so in one hub)."""
    with served(tmp_path_factory.mktemp("kubedash-fanout-one"), "--workers", "1") as server:
        yield server


def test_more_watchers_than_one_flush_slice_all_get_every_event_in_order(one_worker_server, ns):
    """A flush writes to at most hub.FLUSH_SLICE (200) watchers per loop turn: the rest, in
    later turns, get the same events, in order, not one twice (with writes meanwhile)."""
    server = one_worker_server
    token = server.admin_token
    _, _, listed = server.request("GET", leases(ns))
    start = listed["metadata"]["resourceVersion"]
    watches = [RawWatch(server.http_port, f"{leases(ns)}?watch=true&resourceVersion={start}", token)
               for _ in range(260)]
    try:
        for i in range(20):
            status, _, body = server.request("POST", leases(ns), lease(f"s{i}", ns=ns))
            assert status == 201, body
        for w in watches:
            got = [w.next() for _ in range(20)]
            assert [e["object"]["metadata"]["name"] for e in got] == [f"s{i}" for i in range(20)]
            rvs = [rv_of(e) for e in got]
            assert rvs == sorted(set(rvs))
    finally:
        for w in watches:
            w.close()


PARTIAL = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"


def test_watchers_opened_while_writes_go_on_get_exactly_their_events(one_worker_server, ns):
    """Plain watchers share each event's bytes (a broadcast per scope and format) once caught up;
    ones opened while writes go on, in every format and with selectors, still get exactly the
    events after their starting point, each once and in order."""
    server = one_worker_server
    token = server.admin_token
    created: list[tuple[int, str, str]] = []   # (rv, name, color)
    done = threading.Event()

    def writer():
        i = 0
        while not done.is_set() and i < 2000:
            color = ("red", "blue")[i % 2]
            status, _, body = server.request("POST", leases(ns), lease(f"j{i}", ns=ns, labels={"color": color}))
            assert status == 201, body
            created.append((rv_of({"object": body}), f"j{i}", color))
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    opened = []   # (watch, start rv, shape, selector)
    try:
        for k in range(24):
            _, _, listed = server.request("GET", leases(ns))
            start = int(listed["metadata"]["resourceVersion"])
            shape = ("plain", "plain", "partial", "red")[k % 4]
            query = f"watch=true&resourceVersion={start}" + ("&labelSelector=color%3Dred" if shape == "red" else "")
            opened.append((RawWatch(server.http_port, f"{leases(ns)}?{query}", token,
                                    accept=PARTIAL if shape == "partial" else None), start, shape))
            time.sleep(0.05)
    finally:
        done.set()
        thread.join()
    try:
        for w, start, shape in opened:
            want = [(rv, name) for rv, name, color in sorted(created)
                    if rv > start and (shape != "red" or color == "red")]
            got = []
            for _ in want:
                ev = w.next()
                assert ev is not None, f"{shape} watch from {start} ended after {len(got)} events"
                # (a selector's watch starts from the list at its resourceVersion: exact, so a
                # new object is ADDED there too)
                assert ev["type"] == "ADDED", (shape, start, len(got), ev)
                if shape == "partial":
                    assert ev["object"]["kind"] == "PartialObjectMetadata" and "spec" not in ev["object"]
                got.append((rv_of(ev), ev["object"]["metadata"]["name"]))
            assert got == want, f"{shape} watch from {start}"
    finally:
        for w, _, _ in opened:
            w.close()


def test_bookmarks_never_run_ahead_of_the_events_of_a_shared_flush(one_worker_server, ns):
    """More watchers than one flush slice, with bookmarks (every second here) while writes go
    on: a watcher's bookmark comes after every event up to its resourceVersion, never before
    one (its share of the flush under way is written first)."""
    server = one_worker_server
    token = server.admin_token
    _, _, listed = server.request("GET", leases(ns))
    start = listed["metadata"]["resourceVersion"]
    watches = [RawWatch(server.http_port, f"{leases(ns)}?watch=true&allowWatchBookmarks=true&resourceVersion={start}",
                        token) for _ in range(240)]
    rvs = []
    try:
        until = time.monotonic() + 3.5   # (bookmarks every second: a few land among the writes)
        i = 0
        while time.monotonic() < until:
            status, _, body = server.request("POST", leases(ns), lease(f"b{i}", ns=ns))
            assert status == 201, body
            rvs.append(rv_of({"object": body}))
            i += 1
        bookmarks = 0
        for w in watches:
            seen, last = [], 0
            while len(seen) < len(rvs):
                ev = w.next()
                assert ev is not None
                rv = rv_of(ev)
                if ev["type"] == "BOOKMARK":
                    bookmarks += 1
                    assert rv >= last, "a bookmark never goes back"
                else:
                    assert rv > last, "an event after a bookmark (or event) of its revision or newer"
                    seen.append(rv)
                last = rv
            assert seen == rvs
        assert bookmarks, "bookmarks were sent while the writes went on"
    finally:
        for w in watches:
            w.close()


@pytest.fixture(scope="module")
def small_queue_server(tmp_path_factory):
    """A server whose watchers may fall only 5 events behind."""
    data_dir = tmp_path_factory.mktemp("kubedash-fanout")
    with served(data_dir, "--workers", "1", env=server_env(data_dir, KUBEDASH_WATCH_QUEUE_SIZE="5")) as server:
        yield server


def test_watcher_that_falls_behind_is_closed_and_resumes_with_nothing_missing(small_queue_server, ns):
    server = small_queue_server
    token = server.admin_token
    _, _, listed = server.request("GET", leases(ns))
    start = listed["metadata"]["resourceVersion"]
    url = f"{leases(ns)}?watch=true&resourceVersion={start}"
    slow = RawWatch(server.http_port, url, token, rcvbuf=4096)   # never reads while the writes go on
    brisk = RawWatch(server.http_port, url, token)
    filler = "x" * 30_000
    names = []
    brisk_got = []

    def read_brisk():
        for _ in range(300):
            ev = brisk.next(timeout=60)
            if ev is None:
                return
            brisk_got.append(ev["object"]["metadata"]["name"])

    reader = threading.Thread(target=read_brisk)
    reader.start()
    started = time.monotonic()
    for i in range(300):   # ~9 MB of events: more than the socket buffers hold
        name = f"big-{i}"
        status, _, body = server.request("POST", leases(ns), lease(name, ns=ns, annotations={"fill": filler}))
        assert status == 201, body
        names.append(name)
    writes_took = time.monotonic() - started
    try:
        # A watcher that reads keeps up and gets everything.
        reader.join(60)
        assert brisk_got == names
        # The slow one got a prefix, in order, then a clean end of the response.
        got, last_rv = [], start
        while True:
            ev = slow.next(timeout=30)
            if ev is None:
                break
            got.append(ev["object"]["metadata"]["name"])
            last_rv = ev["object"]["metadata"]["resourceVersion"]
        assert slow.ended, "the response ended with its last chunk"
        assert got == names[:len(got)]
        assert len(got) < len(names), "the slow watcher was closed before it got everything"
        # It resumes from the last resourceVersion it got: the rest, nothing missing or doubled.
        resumed = RawWatch(server.http_port, f"{leases(ns)}?watch=true&resourceVersion={last_rv}", token)
        try:
            rest = [resumed.next()["object"]["metadata"]["name"] for _ in names[len(got):]]
        finally:
            resumed.close()
        assert got + rest == names
    finally:
        slow.close()
        brisk.close()
    # The writers were never held up by the slow watcher (a generous bound: no stall of seconds).
    assert writes_took < 60
    status, _, metrics = server.request("GET", "/metrics")
    assert status == 200
    assert b'apiserver_terminated_watchers_total{resource="leases"}' in metrics


def test_a_burst_committed_at_once_reaches_a_reading_watcher_whole(small_queue_server, ns):
    """50 revisions in one commit reach the hub as one batch: more than the watcher's queue
    size wait for the same flush. A watcher that reads gets them all: only a client that does
    not take what was sent is closed, never one whose events are still waiting to be sent."""
    server = small_queue_server
    _, _, listed = server.request("GET", leases(ns))
    watch = RawWatch(server.http_port, f"{leases(ns)}?watch=true&resourceVersion={listed['metadata']['resourceVersion']}",
                     server.admin_token)
    try:
        server.manage("shell", "-c", (
            "from django.db import transaction\n"
            "from dashboard.kube import registry, store\n"
            "res = registry.lookup('coordination.k8s.io', 'v1', 'leases')\n"
            "with transaction.atomic():\n"
            f"    for i in range(50):\n"
            f"        store.create(res, {ns!r}, {{'metadata': {{'name': f'burst-{{i}}'}}, 'spec': {{}}}})\n"))
        got = [watch.next(timeout=15)["object"]["metadata"]["name"] for _ in range(50)]
        assert got == [f"burst-{i}" for i in range(50)]
    finally:
        watch.close()


def test_watch_over_tls(kube_server, ns):
    ctx = ssl.create_default_context(cafile=kube_server.ca_file)
    _, _, listed = kube_server.request("GET", leases(ns))
    port = int(kube_server.https_url.rsplit(":", 1)[1])
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    conn.request("GET", f"{leases(ns)}?watch=true&resourceVersion={listed['metadata']['resourceVersion']}",
                 headers={"Authorization": f"Bearer {kube_server.admin_token}"})
    resp = conn.getresponse()
    assert resp.status == 200
    try:
        for i in range(20):
            status, _, _ = kube_server.request("POST", leases(ns), lease(f"t{i}", ns=ns))
            assert status == 201
        got = [orjson.loads(resp.readline()) for _ in range(20)]
        assert [e["object"]["metadata"]["name"] for e in got] == [f"t{i}" for i in range(20)]
        rvs = [rv_of(e) for e in got]
        assert rvs == sorted(set(rvs))
    finally:
        conn.close()


def test_http10_client_gets_the_stream_unchunked(kube_server, ns):
    """A client that cannot take chunks is served through the ASGI path, events in order."""
    _, _, listed = kube_server.request("GET", leases(ns))
    w = RawWatch(kube_server.http_port, f"{leases(ns)}?watch=true&resourceVersion={listed['metadata']['resourceVersion']}",
                 kube_server.admin_token, version="1.0")
    try:
        assert not w.chunked
        for i in range(5):
            status, _, _ = kube_server.request("POST", leases(ns), lease(f"h{i}", ns=ns))
            assert status == 201
        assert [w.next()["object"]["metadata"]["name"] for _ in range(5)] == [f"h{i}" for i in range(5)]
    finally:
        w.close()

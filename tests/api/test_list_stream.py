"""Streamed lists: a whole list is sent batch by batch from its snapshot (kube/views.py
stream_list, kube/lists.py stream_objects) and is byte for byte the list built whole.

Against a real server (7 rows per batch, so every list here spans several batches): each
shape with no limit (streamed: chunked) equals the same list with a limit above its size
(built whole: Content-Length). In-process: writes that land while a list is being read do
not change what it shows (the snapshot's overlay), and 410 is raised before any byte.
"""
from __future__ import annotations

import gzip
import http.client
import threading
from urllib.parse import quote

import orjson
import pytest

import pg_support
from conftest import served, server_env
from dashboard.kube import context, lists, registry, revlog
from dashboard.kube.compaction import compact
from dashboard.kube.errors import ApiError
from dashboard.kube.selectors import parse_label_selector
from manifests import LEASES, job, lease

ALL_LEASES = "/apis/coordination.k8s.io/v1/leases"
JOBS_OTHER = "/apis/batch/v1/namespaces/other/jobs"
CORE_EVENTS = "/api/v1/namespaces/default/events"
EVENTS_V1 = "/apis/events.k8s.io/v1/events"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
PARTIAL = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def server(request, tmp_path_factory):
    """The server on SQLite, then on PostgreSQL (keyset batches: no server-side cursor)."""
    data_dir = tmp_path_factory.mktemp("list-stream")
    env = server_env(data_dir, KUBEDASH_LIST_STREAM_BATCH="7")
    dbname = None
    if request.param == "postgresql":
        pg_support.require_postgres()
        dbname = pg_support.create_database("kubedash_t28a")
        env["DATABASE_URL"] = pg_support.pg_url(dbname)
        request.addfinalizer(lambda: pg_support.drop_database(dbname))
    with served(data_dir, env=env) as live:
        for i in range(30):
            ns = "default" if i % 3 else "other"
            status, _, _ = live.request("POST", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                                        lease(f"l{i:02}", ns=ns, labels={"tier": "web" if i % 2 else "db"}))
            assert status == 201
        for i in range(9):
            assert live.request("POST", JOBS_OTHER, job(f"j{i}", ns="other"))[0] == 201
        for i in range(10):
            event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"e{i}", "namespace": "default"},
                     "involvedObject": {"kind": "Lease", "namespace": "default", "name": "l01"},
                     "reason": "Test", "message": f"event {i}", "type": "Normal"}
            assert live.request("POST", CORE_EVENTS, event)[0] == 201
        yield live


def raw_get(server, path: str, accept: str | None = None) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection(server.host, server.http_port, timeout=30)
    headers = {"Authorization": f"Bearer {server.admin_token}"}
    if accept:
        headers["Accept"] = accept
    conn.request("GET", path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body


def with_query(path: str, extra: str) -> str:
    return path + ("&" if "?" in path else "?") + extra


SHAPES = [
    (LEASES, None),
    (ALL_LEASES, None),
    (ALL_LEASES + "?labelSelector=" + quote("tier=web"), None),
    (ALL_LEASES + "?fieldSelector=" + quote("metadata.namespace!=other"), None),
    (ALL_LEASES + "?labelSelector=" + quote("tier in (db)") + "&fieldSelector=" + quote("metadata.name!=l04"), None),
    (ALL_LEASES + "?labelSelector=nothere", None),                    # empty list
    (JOBS_OTHER, None),
    (EVENTS_V1, None),                                                 # converted from the stored version
    (ALL_LEASES, TABLE),
    (ALL_LEASES + "?includeObject=None", TABLE),
    (JOBS_OTHER + "?includeObject=Object", TABLE),
    (ALL_LEASES + "?labelSelector=" + quote("tier=db"), PARTIAL),
]


@pytest.mark.parametrize("path,accept", SHAPES)
def test_streamed_list_is_byte_identical_to_the_buffered_one(server, path, accept):
    # A Table's Age cells count seconds: the two requests may straddle a second's boundary,
    # so look again (at most a few times) when they differ.
    for _ in range(5):
        status, headers, streamed = raw_get(server, path, accept)
        status_b, headers_b, buffered = raw_get(server, with_query(path, "limit=100000"), accept)
        if streamed == buffered:
            break
    assert (status, status_b) == (200, 200)
    assert headers.get("transfer-encoding") == "chunked" and "content-length" not in headers
    assert "content-length" in headers_b
    assert headers["content-type"] == headers_b["content-type"]
    assert streamed == buffered
    body = orjson.loads(streamed)
    assert body["metadata"]["resourceVersion"]
    assert "continue" not in body["metadata"]


def test_rest_of_a_chunked_list_streams_the_same_snapshot(server):
    first = orjson.loads(raw_get(server, ALL_LEASES + "?limit=4")[2])
    token = first["metadata"]["continue"]
    # Writes after the first page: the rest still shows the first page's snapshot.
    assert server.request("DELETE", f"{LEASES}/l25")[0] == 200
    assert server.request("PATCH", f"{LEASES}/l28", {"spec": {"holderIdentity": "changed"}},
                          content_type="application/merge-patch+json")[0] == 200
    assert server.request("POST", LEASES, lease("l26a"))[0] == 201
    status, headers, streamed = raw_get(server, ALL_LEASES + "?continue=" + token)
    assert status == 200 and headers.get("transfer-encoding") == "chunked"
    _, _, buffered = raw_get(server, ALL_LEASES + "?limit=100000&continue=" + token)
    assert streamed == buffered
    rest = orjson.loads(streamed)
    names = [i["metadata"]["name"] for i in rest["items"]]
    assert "l25" in names and "l26a" not in names
    assert next(i for i in rest["items"] if i["metadata"]["name"] == "l28")["spec"]["holderIdentity"] == "node-a"
    assert rest["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert len(first["items"]) + len(names) == 30


def test_pretty_list_is_built_whole(server):
    status, headers, body = raw_get(server, LEASES + "?pretty=true")
    assert status == 200 and "content-length" in headers and body.startswith(b"{\n")


def test_streamed_list_errors_are_statuses(server):
    status, headers, body = raw_get(server, ALL_LEASES + "?continue=garbage")
    assert status == 400 and orjson.loads(body)["kind"] == "Status"
    status, _, body = raw_get(server, ALL_LEASES + "?includeObject=Everything", TABLE)
    assert status == 400 and orjson.loads(body)["kind"] == "Status"
    status, _, body = raw_get(server, ALL_LEASES + "?resourceVersion=99999999&resourceVersionMatch=Exact")
    assert status == 504 and orjson.loads(body)["reason"] == "Timeout"


def test_lists_at_a_revision_while_writes_go_on_are_that_revision(server):
    """A list at a resourceVersion (paged by continue tokens, streamed whole, with a label
    selector) while another client creates, relabels and deletes objects back to back shows
    exactly the state at that revision: the writer's answers replayed up to it."""
    churn = "/apis/coordination.k8s.io/v1/namespaces/churn/leases"
    done = threading.Event()
    writes: list[tuple[int, str, dict | None]] = []   # in order: (rv or 0 for a delete, name, object)
    live: list[str] = []
    failures: list = []

    def put(status, body, name):
        assert status in (200, 201), body
        writes.append((int(body["metadata"]["resourceVersion"]), name, body))

    def writer():
        try:
            for n in range(400):
                if done.is_set() and n >= 24:
                    return
                name = f"c{n:03}"
                put(*server.request("POST", churn, lease(name, ns="churn", labels={"color": ("red", "blue")[n % 2]}))[::2],
                    name)
                live.append(name)
                if len(live) > 8:
                    old = live[n % 5]
                    _, _, body = server.request("GET", f"{churn}/{old}")
                    color = {"red": "blue", "blue": "red"}[body["metadata"]["labels"]["color"]]
                    put(*server.request("PATCH", f"{churn}/{old}", {"metadata": {"labels": {"color": color}}},
                                        content_type="application/merge-patch+json")[::2], old)
                    gone_name = live.pop(0)
                    status, _, body = server.request("DELETE", f"{churn}/{gone_name}")
                    assert status == 200, body
                    writes.append((0, gone_name, None))
        except BaseException as exc:   # (seen by the test below)
            failures.append(exc)

    def state_at(index: int, red: bool) -> list[tuple[str, str]]:
        objects: dict[str, dict] = {}
        for _, name, obj in writes[:index + 1]:
            if obj is None:
                objects.pop(name)
            else:
                objects[name] = obj
        return [(name, obj["metadata"]["resourceVersion"]) for name, obj in sorted(objects.items())
                if not red or obj["metadata"]["labels"]["color"] == "red"]

    def listed(rv: int, query: str) -> list[tuple[str, str]]:
        out, token = [], ""
        while True:
            at = f"continue={token}" if token else f"resourceVersion={rv}&resourceVersionMatch=Exact"
            status, _, body = raw_get(server, f"{churn}?{at}{query}")
            assert status == 200, body
            page = orjson.loads(body)
            out += [(i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in page["items"]]
            token = page["metadata"].get("continue", "")
            if not token:
                return out

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        checked = 0
        while checked < 12 and thread.is_alive():
            index = max((i for i, w in enumerate(list(writes)) if w[0]), default=None)
            if index is None or index < 10:
                done.wait(0.01)   # (the writer's first writes)
                continue
            rv = writes[index][0]
            for query, red in (("&limit=3", False), ("", False), ("&limit=2&labelSelector=color%3Dred", True)):
                assert listed(rv, query) == state_at(index, red), (query, index)
            checked += 1
    finally:
        done.set()
        thread.join()
    assert not failures, failures
    assert checked == 12


# ---------------------------------------------------------------------------------------------
# In-process: the snapshot overlay


@pytest.mark.django_db
@pytest.mark.parametrize("writes_range", [1000, 2])
def test_writes_while_a_list_streams_do_not_change_it(api, settings, monkeypatch, writes_range):
    settings.KUBEDASH_LIST_STREAM_BATCH = 3
    # (2: the log since the snapshot is read in several rv ranges, each with other kinds' writes)
    monkeypatch.setattr(revlog, "WRITES_RANGE", writes_range)
    for i in range(20):
        assert api.post(LEASES, lease(f"l{i:02}", labels={"keep": "yes"})).status_code == 201
    res = registry.by_kind("Lease")
    for selector in (None, parse_label_selector("keep=yes")):
        q = lists.ListQuery(namespace="default", label_selector=selector)
        snapshot, batches = lists.stream_objects(res, q)
        taken = list(next(batches))
        # While the rest is unread: delete, relabel, change and create keys ahead of the
        # reader (and one behind it), and create ones in between.
        api.delete(f"{LEASES}/l10")
        api.patch(f"{LEASES}/l12", {"metadata": {"labels": {"keep": "no"}}})
        api.patch(f"{LEASES}/l15", {"spec": {"holderIdentity": "later"}})
        api.post(JOBS_OTHER, job(f"j-{selector is None}", ns="other"))   # another kind's write between
        api.patch(f"{LEASES}/l00", {"spec": {"holderIdentity": "later"}})
        api.post(LEASES, lease("l10b", labels={"keep": "yes"}))
        api.post(LEASES, lease("l99", labels={"keep": "yes"}))
        for batch in batches:
            taken += batch
        exact = lists.list_objects(res, lists.ListQuery(namespace="default", label_selector=selector,
                                                        resource_version=snapshot, resource_version_match="Exact"))
        assert taken == exact.items
        got = [orjson.loads(t)["metadata"]["name"] for t in taken]
        assert got == [f"l{i:02}" for i in range(20)]
        # put things back for the second round
        api.post(LEASES, lease("l10", labels={"keep": "yes"}))
        api.patch(f"{LEASES}/l12", {"metadata": {"labels": {"keep": "yes"}}})
        api.delete(f"{LEASES}/l10b")
        api.delete(f"{LEASES}/l99")


@pytest.mark.django_db
def test_expired_snapshot_is_410_before_any_byte(api):
    for i in range(5):
        api.post(LEASES, lease(f"l{i}"))
    token = api.get(f"{LEASES}?limit=2").json()["metadata"]["continue"]
    api.patch(f"{LEASES}/l3", {"spec": {"holderIdentity": "x"}})
    compact(keep=0)
    with pytest.raises(ApiError) as caught:
        lists.stream_objects(registry.by_kind("Lease"), lists.ListQuery(namespace="default", continue_token=token))
    assert caught.value.code == 410 and caught.value.list_continue


@pytest.mark.django_db
def test_a_session_s_streamed_list_is_gzipped_as_the_buffered_one_was(api, login):
    """The dashboard's own fetches (a session) got lists gzipped when built whole; streamed, too."""
    for i in range(12):
        api.post(LEASES, lease(f"l{i:02}"))
    client = login("admin", "gz")
    buffered = client.get(LEASES, HTTP_ACCEPT_ENCODING="gzip")
    streamed = client.get(LEASES, HTTP_ACCEPT_ENCODING="gzip", **{context.KEY: context.RequestContext(streams=True)})
    assert not buffered.streaming and streamed.streaming
    assert streamed["Content-Encoding"] == buffered["Content-Encoding"] == "gzip"
    plain = client.get(LEASES, **{context.KEY: context.RequestContext(streams=True)})
    assert plain.streaming and not plain.has_header("Content-Encoding")
    assert gzip.decompress(b"".join(streamed.streaming_content)) == gzip.decompress(buffered.content) \
        == b"".join(plain.streaming_content)

"""/metrics, the JSON request log and Audit-ID (dashboard.server.observe, dashboard.server.metrics).

The live tests run one `serve --workers 2` on PostgreSQL + Redis (the supervisor and two
worker processes sharing the listening socket): every count below is summed over both
workers by prometheus_client's multiprocess mode, since the kernel spreads the requests.
"""
from __future__ import annotations

import http.client
import random
import re
import signal
import time
import uuid

import orjson
import pytest

import pg_support
from conftest import LiveServer, log_in_form, sample, scrape, served, server_env
from manifests import lease

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
METRICS_TOKEN = "metrics-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`serve --workers 2` on PostgreSQL + Redis, maintenance on (off in other tests)."""
    pg_support.require_postgres()
    pg_support.require_redis()
    dbname = pg_support.create_database("kd_ops_obs")
    data_dir = tmp_path_factory.mktemp("kubedash-observe")
    env = server_env(data_dir, DATABASE_URL=pg_support.pg_url(dbname),
                     REDIS_URL=pg_support.redis_url(random.randint(1, 15)), KUBEDASH_MAINTENANCE="1",
                     KUBEDASH_METRICS_TOKEN=METRICS_TOKEN, KUBEDASH_METRICS_USERS="prometheus")
    try:
        with served(data_dir, "--workers", "2", env=env) as srv:
            yield srv
    finally:
        pg_support.drop_database(dbname)


def plain(server: LiveServer, path: str, headers: dict | None = None):
    """A request with exactly these headers (no token unless given)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), body


def log_lines(server: LiveServer) -> list[dict]:
    """The request lines (every line is JSON: the others name another logger)."""
    out = []
    for raw in server.log_path.read_text().splitlines():
        if raw.startswith("{"):
            line = orjson.loads(raw)
            if line.get("logger") == "kubedash.request":
                out.append(line)
    return out


def wait_log(server: LiveServer, predicate, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log_lines(server):
            if predicate(line):
                return line
        time.sleep(0.1)
    raise AssertionError("no such log line; last lines: " + "\n".join(map(str, log_lines(server)[-5:])))


# --- RequestInfo: the verb and labels kube-apiserver would give a request --------------------

@pytest.mark.parametrize("method,path,query,expect", [
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", b"",
     {"verb": "LIST", "group": "coordination.k8s.io", "version": "v1", "resource": "leases", "scope": "namespace"}),
    ("GET", "/apis/coordination.k8s.io/v1/leases", b"watch=true",
     {"verb": "WATCH", "resource": "leases", "scope": "cluster"}),
    ("GET", "/apis/coordination.k8s.io/v1/watch/namespaces/ns/leases/a", b"",
     {"verb": "WATCH", "name": "a", "scope": "resource"}),
    ("GET", "/api/v1/namespaces/ns/endpoints/a", b"watch=false", {"verb": "GET", "group": "", "name": "a"}),
    ("PUT", "/apis/batch/v1/namespaces/ns/jobs/j/status", b"",
     {"verb": "PUT", "resource": "jobs", "subresource": "status", "namespace": "ns", "name": "j"}),
    ("POST", "/apis/batch/v1/namespaces/ns/jobs", b"dryRun=All", {"verb": "POST", "dry_run": "All"}),
    ("DELETE", "/apis/batch/v1/namespaces/ns/jobs", b"", {"verb": "DELETECOLLECTION", "scope": "namespace"}),
    ("DELETE", "/apis/batch/v1/namespaces/ns/jobs/j", b"", {"verb": "DELETE", "scope": "resource"}),
    ("GET", "/apis/batch/v1", b"", {"verb": "GET", "resource": "", "scope": ""}),
    ("GET", "/healthz", b"", {"verb": "GET", "resource": "", "version": ""}),
])
def test_request_info(method, path, query, expect):
    from dashboard.server.observe import request_info

    info = request_info(method, path, query)
    assert {k: info[k] for k in expect} == expect


def test_share_paths_are_redacted():
    from dashboard.server.observe import safe_path

    assert safe_path("/s/AbC123secret/") == "/s/REDACTED/"
    assert safe_path("/s/leave/") == "/s/leave/"
    assert safe_path("/leases/") == "/leases/"


# --- /metrics -----------------------------------------------------------------------------------

@pytest.mark.postgres
def test_metrics_refused_anonymously_and_to_other_users(server):
    status, _, body = plain(server, "/metrics")
    assert status == 401 and orjson.loads(body)["reason"] == "Unauthorized"
    viewer = server.token("someone", "viewer")
    status, _, body = plain(server, "/metrics", {"Authorization": f"Bearer {viewer}"})
    assert status == 403
    assert orjson.loads(body)["message"] == 'forbidden: User "someone" cannot get path "/metrics"'
    status, _, _ = plain(server, "/metrics", {"Authorization": "Bearer not-a-token"})
    assert status == 401


@pytest.mark.postgres
def test_metrics_readable_by_admin_metrics_token_and_metrics_users(server):
    assert "apiserver_request_total" in scrape(server)
    assert "apiserver_request_total" in scrape(server, METRICS_TOKEN)
    # A dedicated, revocable token: a viewer named in KUBEDASH_METRICS_USERS.
    assert "apiserver_request_total" in scrape(server, server.token("prometheus", "viewer"))


@pytest.mark.postgres
def test_request_counter_grows_by_exactly_the_requests_done(server):
    ns = "obs-" + uuid.uuid4().hex[:6]
    status, _, _ = server.request("POST", LEASES.format(ns=ns), lease("counted", ns=ns))
    assert status == 201
    labels = dict(component="apiserver", dry_run="", group="coordination.k8s.io", version="v1",
                  resource="leases", subresource="", scope="resource", verb="GET")
    before = scrape(server)
    n = 12
    for _ in range(n):
        status, _, _ = server.request("GET", LEASES.format(ns=ns) + "/counted")
        assert status == 200
    for _ in range(3):
        assert server.request("GET", LEASES.format(ns=ns) + "/missing")[0] == 404
    after = scrape(server)
    assert sample(after, "apiserver_request_total", code="200", **labels) - \
        sample(before, "apiserver_request_total", code="200", **labels) == n
    assert sample(after, "apiserver_request_total", code="404", **labels) - \
        sample(before, "apiserver_request_total", code="404", **labels) == 3
    # The histogram has kube's buckets and counted the same requests.
    assert sample(after, "apiserver_request_duration_seconds_count", **labels) - \
        sample(before, "apiserver_request_duration_seconds_count", **labels) == n + 3
    assert sample(after, "apiserver_request_duration_seconds_bucket", le="60.0", **labels) == \
        sample(after, "apiserver_request_duration_seconds_count", **labels)
    for le in ("0.005", "0.025", "0.4", "1.25", "45.0", "+Inf"):
        assert f'le="{le}"' in after
    assert sample(after, "kubedash_revision_newest") >= 1
    assert 'kubedash_revision_compacted ' in after and "kubedash_revision_log_rows " in after


@pytest.mark.postgres
def test_watch_gauges_and_events(server):
    ns = "obsw-" + uuid.uuid4().hex[:6]
    watch_labels = dict(component="apiserver", group="coordination.k8s.io", version="v1", resource="leases",
                        subresource="", scope="namespace", verb="WATCH")
    before = scrape(server)
    events_before = sample(before, "apiserver_watch_events_total", group="coordination.k8s.io", version="v1",
                           kind="Lease")
    with server.watch(LEASES.format(ns=ns) + "?watch=true&resourceVersion=0") as stream:
        assert stream.status == 200
        for i in range(3):
            assert server.request("POST", LEASES.format(ns=ns), lease(f"w{i}", ns=ns))[0] == 201
        assert [e["type"] for e in stream.events(3)] == ["ADDED"] * 3
        during = scrape(server)
        assert sample(during, "apiserver_longrunning_requests", **watch_labels) >= 1
    assert sample(during, "apiserver_watch_events_total", group="coordination.k8s.io", version="v1",
                  kind="Lease") - events_before >= 3
    assert sample(during, "kubedash_watch_hub_lag_revisions") >= 0
    assert "kubedash_watch_hub_revision" in during
    deadline = time.monotonic() + 20
    while sample(scrape(server), "apiserver_longrunning_requests", **watch_labels) != 0:
        assert time.monotonic() < deadline, "the closed watch is still counted"
        time.sleep(0.2)


@pytest.mark.postgres
def test_lane_queue_gauge_is_live(server):
    text = scrape(server)
    # The scrape itself is admitted to the expensive lane while it collects.
    assert sample(text, "kubedash_lane_requests", lane="expensive") >= 1


def test_lane_rejections_counted():
    from prometheus_client import REGISTRY

    from dashboard.server.lanes import Lane, LaneFull

    lane = Lane("probe", threads=1, queue=0)
    before = REGISTRY.get_sample_value("kubedash_lane_rejected_total", {"lane": "probe"}) or 0
    lane.admit()
    with pytest.raises(LaneFull):
        lane.admit()
    assert REGISTRY.get_sample_value("kubedash_lane_rejected_total", {"lane": "probe"}) == before + 1
    assert REGISTRY.get_sample_value("kubedash_lane_requests", {"lane": "probe"}) == 1
    lane.release()
    assert REGISTRY.get_sample_value("kubedash_lane_requests", {"lane": "probe"}) == 0


# --- Logs and Audit-ID -------------------------------------------------------------------------

def audit_id(headers: dict) -> str:
    """The Audit-Id header (Go and Twisted both send it as "Audit-Id")."""
    found = [v for k, v in headers.items() if k.lower() == "audit-id"]
    assert len(found) == 1, headers
    return found[0]


@pytest.mark.postgres
def test_audit_id_is_a_fresh_uuid_and_in_the_log_line(server):
    ns = "obsl-" + uuid.uuid4().hex[:6]
    status, headers, _ = server.request("POST", LEASES.format(ns=ns), lease("logged", ns=ns),
                                        headers={"Audit-ID": "client-chosen"})
    assert status == 201
    audit = audit_id(headers)
    assert UUID.match(audit) and audit != "client-chosen"
    line = wait_log(server, lambda l: l.get("auditID") == audit)
    assert line["verb"] == "POST" and line["code"] == 201 and line["resource"] == "leases"
    # (on PostgreSQL the fast lane's requests run on the event loop: server/green.py)
    assert line["namespace"] == ns and line["user"] == "live-admin" and line["lane"] == "fast-loop"
    assert line["group"] == "coordination.k8s.io" and line["latency"] > 0
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$", line["ts"])
    status, headers, _ = server.request("GET", LEASES.format(ns=ns) + "/logged")
    get_line = wait_log(server, lambda l: l.get("auditID") == audit_id(headers))
    assert get_line["verb"] == "GET" and get_line["name"] == "logged" and get_line["code"] == 200


@pytest.mark.postgres
def test_logs_hold_no_token_or_share_secret(server):
    out = server.manage("shell", "-c", (
        "from django.contrib.auth import get_user_model;"
        "from dashboard.access.tokens import ensure_user;"
        "from dashboard.web.share import create_link;"
        "u = ensure_user('sharer', 'admin');"
        "link, token = create_link(u, kind='Lease', namespace='', label_selector='', label='x', expiry='1h');"
        "print('SECRET=' + token)"))
    secret = out.strip().splitlines()[-1].split("=", 1)[1]
    status, _, _ = plain(server, f"/s/{secret}/")
    assert status in (200, 302)
    plain(server, f"/s/{secret}-wrong/")
    status, _, _ = plain(server, "/metrics", {"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert status == 200
    server.request("GET", LEASES.format(ns="default"))
    wait_log(server, lambda l: l.get("path") == "/s/REDACTED/")
    wait_log(server, lambda l: l.get("path") == "/metrics" and l.get("code") == 200)
    text = server.log_path.read_text()
    for secret_text in (secret, METRICS_TOKEN, server.admin_token):
        assert secret_text not in text
    assert "Bearer" not in text and "sessionid" not in text
    lines = log_lines(server)
    assert lines, "no JSON log lines"
    keys = {"ts", "auditID", "user", "verb", "resource", "namespace", "name", "code", "latency", "lane"}
    assert all(keys <= set(line) for line in lines)


# --- who may read /metrics, through Django (one process, its own registry) --------------------

def test_anonymous_metrics_only_when_allowed(client, settings, db):
    settings.KUBEDASH_METRICS_ANONYMOUS = False
    response = client.get("/metrics")
    assert response.status_code == 401 and response.json()["reason"] == "Unauthorized"
    settings.KUBEDASH_METRICS_ANONYMOUS = True
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert b"kubedash_revision_newest" in response.content


def test_metrics_token_is_compared_whole(client, settings, db):
    settings.KUBEDASH_METRICS_TOKEN = "s3cret-metrics-token"
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics-token").status_code == 200
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-metrics").status_code == 401
    settings.KUBEDASH_METRICS_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401


# --- requests the protocol answers itself, and page websockets --------------------------------

def raw_exchange(server: LiveServer, head: bytes) -> tuple[int, dict, bytes]:
    """Send these bytes as they are, read the answer to the end (the server closes)."""
    import socket

    sock = socket.create_connection(("127.0.0.1", server.http_port), timeout=30)
    sock.sendall(head)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    top, _, body = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


@pytest.mark.postgres
def test_refused_before_django_is_logged_and_counted(server):
    """414, 431 and 401/413 (decided from the headers, the body never read) are answered by the
    protocol, not Django: they still get an Audit-Id, a log line and a count, like any request."""
    ns = "obsr-" + uuid.uuid4().hex[:6]
    path = LEASES.format(ns=ns)
    labels = dict(component="apiserver", dry_run="", group="coordination.k8s.io", version="v1",
                  resource="leases", subresource="", scope="namespace", verb="POST")
    before = scrape(server)
    big = 10 * 1024 * 1024
    cases = {
        401: f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {big}\r\n\r\n",
        413: (f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.admin_token}\r\n"
              f"Content-Type: application/json\r\nContent-Length: {big * 10}\r\n\r\n"),
        431: f"POST {path} HTTP/1.1\r\nHost: x\r\n" + "".join(f"X-Pad-{i}: {'p' * 4000}\r\n" for i in range(40)) + "\r\n",
    }
    seen = {}
    for code, head in cases.items():
        status, headers, body = raw_exchange(server, head.encode())
        assert status == code, body
        assert orjson.loads(body)["code"] == code
        seen[code] = audit_id(headers)
    status, headers, _ = raw_exchange(server, f"GET {path}?q={'x' * 200_000} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status == 414
    seen[414] = audit_id(headers)
    for code, audit in seen.items():
        line = wait_log(server, lambda l, a=audit: l.get("auditID") == a)
        assert line["code"] == code and line["lane"] == "protocol" and line["user"] == ""
        assert line["path"] == path and line["resource"] == "leases" and line["namespace"] == ns
        assert line["verb"] == ("LIST" if code == 414 else "POST")
    after = scrape(server)
    for code in (401, 413, 431):
        assert sample(after, "apiserver_request_total", code=str(code), **labels) - \
            sample(before, "apiserver_request_total", code=str(code), **labels) == 1, code
    list_labels = {**labels, "verb": "LIST"}
    assert sample(after, "apiserver_request_total", code="414", **list_labels) - \
        sample(before, "apiserver_request_total", code="414", **list_labels) == 1


def _open_page_socket(server: LiveServer, username: str):
    """A signed-in viewer's Leases page websocket: (socket, its path)."""
    import websocket  # websocket-client, which the kubernetes client depends on

    server.manage("shell", "-c", (
        "from dashboard.access.tokens import ensure_user\n"
        f"u = ensure_user({username!r}, 'viewer')\n"
        "u.set_password('ws-password-not-secret')\n"
        "u.save()\n"))
    base = f"http://127.0.0.1:{server.http_port}"
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    cookie = log_in_form(conn, base, username, "ws-password-not-secret")
    conn.request("GET", "/leases/", headers={"Cookie": cookie})
    resp = conn.getresponse()
    html = resp.read().decode()
    conn.close()
    assert resp.status == 200
    ws_path = re.search(r'ws-connect="([^"]+)"', html).group(1).replace("&amp;", "&")
    ws = websocket.create_connection(f"ws://127.0.0.1:{server.http_port}{ws_path}", timeout=30,
                                     origin=base, header=[f"Cookie: {cookie}"])
    return ws, ws_path.split("?")[0]


@pytest.mark.postgres
def test_page_websocket_log_line_names_its_user(server):
    ws, path = _open_page_socket(server, "ws-logged")
    ws.close()
    line = wait_log(server, lambda l: l.get("verb") == "WEBSOCKET" and l.get("path") == path)
    assert line["user"] == "ws-logged" and line["lane"] == "pages"


@pytest.mark.slow
def test_page_websocket_closed_by_a_restart_is_logged_with_the_code_it_got(tmp_path):
    """SIGTERM closes page sockets with 1012 "service restart"; the log line says 1012 (not the
    4408 the consumer sends when its subscription ends a moment later)."""
    import websocket

    with served(tmp_path, "--workers", "1") as server:
        ws, path = _open_page_socket(server, "ws-restarted")
        server.proc.send_signal(signal.SIGTERM)
        while True:
            frame = ws.recv_frame()
            if frame.opcode == websocket.ABNF.OPCODE_CLOSE:
                break
        assert int.from_bytes(frame.data[:2], "big") == 1012
        assert server.proc.wait(60) == 0
        line = wait_log(server, lambda l: l.get("verb") == "WEBSOCKET" and l.get("user") == "ws-restarted")
        assert line["code"] == 1012 and line["path"] == path


def _junk(server: LiveServer, batch: int, n: int = 100) -> None:
    for i in range(n):
        conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
        method = ("GET", "POST", f"JUNK{batch}X{i}", "DELETE")[i % 4]
        path = (f"/apis/junk-{batch}-{i}.example.com/v{i}/things{i}", f"/api/v{batch}x{i}/namespaces/n/pods{i}/x/sub{i}",
                f"/apis/coordination.k8s.io/v1/leases{i}?dryRun=junk{batch}x{i}",
                f"/apis/coordination.k8s.io/v1/namespaces/n/leases/x/junk{batch}x{i}")[i % 4]
        conn.request(method, path)
        conn.getresponse().read()
        conn.close()


@pytest.mark.postgres
def test_junk_requests_add_no_series(server):
    """Issue 29: labels come from fixed sets (kube's verbs, the served resources, "other"): 200
    junk anonymous requests once grew /metrics from 34 to 234 series."""
    def series(text: str) -> set[str]:
        return {line.rpartition(" ")[0] for line in text.splitlines()
                if line.startswith(("apiserver_request_total{", "apiserver_request_duration_seconds_count{"))}

    _junk(server, 1)
    first = scrape(server)
    assert "junk" not in first.lower()
    _junk(server, 2)   # other junk, answered with the same codes: not one new series
    second = scrape(server)
    assert "junk" not in second.lower()
    assert series(second) == series(first)
    assert 'verb="other"' in second and 'resource="other"' in second and 'group="other"' in second

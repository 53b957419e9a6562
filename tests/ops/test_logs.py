"""Logs an incident can use (dashboard/server/logs.py, observe.py, kube/outage.py): every line a
real `serve` writes to stdout and stderr is one JSON object; request lines name the client and its
User-Agent; what else is logged about a request names its Audit-ID; a failure that repeats (Redis
down, a schema not migrated yet) is one line when it starts and one when it ends."""
from __future__ import annotations

import http.client
import logging
import subprocess
import sys

import orjson
import pytest

from conftest import ROOT, LiveServer, eventually, free_port, migrate, running, sample, scrape, server_env
from manifests import lease

LEASES = "/apis/coordination.k8s.io/v1/namespaces/logs/leases"


def json_lines(server: LiveServer) -> list[dict]:
    """Every line of the server's stdout and stderr, each parsed as JSON (fails naming the first
    line that is not)."""
    out = []
    for raw in server.log().splitlines():
        try:
            out.append(orjson.loads(raw))
        except orjson.JSONDecodeError:
            raise AssertionError(f"a log line that is not JSON: {raw!r}") from None
    return out


@pytest.mark.slow
def test_every_line_is_json_and_redis_down_is_one_line(tmp_path):
    """Two workers, maintenance on, Daphne's access log on, and a REDIS_URL where nothing listens:
    writes, reads, a refused request, a page, a stop. Every line parses; each process that
    published says once that Redis is down (and counts each failure), never a traceback per write."""
    dead_redis = f"redis://127.0.0.1:{free_port()}/0"
    env = server_env(tmp_path, REDIS_URL=dead_redis, KUBEDASH_MAINTENANCE="1", KUBEDASH_LOG_LEVEL="INFO")
    server = LiveServer(tmp_path, "--workers", "2", "--access-log", env=env)
    migrate(server.env)
    token = server.token("logs-admin", "admin")
    writes = 12
    with running(server):
        for i in range(writes):
            status, _, body = server.request("POST", LEASES, lease(f"l{i}", ns="logs"), token=token)
            assert status == 201, body
        assert server.request("GET", LEASES, token="not-a-token")[0] == 401
        conn = http.client.HTTPConnection(server.host, server.http_port, timeout=30)
        conn.request("GET", "/accounts/login/", headers={"User-Agent": "incident-browser/1.0"})
        assert conn.getresponse().status == 200
        conn.close()
        metrics = scrape(server)
        assert sample(metrics, "kubedash_redis_errors_total", operation="publish") >= writes
        # (the last write's request line is out before its answer: its publish came first)
        eventually(lambda: sum(1 for line in json_lines(server)
                               if line.get("logger") == "kubedash.request" and line.get("code") == 201) == writes,
                   what="a request line per write")
    lines = json_lines(server)   # after the stop: the shutdown's lines too

    assert all({"ts", "level", "logger"} <= set(line) and line["ts"].endswith("Z") for line in lines)
    requests = [line for line in lines if line["logger"] == "kubedash.request"]
    page = next(line for line in requests if line["path"] == "/accounts/login/")
    assert page["client"] == "127.0.0.1" and page["userAgent"] == "incident-browser/1.0" and page["code"] == 200
    assert all(line["client"] == "127.0.0.1" and line["auditID"] for line in requests)
    others = [line for line in lines if line["logger"] != "kubedash.request"]
    assert all("message" in line for line in others)
    assert any(line["logger"] == "kubedash.serve" and "Serving HTTP" in line["message"] for line in others)
    assert any(line["logger"] == "kubedash.access" and "/accounts/login/" in line["message"] for line in others)

    redis_down = [line for line in others if "publishing commits to Redis" in line["message"]]
    writers = {line["pid"] for line in requests if line["method"] == "POST"}
    assert redis_down and len(redis_down) <= len(writers), redis_down   # one per process, not one per write
    assert all("exc" not in line for line in redis_down)
    subscription = [line for line in others if "Redis subscription" in line["message"]]
    assert len(subscription) <= 2, subscription   # (each worker's hub: its first failure only)


@pytest.mark.slow
def test_an_unmigrated_schema_is_logged_once_not_every_round(tmp_path):
    """A process started before `migrate` (its election retrying every 0.1 s, readiness probed
    again and again): one line each when it starts failing, one when it works."""
    env = server_env(tmp_path, KUBEDASH_MAINTENANCE="1", KUBEDASH_MAINTENANCE_RETRY_PERIOD="0.1")
    server = LiveServer(tmp_path, "--workers", "1", env=env)
    with running(server):
        for _ in range(5):
            assert server.request("GET", "/readyz", token="-")[0] == 500
        eventually(lambda: "maintenance election: reaching the store failed" in server.log(), what="an election round")
        subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], env=env, cwd=ROOT, check=True)
        eventually(lambda: server.request("GET", "/readyz", token="-")[0] == 200, what="ready after migrate")
        eventually(lambda: "maintenance election: reaching the store works again" in server.log(),
                   what="the election reaching the store")
    messages = [line.get("message", "") for line in json_lines(server)]
    # Dozens of rounds failed (0.1 s apart, over the migrate's seconds): a line per kind of error
    # met (the missing schema; perhaps another while its tables appear), not one per round.
    assert 1 <= sum("maintenance election: reaching the store failed" in m for m in messages) <= 3, messages
    assert sum("readyz: migrations failed" in m for m in messages) == 1, messages
    assert sum("readyz: migrations works again" in m for m in messages) == 1, messages


def test_a_record_about_a_request_names_its_audit_id():
    """The formatter's side of it: a record logged with the request (as Django's own and the API's
    error lines are) carries the Audit-ID its request line has."""
    from django.test import RequestFactory

    from dashboard.kube import context
    from dashboard.server.logs import JsonFormatter

    request = RequestFactory().get("/api/v1")
    context.of(request).record["auditID"] = "1f0c1d2e-0000-4000-8000-000000000000"
    record = logging.LogRecord("dashboard.kube.views", logging.WARNING, __file__, 1, "database connection lost serving %s",
                               ("/api/v1",), None)
    record.request = request
    line = orjson.loads(JsonFormatter().format(record))
    assert line["auditID"] == "1f0c1d2e-0000-4000-8000-000000000000" and line["level"] == "WARNING"
    assert line["message"] == "database connection lost serving /api/v1" and line["logger"] == "dashboard.kube.views"

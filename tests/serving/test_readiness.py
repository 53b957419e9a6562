"""A server started on an unmigrated database (a new pod before `migrate` finished): the process
stays alive, /readyz is not ready in kube's format (`[-]migrations failed`), API calls get a 503
Status (never a 500), and once `migrate` has run it becomes ready by itself."""
from __future__ import annotations

import subprocess
import sys
import time

import orjson
import pytest

from conftest import ROOT, LiveServer, eventually, migrate, running, server_env

LEASES = "/apis/coordination.k8s.io/v1/namespaces/ready/leases"


@pytest.fixture
def unmigrated(tmp_path):
    """`manage.py serve` on a database nobody migrated (SQLite file absent)."""
    # (maintenance on: the election too must survive a missing schema)
    server = LiveServer(tmp_path, env=server_env(tmp_path, KUBEDASH_MAINTENANCE="1"))
    with running(server):
        yield server, server.env


def test_unmigrated_database_is_not_ready_and_never_500(unmigrated):
    server, env = unmigrated
    status, headers, body = server.request("GET", "/readyz?verbose", token="-")
    assert status == 500 and headers["Content-Type"].startswith("text/plain")
    assert body.decode().splitlines() == ["[+]ping ok", "[+]database ok", "[-]migrations failed: reason withheld",
                                          "readyz check failed"]
    assert server.request("GET", "/readyz/migrations", token="-")[0] == 500
    # The API answers a Status saying why, for reads, writes and watches alike.
    for method, path, body_ in (("GET", LEASES, None), ("POST", LEASES, {"metadata": {"name": "x"}}),
                                ("GET", LEASES + "?watch=true", None), ("GET", LEASES + "/x", None)):
        status, headers, got = server.request(method, path, body=body_, token="any-token")
        assert status == 503, (method, path, status, got)
        assert got["kind"] == "Status" and got["reason"] == "ServiceUnavailable"
        assert "not migrated" in got["message"] and headers["Retry-After"] == "5"
    assert server.request("GET", "/livez", token="-")[:3:2] == (200, b"ok")
    # A maintenance election round on the missing schema (its log line says so), and it lives on.
    eventually(lambda: "maintenance election: reaching the store failed" in server.log(), what="an election round")
    assert server.proc.poll() is None, "the server died on an unmigrated database"

    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    deadline = time.monotonic() + 30
    while server.request("GET", "/readyz", token="-")[0] != 200:   # positive signal, no fixed sleep
        assert time.monotonic() < deadline, "not ready after migrate"
        time.sleep(0.2)
    status, _, body = server.request("GET", "/readyz?verbose", token="-")
    assert body.decode().splitlines() == ["[+]ping ok", "[+]database ok", "[+]migrations ok", "readyz check passed"]
    token = server.token("ready-admin", "admin")
    status, _, created = server.request("POST", LEASES, {"metadata": {"name": "after"}, "spec": {}}, token=token)
    assert status == 201, created


@pytest.mark.postgres
def test_migrate_runs_one_at_a_time_on_postgresql(tmp_path):
    """Several pods' init containers start `migrate` at once on a fresh database: all succeed
    (they take turns under the advisory lock; the later ones find nothing to apply)."""
    import uuid

    from pg_support import connect, pg_url, require_postgres

    require_postgres()
    name = f"kubedash_i24_migrate_{uuid.uuid4().hex[:8]}"
    with connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        env = {**server_env(tmp_path), "DATABASE_URL": pg_url(name)}
        procs = [subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput"], env=env,
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for _ in range(3)]
        outputs = [p.communicate(timeout=300)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0, 0], outputs
        assert sum("No migrations to apply." in out for out in outputs) == 2, outputs
    finally:
        with connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


NEWER = ("coordination", "9999_from_a_newer_release")


@pytest.mark.slow
def test_a_release_refuses_a_schema_a_newer_release_migrated(tmp_path):
    """A rollback: the database holds a migration this code does not have (a newer release applied
    it). Started on it, the process serves nothing but the probes and /metrics: /readyz fails
    (/readyz/migrations says why), every other request gets 503 saying what to do, the log says
    it once. The same process started on the database without that migration serves again."""
    import sqlite3

    server = LiveServer(tmp_path, "--workers", "1", env=server_env(tmp_path))
    migrate(server.env)
    token = server.token("rollback-admin", "admin")
    with sqlite3.connect(tmp_path / "kubedash.sqlite3") as db:   # (what `migrate` of that release wrote)
        db.execute("INSERT INTO django_migrations (app, name, applied) VALUES (?, ?, datetime('now'))", NEWER)
    with running(server):
        status, _, body = server.request("GET", "/readyz?verbose", token="-")
        assert status == 500
        assert "[-]migrations failed: reason withheld" in body.decode().splitlines()
        status, _, body = server.request("GET", "/readyz/migrations", token="-")
        assert status == 500
        why = body.decode()
        assert "database schema is newer than this release" in why and "coordination.9999_from_a_newer_release" in why
        assert "roll forward" in why and "restore" in why
        for method, path, body_, headers in (
                ("GET", LEASES, None, {}), ("POST", LEASES, {"metadata": {"name": "x"}, "spec": {}}, {}),
                ("GET", LEASES + "?watch=true", None, {}), ("GET", "/version", None, {}),
                ("GET", "/", None, {"Accept": "text/html"})):
            status, got_headers, got = server.request(method, path, body=body_, token=token, headers=headers)
            assert status == 503, (method, path, status, got)
            assert got["kind"] == "Status" and got["reason"] == "ServiceUnavailable" and got["code"] == 503
            assert "newer than this release" in got["message"] and "Retry-After" not in got_headers
        assert server.request("GET", "/livez", token="-")[:3:2] == (200, b"ok")
        assert server.request("GET", "/metrics", token=token)[0] == 200
        for _ in range(3):   # probes keep failing: still one line in the log
            assert server.request("GET", "/readyz", token="-")[0] == 500
    lines = [orjson.loads(line) for line in server.log().splitlines()]
    # Said once, when the worker started (its heavy child, serving the page, refused quietly).
    said = [line["pid"] for line in lines if line["logger"] == "dashboard.kube.schema_state"]
    assert len(said) == 1, said
    assert "newer than this release" in next(line for line in lines if line["logger"] == "dashboard.kube.schema_state")["message"]
    # Four failed probes: one line, and no "Internal Server Error" per probe.
    assert sum("readyz: migrations failed" in line.get("message", "") for line in lines) == 1, lines
    assert not any(line["logger"] == "django.request" for line in lines), lines

    # Rolled forward (here: the newer migration gone): it serves again.
    with sqlite3.connect(tmp_path / "kubedash.sqlite3") as db:
        db.execute("DELETE FROM django_migrations WHERE app = ? AND name = ?", NEWER)
    with running(server):
        assert server.request("GET", "/readyz", token="-")[0] == 200
        status, _, created = server.request("POST", LEASES, {"metadata": {"name": "back"}, "spec": {}}, token=token)
        assert status == 201, created

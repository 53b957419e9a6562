"""What the deployment's configuration promises (docs/OPERATIONS.md, .env.example): the public
host is served, placeholder secrets are refused at start, a Redis shared by deployments keeps
them apart, and `serve --help` says what --access-log does."""
from __future__ import annotations

import http.client
import subprocess
import sys

import pytest

from conftest import ROOT, eventually, free_port, served, server_env
from manifests import lease

CHANGE_ME = dict(DJANGO_SECRET_KEY="change-me-to-a-long-random-string")   # (.env.example's)


def _serve(tmp_path, *args, **env) -> subprocess.CompletedProcess:
    """`manage.py serve` that is expected to refuse (it exits by itself)."""
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), "serve", "--no-tls", "--workers", "1",
                           "--port", str(free_port()), *args], env=server_env(tmp_path, **env), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_placeholder_secrets_are_refused_at_start_in_words(tmp_path):
    out = _serve(tmp_path, **CHANGE_ME)
    assert out.returncode == 1
    assert "refusing to start: DJANGO_SECRET_KEY still holds the placeholder" in out.stderr + out.stdout
    assert "Traceback" not in out.stderr + out.stdout
    out = _serve(tmp_path, DATABASE_URL="postgres://kubedash:CHANGE-ME@127.0.0.1:1/kubedash",
                 KUBEDASH_METRICS_TOKEN="CHANGE-ME-token-prometheus-sends", **CHANGE_ME)
    assert out.returncode == 1
    said = out.stderr + out.stdout
    assert "DJANGO_SECRET_KEY, the database password (POSTGRES_PASSWORD, in DATABASE_URL), KUBEDASH_METRICS_TOKEN" \
        " still hold the placeholder" in said, said
    # secret.yaml's credentials key is no Fernet key: refused now (even in development), not at `follow add`.
    out = _serve(tmp_path, "--allow-placeholders", KUBEDASH_CREDENTIALS_KEY="CHANGE-ME-fernet-key")
    assert out.returncode == 1
    assert "refusing to start: KUBEDASH_CREDENTIALS_KEY is not a Fernet key" in out.stderr + out.stdout


@pytest.mark.slow
def test_placeholders_are_fine_in_development(tmp_path):
    """DJANGO_DEBUG (and `manage.py start`, which passes --allow-placeholders) serve as before."""
    with served(tmp_path, "--workers", "1", env=server_env(tmp_path, DJANGO_DEBUG="1", **CHANGE_ME)) as server:
        assert server.request("GET", "/livez", token="-")[0] == 200


@pytest.mark.slow
def test_the_public_host_is_served(tmp_path):
    """.env.example's KUBEDASH_PUBLIC_HOST (the proxy's certificate name) reaches ALLOWED_HOSTS:
    a page on that host answers (it was 400), another host still does not."""
    env = server_env(tmp_path, KUBEDASH_PUBLIC_HOST="kubedash.example", ALLOWED_HOSTS="127.0.0.1")
    with served(tmp_path, "--workers", "1", env=env) as server:
        def page(host: str) -> int:
            conn = http.client.HTTPConnection(server.host, server.http_port, timeout=30)
            conn.request("GET", "/accounts/login/", headers={"Host": host})
            status = conn.getresponse().status
            conn.close()
            return status

        assert page("kubedash.example:8443") == 200
        assert page(f"127.0.0.1:{server.http_port}") == 200
        assert page("other.example") == 400


@pytest.mark.slow
def test_deployments_sharing_one_redis_wake_only_their_own(tmp_path_factory):
    """Two deployments on one Redis with their own KUBEDASH_REDIS_PREFIX: each publishes its
    commits' wake-ups on "<prefix>:revisions", so neither rings the other's processes."""
    import redis

    import pg_support

    pg_support.require_redis()
    client = redis.Redis(host=pg_support.REDIS_HOST, port=pg_support.REDIS_PORT)
    pubsub = client.pubsub()
    pubsub.subscribe("team-a:revisions", "team-b:revisions")
    try:
        servers = []
        for prefix in ("team-a", "team-b"):
            data_dir = tmp_path_factory.mktemp(prefix)   # (a database each: SQLite files)
            env = server_env(data_dir, REDIS_URL=pg_support.redis_url(0), KUBEDASH_REDIS_PREFIX=prefix)
            servers.append(served(data_dir, "--workers", "1", env=env))
        with servers[0] as a, servers[1] as b:
            for server, prefix in ((a, "team-a"), (b, "team-b")):
                status, _, body = server.request("POST", "/apis/coordination.k8s.io/v1/namespaces/p/leases",
                                                 lease(f"from-{prefix}", ns="p"))
                assert status == 201, body
                eventually(lambda p=prefix: _published(pubsub, p), what=f"a wake-up on {prefix}:revisions")
    finally:
        pubsub.close()
        client.close()


def _published(pubsub, prefix: str) -> bool:
    message = pubsub.get_message(timeout=0.5)
    while message is not None:
        if message["type"] == "message" and message["channel"] == f"{prefix}:revisions".encode():
            return True
        message = pubsub.get_message(timeout=0.1)
    return False


def test_serve_help_says_what_access_log_does():
    out = subprocess.run([sys.executable, str(ROOT / "manage.py"), "serve", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=True)
    text = " ".join(out.stdout.split())
    assert "--access-log" in text and "Daphne's access log" in text and "KUBEDASH_REQUEST_LOG" in text


@pytest.mark.postgres
def test_the_sample_pgbouncer_ini_serves_kubedash(tmp_path):
    """deploy/pgbouncer/pgbouncer.ini, with this machine's addresses and trust auth in place of
    the sample's, in front of a server with KUBEDASH_PGBOUNCER=1: migrate, writes, a list."""
    import configparser
    import os
    import shutil
    import socket
    import tempfile
    import time
    from pathlib import Path

    import pg_support

    pg_support.require_postgres()
    if not os.path.exists(pg_support.PGBOUNCER):
        pg_support.unavailable("pgbouncer is not installed (apt-get install pgbouncer; .ci/run installs it)")
    config = configparser.ConfigParser()
    config.read(ROOT / "deploy" / "pgbouncer" / "pgbouncer.ini")
    assert config["pgbouncer"]["pool_mode"] == "transaction"
    dbname, port = pg_support.create_database("kd_pgb_sample"), free_port()
    work = Path(tempfile.mkdtemp(prefix="kubedash-pgbouncer-"))   # (not under pytest's 0700 tmp: nobody reads it)
    (work / "users.txt").write_text(f'"{pg_support.PG_USER}" ""\n')
    config["databases"] = {dbname: f"host={pg_support.PG_HOST} port={pg_support.PG_PORT} dbname={dbname}"}
    config["pgbouncer"].update(listen_addr="127.0.0.1", listen_port=str(port), auth_type="trust",
                               auth_file=str(work / "users.txt"), unix_socket_dir="",
                               logfile=str(work / "pgbouncer.log"))
    with open(work / "pgbouncer.ini", "w") as fh:
        config.write(fh)
    command = [pg_support.PGBOUNCER, str(work / "pgbouncer.ini")]
    if os.geteuid() == 0:   # pgbouncer refuses to run as root
        work.chmod(0o777)
        command[1:1] = ["-u", "nobody"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "pgbouncer did not start"
                time.sleep(0.1)
        data_dir = tmp_path / "app"
        data_dir.mkdir()
        env = server_env(data_dir, DATABASE_URL=f"postgres://{pg_support.PG_USER}@127.0.0.1:{port}/{dbname}",
                         KUBEDASH_PGBOUNCER="1")
        with served(data_dir, "--workers", "1", env=env) as server:
            path = "/apis/coordination.k8s.io/v1/namespaces/pgb/leases"
            for i in range(3):
                status, _, body = server.request("POST", path, lease(f"l{i}", ns="pgb"))
                assert status == 201, body
            status, _, listed = server.request("GET", path)
            assert status == 200 and [item["metadata"]["name"] for item in listed["items"]] == ["l0", "l1", "l2"]
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
        pg_support.drop_database(dbname)

"""/metrics for running it (issue 43): a one-worker serve with the multiprocess folder keeps every
family; every process's CPU and memory; readiness, the database, Redis, the certificates; how
long compaction has left due revisions waiting. Each against a real `manage.py serve`.
"""
from __future__ import annotations

import re
import uuid

import pytest
from cryptography import x509

import pg_support
from conftest import (FOLLOWER_ENV, LiveServer, child_pids, eventually, free_port, migrate, running, sample, scrape,
                      server_env, served)
from manifests import lease

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
METRICS_TOKEN = "metrics-" + uuid.uuid4().hex


def families(text: str) -> set[str]:
    return set(re.findall(r"^# TYPE (\S+) ", text, re.M))


def samples(text: str, name: str) -> list[tuple[dict, float]]:
    """Every sample of one name: (labels, value)."""
    out = []
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, _, value = line.rpartition(" ")
            out.append((dict(re.findall(r'(\w+)="([^"]*)"', head)), float(value)))
    return out


def process_roles(text: str) -> dict[str, set[int]]:
    """process_* pids by role."""
    roles = {}
    for labels, _ in samples(text, "process_resident_memory_bytes"):
        roles.setdefault(labels["role"], set()).add(int(labels["pid"]))
    return roles


def create_leases(server: LiveServer, ns: str, count: int) -> None:
    for i in range(count):
        status, _, body = server.request("POST", LEASES.format(ns=ns), lease(f"l{i}", ns=ns))
        assert status == 201, body


def leading(server: LiveServer) -> str:
    """The server's /metrics once it holds the maintenance Lease."""
    return eventually(lambda: (text := scrape(server)) and sample(text, "kubedash_maintenance_leader") == 1 and text,
                      timeout=60, what="the maintenance leader")


@pytest.mark.slow
def test_one_worker_with_the_multiprocess_folder_keeps_every_family(tmp_path):
    """KUBEDASH_WORKERS=1 with PROMETHEUS_MULTIPROC_DIR (the image's default): `serve` used to
    empty the folder after its own metrics existed, losing apiserver_request_total and
    kubedash_maintenance_leader. Now it binds, empties the folder (a file an earlier run left
    included) and becomes its one worker by exec: the same families as two workers."""
    servers = {}
    for workers in ("1", "2"):
        data_dir = tmp_path / f"w{workers}"
        data_dir.mkdir()
        metrics_dir = tmp_path / f"metrics-{workers}"
        metrics_dir.mkdir()
        (metrics_dir / "counter_999999.db").write_bytes(b"\0" * 8)   # left by an earlier run
        env = server_env(data_dir, **FOLLOWER_ENV, KUBEDASH_MAINTENANCE_INTERVAL="3600",
                         PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
        migrate(env)
        servers[workers] = LiveServer(data_dir, "--workers", workers, env=env, label=f"workers-{workers}")
    with running(*servers.values()):
        seen = {}
        for workers, server in servers.items():
            assert not (tmp_path / f"metrics-{workers}" / "counter_999999.db").exists(), "the folder was not emptied"
            leading(server)
            create_leases(server, "default", 3)
            status, _, _ = server.request("GET", LEASES.format(ns="default"))
            assert status == 200
            text = scrape(server)
            seen[workers] = families(text)
            assert sample(text, "kubedash_maintenance_leader") == 1
            created = sum(v for labels, v in samples(text, "apiserver_request_total")
                          if labels["verb"] == "POST" and labels["code"] == "201")
            assert created == 3, text
            # every process of the server, by role: the supervisor, its workers, their heavy children
            roles = eventually(lambda s=server, n=int(workers): (r := process_roles(scrape(s)))
                               and len(r.get("heavy", ())) == n and r, what="a heavy child per worker")
            if workers == "1":   # it became its one worker: no supervisor
                assert roles["worker"] == {server.proc.pid} and "supervisor" not in roles
                workers_pids = roles["worker"]
            else:
                workers_pids = child_pids(server.proc.pid)
                assert roles["supervisor"] == {server.proc.pid}
                assert roles["worker"] == workers_pids and len(workers_pids) == int(workers)
            assert roles["heavy"] == set().union(*(child_pids(pid) for pid in workers_pids))
            assert all(v > 0 for _, v in samples(text, "process_cpu_seconds_total"))
        assert {"apiserver_request_total", "apiserver_request_duration_seconds", "kubedash_maintenance_leader",
                "kubedash_lane_requests", "kubedash_watch_follower_running", "kubedash_ready",
                "process_cpu_seconds_total", "process_resident_memory_bytes"} <= seen["1"]
        assert seen["1"] == seen["2"], (seen["1"] ^ seen["2"])


@pytest.mark.slow
def test_compaction_overdue_grows_while_nothing_compacts_and_is_zero_after(tmp_path):
    """kubedash_revision_compaction_overdue_seconds: with no maintenance leader nothing compacts,
    so revisions past both retentions (1 s, 2 newer revisions) wait longer at every scrape,
    however few the writes; one compaction brings it to 0. One process, no multiprocess folder:
    process_* still names it (role worker) and its heavy child. Redis unreachable: 0 and the
    failed publishes counted. The serving certificate's notAfter, as in the file."""
    dead_redis = f"redis://127.0.0.1:{free_port()}/0"
    env = server_env(tmp_path, KUBEDASH_RETAIN_SECONDS="1", KUBEDASH_RETAIN_REVISIONS="2", REDIS_URL=dead_redis)
    with served(tmp_path, "--workers", "1", env=env) as server:
        create_leases(server, "default", 5)
        first = eventually(lambda: sample(scrape(server), "kubedash_revision_compaction_overdue_seconds"),
                           what="a revision overdue for compaction")
        eventually(lambda: sample(scrape(server), "kubedash_revision_compaction_overdue_seconds") > first + 1,
                   what="the overdue seconds growing with the clock")
        assert "removed" in server.manage("compact")
        text = scrape(server)
        assert sample(text, "kubedash_revision_compaction_overdue_seconds") == 0
        assert sample(text, "kubedash_revision_compacted") == sample(text, "kubedash_revision_newest") - 2

        assert sample(text, "kubedash_redis_up") == 0
        assert sample(text, "kubedash_redis_errors_total", operation="publish") >= 5   # one per create
        assert sample(text, "kubedash_ready") == 1 and sample(text, "kubedash_database_up") == 1

        roles = eventually(lambda: (r := process_roles(scrape(server))) and "heavy" in r and r, what="the heavy child")
        assert roles["worker"] == {server.proc.pid} and "supervisor" not in roles
        assert roles["heavy"] == child_pids(server.proc.pid)
        assert len(samples(text, "process_cpu_seconds_total")) == 2, "one family, a sample per process"

        for name, path in (("serving", "server.crt"), ("ca", "ca.crt")):
            cert = x509.load_pem_x509_certificate((tmp_path / "tls" / path).read_bytes())
            assert sample(text, "kubedash_certificate_expiry_timestamp_seconds",
                          certificate=name) == cert.not_valid_after_utc.timestamp()


@pytest.mark.postgres
@pytest.mark.slow
def test_database_and_readiness_figures_follow_the_database(tmp_path):
    """On PostgreSQL + Redis: the database's connections against max_connections, Redis up,
    ready. Then the database refuses connections: the scrape (the static metrics token needs
    no database) still answers, with kubedash_ready and kubedash_database_up 0, and a request
    that lost its connection is counted; back to 1 when the database is."""
    pg_support.require_postgres()
    pg_support.require_redis()
    dbname = pg_support.create_database("kd_ops_health")
    env = server_env(tmp_path, DATABASE_URL=pg_support.pg_url(dbname), REDIS_URL=pg_support.redis_url(7),
                     KUBEDASH_METRICS_TOKEN=METRICS_TOKEN)
    try:
        with served(tmp_path, "--workers", "2", env=env) as server:
            create_leases(server, "default", 2)
            text = scrape(server, METRICS_TOKEN)
            with pg_support.connect() as conn:
                most = int(conn.execute("SHOW max_connections").fetchone()[0])
            assert sample(text, "kubedash_database_max_connections") == most
            assert 1 <= sample(text, "kubedash_database_connections") <= most
            assert sample(text, "kubedash_ready") == 1 and sample(text, "kubedash_database_up") == 1
            assert sample(text, "kubedash_redis_up") == 1
            token = server.admin_token
            with pg_support.connect() as conn:
                conn.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS false')
                conn.execute("SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = %s",
                             (dbname,))
            try:
                status, _, _ = server.request("GET", LEASES.format(ns="default") + "/l0", token=token)
                assert status == 503
                down = eventually(lambda: (t := scrape(server, METRICS_TOKEN)) and sample(t, "kubedash_ready") == 0
                                  and t, what="kubedash_ready 0")
                assert sample(down, "kubedash_database_up") == 0
                assert "kubedash_revision_newest" not in families(down)
                assert sample(down, "kubedash_database_connection_lost_total") >= 1
            finally:
                with pg_support.connect() as conn:
                    conn.execute(f'ALTER DATABASE "{dbname}" ALLOW_CONNECTIONS true')
            eventually(lambda: sample(scrape(server, METRICS_TOKEN), "kubedash_ready") == 1, what="ready again")
    finally:
        pg_support.drop_database(dbname)

"""PostgreSQL and Redis for the scaled-setup tests: reachability, throwaway databases.

The services are the machine's own (127.0.0.1:5432 with trust auth as `postgres`, and
127.0.0.1:6379). When one is missing the tests skip on a developer machine, but fail in CI,
where the scaled setup must be exercised.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

PG_HOST, PG_PORT, PG_USER = "127.0.0.1", 5432, "postgres"
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379


def pg_url(dbname: str) -> str:
    return f"postgres://{PG_USER}@{PG_HOST}:{PG_PORT}/{dbname}"


def redis_url(db: int) -> str:
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"


def unavailable(message: str):
    """A missing service: a failure in CI (it must run there), a skip elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(message + " (required in CI: see .ci/run, which starts the services)", pytrace=False)
    pytest.skip(message)


def connect(dbname: str = "postgres", autocommit: bool = True):
    import psycopg

    return psycopg.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=dbname,
                           autocommit=autocommit, connect_timeout=5)


def require_postgres() -> None:
    try:
        with connect() as conn:
            conn.execute("SELECT 1")
    except Exception as err:  # psycopg missing, refused, auth: all mean "not usable here"
        unavailable(f"PostgreSQL at {PG_HOST}:{PG_PORT} is not reachable: {err}")


def require_redis() -> None:
    try:
        import redis

        client = redis.Redis(host=REDIS_HOST, port=REDIS_PORT, socket_connect_timeout=3, socket_timeout=3)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as err:
        unavailable(f"Redis at {REDIS_HOST}:{REDIS_PORT} is not reachable: {err}")


def create_database(prefix: str = "kubedash_test") -> str:
    """A new, empty database with a unique name (CREATE DATABASE can't run in a transaction)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(name: str) -> None:
    # FORCE (PostgreSQL 13+) ends connections a killed server may have left behind.
    with connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ---------------------------------------------------------------------------------------------
# PgBouncer (Debian's package) in transaction pooling mode, in front of the machine's PostgreSQL

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
# Fewer server connections than the two test servers hold client connections (each about six),
# so consecutive transactions of one client land on different server connections: what
# transaction pooling breaks (a server-side cursor, a prepared statement, session state) fails.
PGBOUNCER_POOL_SIZE = 3


class PgBouncer:
    """One pgbouncer process of a test's own, on a free port; url(dbname) goes through it."""

    def __init__(self, pool_size: int = PGBOUNCER_POOL_SIZE):
        if not os.path.exists(PGBOUNCER):
            unavailable("pgbouncer is not installed (apt-get install pgbouncer; .ci/run installs it)")
        self.dir = Path(tempfile.mkdtemp(prefix="kubedash-pgbouncer-"))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        (self.dir / "users.txt").write_text(f'"{PG_USER}" ""\n')
        (self.dir / "pgbouncer.ini").write_text(f"""[databases]
* = host={PG_HOST} port={PG_PORT}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir}/users.txt
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits,options
logfile = {self.dir}/pgbouncer.log
""")
        command = [PGBOUNCER, str(self.dir / "pgbouncer.ini")]
        if os.geteuid() == 0:   # pgbouncer refuses to run as root
            os.chmod(self.dir, 0o777)
            for name in ("users.txt", "pgbouncer.ini"):
                os.chmod(self.dir / name, 0o644)
            command[1:1] = ["-u", "nobody"]
        self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("pgbouncer did not start: " + self.log())
                time.sleep(0.1)

    def url(self, dbname: str) -> str:
        return f"postgres://{PG_USER}@127.0.0.1:{self.port}/{dbname}"

    def log(self) -> str:
        path = self.dir / "pgbouncer.log"
        return path.read_text()[-3000:] if path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

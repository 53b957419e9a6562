"""PostgreSQL and Redis for the scaled-setup tests: reachability, throwaway databases.

The services are the machine's own (127.0.0.1:5432 with trust auth as `postgres`, and
127.0.0.1:6379). When one is missing the tests skip on a developer machine, but fail in CI,
where the scaled setup must be exercised.
"""
from __future__ import annotations

import os
import uuid

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

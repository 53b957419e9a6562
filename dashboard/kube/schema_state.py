"""Whether the database schema is migrated: /readyz's `migrations` check, and the 503 (not 500)
that API requests get while it is not (a new pod started before `migrate` finished).

Once every migration is applied the answer is kept: this process's code cannot gain migrations,
so a probe costs nothing afterwards. Until then each call reads the django_migrations table
(no write: a database that has none yet simply has nothing applied).
"""
from __future__ import annotations

from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor

from .errors import ApiError

_migrated = False


def pending() -> list[str]:
    """The migrations this code has and the database lacks ("app.0003_name"), [] when none."""
    global _migrated
    if _migrated:
        return []
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    names = [f"{migration.app_label}.{migration.name}" for migration, _backwards in plan]
    _migrated = not names
    return names


def not_migrated_error(exc: Exception):
    """For a database error: the 503 Status to answer when the schema is not migrated yet (the
    error is then its doing), else None."""
    if not isinstance(exc, DatabaseError) or _migrated:
        return None
    try:
        missing = pending()
    except DatabaseError:
        return None
    if not missing:
        return None
    return ApiError(503, "ServiceUnavailable",
                    f"the database schema is not migrated yet ({len(missing)} migrations pending: run "
                    "`manage.py migrate`); try again shortly", headers={"Retry-After": "5"})

"""Whether the database schema is the one this code expects: /readyz's `migrations` check, the
503 (not 500) that API requests get while it is not migrated yet (a new pod started before
`migrate` finished), and the refusal to serve a schema NEWER than this release.

Not migrated: once every migration is applied the answer is kept (this process's code cannot
gain migrations, so a probe costs nothing afterwards); until then each call reads the
django_migrations table (no write: a database that has none yet simply has nothing applied).

Newer: the database has migrations of kubedash's apps that this code does not have, so a newer
release migrated it and this one is a rollback. Its code would misread the rows (a release before
followed clusters served their objects as local ones), so it serves nothing instead: every
request but the health endpoints and /metrics gets 503 (SchemaGuardMiddleware), /readyz fails,
and the log says so once. Checked once per process, when it starts (check_at_start: `serve`'s
workers, their heavy children) or else at its first /readyz: a process that was already serving
when the new release migrated (a rolling upgrade) keeps serving; one started on that database
(a rollback, a restart) refuses. Requests never query for it (the guard reads what was found). docs/OPERATIONS.md,
"Upgrades"; CHANGELOG.md says which releases can be rolled back to.
"""
from __future__ import annotations

import logging

import orjson
from django.apps import apps
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.http import HttpResponse

from dashboard.access.middleware import EitherModeMiddleware
from dashboard.compat.django import logged_already

from .build import build
from .errors import ApiError

log = logging.getLogger(__name__)

_migrated = False
_newer: list[str] | None = None   # None: not checked yet in this process
# Still served on a newer schema: the probes must say why, and Prometheus must see the process.
UNGUARDED = ("/livez", "/healthz", "/readyz", "/metrics")


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


def _unknown_applied(loader: MigrationLoader) -> list[str]:
    """Applied migrations of kubedash's apps ("dashboard.*") that are not in this code."""
    ours = {config.label for config in apps.get_app_configs() if config.name.startswith("dashboard.")}
    return sorted(f"{app}.{name}" for app, name in loader.applied_migrations
                  if app in ours and (app, name) not in loader.disk_migrations)


def newer(quiet: bool = False) -> list[str]:
    """The migrations of kubedash's apps the database has and this code lacks ([] when none),
    read once per process; a finding is logged then (unless `quiet`). DatabaseError when the
    database cannot be read (then the next call tries again)."""
    global _newer
    if _newer is None:
        found = _unknown_applied(MigrationLoader(connection))
        if found and not quiet:
            log.error("%s: refusing to serve", newer_message(found))
        _newer = found
    return _newer


def check_at_start(quiet: bool = False) -> None:
    """newer(), when a process starts serving; a database not reachable yet is left to /readyz."""
    try:
        newer(quiet)
    except DatabaseError:
        pass
    finally:
        connection.close()   # (this thread's; the lanes open their own)


def newer_message(found: list[str]) -> str:
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    return (f"the database schema is newer than this release ({build().version}): it has migrations this "
            f"code does not know ({shown}); roll forward to the release that applied them, or restore the "
            "database from before that upgrade")


def _refusal(path: str) -> HttpResponse | None:
    """The 503 a request gets once a newer schema was found (None for the probes and /metrics)."""
    if path.startswith(UNGUARDED):
        return None
    # No Retry-After: waiting does not help, only another release or another database does.
    err = ApiError(503, "ServiceUnavailable", newer_message(_newer))
    # (logged once, when found: not again by Django for every request)
    return logged_already(HttpResponse(orjson.dumps(err.status()), status=err.code, content_type="application/json"))


class SchemaGuardMiddleware(EitherModeMiddleware):
    """Near the top of both chains (settings.MIDDLEWARE, KUBEDASH_API_MIDDLEWARE): on a newer schema
    nothing is served but the probes and /metrics. It costs one test of a list per request."""

    def handle(self, request):
        return (_newer and _refusal(request.path)) or self.get_response(request)

    async def ahandle(self, request):
        return (_newer and _refusal(request.path)) or await self.get_response(request)

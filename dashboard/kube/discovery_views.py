"""Discovery, version and OpenAPI endpoints (public, like kube-apiserver's discovery roles)."""
from __future__ import annotations

import logging

from django.db import connection
from django.http import HttpResponse

from dashboard.compat.django import logged_already

from . import discovery, openapi, openapi_proto, schema_state
from .errors import path_not_found
from .outage import Outage
from .views import KubeAPIView, json_response

log = logging.getLogger(__name__)


class PublicView(KubeAPIView):
    authentication_classes = []

    def initial(self, request, *args, **kwargs):
        pass


def _aggregated_or_legacy(request, core: bool):
    body, content_type = discovery.root_document(core, request.META.get("HTTP_ACCEPT", ""), request.get_host())
    return json_response(body, request=request, content_type=content_type)


class VersionView(PublicView):
    def get(self, request):
        return json_response(discovery.version_info(), request=request)


class CoreDiscoveryView(PublicView):
    def get(self, request):
        return _aggregated_or_legacy(request, core=True)


class GroupsDiscoveryView(PublicView):
    def get(self, request):
        return _aggregated_or_legacy(request, core=False)


class GroupView(PublicView):
    def get(self, request, group):
        body = discovery.api_group(group)
        if body is None:
            raise path_not_found()
        return json_response(body, request=request)


class ResourceListView(PublicView):
    def get(self, request, version, group=""):
        body = discovery.api_resource_list(group, version)
        if body is None:
            raise path_not_found()
        return json_response(body, request=request)


class OpenAPIv3RootView(PublicView):
    def get(self, request):
        return json_response(openapi.v3_root(), request=request)


class OpenAPIv3DocView(PublicView):
    def get(self, request, gv):
        found = openapi.v3_group_version(gv)
        if found is None:
            raise path_not_found()
        data, digest = found
        response = HttpResponse(data, content_type="application/json")
        if request.GET.get("hash") == digest:
            # The hash names this exact document: clients may cache it forever.
            response["Cache-Control"] = "public, immutable"
            response["ETag"] = f'"{digest}"'
        return response


class OpenAPIv2View(PublicView):
    def get(self, request):
        accept = request.META.get("HTTP_ACCEPT", "")
        if "protobuf" in accept and "json" not in accept:
            # kubectl's fallback for kinds not in /openapi/v3 (kube/openapi_proto.py).
            return HttpResponse(openapi.v2_protobuf(), content_type=openapi_proto.CONTENT_TYPE)
        return HttpResponse(openapi.v2(), content_type="application/json")


def healthz(request):
    """/healthz, /livez: plain "ok", as kube-apiserver answers (also the bench ceiling). The
    process answering is all liveness means: a lost database or Redis is for /readyz to say."""
    if "verbose" in request.GET:
        name = request.path.strip("/") or "healthz"
        return _plain(f"[+]ping ok\n{name} check passed\n")
    return _plain("ok")


def _check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _check_migrations() -> None:
    newer = schema_state.newer()
    if newer:
        raise RuntimeError(schema_state.newer_message(newer))
    missing = schema_state.pending()
    if missing:
        raise RuntimeError(f"{len(missing)} migrations not applied: {', '.join(missing[:5])}")


def _ready_checks() -> list[tuple[str, object]]:
    """What the API needs to answer: the database, migrated. Not Redis: without it the API and
    the pages keep working (wake-ups fall back to polling the log), so a Redis outage must not
    take every pod out of the Service; its state is in /metrics and the logs."""
    return [("ping", lambda: None), ("database", _check_database), ("migrations", _check_migrations)]


def _plain(text: str, status: int = 200) -> HttpResponse:
    response = HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")
    response["X-Content-Type-Options"] = "nosniff"
    # A failing check is logged when it starts failing (_outage), not by Django at every probe.
    return logged_already(response) if status == 500 else response


# A probe every few seconds logs a check's failure when it starts or its reason changes, and its
# recovery, not every probe (kube/outage.py).
_outages: dict[str, Outage] = {}


def _outage(name: str) -> Outage:
    found = _outages.get(name)
    if found is None:
        found = _outages[name] = Outage(log, f"readyz: {name}")
    return found


def readyz(request, check: str | None = None):
    """/readyz in kube-apiserver's format: "ok"; `?verbose` lists "[+]name ok" per check; a
    failed check makes it 500 listing "[-]name failed: reason withheld" (the reason is logged,
    not shown: the endpoint is public); `?exclude=name` skips one. /readyz/<name> runs one.
    Not ready until every migration is applied (a pod started before `migrate` finished)."""
    checks = _ready_checks()
    if check is not None:
        found = dict(checks).get(check)
        if found is None:
            return _plain("404 page not found\n", 404)
        try:
            found()
        except Exception as err:
            return _plain(f"internal server error: {err}\n", 500)
        return _plain("ok")
    excluded = set(request.GET.getlist("exclude"))
    lines, failed = [], []
    for name, run in checks:
        if name in excluded:
            excluded.discard(name)
            lines.append(f"[+]{name} excluded: ok\n")
            continue
        try:
            run()
        except Exception as err:
            _outage(name).failed(str(err))
            lines.append(f"[-]{name} failed: reason withheld\n")
            failed.append(name)
        else:
            _outage(name).ok()
            lines.append(f"[+]{name} ok\n")
    if excluded:
        quoted = ",".join(f'"{n}"' for n in sorted(excluded))
        lines.append(f"warn: some health checks cannot be excluded: no matches for {quoted}\n")
    if failed:
        return _plain("".join(lines) + "readyz check failed\n", 500)
    if "verbose" not in request.GET:
        return _plain("ok")
    return _plain("".join(lines) + "readyz check passed\n")


def ready() -> bool:
    """Would /readyz answer 200 now? (/metrics' kubedash_ready: the same checks, quietly.)"""
    for _name, run in _ready_checks():
        try:
            run()
        except Exception:  # as readyz: any failure is "not ready" (readyz logs why)
            return False
    return True

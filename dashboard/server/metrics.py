"""GET /metrics: Prometheus text format, summed over the worker processes.

With PROMETHEUS_MULTIPROC_DIR set (the supervisor sets and empties it for its workers,
dashboard.server.workers) every worker writes its counters there and a scrape of any worker
reads all of them; without it (one process) the process's own registry is served. The
revision-log figures are read from the database at scrape time (dashboard.kube.metrics).

Who may read it: admins without namespace or cluster limits (bearer token or session; it names
every followed cluster), the users named in KUBEDASH_METRICS_USERS
(e.g. a viewer token for Prometheus), the static KUBEDASH_METRICS_TOKEN; anonymously only
when KUBEDASH_METRICS_ANONYMOUS is on. Otherwise 401 / 403 as kube-apiserver answers them.
"""
from __future__ import annotations

import hashlib
import hmac
import os

from django.conf import settings
from django.http import HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Gauge, generate_latest, multiprocess
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from dashboard.access.authentication import BearerTokenAuthentication
from dashboard.access.principals import principal_for
from dashboard.kube import context, discovery
from dashboard.kube.build import build
from dashboard.kube.errors import ApiError, method_not_allowed, unauthorized
from dashboard.kube.metrics import RevisionLogCollector
from dashboard.kube.views import acting, status_response


def _forbidden(user: str) -> ApiError:
    return ApiError(403, "Forbidden", f'forbidden: User "{user}" cannot get path "/metrics"', {})


def _same_secret(given: str, expected: str) -> bool:
    return bool(expected) and hmac.compare_digest(hashlib.sha256(given.encode()).digest(),
                                                  hashlib.sha256(expected.encode()).digest())


def _check(request) -> None:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, token = header.partition(" ")
    if header and scheme.lower() == "bearer" and _same_secret(token.strip(), settings.KUBEDASH_METRICS_TOKEN):
        return
    try:
        found = BearerTokenAuthentication().authenticate(Request(request))
    except AuthenticationFailed:
        raise unauthorized() from None
    principal = acting(request, *found) if found else None   # (impersonating: as whom it acts)
    if principal is None:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            principal = principal_for(user)
    if principal is None:
        if settings.KUBEDASH_METRICS_ANONYMOUS:
            return
        raise unauthorized()
    context.of(request).principal = principal   # (the request log's user)
    if principal.is_full_admin or (not principal.is_share and principal.username in settings.KUBEDASH_METRICS_USERS):
        return
    raise _forbidden(principal.username)


HUB_REVISION_NAME = "kubedash_watch_hub_revision"

# Which build answers, as kube's kubernetes_build_info: always 1, the labels say (kube/build.py).
BUILD_INFO = Gauge("kubedash_build_info", "A metric with a constant '1' value labeled by the release, git version, "
                   "git commit and build date of the kubedash build serving",
                   ["version", "git_version", "git_commit", "build_date"], multiprocess_mode="max")
BUILD_INFO.labels(build().version, discovery.git_version(), build().git_commit, build().build_date).set(1)


class _Scrape:
    """The workers' (or this process's) metrics, then the revision log's, with the hub's lag
    computed from the slowest live hub's revision."""

    def __init__(self, source):
        self.source = source

    def collect(self):
        hubs = []
        for family in self.source.collect():
            if family.name == HUB_REVISION_NAME:
                hubs.extend(sample.value for sample in family.samples)
            yield family
        yield from RevisionLogCollector(lambda: min(hubs) if hubs else None).collect()


def registry() -> CollectorRegistry:
    source = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        source = CollectorRegistry()
        multiprocess.MultiProcessCollector(source)
    out = CollectorRegistry(auto_describe=False)
    out.register(_Scrape(source))
    return out


def metrics(request):
    if request.method not in ("GET", "HEAD"):
        return status_response(method_not_allowed(request.method), request)
    try:
        _check(request)
    except ApiError as err:
        return status_response(err, request)
    return HttpResponse(generate_latest(registry()), content_type=CONTENT_TYPE_LATEST)

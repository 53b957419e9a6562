"""GET /metrics: Prometheus text format, summed over the worker processes.

With PROMETHEUS_MULTIPROC_DIR set (the supervisor sets and empties it for its workers,
dashboard.server.workers) every worker writes its counters there and a scrape of any worker
reads all of them; without it (one process) the process's own registry is served. The
revision-log figures are read from the database at scrape time (dashboard.kube.metrics), and so
is whether each followed cluster's copy is current (from its row: every process answers alike,
and a follower that died leaves its clusters stale, not "live").

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
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from dashboard.access.authentication import BearerTokenAuthentication
from dashboard.access.principals import principal_for
from dashboard.follow.models import Cluster
from dashboard.kube import context
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
        yield from _followed()


def _followed():
    """Each followed cluster: stale (1: not live, or its follower silent; Cluster.is_current) and
    when kubedash last heard from it (docs/FOLLOWING.md, "Silence")."""
    rows = list(Cluster.objects.all())
    if not rows:
        return
    now = timezone.now()
    stale = GaugeMetricFamily("kubedash_follow_stale", "1 while a followed cluster's copy is not current (no word "
                              "from it within the silence deadline, its watch down or relisting, or no follower)",
                              labels=["cluster"])
    heard = GaugeMetricFamily("kubedash_follow_heard_timestamp_seconds",
                              "When kubedash last heard from a followed cluster (an event, a bookmark, a list)",
                              labels=["cluster"])
    for row in rows:
        stale.add_metric([row.name], 0 if row.is_current(now) else 1)
        if row.heard_at is not None:
            heard.add_metric([row.name], row.heard_at.timestamp())
    yield stale
    yield heard


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

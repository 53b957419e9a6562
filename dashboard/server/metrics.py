"""GET /metrics: Prometheus text format, summed over the worker processes.

With PROMETHEUS_MULTIPROC_DIR set (the supervisor sets and empties it for its workers,
dashboard.server.workers) every worker writes its counters there and a scrape of any worker
reads all of them; without it (one process) the process's own registry is served. Read at
scrape time: the revision-log and database figures (dashboard.kube.metrics), readiness, Redis,
the certificates' expiry, the CPU and memory of every process of this server (ProcessTree), and
whether each followed cluster's copy is current (from its row: every process answers alike, and
a follower that died leaves its clusters stale, not "live").

Who may read it: admins without namespace or cluster limits (bearer token or session; it names
every followed cluster), the users named in KUBEDASH_METRICS_USERS
(e.g. a viewer token for Prometheus), the static KUBEDASH_METRICS_TOKEN; anonymously only
when KUBEDASH_METRICS_ANONYMOUS is on. Otherwise 401 / 403 as kube-apiserver answers them.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpResponse
from django.utils import timezone
from prometheus_client import (CONTENT_TYPE_LATEST, PROCESS_COLLECTOR, REGISTRY, CollectorRegistry, Gauge,
                               ProcessCollector, generate_latest, multiprocess)
from prometheus_client.core import GaugeMetricFamily, Metric
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from dashboard.notifications.metrics import outbox_figures
from dashboard.access.authentication import BearerTokenAuthentication
from dashboard.access.principals import principal_for
from dashboard.access.tls import expiry_times
from dashboard.follow.models import Cluster
from dashboard.kube import context, discovery, notify
from dashboard.kube.build import build
from dashboard.kube.discovery_views import ready
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

# This server's processes, for process_*: the supervisor (a worker's parent) when there is one,
# else the serving process; serve sets it (set_process_root).
_root = {"pid": os.getpid(), "supervised": False}


def set_process_root(pid: int, supervised: bool) -> None:
    _root.update(pid=pid, supervised=supervised)


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(p) for p in (task / "children").read_text().split()]
    except OSError:   # gone meanwhile, or a kernel without the children files
        pass
    return out


class ProcessTree:
    """prometheus_client's process_* figures (CPU seconds, resident and virtual memory, open
    files, start time) of every process of this server, each with `pid` and `role` (supervisor,
    worker, heavy: a worker's expensive-lane child), read from /proc at scrape. The multiprocess
    collector has no process_* at all, and its own collector would describe only the process the
    scrape reached; this one also covers the supervisor and the heavy children, which hold a good
    part of a pod's memory. (Only the processes of this machine's server: each pod is scraped.)"""

    def processes(self) -> list[tuple[int, str]]:
        root, out = _root["pid"], []
        serving = _children(root) if _root["supervised"] else [root]
        if _root["supervised"]:
            out.append((root, "supervisor"))
        for worker in serving:
            out.append((worker, "worker"))
            out += [(child, "heavy") for child in _children(worker)]
        return out

    def collect(self):
        families: dict[str, Metric] = {}
        reading = [0]   # (a collector per scrape: scrapes run on several lane threads at once)
        one = ProcessCollector(pid=lambda: reading[0], registry=None)
        for pid, role in self.processes():
            reading[0] = pid
            for family in one.collect():
                merged = families.setdefault(family.name, Metric(family.name, family.documentation, family.type))
                for sample in family.samples:
                    merged.add_sample(sample.name, {"pid": str(pid), "role": role}, sample.value)
        yield from families.values()


def _health():
    """Readiness, Redis and the certificates, at scrape."""
    yield GaugeMetricFamily("kubedash_ready", "1 when /readyz would answer 200 (database reachable, schema migrated)",
                            value=1 if ready() else 0)
    redis_up = notify.redis_reachable()
    if redis_up is not None:
        yield GaugeMetricFamily("kubedash_redis_up", "1 when Redis answered a PING within a second",
                                value=1 if redis_up else 0)
    expiry = GaugeMetricFamily("kubedash_certificate_expiry_timestamp_seconds",
                               "When a certificate under the data dir's tls/ stops being valid (notAfter)",
                               labels=["certificate"])
    for name, moment in expiry_times(settings.DATA_DIR).items():
        expiry.add_metric([name], moment)
    if expiry.samples:
        yield expiry


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
        yield from _health()
        yield from _followed()
        yield from outbox_figures()
        yield from _PROCESSES.collect()


def _followed():
    """Each followed cluster: stale (1: not live, or its follower silent; Cluster.is_current) and
    when kubedash last heard from it (docs/FOLLOWING.md, "Silence"). Nothing while the database
    is unreachable: kubedash_database_up says so, and the scrape must still answer."""
    try:
        rows = list(Cluster.objects.all())
    except DatabaseError:
        return
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


# The default registry's process collector is replaced by ProcessTree (one family, pid-labelled).
REGISTRY.unregister(PROCESS_COLLECTOR)
_PROCESSES = ProcessTree()


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

"""Prometheus metrics of the API machinery: watch fan-out, and the revision log read at scrape.

Counters and gauges live in prometheus_client's registry (per process, or summed across the
workers in its multiprocess mode: dashboard/server/metrics.py serves them); the revision-log
figures are read from the database when /metrics is scraped, never kept up to date.
"""
from __future__ import annotations

from django.db import DatabaseError
from prometheus_client import Counter, Gauge
from prometheus_client.core import GaugeMetricFamily

from . import compaction, revlog, storage, store

# kube-apiserver's names where it has one (apiserver_watch_events_total,
# apiserver_terminated_watchers_total); kubedash_* where it has none.
WATCH_EVENTS = Counter("apiserver_watch_events", "Number of events sent in watch clients",
                       ["group", "version", "kind"])
WATCH_TERMINATED = Counter("apiserver_terminated_watchers",
                           "Counter of watchers closed due to unresponsiveness broken by resource type.",
                           ["resource"])
# The newest revision each process's hub has fanned out; the scrape takes the slowest live one.
# Labelled, and the label set only on the first dispatch, so a process whose hub never ran
# reports nothing rather than 0.
_HUB_REVISION = Gauge("kubedash_watch_hub_revision", "The newest revision the watch hub has dispatched",
                      ["hub"], multiprocess_mode="livemin")


# 1 while this process's hub follower reads the revision log, 0 while it rests (no watch or
# live page open in the process: hub.py); summed over the live workers.
FOLLOWER_RUNNING = Gauge("kubedash_watch_follower_running",
                         "Processes whose watch hub follows the revision log (0 while none has a watcher)",
                         multiprocess_mode="livesum")


# Updates tried before their token was checked (kube/views.py _unconfirmed_write, PostgreSQL):
# "written" (the write checked the token in its own statement), or "served_again" the usual way.
UNCONFIRMED_WRITES = Counter("kubedash_unconfirmed_writes",
                             "Updates tried before their token was checked (PostgreSQL), by outcome", ["outcome"])


# Requests answered 503 because the database connection broke under them (views.py).
DATABASE_LOST = Counter("kubedash_database_connection_lost", "Requests answered 503: the database connection was lost")

# Redis, the processes' doorbell (notify.py): publishes and subscriptions that failed (whether it
# answers now: kubedash_redis_up, at scrape, server/metrics.py).
REDIS_ERRORS = Counter("kubedash_redis_errors", "Redis operations that failed (publish, subscribe)", ["operation"])


def hub_dispatched(rv: int) -> None:
    _HUB_REVISION.labels("watch").set(rv)


def hub_resting() -> None:
    """A resting hub has nothing to fan out: +Inf, so the slowest live hub's revision (and the
    lag computed from it) is that of the hubs that do follow the log; 0 lag when none does."""
    _HUB_REVISION.labels("watch").set(float("inf"))


async def counted(stream, res):
    """A watch stream's chunks, counting the events (one per line) they carry."""
    events = WATCH_EVENTS.labels(res.group, res.version, res.kind)
    try:
        async for chunk in stream:
            if chunk:
                events.inc(chunk.count(b"\n"))
            yield chunk
    finally:
        await stream.aclose()


class RevisionLogCollector:
    """Collected at scrape time from the database: a few small queries. A database that does not
    answer makes kubedash_database_up 0 (the scrape itself still answers)."""

    def __init__(self, hub_revision=None):
        self.hub_revision = hub_revision   # callable: the slowest hub's revision, or None

    def collect(self):
        try:
            newest = store.current_revision()
            figures = [
                GaugeMetricFamily("kubedash_revision_newest", "The newest resourceVersion handed out", value=newest),
                GaugeMetricFamily("kubedash_revision_compacted",
                                  "The compaction horizon: older resourceVersions answer 410 Expired",
                                  value=revlog.compacted_revision()),
                GaugeMetricFamily("kubedash_revision_log_rows", "Rows in the revision log (estimate on PostgreSQL)",
                                  value=storage.backend().log_size()),
                GaugeMetricFamily("kubedash_revision_compaction_overdue_seconds",
                                  "How long the oldest revision past both retentions has waited for compaction",
                                  value=compaction.overdue_seconds()),
            ]
            connections = storage.backend().connection_counts()
        except DatabaseError:
            yield GaugeMetricFamily("kubedash_database_up", "1 when this scrape's queries got answers", value=0)
            return
        yield GaugeMetricFamily("kubedash_database_up", "1 when this scrape's queries got answers", value=1)
        yield from figures
        if connections is not None:
            yield GaugeMetricFamily("kubedash_database_connections",
                                    "Client connections the database server has open (every database, every client)",
                                    value=connections[0])
            yield GaugeMetricFamily("kubedash_database_max_connections", "The database server's max_connections",
                                    value=connections[1])
        hub = self.hub_revision() if self.hub_revision else None
        if hub is not None:
            yield GaugeMetricFamily("kubedash_watch_hub_lag_revisions",
                                    "Revisions committed that the slowest watch hub has not yet fanned out",
                                    value=max(newest - hub, 0))

"""Notifications' metrics: counters kept by the leader's engine and sender, and the outbox read at scrape
(server/metrics.py serves them)."""
from __future__ import annotations

from django.db import DatabaseError
from django.db.models import Min
from django.utils import timezone
from prometheus_client import Counter, Gauge
from prometheus_client.core import GaugeMetricFamily

from .models import Outbox

RULES = Gauge("kubedash_notify_rules", "Notification rules the maintenance leader evaluates",
              multiprocess_mode="livemax")
EVALUATED = Counter("kubedash_notify_revisions_evaluated", "Revisions the notification rules were evaluated against")
DECISIONS = Counter("kubedash_notify_decisions", "Episodes opened (firing) and closed (resolved)", ["state"])
DELIVERIES = Counter("kubedash_notify_deliveries", "Messages delivered to a channel (digests count once)", ["scheme"])
RETRIES = Counter("kubedash_notify_retries", "Delivery tries that failed and will be tried again", ["error"])
FAILURES = Counter("kubedash_notify_failures", "Messages given up on (marked failed)", ["error"])
DIGESTS = Counter("kubedash_notify_digested", "Messages folded into a digest (a channel over its rate)")


def outbox_figures():
    """The outbox's pending messages and the age of the oldest (a stuck sender: no leader, a
    receiver down), read when /metrics is scraped."""
    try:
        pending = Outbox.objects.filter(status=Outbox.PENDING)
        oldest = pending.aggregate(oldest=Min("created"))["oldest"]
        count = pending.count()
        failed = Outbox.objects.filter(status=Outbox.FAILED).count()
    except DatabaseError:
        return
    yield GaugeMetricFamily("kubedash_notify_outbox_pending", "Messages waiting in the outbox", value=count)
    yield GaugeMetricFamily("kubedash_notify_outbox_oldest_seconds",
                            "Age of the oldest message waiting in the outbox (0 when none waits)",
                            value=(timezone.now() - oldest).total_seconds() if oldest else 0)
    yield GaugeMetricFamily("kubedash_notify_outbox_failed", "Messages given up on, kept in the delivery log",
                            value=failed)

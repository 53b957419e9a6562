"""Compaction: drop history that is superseded, so the revision log stays bounded.

Everything at or below the compaction point goes, except each live object's current
revision (the log is where objects are read from). Reads and watches that need a revision
below the point are answered 410 Expired.
"""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction

from . import registry, revlog, store
from .meta import now
from .models import CompactionState


def compaction_point(keep: int | None = None, keep_seconds: int | None = None) -> int:
    """The highest revision that may go: older than both the count and the age retention."""
    keep = settings.KUBEDASH_RETAIN_REVISIONS if keep is None else keep
    keep_seconds = settings.KUBEDASH_RETAIN_SECONDS if keep_seconds is None else keep_seconds
    point = store.current_revision() - keep
    if keep_seconds:
        cutoff = now() - timedelta(seconds=keep_seconds)
        aged = revlog.newest_before(cutoff)
        point = min(point, aged)
    return max(point, 0)


def overdue_seconds(keep: int | None = None, keep_seconds: int | None = None) -> float:
    """How long the oldest revision above the compaction horizon has been due to go (0: none is).

    A revision is due once both retentions are behind it: KUBEDASH_RETAIN_SECONDS since it was
    written, and KUBEDASH_RETAIN_REVISIONS newer revisions written. While compaction runs this
    stays below its interval whatever the write rate (the log's length grows with the load);
    when compaction stops, it grows with the clock (/metrics, the KubedashCompactionStalled alert).
    """
    keep = settings.KUBEDASH_RETAIN_REVISIONS if keep is None else keep
    keep_seconds = settings.KUBEDASH_RETAIN_SECONDS if keep_seconds is None else keep_seconds
    oldest = revlog.first_from(revlog.compacted_revision() + 1)
    if oldest is None:
        return 0.0
    rv, written = oldest
    pushed_out = revlog.first_from(rv + keep)   # the write that took it out of the newest `keep`
    if pushed_out is None:
        return 0.0
    due = max(written + timedelta(seconds=keep_seconds), pushed_out[1])
    return max((now() - due).total_seconds(), 0.0)


def compact(keep: int | None = None, keep_seconds: int | None = 0) -> int:
    """Compact now; returns how many revisions were removed."""
    with transaction.atomic():
        point = compaction_point(keep, keep_seconds)
        state, _ = CompactionState.objects.select_for_update().get_or_create(pk=1)
        if point <= state.compacted_rv:
            return 0
        removed = revlog.drop_superseded(point, list(registry.all_resources()))
        state.compacted_rv, state.compacted_at = point, now()
        state.save(update_fields=["compacted_rv", "compacted_at"])
        return removed

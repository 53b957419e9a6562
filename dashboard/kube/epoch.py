"""After a restore: revisions jump past anything handed out before, and the old ones are marked
compacted, as `etcdutl snapshot restore --bump-revision N --mark-compacted` does for etcd.

A backup restored into the database brings back an older revision counter. Without this, the
next writes would hand out resourceVersions that clients have already seen for other writes: a
watch resuming from one gets 504 until new writes pass it, then silently misses every change in
between (and never hears of the objects lost with the restore). After `bump()`, every revision
handed out before the restore is at most the new compaction point, so resuming from it is
410 Expired: informers and kubectl relist and see the restored state whole. docs/OPERATIONS.md
"Backups" runs it (`manage.py bump_revision`) as the last step of every restore.
"""
from __future__ import annotations

import math

from django.db import transaction

from . import revlog, storage
from .meta import now
from .models import CompactionState, RevisionCounter

# No deployment hands out a million revisions a second (writes take the revision lock one at a
# time: docs/BENCHMARKS.md), so this many per second since the newest restored revision was
# written jumps past anything written after the backup was taken. At least a billion, as etcd
# suggests; a year of it is 3e13, far below the 64-bit limit (9.2e18).
PER_SECOND = 1_000_000
MINIMUM = 1_000_000_000


def default_bump() -> int:
    written = revlog.newest_written()
    elapsed = max((now() - written).total_seconds(), 0.0) if written else 0.0
    return max(MINIMUM, math.ceil(elapsed + 3600) * PER_SECOND)


def bump(by: int | None = None) -> tuple[int, int]:
    """Move the revision counter `by` (default: default_bump()) past the restored one and mark
    everything up to the new value compacted. Returns (restored revision, new revision)."""
    db = storage.backend()
    with transaction.atomic():
        db.lock()   # the storage's revision lock
        counter, _ = RevisionCounter.objects.select_for_update().get_or_create(pk=1)
        restored = max(counter.value, revlog.last_logged())
        new = restored + (default_bump() if by is None else by)
        counter.value = new
        counter.save(update_fields=["value"])
        state, _ = CompactionState.objects.select_for_update().get_or_create(pk=1)
        state.compacted_rv, state.compacted_at = max(state.compacted_rv, new), now()
        state.save(update_fields=["compacted_rv", "compacted_at"])
    db.forget_cache()   # (this process's, e.g. a test's; the app processes are stopped for a restore)
    return restored, new

"""Objects of a kind with a time to live (Resource.ttl_seconds: Events) are deleted once their
last write is that old, as kube-apiserver's etcd leases expire Events. The maintenance leader
runs expire(); each deletion is an ordinary DELETED revision, so watchers and pages see it.
Finalizers do not keep an expired object: etcd's lease deletes the key whatever it holds, so
kube's Events with finalizers go at their TTL too (store.delete's `expired`)."""
from __future__ import annotations

from datetime import timedelta

from django.db import transaction

from . import registry, revlog, store
from .errors import ApiError
from .meta import now as utcnow

BATCH = 200   # deletions per write transaction (the write lock is held for one batch at a time)


def expire(now=None, limit: int = 50_000) -> int:
    """Delete the local cluster's objects whose last write is older than their kind's TTL;
    returns how many. An object written again meanwhile is kept (its resourceVersion is the
    deletion's precondition)."""
    now = now or utcnow()
    removed = 0
    for res in registry.all_resources():
        seconds = res.ttl_seconds() if res.ttl_seconds is not None else None
        if seconds is None:
            continue
        cutoff = now - timedelta(seconds=seconds)
        doomed = list(revlog.current_written_before(res.model.objects, cutoff)
                      .values_list("namespace", "name", "current_id")[:limit])
        for i in range(0, len(doomed), BATCH):
            with transaction.atomic():
                for namespace, name, rv in doomed[i:i + BATCH]:
                    try:
                        store.delete(res, namespace, name, rv=str(rv), expired=True)
                    except ApiError as err:
                        if err.code not in (404, 409):   # gone, or written again: not expired
                            raise
                        continue
                    removed += 1
    return removed

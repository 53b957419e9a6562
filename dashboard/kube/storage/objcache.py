"""PostgreSQL's object cache: the current objects this process last wrote or read, so an update needs no read.

kube-apiserver's GuaranteedUpdate computes an update from its watch cache's copy of the object
and lets etcd's transaction compare the mod revision; only when that fails does it read again.
The PostgreSQL backend does the same (postgresql.py, guaranteed_update): a PUT whose body names
the resourceVersion held here is computed from this copy instead of a read, and the conditional
write (the typed row still holds that revision) verifies it. An entry may be stale: that costs
only the try (any error, a no-op or a lost check drops the entry and the update reads and runs
again, having written nothing). It must never be wrong: every (row id, revision, text) held here
was committed together, so it is filled only from reads outside any transaction (committed
data) and from writes once they committed (on_commit), never from a rolled-back write whose
revision number the next write will hand out again.

A revision never names two states of a row: the counter only goes up, and a restore (which
brings an older counter back) is done with every app process stopped, then `bump_revision`
jumps past every revision handed out before (epoch.py, docs/OPERATIONS.md "Restoring"), so no
process keeps a cache across it. A flushed test database (the counter starts again) sends
post_migrate: the cache is cleared then (apps.py: Storage.forget_cache), and by epoch.bump in
its own process.

Keyed by database, cluster, table, namespace and name; bounded (LRU, KUBEDASH_UPDATE_CACHE
entries; 0: off) and thread-safe. Only postgresql.py uses it.
Callers get a fresh dict per use (decoded from the text), never the cached state itself.
"""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict

import orjson
from django.conf import settings
from django.db import connection, transaction

from dashboard.access import clusters

from prometheus_client import Counter

_entries: OrderedDict[tuple, tuple[int, int, str]] = OrderedDict()   # key -> (row id, rv, text)
_lock = threading.Lock()


# hit, computed from the cached object (no read); miss, not cached at that revision; stale, the
# cached try fell through (the object changed, an error, a no-op) and the update read and ran again.
UPDATE_CACHE = Counter("kubedash_update_cache", "Updates computed from the per-process object cache, by outcome",
                       ["outcome"])


@functools.cache
def _counted(outcome: str):
    return UPDATE_CACHE.labels(outcome)


def key(res, namespace: str, name: str) -> tuple:
    s = connection.settings_dict
    return (s["HOST"], s["PORT"], s["NAME"], clusters.current(), res.model._meta.db_table, namespace, name)


def used() -> bool:
    return settings.KUBEDASH_UPDATE_CACHE > 0


def _put(k: tuple, row_id: int, rv: int, text: str) -> None:
    with _lock:
        old = _entries.get(k)
        if old is not None and old[1] > rv:
            return   # (a slower read of an older state: keep the newer one)
        _entries[k] = (row_id, rv, text)
        _entries.move_to_end(k)
        if len(_entries) > settings.KUBEDASH_UPDATE_CACHE:
            _entries.popitem(last=False)


def read(res, namespace: str, name: str, row_id: int, text: str, rv: int) -> None:
    """A current object read (PostgreSQLStorage.get_raw): kept only when read outside any transaction."""
    if used() and not connection.in_atomic_block:
        _put(key(res, namespace, name), row_id, rv, text)


def written(res, obj: dict, row_id: int, rv: int, text: str) -> None:
    """An update written (PostgreSQLStorage.record), its stored text: kept once committed."""
    if not used():
        return
    k = key(res, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
    if connection.in_atomic_block:
        transaction.on_commit(lambda: _put(k, row_id, rv, text))
    else:   # (the conditional write committed in its own round trip)
        _put(k, row_id, rv, text)


def lookup(res, namespace: str, name: str, rv: str):
    """(key, (row id, a fresh copy of the object)) when the cached object is at revision rv
    (the one a PUT's body names), else (key, None), counted a miss (the caller counts the rest:
    hit or stale)."""
    k = key(res, namespace, name)
    if not used():
        return k, None
    with _lock:
        found = _entries.get(k)
        if found is not None:
            _entries.move_to_end(k)
    if found is None or str(found[1]) != rv:
        _counted("miss").inc()
        return k, None
    return k, (found[0], orjson.loads(found[2]))


def hit() -> None:
    _counted("hit").inc()


def stale(k: tuple) -> None:
    """The cached try fell through (object changed, an error, a no-op...): forget the entry."""
    _counted("stale").inc()
    drop(k)


def drop(k: tuple) -> None:
    with _lock:
        _entries.pop(k, None)


def dropped(res, namespace: str, name: str) -> None:
    if used():
        drop(key(res, namespace, name))


def clear(**_) -> None:
    with _lock:
        _entries.clear()

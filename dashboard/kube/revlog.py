"""Every read of the revision log (kube_revision): watch catch-up, list snapshots, history pages,
the current objects the typed rows point at; and compaction's cut.

The log is written only through the storage (storage/: store.py's writes and mirror.py's
batches; one row per write, in revision order), which also reads the current object it is about
to write. Every other read goes through these functions, so the questions asked of it — "what
happened after rv", "what did this key look like at rv", "who held this lease" — have one
answer each, like kine's log layer beside its SQL driver.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from datetime import datetime, timedelta
from typing import Iterable, Iterator

import orjson
from django.db import connection

from dashboard.access import clusters

from . import delta, pack
from .models import CompactionState, Revision, RevisionPack

ADDED, MODIFIED, DELETED = Revision.ADDED, Revision.MODIFIED, Revision.DELETED


Row = tuple[int, str, str, str, str, str, str]   # rv, kind, namespace, name, event type, object JSON text, cluster

# Reads are of the cluster the work is about (Revision.objects, access/clusters.py), except
# read_after: the watch hub reads every cluster's writes and offers each to its watchers.


def read_after(rv: int, limit: int, upto: int | None = None) -> list[Row]:
    """The writes after rv (up to `upto`) in every cluster, oldest first, at most `limit` of them."""
    # (plain SQL: every process's hub asks this after every commit)
    sql = ("SELECT rv, kind, namespace, name, type, object, cluster FROM kube_revision WHERE rv > %s"
           + (" AND rv <= %s" if upto is not None else "") + " ORDER BY rv LIMIT %s")
    with connection.cursor() as cursor:
        cursor.execute(sql, [rv, upto, limit] if upto is not None else [rv, limit])
        return cursor.fetchall()


def with_current(rows, *columns: str, logged: str = "object"):
    """A kind's typed rows (a queryset) as values_list: `columns`, then the field `logged` of the
    revision each row is at (object: the current object's JSON text; upstream_rv: a followed
    cluster's own resourceVersion of it), read in the same query."""
    return rows.values_list(*columns, f"current__{logged}")


def current_written_before(rows, moment: datetime):
    """The typed rows (a queryset) whose current revision was written before `moment`."""
    return rows.filter(current__created__lt=moment)


def logged_count() -> int:
    """How many revisions the log holds, in every cluster (an exact count)."""
    return Revision.everywhere.count()


def last_logged() -> int:
    """The newest revision in the log (0 when empty)."""
    return Revision.everywhere.order_by("-rv").values_list("rv", flat=True).first() or 0


def newest_written() -> datetime | None:
    """When the newest logged revision was written (None when the log is empty)."""
    return Revision.everywhere.order_by("-rv").values_list("created", flat=True).first()


def newest_before(moment: datetime) -> int:
    """The newest revision written before `moment` (0 when none): compaction's age cut-off."""
    return Revision.everywhere.filter(created__lt=moment).order_by("-rv").values_list("rv", flat=True).first() or 0


def object_at(kind: str, namespace: str, name: str, rv: int) -> dict | None:
    """The object written at exactly revision rv, if that revision is still logged."""
    hit = _key_log(kind, namespace, name, after=rv - 1, before=rv + 1, limit=1)
    return orjson.loads(hit[0][2]) if hit else None


def text_as_of(kind: str, namespace: str, name: str, rv: int) -> str | None:
    """One key's object text as it stood at revision rv (None if absent then)."""
    hit = _key_log(kind, namespace, name, before=rv + 1, limit=1)
    return None if not hit or hit[0][1] == DELETED else hit[0][2]


def keys_written_after(kind: str, rv: int, namespace: str | None) -> set[tuple[str, str]]:
    """(namespace, name) of every object of `kind` written after rv."""
    later = Revision.objects.filter(kind=kind, rv__gt=rv)
    if namespace is not None:
        later = later.filter(namespace=namespace)
    return set(later.values_list("namespace", "name").distinct())


def writes_after(kind: str, rv: int, namespace: str | None) -> list[tuple[int, str, str]]:
    """(rv, namespace, name) of every write of `kind` after rv (a streamed list's snapshot overlay).

    Asked after every batch with rv the newest write seen, so it reads the primary key's range:
    the newest rv (one index probe, and usually the whole answer: nothing since), then what the
    log got since in bounded ranges; kind and namespace are sorted out here. Filtered in SQL,
    SQLite takes the kube_rev_key index and walks every logged write of the kind (10,000
    rows: 0.7 ms a batch); an open range, PostgreSQL without fresh statistics scans the table."""
    with connection.cursor() as cursor:   # (plain SQL: asked after every batch; the ORM's aggregate costs 0.3 ms)
        cursor.execute("SELECT MAX(rv) FROM kube_revision")
        top = cursor.fetchone()[0] or 0
    cluster, out = clusters.current(), []
    while rv < top:
        upto = min(top, rv + WRITES_RANGE)
        out += [(r, ns, name) for r, c, k, ns, name in Revision.everywhere.filter(rv__gt=rv, rv__lte=upto)
                .values_list("rv", "cluster", "kind", "namespace", "name")
                if c == cluster and k == kind and (namespace is None or ns == namespace)]
        rv = upto
    return out


WRITES_RANGE = 1000


def changed_between(kinds: Iterable[str], after: int, upto: int, namespace: str = "", name: str = "") -> bool:
    """Was anything of these kinds (in this namespace / with this name) written in (after, upto]?"""
    if after >= upto:
        return False
    revisions = Revision.objects.filter(rv__gt=after, rv__lte=upto, kind__in=list(kinds))
    if namespace:
        revisions = revisions.filter(namespace=namespace)
    if name:
        revisions = revisions.filter(name=name)
    return revisions.exists()


def history(kind: str, namespace: str, name: str, newest: int,
            upto: int | None = None) -> list[tuple[str, dict, datetime]]:
    """The newest `newest` writes of one object (at or below `upto`) as (event type, object,
    write time), oldest first."""
    rows = _key_log(kind, namespace, name, before=None if upto is None else upto + 1, limit=newest)
    return [(event, orjson.loads(text), created) for _, event, text, created in reversed(rows)]


LogEntry = tuple[int, str, dict, datetime]   # rv, event type, object, write time


def object_revisions(kind: str, namespace: str, name: str, limit: int, before: int | None = None,
                     after: int = 0) -> list[LogEntry]:
    """One object's logged writes, newest first: at most `limit`, below `before`, above `after`
    (the history pages: one page of it, or what was written since the page was shown)."""
    rows = _key_log(kind, namespace, name, after=after, before=before, limit=limit)
    return [(rv, event, orjson.loads(text), created) for rv, event, text, created in rows]


def revision_numbers(kind: str, namespace: str, name: str, limit: int, offset: int = 0) -> list[int]:
    """The rvs of one object's logged writes, newest first, from the offset-th (no objects read)."""
    return [e[0] for e in _key_log(kind, namespace, name, limit=offset + limit, texts=False)[offset:]]


def count_revisions(kind: str, namespace: str, name: str) -> int:
    packs = list(_packs(kind, namespace, name).values_list("first_rv", "last_rv", "count"))
    rows = Revision.objects.filter(kind=kind, namespace=namespace, name=name).values_list("rv", flat=True)
    return sum(c for _, _, c in packs) + sum(not _inside(rv, packs) for rv in rows)


def _inside(rv: int, packs: list[tuple]) -> bool:
    """Is rv within one of these packs' (first_rv, last_rv, …) ranges (a pinned page's copy of a
    packed revision: kube/asof.py; a key's rows and packs never interleave: kube/pack.py)?"""
    return any(first <= rv <= last for first, last, *_ in packs)


# ---------------------------------------------------------------------------------------------
# One object's revisions, rows and packs (kube/pack.py) together

KeyEntry = tuple[int, str, str | None, datetime]   # rv, event type, full object text (None: not read), write time


def _packs(kind: str, namespace: str, name: str):
    return RevisionPack.objects.filter(kind=kind, namespace=namespace, name=name)


def _key_log(kind: str, namespace: str, name: str, after: int = 0, before: int | None = None,
             limit: int | None = None, texts: bool = True) -> list[KeyEntry]:
    """One object's revisions in (after, before), newest first, at most `limit`: its rows and its
    packs' entries merged (a revision in both, a pinned page's copy, once); texts full."""
    before = before if before is not None else 2 ** 62
    rows = Revision.objects.filter(kind=kind, namespace=namespace, name=name, rv__gt=after, rv__lt=before)
    rows = rows.order_by("-rv").values_list("rv", "type", "object" if texts else "created", "created")
    rows = list(rows[:limit] if limit is not None else rows)
    if texts:
        rows = [(rv, event, text, at) for (rv, event, _, at), text in zip(rows, full_texts([r[2] for r in rows]))]
    else:
        rows = [(rv, event, None, at) for rv, event, _, at in rows]
    packs = _packs(kind, namespace, name).filter(last_rv__gt=after, first_rv__lt=before)
    if limit is not None and len(rows) == limit:   # (the rows may be all it takes: the common case, live)
        newest = packs.order_by("-first_rv").values_list("last_rv", flat=True).first()
        if newest is None or newest < rows[-1][0]:
            return rows
    packed = _unpacked(packs, after, before, texts)
    out: list[KeyEntry] = []
    for entry in heapq.merge(rows, packed, key=lambda e: e[0], reverse=True):
        if out and out[-1][0] == entry[0]:
            continue
        out.append(entry)
        if limit is not None and len(out) >= limit:
            break
    return out


def _unpacked(packs, after: int, before: int, texts: bool = True, batch: int = 8) -> Iterator[KeyEntry]:
    """The entries in (after, before) of these packs (a queryset), newest first, read `batch`
    packs at a time (a caller that needs one revision decompresses one pack)."""
    columns = ("first_rv", "entries", "texts") if texts else ("first_rv", "entries")
    below = before
    while True:
        chunk = list(packs.filter(first_rv__lt=below).order_by("-first_rv").values_list(*columns)[:batch])
        for _, data, *body in chunk:
            entries = pack.entries(data)
            bodies = pack.texts(body[0]) if texts else [None] * len(entries)
            for (rv, at, _), text in reversed(list(zip(entries, bodies))):
                if after < rv < before:
                    yield rv, MODIFIED, text, at
        if len(chunk) < batch:
            return
        below = chunk[-1][0]


def horizon() -> tuple[int, datetime | None]:
    """(revision, time) of the last compaction: the log holds nothing superseded at or below it."""
    hit = CompactionState.objects.filter(pk=1).values_list("compacted_rv", "compacted_at").first()
    return hit if hit else (0, None)


def compacted_revision() -> int:
    """The last compaction's revision: lists and watches below it are answered 410."""
    return CompactionState.objects.filter(pk=1).values_list("compacted_rv", flat=True).first() or 0


def first_from(rv: int) -> tuple[int, datetime] | None:
    """(rv, time written) of the oldest logged revision at or above rv, any cluster (compaction's
    overdue figure, /metrics)."""
    return Revision.everywhere.filter(rv__gte=rv).order_by("rv").values_list("rv", "created").first()


def first_logged(kind: str, namespace: str, name: str) -> tuple[int, str] | None:
    """(rv, event type) of the oldest logged write of one object: ADDED means its whole history is kept."""
    return (Revision.objects.filter(kind=kind, namespace=namespace, name=name).order_by("rv")
            .values_list("rv", "type").first())


# ---------------------------------------------------------------------------------------------
# The pages' history (issue 38): kept apart from the watch window (compaction.py)


def history_horizon() -> tuple[int, datetime | None]:
    """(revision, time) at or below which the log keeps only each key's newest revision: the
    pages cannot travel to a moment before it."""
    hit = CompactionState.objects.filter(pk=1).values_list("history_rv", "history_at").first()
    return hit if hit else (0, None)


def thinned_until() -> datetime | None:
    """Renewal-only revisions written before this instant may have been thinned (None: none were)."""
    hit = CompactionState.objects.filter(pk=1).values_list("thinned_at", flat=True).first()
    return hit


def _of(kinds: Iterable[str], namespace: str, name: str, model=Revision):
    """The current cluster's revisions (or packs) of these kinds (all: empty), namespace and name (any: "")."""
    rows = model.objects.all()
    if kinds:
        rows = rows.filter(kind__in=list(kinds))
    if namespace:
        rows = rows.filter(namespace=namespace)
    if name:
        rows = rows.filter(name=name)
    return rows


def neighbours(rv: int, kinds: Iterable[str] = (), namespace: str = "", name: str = "") -> tuple[int, int]:
    """(the newest revision below rv, the oldest above it) in the current cluster, of these kinds
    (all: empty) and this namespace / name (0: none): the time bar's previous and next change."""
    rows, packs = _of(kinds, namespace, name), _of(kinds, namespace, name, RevisionPack)
    before = [rows.filter(rv__lt=rv).order_by("-rv").values_list("rv", flat=True).first() or 0,
              packs.filter(last_rv__lt=rv).order_by("-last_rv").values_list("last_rv", flat=True).first() or 0]
    after = [rows.filter(rv__gt=rv).order_by("rv").values_list("rv", flat=True).first(),
             packs.filter(first_rv__gt=rv).order_by("first_rv").values_list("first_rv", flat=True).first()]
    for data in packs.filter(last_rv__gte=rv, first_rv__lte=rv).values_list("entries", flat=True):   # (around rv)
        rvs = pack.rvs(data)
        i = bisect_left(rvs, rv)
        before.append(rvs[i - 1] if i else 0)
        j = bisect_right(rvs, rv)
        after.append(rvs[j] if j < len(rvs) else None)
    return max(before), min((a for a in after if a), default=0)


def drop_before_history(point: int) -> int:
    """Past the pages' history: delete every revision at or below `point` except each key's
    newest one there (the state at `point`, which every later moment builds on), and that one
    too when it is a deletion; when that one is a delta, its base stays (it and the deltas above
    `point` that name it need it: kube/delta.py). Packs (kube/pack.py) wholly at or below `point`
    go too; the key's newest revision there, when one of them holds it, becomes a row again.
    Returns how many went."""
    _unpack_newest(point)
    keep = ("SELECT MAX(rv) FROM kube_revision WHERE rv <= %s GROUP BY cluster, kind, namespace, name")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT object FROM kube_revision WHERE rv IN ({keep}) AND object LIKE %s",
                       [point, delta.MARK + "%"])
        bases = sorted({delta.base_of(text) for (text,) in cursor.fetchall()})
        removed, low = 0, 0
        # (in rv ranges holding at most SPARED bases each: a statement's parameters are bounded)
        for chunk in [bases[i:i + SPARED] for i in range(0, len(bases), SPARED)] + [[]]:
            high = chunk[-1] if chunk else point
            spare = f" AND rv NOT IN ({', '.join(['%s'] * len(chunk))})" if chunk else ""
            cursor.execute(f"DELETE FROM kube_revision WHERE rv > %s AND rv <= %s "
                           f"AND rv NOT IN (SELECT * FROM ({keep}) k){spare}", [low, high, point, *chunk])
            removed += cursor.rowcount
            low = high
        cursor.execute("DELETE FROM kube_revision WHERE rv <= %s AND type = %s", [point, DELETED])
        return removed + cursor.rowcount


SPARED = 1000


def packed_as_of(firsts: list[int], rv: int) -> dict[int, tuple[int, str, datetime, str]]:
    """{first_rv: (rv, full text, write time, upstream rv) of its newest revision at or below rv}
    of these packs (the pages' past: kube/asof.py)."""
    out = {}
    for i in range(0, len(firsts), 200):
        for first, data, body in RevisionPack.everywhere.filter(first_rv__in=firsts[i:i + 200]).values_list(
                "first_rv", "entries", "texts"):
            rvs, times, ups = pack.head(data)
            at = bisect_right(rvs, rv) - 1
            out[first] = (rvs[at], pack.text_at(body, at), pack.moment(times[at]), ups[at])
    return out


def _unpack_newest(point: int) -> None:
    """Delete the packs wholly at or below `point`, after writing back as a row each key's newest
    revision at or below it where one of them holds it (drop_before_history keeps that row)."""
    gone = RevisionPack.everywhere.filter(last_rv__lte=point)
    newest: dict[tuple, tuple] = {}
    for first, last, cluster, kind, ns, name in gone.values_list("first_rv", "last_rv", "cluster", "kind", "namespace",
                                                                 "name"):
        if last > newest.get((cluster, kind, ns, name), (0,))[0]:
            newest[(cluster, kind, ns, name)] = (last, first)
    back = []
    for (cluster, kind, ns, name), (last, first) in newest.items():
        later = Revision.everywhere.filter(cluster=cluster, kind=kind, namespace=ns, name=name, rv__gt=last, rv__lte=point)
        if later.exists() or RevisionPack.everywhere.filter(cluster=cluster, kind=kind, namespace=ns, name=name,
                                                            first_rv__gt=last, first_rv__lte=point).exists():
            continue
        data, body = RevisionPack.everywhere.filter(first_rv=first).values_list("entries", "texts").get()
        rv, at, up = pack.entries(data)[-1]
        back.append(Revision(rv=rv, cluster=cluster, kind=kind, namespace=ns, name=name, type=MODIFIED,
                             object=pack.texts(body)[-1], created=at, upstream_rv=up))
    Revision.everywhere.bulk_create(back, batch_size=200)
    gone.delete()


def packable(after: int, upto: int):
    """(rv, cluster, kind, namespace, name, type, object text, created, upstream rv) of every
    revision in (after, upto], key by key and in revision order within a key (packing reads it)."""
    return (Revision.everywhere.filter(rv__gt=after, rv__lte=upto)
            .order_by("cluster", "kind", "namespace", "name", "rv")
            .values_list("rv", "cluster", "kind", "namespace", "name", "type", "object", "created", "upstream_rv")
            .iterator(chunk_size=2000))


def written_between(cluster: str, kind: str, namespace: str, name: str, after: int, upto: int) -> bool:
    """Does the log hold a revision of this key in (after, upto]?"""
    return Revision.everywhere.filter(cluster=cluster, kind=kind, namespace=namespace, name=name, rv__gt=after,
                                      rv__lte=upto).exists()


def delta_bases(after: int, upto: int) -> set[int]:
    """The revisions the deltas in (after, upto] name as their base (kube/delta.py)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT SUBSTR(object, 1, 24) FROM kube_revision WHERE rv > %s AND rv <= %s AND object LIKE %s",
                       [after, upto, delta.MARK + "%"])
        return {delta.base_of(head) for (head,) in cursor.fetchall()}


def store_packs(packs: list[RevisionPack]) -> int:
    """Write these packs and delete the log's rows of the revisions they hold; returns how many."""
    RevisionPack.everywhere.bulk_create(packs, batch_size=200)
    held = [rv for p in packs for rv in pack.rvs(p.entries)]
    return delete_revisions(held)


def full_texts(texts: list[str]) -> list[str]:
    """Logged object texts with each delta replaced by the full text it stands for (one query for
    all their bases; a base is always a full text: kube/delta.py)."""
    bases = {delta.base_of(t) for t in texts if delta.is_delta(t)}
    if not bases:
        return texts
    found = {}
    ordered = sorted(bases)
    for i in range(0, len(ordered), 500):
        found.update(Revision.everywhere.filter(rv__in=ordered[i:i + 500]).values_list("rv", "object"))
    return [delta.decode(t, found[delta.base_of(t)]) if delta.is_delta(t) else t for t in texts]


def store_deltas(texts: list[tuple[int, str]]) -> None:
    """Replace these revisions' object texts (rv, delta text): compaction's storing of kept
    revisions past the watch window as deltas."""
    with connection.cursor() as cursor:
        cursor.executemany("UPDATE kube_revision SET object = %s WHERE rv = %s", [(t, rv) for rv, t in texts])


def key_revisions(kind: str, after: int, upto: int):
    """(rv, cluster, namespace, name, type, object text, created) of every revision of `kind` in
    (after, upto], key by key and in revision order within a key (thinning reads it)."""
    return (Revision.everywhere.filter(kind=kind, rv__gt=after, rv__lte=upto)
            .order_by("cluster", "namespace", "name", "rv")
            .values_list("rv", "cluster", "namespace", "name", "type", "object", "created").iterator(chunk_size=2000))


def last_at_or_below(kind: str, cluster: str, namespace: str, name: str, rv: int):
    """(rv, type, object text, created) of one key's newest revision at or below rv, or None
    (the text as stored: a delta's too, see kube/delta.py)."""
    return (Revision.everywhere.filter(cluster=cluster, kind=kind, namespace=namespace, name=name, rv__lte=rv)
            .order_by("-rv").values_list("rv", "type", "object", "created").first())


def delete_revisions(rvs: list[int]) -> int:
    removed = 0
    for i in range(0, len(rvs), 500):
        removed += Revision.everywhere.filter(rv__in=rvs[i:i + 500]).delete()[0]
    return removed


def last_at_or_below_any(rv: int) -> datetime | None:
    """When the newest revision at or below rv (any cluster; a packed one too) was written (None: none)."""
    found = [Revision.everywhere.filter(rv__lte=rv).order_by("-rv").values_list("rv", "created").first() or (0, None)]
    below = RevisionPack.everywhere.filter(last_rv__lte=rv, last_rv__gt=found[0][0]).order_by("-last_rv")
    found += [pack.entries(data)[-1][:2] for data in below.values_list("entries", flat=True)[:1]]
    for data in RevisionPack.everywhere.filter(last_rv__gt=rv, first_rv__lte=rv).values_list("entries", flat=True):
        # (the packs around rv: other objects' packs overlap, whatever the revisions found above)
        rvs, times, _ = pack.head(data)
        at = bisect_right(rvs, rv) - 1
        found.append((rvs[at], pack.moment(times[at])))
    return max(found, key=lambda hit: hit[0])[1]


def newest_packed_at(moment: datetime, span_seconds: int) -> int:
    """The newest packed revision written at or before `moment` (0: none): in the packs begun
    within a span before the latest one begun by then (a pack's revisions lie in one span)."""
    packs = RevisionPack.everywhere.filter(first_at__lte=moment)
    latest = packs.order_by("-first_at").values_list("first_at", flat=True).first()
    if latest is None:
        return 0
    near = packs.filter(first_at__gt=latest - timedelta(seconds=span_seconds)).values_list("entries", flat=True)
    upto = pack.micros(moment)
    return max((rv for data in near for rv, at in zip(*pack.head(data)[:2]) if at <= upto), default=0)


def oldest_written() -> datetime | None:
    """When the oldest logged revision (any cluster) was written (None: the log is empty)."""
    return Revision.everywhere.order_by("rv").values_list("created", flat=True).first()


def change_times(limit: int, kinds: Iterable[str] = (), namespace: str = "", name: str = "") -> list[datetime]:
    """When the newest `limit` writes of these kinds / namespace / name were made, in the current cluster."""
    found = list(_of(kinds, namespace, name).order_by("-rv").values_list("rv", "created")[:limit])
    packs, below = _of(kinds, namespace, name, RevisionPack).order_by("-last_rv"), None
    while True:   # (packs newest first, until the newest `limit` found are all newer than the next pack)
        chunk = list((packs.filter(last_rv__lt=below) if below else packs).values_list("last_rv", "entries")[:64])
        if not chunk:
            break
        for last, data in chunk:
            if len(found) >= limit and last < found[limit - 1][0]:
                chunk = []
                break
            found = sorted({*found, *((rv, at) for rv, at, _ in pack.entries(data))}, reverse=True)[:limit]
        if len(chunk) < 64:
            break
        below = chunk[-1][0]
    return [at for _, at in found]


def keys_written_since(kind: str, table: str, cluster: str, after: int, namespaces: Iterable[str] = (),
                       name: str = "") -> list[tuple[str, str]]:
    """(namespace, name) of every object of `kind` in `cluster` that may have been written after
    rv `after`, in order: those with a typed row now (`table`) and those deleted since (the
    kube_rev_deleted index). Any key written after `after` is one of them (/changes/ walks them)."""
    q = connection.ops.quote_name
    where, params = "cluster = %s", [cluster]
    namespaces = list(namespaces)
    if namespaces:
        where += f" AND namespace IN ({', '.join(['%s'] * len(namespaces))})"
        params += namespaces
    if name:
        where += " AND name = %s"
        params.append(name)
    sql = (f"SELECT namespace, name FROM {q(table)} WHERE {where} UNION SELECT namespace, name FROM kube_revision"
           f" WHERE type = 'DELETED' AND kind = %s AND rv > %s AND {where} ORDER BY namespace, name")
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, kind, after, *params])
        return cursor.fetchall()


def key_window(kind: str, cluster: str, namespace: str, name: str, after: int, upto: int) -> tuple[int, int, int]:
    """One key's (revisions in (after, upto], the newest of them, its newest at or below `after`):
    (0, 0, …) when none; 0 for no revision. Ranges of the kube_rev_key index, the rows never read;
    plain SQL (asked for every key of a /changes/ window: the ORM's query building cost more
    than the query)."""
    key = "cluster = %s AND kind = %s AND namespace = %s AND name = %s"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*), MAX(rv), (SELECT MAX(rv) FROM kube_revision WHERE {key} AND rv <= %s)"
                       f" FROM kube_revision WHERE {key} AND rv > %s AND rv <= %s",
                       [cluster, kind, namespace, name, after, cluster, kind, namespace, name, after, upto])
        count, newest, before = cursor.fetchone()
        cursor.execute("SELECT first_rv, last_rv, count, entries FROM kube_revision_pack WHERE cluster = %s AND kind = %s"
                       " AND namespace = %s AND name = %s AND last_rv > %s AND first_rv <= %s ORDER BY first_rv",
                       [cluster, kind, namespace, name, after, upto])
        packs = cursor.fetchall()
        cursor.execute("SELECT first_rv, last_rv, entries FROM kube_revision_pack WHERE cluster = %s AND kind = %s"
                       " AND namespace = %s AND name = %s AND first_rv <= %s ORDER BY first_rv DESC LIMIT 1",
                       [cluster, kind, namespace, name, after])
        prior = cursor.fetchone()   # (the pack holding the key's newest packed revision at or below after)
    if prior is not None:
        before = max(before or 0, prior[1] if prior[1] <= after else max(r for r in pack.rvs(prior[2]) if r <= after))
    for first, last, n, data in packs:   # (the packs' revisions in the window)
        inside = [last] * n if after < first and last <= upto else [r for r in pack.rvs(data) if after < r <= upto]
        count += len(inside)
        newest = max([newest or 0, *inside])
    return count, newest or 0, before or 0


def logged(rvs: Iterable[int], key: tuple[str, str, str, str] | None = None) -> dict[int, tuple[str, str]]:
    """{rv: (event type, object JSON text)} of these revisions (those still logged; a delta's
    full text: full_texts; a packed one's from its pack, found by its object's key (cluster,
    kind, namespace, name) when given:
    /changes/ asks for two of every key, which the packs around each revision would not bound)."""
    rvs = [rv for rv in rvs if rv]
    if not rvs:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT rv, type, object FROM kube_revision WHERE rv IN ({', '.join(['%s'] * len(rvs))})", rvs)
        rows = cursor.fetchall()
    texts = full_texts([text for _, _, text in rows])
    found = {rv: (kind, text) for (rv, kind, _), text in zip(rows, texts)}
    for rv in set(rvs) - set(found):   # (packed: kube/pack.py)
        if key is not None:
            with clusters.within(key[0]):
                hit = _key_log(*key[1:], after=rv - 1, before=rv + 1, limit=1)
            found.update({rv: hit[0][1:3]} if hit else {})
            continue
        for data, body in RevisionPack.everywhere.filter(last_rv__gte=rv, first_rv__lte=rv).values_list("entries", "texts"):
            rvs_there = pack.rvs(data)
            if rv in rvs_there:
                found[rv] = (MODIFIED, pack.text_at(body, rvs_there.index(rv)))
    return found

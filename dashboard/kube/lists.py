"""Lists at one revision: a consistent snapshot, paged by continue tokens (kube's list semantics).

Reads at a revision N use the typed tables for keys untouched since N and the revision log
for the few keys written after N, so a list's pages (its continue tokens) show one revision
whatever is written meanwhile; "the most recent" lists read the typed rows and take a newer
snapshot when a write lands while they are read. Label selectors are pushed down to SQL
where they can be (selectors.label_selector_q), the rest is matched here.
"""
from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Iterator

import orjson
from django.conf import settings
from django.db import connection
from django.db.models import BooleanField, Func, Q, TextField
from django.db.models.expressions import RawSQL

from dashboard.access import clusters

from . import asof, revlog, yielding
from .errors import ApiError, bad_request, gone
from .registry import Resource
from .selectors import field_getter, label_selector_q
from .store import current_revision

@dataclass
class ListPage:
    items: list[bytes]
    resource_version: int
    continue_token: str = ""
    remaining: int | None = None


@dataclass
class ListQuery:
    namespace: str | None = None
    label_selector: object = None          # selectors.LabelSelector or None
    field_selector: object = None          # selectors.FieldSelector or None
    limit: int | None = None
    continue_token: str = ""
    resource_version: int | None = None
    resource_version_match: str = ""
    names: tuple[str, ...] = ()            # from fieldSelector metadata.name=X (pushdown)


def encode_continue(rv: int, namespace: str, name: str) -> str:
    raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": [namespace, name]})
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str, str]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = orjson.loads(base64.urlsafe_b64decode(padded.encode()))
        rv, (ns, name) = int(data["rv"]), data["start"]
        if data.get("v") != "meta.k8s.io/v1" or rv < 0 or not isinstance(ns, str) or not isinstance(name, str):
            raise ValueError
        return rv, ns, name
    except Exception:
        raise bad_request("continue key is not valid: the continue token is malformed or was not issued by this server")


def _snapshot_revision(q: ListQuery) -> tuple[int, bool]:
    """The revision a list reads at, and whether it must be exactly that revision."""
    current = current_revision()
    if q.continue_token:
        rv, _, _ = decode_continue(q.continue_token)
        return rv, True
    if q.resource_version is None or q.resource_version == 0:
        return current, False
    # Legacy: limit + resourceVersion without resourceVersionMatch lists at exactly that revision.
    if q.resource_version_match == "Exact" or (q.limit and not q.resource_version_match):
        if q.resource_version > current:
            raise ApiError(504, "Timeout", f"Too large resource version: {q.resource_version}, current: {current}",
                           {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                            "retryAfterSeconds": 1})
        return q.resource_version, True
    if q.resource_version > current:
        raise ApiError(504, "Timeout", f"Too large resource version: {q.resource_version}, current: {current}",
                       {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                        "retryAfterSeconds": 1})
    return current, False


def _matches(res: Resource, q: ListQuery, labels: dict | None, text: str | None, obj: dict | None) -> bool:
    if q.label_selector is not None and not q.label_selector.empty:
        if labels is None:
            obj = obj or orjson.loads(text)
            labels = obj.get("metadata", {}).get("labels") or {}
        if not q.label_selector.matches(labels):
            return False
    if q.field_selector is not None and not q.field_selector.empty:
        obj = obj or orjson.loads(text)
        if not q.field_selector.matches(field_getter(obj, res.field_getters)):
            return False
    return True


_NEWEST = 2 ** 62   # above any revision


def list_objects(res: Resource, q: ListQuery, at: asof.At | None = None) -> ListPage:
    """One page of the list `q` asks for. `at`: a page as of a past moment, called within
    asof.pinned(at) (web/timetravel.py); None (the API, live pages): the store now."""
    snapshot, exact = _snapshot_revision(q)
    start = decode_continue(q.continue_token)[1:] if q.continue_token else None
    if exact and at is None:
        compacted = revlog.compacted_revision()
        if snapshot < compacted:
            if q.continue_token:
                fresh = encode_continue(current_revision(), *start)
                raise _expired_continue(fresh)
            raise gone("The resourceVersion for the provided list is too old.")
    if at is not None:
        # A page as of a past moment (asof.pinned): the shadowed typed rows are the snapshot.
        return _page_at(res, q, snapshot, start)
    if not exact:
        # "The most recent" state: any recent snapshot will do. When writes land while the rows
        # are read, take a newer snapshot and read again, rather than rebuild the old one from
        # the log key by key (a follower's batch of thousands of objects made that seconds).
        for _ in range(3):
            page = _page_at(res, q, snapshot, start)
            if not revlog.changed_between([res.kind], snapshot, _NEWEST, q.namespace or ""):
                return page
            snapshot = current_revision()
        # (written to all the while: that last snapshot, exactly)
    return _page_at(res, q, snapshot, start, exact=True)


def _rows(res: Resource, q: ListQuery, after, revision: bool = False, typed: tuple = ()):
    """The typed table's rows for the query after the key `after` (or from the first), in key
    order: (namespace, name, [labels,] [revision,] stored text); labels only when a label
    selector asks, the row's current revision when `revision` asks; `typed` (columns or
    expressions of the typed table): those values in place of the stored text (no join to the log)."""
    rows = res.model.objects.all()
    if q.namespace is not None:
        rows = rows.filter(namespace=q.namespace)
    if q.names:
        rows = rows.filter(name__in=q.names)
    if after is not None:
        rows = rows.filter(_after_key(res, q, after))
    columns = ("namespace", "name")
    if q.label_selector is not None and not q.label_selector.empty:
        pushed = label_selector_q(q.label_selector)
        if pushed is not None:
            rows = rows.filter(pushed)
        columns = ("namespace", "name", "labels")
    if revision:
        columns += ("current_id",)
    if typed:
        return rows.order_by("namespace", "name").values_list(*columns, *typed)
    return revlog.with_current(rows.order_by("namespace", "name"), *columns)


def _after_key(res: Resource, q: ListQuery, after) -> Q | RawSQL:
    """Rows after the key `after`, as a range of the (cluster, namespace, name) index: spelt
    as an OR, SQLite reads the index from the namespace's start and skips up to the key (each
    of a whole list's 1,000-row batches paid for every row before it)."""
    if q.namespace is not None and after[0] == q.namespace:
        return Q(name__gt=after[1])
    table = connection.ops.quote_name(res.model._meta.db_table)
    return RawSQL(f"({table}.{connection.ops.quote_name('namespace')}, {table}.{connection.ops.quote_name('name')})"
                  " > (%s, %s)", tuple(after), output_field=BooleanField())


def _page_at(res: Resource, q: ListQuery, snapshot: int, start, exact: bool = False) -> ListPage:
    """One page from the typed rows; `exact`: exactly as of `snapshot`, whatever is written
    meanwhile. A row whose current revision is above the snapshot was written after it: its
    text then comes from the log (None: created since). Rows that are gone (deleted since) or
    that the pushed-down label selector hides (relabelled since) are among the keys the log
    holds writes of after the snapshot, read once the rows are (so a write that lands
    meanwhile is in it). No retry: the page is exact by construction."""
    selector = q.label_selector is not None and not q.label_selector.empty
    rows = _rows(res, q, start, revision=exact)
    want = q.limit + 1 if q.limit else None   # one more than the page: is there more?
    matched: list[tuple[tuple[str, str], str]] = []
    boundary = None   # the last row read when the page filled up (None: all were read)
    logged: set[tuple[str, str]] = set()   # rows read from the log at the snapshot
    for i, row in enumerate(rows.iterator(chunk_size=2000)):
        yielding.every(i)
        key, labels, text = (row[0], row[1]), (row[2] if selector else None), row[-1]
        if exact and row[-2] > snapshot:
            labels, text = None, revlog.text_as_of(res.kind, key[0], key[1], snapshot)
            logged.add(key)
            if text is None:
                continue
        if not _matches(res, q, labels, text, None):
            continue
        matched.append((key, text))
        if want and len(matched) >= want:
            boundary = key
            break
    written: set[tuple[str, str]] = set()
    if exact:
        written = revlog.keys_written_after(res.kind, snapshot, q.namespace)
        have = logged.union(key for key, _ in matched)
        restored = []
        for key in sorted(written):
            if (key in have or (start is not None and key <= tuple(start))
                    or (boundary is not None and key > boundary) or (q.names and key[1] not in q.names)):
                continue
            text = revlog.text_as_of(res.kind, key[0], key[1], snapshot)
            if text is not None and _matches(res, q, None, text, None):
                restored.append((key, text))
        if restored:
            matched = sorted(matched + restored, key=lambda m: m[0])
    more = bool(q.limit) and len(matched) > q.limit
    if more:
        matched = matched[:q.limit]
    items = [text.encode() if isinstance(text, str) else text for _, text in matched]
    last_key = matched[-1][0] if matched else None
    token = encode_continue(snapshot, *last_key) if more and last_key else ""
    remaining = None
    if token and _unselective(q):
        remaining = _count_after(res, q, snapshot, last_key, written)
    return ListPage(items=items, resource_version=snapshot, continue_token=token, remaining=remaining)


# ---------------------------------------------------------------------------------------------
# Streamed lists: a whole list (no limit) sent batch by batch, never held whole.


def stream_objects(res: Resource, q: ListQuery, typed: tuple = ()) -> tuple[int, Iterator[list]]:
    """A list without a limit as (its snapshot revision, batches of the item texts in order).

    Everything that can fail on the request's behalf (the revision, 410, a malformed continue
    token) fails here, before the caller sends a byte; the batches are read as they are taken.
    Unlike list_objects, which may move to a newer snapshot when writes land, the revision is
    fixed once its first byte is out, so each batch is made exactly that revision (_at_snapshot).

    `typed` (columns or expressions of the kind's typed table, e.g. TimeText): an item whose
    typed row shows the snapshot's object is then those values (a tuple), read in the same query
    in place of its text; an item written since the snapshot is still its text from the log
    (bytes): what the typed row holds is newer. (A CSV export: web/export.py.)
    """
    if q.limit:
        raise ValueError("a list with a limit is one page: list_objects")
    if typed and not (q.field_selector is None or q.field_selector.empty):
        raise ValueError("a field selector reads the objects: no typed values")
    snapshot, exact = _snapshot_revision(q)
    start = tuple(decode_continue(q.continue_token)[1:]) if q.continue_token else None
    if exact and snapshot < revlog.compacted_revision():
        if q.continue_token:
            raise _expired_continue(encode_continue(current_revision(), *start))
        raise gone("The resourceVersion for the provided list is too old.")
    return snapshot, _at_snapshot(res, q, snapshot, start, clusters.current(), typed)


def _at_snapshot(res: Resource, q: ListQuery, snapshot: int, after, cluster: str, typed: tuple = ()) -> Iterator[list]:
    """The selected objects as of `snapshot`, after key `after`, one keyset batch at a time.

    A typed row shows the snapshot's object unless its key was written after the snapshot.
    After reading each batch the log is read for the writes since the last look (so every
    write the rows may already show is in `changed`), and the changed keys within the batch's
    key range are taken from the log as they stood at the snapshot (absent ones dropped, deleted
    ones restored). The log is read incrementally: each write after the snapshot once.
    """
    changed: set[tuple[str, str]] = set()
    seen, size = snapshot, settings.KUBEDASH_LIST_STREAM_BATCH
    labelled = not (q.label_selector is None or q.label_selector.empty)   # (_rows reads the labels then)
    selective = labelled or not (q.field_selector is None or q.field_selector.empty)
    width = 3 if labelled else 2   # the key (and labels) before a row's text or typed values
    item = (lambda row: row[width:]) if typed else (lambda row: _bytes(row[-1]))
    while True:
        with clusters.within(cluster):
            batch = list(_rows(res, q, after, typed=typed)[:size])
            writes = revlog.writes_after(res.kind, seen, q.namespace)
            changed.update((ns, name) for _, ns, name in writes)
            seen = max([seen, *(rv for rv, _, _ in writes)])
            last = (batch[-1][0], batch[-1][1]) if len(batch) == size else None
            logged = {k: revlog.text_as_of(res.kind, k[0], k[1], snapshot) for k in sorted(changed)
                      if (after is None or k > after) and (last is None or k <= last)
                      and (q.namespace is None or k[0] == q.namespace) and (not q.names or k[1] in q.names)}
            if logged and revlog.compacted_revision() > snapshot:
                # The log no longer holds the snapshot (compaction overtook a slow reader): the
                # rest cannot be shown; end the stream broken rather than send another state.
                raise RuntimeError(f"list at revision {snapshot} compacted while it was sent")
        if not (changed or selective):   # the common case (no write since the snapshot): the batch as read
            out = [item(row) for row in batch]
        else:   # (namespace, name, labels or None, item), the log's texts in their place
            rows = [(row[0], row[1], row[2] if labelled else None, item(row))
                    for row in batch if (row[0], row[1]) not in changed]
            if logged:
                rows += [(ns, name, None, _bytes(text)) for (ns, name), text in logged.items() if text is not None]
                rows.sort(key=lambda row: (row[0], row[1]))
            if selective:
                rows = [row for row in rows if _matches(res, q, row[2], row[3], None)]
            out = [row[3] for row in rows]
        if out:
            yield out
        if last is None:
            return
        after = last


def _bytes(text) -> bytes:
    return text.encode() if isinstance(text, str) else text


class TimeText(Func):
    """A typed time column as text, UTC, `YYYY-MM-DD HH:MM:SS[.ffffff]` (six digits or none;
    NULL stays NULL), read in a list's own query (stream_objects' `typed`): a datetime made per
    row costs more than the rest of the row's read (web/present.time_text_iso cuts it to ISO)."""

    output_field = TextField()

    def as_sqlite(self, compiler, connection, **extra):
        # The stored text itself (Django stores str() of the naive UTC datetime); as an expression
        # the column has no declared type, so sqlite3 makes no datetime of it.
        return self.as_sql(compiler, connection, template="(%(expressions)s || '')", **extra)

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(compiler, connection,
                           template="to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')", **extra)


def _unselective(q: ListQuery) -> bool:
    """No label or field selector: kube counts remainingItemCount only then (a count of the
    keys after the page would overcount a filtered list)."""
    return ((q.label_selector is None or q.label_selector.empty)
            and (q.field_selector is None or q.field_selector.empty) and not q.names)


def _count_after(res: Resource, q: ListQuery, snapshot: int, last_key: tuple[str, str],
                 written: set[tuple[str, str]]) -> int:
    """How many objects the snapshot holds after last_key: the typed rows, corrected for the
    keys written since the snapshot (absent then, or created since)."""
    after = res.model.objects.all()
    if q.namespace is not None:
        after = after.filter(namespace=q.namespace)
    after = after.filter(Q(namespace__gt=last_key[0]) | Q(namespace=last_key[0], name__gt=last_key[1]))
    count = after.count()
    later = [k for k in written if k > last_key and (q.namespace is None or k[0] == q.namespace)]
    if later:
        now_live = set(after.filter(name__in={k[1] for k in later}).values_list("namespace", "name"))
        count += sum((revlog.text_as_of(res.kind, k[0], k[1], snapshot) is not None) - (k in now_live)
                     for k in later)
    return count


def _expired_continue(fresh: str) -> ApiError:
    err = ApiError(410, "Expired",
                   "The provided continue parameter is too old to display a consistent list result. "
                   "You can start a new list without the continue parameter, or use the continue token "
                   "in this response to retrieve the remainder of the results. Continuing with the provided "
                   "token results in an inconsistent list - objects that were created, modified, or deleted "
                   "between the time the first chunk was returned and now may show up in the list.")
    err.list_continue = fresh
    return err


def keys_matching(res: Resource, q: ListQuery) -> list[tuple[str, str]]:
    """(namespace, name) of every current object the query selects (for deletecollection)."""
    q = ListQuery(**{**q.__dict__, "limit": None, "continue_token": ""})
    page = list_objects(res, q)
    out = []
    for text in page.items:
        m = orjson.loads(text)["metadata"]
        out.append((m["namespace"], m["name"]))
    return out

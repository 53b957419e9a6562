"""The store as of a past revision, for the pages' `?at=` (issue 38).

Every page reads the typed tables (kube/models.py ObjectRow subclasses): lists, sorted pages,
totals, the Overview's counts, the search. To show them as of revision R, `pinned(R)` shadows
each typed table, for this database connection and this block only, with a temporary table of
the same name holding every object as it stood at R: the newest logged revision <= R of every
key, unless that revision is its deletion. SQLite and PostgreSQL both resolve an unqualified
name to the connection's temporary table first, so every query of the pages runs unchanged
against the past (its rows point at the old revisions, whose JSON is what they show). The
revision log is shadowed only by a view of all of it that gives those revisions their full text
where it is stored as a delta (kube/delta.py), and adds those held in a pack (kube/pack.py): the
rows' joins find them, history reads stay exact (revlog reads packs and skips such copies).

Nothing is written to the real tables; the temporary tables are dropped when the block ends
(and vanish with the connection if it breaks). Which moment a request is pinned to is not kept
here: the page request's context carries it (kube/context.py RequestContext.at, set by
web/timetravel.py), and the code that reads it takes it as an argument: the instant the page's
time-derived states are computed against (cluster_scope.moment), and kube/lists.py reading the
shadowed rows as its snapshot (no overlay of later writes).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

import orjson
from django.conf import settings
from django.db import connection, transaction

from . import registry, revlog, yielding
from .models import Revision
from .storage import rows


@dataclass(frozen=True)
class At:
    rv: int             # the newest revision the state includes
    moment: datetime    # the instant the page is as of (time-derived states are computed at it)
    asked: str          # the `at` parameter as given (links keep it)


def state_at(kind: str, rv: int, table: str | None = None,
             decoded: list[tuple] | None = None) -> list[tuple[str, str, str, int, str]]:
    """(cluster, namespace, name, rv, object text) of every object of `kind` (every cluster) as
    it stood at revision rv: each key's newest logged revision <= rv, deleted ones left out.

    The keys that can have existed then are those with a typed row now (`table`, the real one,
    read before it is shadowed) and those deleted since (the kube_rev_deleted index); each one's
    revision is one probe of kube_rev_key. So the cost grows with the objects, not with the
    length of the history (a renewal every 2 s writes a million revisions a week). A key's newest
    revision may be packed (kube/pack.py): its pack is the key's one with the greatest first_rv
    <= rv (another probe), read when that is above the row found. The texts are full;
    `decoded`, if given, gets the log rows (every column, in the log's order) of the revisions
    whose text is not the row's own: stored as deltas (kube/delta.py) or packed."""
    table = table or registry.by_kind(kind).model._meta.db_table
    sql = (f"SELECT r.cluster, r.namespace, r.name, r.rv, r.object, r.created, r.upstream_rv, ("
           " SELECT MAX(p.first_rv) FROM kube_revision_pack p WHERE p.cluster = k.cluster AND p.kind = %s"
           " AND p.namespace = k.namespace AND p.name = k.name AND p.first_rv <= %s) FROM ("
           f" SELECT cluster, namespace, name FROM {connection.ops.quote_name(table)}"
           " UNION SELECT cluster, namespace, name FROM kube_revision WHERE type = 'DELETED' AND kind = %s AND rv > %s"
           ") k JOIN kube_revision r ON r.rv = (SELECT MAX(x.rv) FROM kube_revision x WHERE x.cluster = k.cluster"
           " AND x.kind = %s AND x.namespace = k.namespace AND x.name = k.name AND x.rv <= %s)"
           " WHERE r.type <> 'DELETED' ORDER BY r.cluster, r.namespace, r.name")
    with connection.cursor() as cursor:
        cursor.execute(sql, [kind, rv, kind, rv, kind, rv])
        found = cursor.fetchall()
    texts = revlog.full_texts([row[4] for row in found])   # (past the watch window, most are deltas)
    packed = revlog.packed_as_of([row[7] for row in found if row[7] and row[7] > row[3]], rv)
    out = []
    for row, text in zip(found, texts):
        cluster, ns, name, at, _, created, upstream, first = row
        if first in packed:   # (a (MODIFIED) revision after the row's, in a pack)
            at, text, created, upstream = packed[first]
        elif text is row[4]:
            out.append((cluster, ns, name, at, text))
            continue
        if decoded is not None:   # (the log's columns, then whether the log lacks the row)
            decoded.append((at, cluster, kind, ns, name, "MODIFIED", text, created, upstream, first in packed))
        out.append((cluster, ns, name, at, text))
    return out


def _create_shadow(table: str, on_commit_drop: bool = False) -> None:
    q = connection.ops.quote_name
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = %s", [table])
            ddl = cursor.fetchone()[0]
            cursor.execute(ddl.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
        else:
            cursor.execute(f"CREATE TEMP TABLE {q(table)} (LIKE {q(_schema(table))}.{q(table)} "
                           "INCLUDING DEFAULTS INCLUDING IDENTITY)" + (" ON COMMIT DROP" if on_commit_drop else ""))
        cursor.execute(f"CREATE INDEX {q(table + '_asof_key')} ON {q(table)} (cluster, namespace, name)")


LOG, TEXTS = "kube_revision", "kube_revision_asof"


def _shadow_log(texts: list[tuple], on_commit_drop: bool = False) -> None:
    """Shadow the log with a view of it in which the revisions the shadowed rows point at are
    there with their full text: the pages read an object's JSON by joining its row to the log,
    and past the watch window a revision's text may be stored as a delta (kube/delta.py) or the
    revision held in a pack (kube/pack.py). The view is the log without those rows, then a
    temporary table of them whole (`texts`: the log's columns in order, then whether the log lacks it): a UNION ALL of two
    plain SELECTs, which SQLite flattens into a join with the typed rows (a LEFT JOIN term would
    make it read the whole log first). PostgreSQL plans a join with that NOT IN leg as a hash
    join over the whole log, so there the first leg is the whole log with the text taken from the
    temporary table by a scalar subquery (which SQLite, in turn, would materialise), and the
    second only the packed ones (`packed`). Made on every pin, so a query planned against the view is
    never reused against the plain log (dropping it invalidates such plans on PostgreSQL)."""
    q = connection.ops.quote_name
    main, temp = ("main", "temp") if connection.vendor == "sqlite" else (q(_schema(LOG)), "pg_temp")
    columns = "rv, cluster, kind, namespace, name, type, object, created, upstream_rv"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE {q(TEXTS)} (rv bigint PRIMARY KEY, cluster varchar(63) NOT NULL, "
                       "kind varchar(63) NOT NULL, namespace varchar(253) NOT NULL, name varchar(253) NOT NULL, "
                       "type varchar(8) NOT NULL, object text NOT NULL, created "
                       + ("datetime" if connection.vendor == "sqlite" else "timestamp with time zone")
                       + " NOT NULL, upstream_rv varchar(64) NOT NULL, packed boolean NOT NULL)"
                       + (" ON COMMIT DROP" if on_commit_drop else ""))
        for i in range(0, len(texts), 200):
            chunk = [(*row[:7], _stored_time(row[7]), row[8], row[9]) for row in texts[i:i + 200]]
            cursor.execute(f"INSERT INTO {temp}.{q(TEXTS)} ({columns}, packed) VALUES "
                           + ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(chunk)),
                           [v for row in chunk for v in row])
        if connection.vendor == "sqlite":
            cursor.execute(f"CREATE TEMP VIEW {q(LOG)} AS SELECT {columns} FROM {main}.{q(LOG)} r "
                           f"WHERE r.rv NOT IN (SELECT rv FROM {temp}.{q(TEXTS)}) "
                           f"UNION ALL SELECT {columns} FROM {temp}.{q(TEXTS)}")
        else:   # (PostgreSQL plans a join with a NOT IN leg as a hash join over the whole log)
            cursor.execute(f"CREATE TEMP VIEW {q(LOG)} AS SELECT r.rv, r.cluster, r.kind, r.namespace, r.name, r.type, "
                           f"COALESCE((SELECT d.object FROM {temp}.{q(TEXTS)} d WHERE d.rv = r.rv), r.object) AS object, "
                           f"r.created, r.upstream_rv FROM {main}.{q(LOG)} r "
                           f"UNION ALL SELECT {columns} FROM {temp}.{q(TEXTS)} WHERE packed")


def _stored_time(value):
    """A write time as the log stores it (a raw cursor's read gives SQLite's text back as is)."""
    return connection.ops.adapt_datetimefield_value(value) if isinstance(value, datetime) else value


def _drop_shadow(table: str) -> None:
    temp = "temp" if connection.vendor == "sqlite" else "pg_temp"
    what = "VIEW" if table == LOG else "TABLE"
    with connection.cursor() as cursor:
        cursor.execute(f"DROP {what} IF EXISTS {temp}.{connection.ops.quote_name(table)}")


def _schema(table: str) -> str:
    """The schema of the real table (not a temporary one of this connection)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                       "WHERE c.relname = %s AND c.relkind IN ('r', 'p') AND n.nspname NOT LIKE 'pg\\_temp\\_%%' "
                       "ORDER BY n.nspname = current_schema() DESC LIMIT 1", [table])
        return cursor.fetchone()[0]


@contextmanager
def _search_path_changed():
    """PostgreSQL re-plans a prepared statement when search_path changes, not when a temporary
    table comes to shadow its table: name pg_temp first explicitly while shadowed, then restore."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('search_path')")
        saved = cursor.fetchone()[0]
        cursor.execute(f"SET search_path TO pg_temp, {saved}")
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                cursor.execute(f"SET search_path TO {saved}")
        except Exception:
            connection.close()   # (as _drop_all: never hand the connection on in this state)
            raise


def _drop_all(tables: list[str]) -> None:
    """Drop the shadow tables; if that fails, close the connection (its temporary tables go with
    it): a connection that kept one would show the past as the present to its next request."""
    try:
        for table in reversed(tables):   # (the log's view before the table it reads)
            _drop_shadow(table)
    except Exception:
        connection.close()
        raise


@contextmanager
def pinned(at: At):
    """Run the block with every typed table showing the state at `at.rv` (see the module doc).

    On PostgreSQL in one transaction (unless already in one): through PgBouncer's transaction
    pooling it is the only way every statement of the block meets the same server connection,
    and the tables (ON COMMIT DROP) and search_path (SET LOCAL) end with it whatever happens.
    On SQLite on the connection, dropped after (a transaction there would hold the writers' lock).
    The tables belong to this thread's connection: the block's reads must run on this thread."""
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT current_setting('search_path')")
                cursor.execute(f"SET LOCAL search_path TO pg_temp, {cursor.fetchone()[0]}")
            _fill(at, [], on_commit_drop=True)
            yield at
            if not connection.needs_rollback:   # (else ROLLBACK takes both)
                _drop_shadow(LOG)   # (before its table goes at COMMIT)
        return
    tables: list[str] = []
    with _search_path_changed():
        try:
            _fill(at, tables)
            yield at
        finally:
            _drop_all(tables)


def _fill(at: At, tables: list[str], on_commit_drop: bool = False) -> None:
    """Create and fill the shadow of every typed table (appending each to `tables` once made),
    then the log's (_shadow_log)."""
    texts: list[tuple] = []   # the log rows of the rows' revisions stored as deltas or packed, text full
    for res in registry.all_resources():
        table = res.model._meta.db_table
        if table in tables:
            continue
        then = state_at(res.kind, at.rv, table, texts)   # (read from the real table: before it is shadowed)
        _create_shadow(table, on_commit_drop)
        tables.append(table)
        head = rows.statements(res.model)["insert_head"]
        rows.insert_many(head, [(cluster, ns, name, *rows.row_params(res, _loads(text), rv))   # (the heavy
                                for cluster, ns, name, rv, text in yielding.paced(then)])   # lane's pauses)
    if LOG not in tables:
        tables.append(TEXTS)
        _shadow_log(texts, on_commit_drop)
        tables.append(LOG)


def _loads(text: str) -> dict:
    return orjson.loads(text)


def written_at(rv: int) -> datetime | None:
    """When revision rv (or the newest logged one below it, packed or not) was written."""
    return revlog.last_at_or_below_any(rv)


NEAR = 5000   # revisions around the binary search's answer read to settle it exactly


def newest_at(moment: datetime) -> int:
    """The newest revision written at or before `moment` (0: none).

    The log has no index on its write times (one more index on every renewal); they rise with
    the revision, all but for writers whose clocks were read a moment apart before they took
    the lock. So: a binary search over revisions (a primary-key probe each), then the exact
    answer among the NEAR revisions either side."""
    revisions = Revision.everywhere.order_by("rv")
    low, high = (revisions.values_list("rv", flat=True).first() or 0), (
        revisions.reverse().values_list("rv", flat=True).first() or 0)
    if not high:
        return 0
    while low < high:   # the first revision written after `moment`, near enough
        middle = (low + high) // 2
        hit = revisions.filter(rv__gte=middle).values_list("rv", "created").first()
        if hit[1] <= moment:
            low = hit[0] + 1
        else:
            high = middle
    near = Revision.everywhere.filter(rv__gt=low - NEAR, rv__lte=low + NEAR, created__lte=moment)
    found = near.order_by("-rv").values_list("rv", flat=True).first() or 0
    # (past the watch window most revisions are packed: kube/pack.py)
    return max(found, revlog.newest_packed_at(moment, max(settings.KUBEDASH_HISTORY_PACK_SECONDS, 3600)))


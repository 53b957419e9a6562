"""The queries both a page and its live pushes run, in one place so that they cannot drift.

A list's view is its namespaces (the viewer's, or the one asked for), a label selector (a share
link's own ANDed in: scope.narrow), a name search `q`, the objects it is limited to (`keys`, e.g.
those with warnings: web/warnings.py; None: no such limit), a state (kinds.State: its test over the
typed columns, which the live side computes from the object) and, for a sorted view, an order and a page.
Its rules hold on every side: in SQL over the typed rows (view_rows: the totals, sorted pages, the
pager's position) and in Python over a snapshot's objects (fetch, a page's; view_objects with
view_predicate, a live page's, whose hub subscription filters with view_predicate too). The name
search is a case-insensitive substring everywhere (`name__icontains`; `q.lower() in name.lower()`).

The Overview's cards, totals and clusters table read the typed columns per namespace
(namespace_cards, cluster_rows) over the namespaces overview_namespaces says, for the page and
its pushes alike.
"""
from __future__ import annotations

import bisect
import functools
import operator
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlencode

import orjson
from django.db.models import F, Q

from dashboard.access import clusters
from dashboard.access.principals import Principal
from dashboard.follow.models import Cluster
from dashboard.kube import asof, lists, revlog, store
from dashboard.kube.meta import now as utcnow
from dashboard.kube.registry import by_kind
from dashboard.kube.selectors import label_selector_q

from . import cluster_scope, kinds, scope
from . import present as p

PAGE_SIZE = 100            # rows per page by default: a page that renders fast


# ---------------------------------------------------------------------------------------------
# A list's view


@dataclass
class Fetched:
    objects: list[dict]
    resource_version: int
    next_token: str


def fetch(kind: str, namespaces: list[str | None], selector, q: str, limit: int, token: str,
          keys: frozenset | None = None, state: kinds.State | None = None, at: asof.At | None = None) -> Fetched:
    """One page of objects in (namespace, name) order, read from one snapshot (`at`: a page as
    of a past moment, read within asof.pinned(at); None: live).

    namespaces is [None] (all), or the sorted namespaces to read one after another (a
    namespace-limited user). The name filter q is applied here, so the store is read in
    chunks until the page is full; the next-page token is our own (same snapshot, resumes
    after the last object shown).
    """
    res = by_kind(kind)
    start = lists.decode_continue(token) if token else None
    rv: int | None = start[0] if start else None
    out: list[dict] = []
    needle = q.lower()
    in_state = state_test(kind, state, at)
    chunk = limit + 1 if not (needle or in_state) and keys is None else max(limit + 1, 500)
    for ns in namespaces:
        if start is not None and ns is not None and ns < start[1]:
            continue
        if start is not None and (ns is None or ns == start[1]):
            cont = lists.encode_continue(rv, start[1], start[2])
        elif rv is not None:
            cont = lists.encode_continue(rv, ns, "")   # the same snapshot, from this namespace's start
        else:
            cont = ""
        while True:
            page = lists.list_objects(res, lists.ListQuery(namespace=ns, label_selector=selector, limit=chunk,
                                                           continue_token=cont), at)
            rv = page.resource_version
            for raw in page.items:
                obj = orjson.loads(raw)
                meta = obj["metadata"]
                if (needle and needle not in meta["name"].lower()) or (in_state and not in_state(obj)):
                    continue
                if keys is not None and (meta["namespace"], meta["name"]) not in keys:
                    continue
                if len(out) == limit:
                    last = out[-1]["metadata"]
                    return Fetched(out, rv, lists.encode_continue(rv, last["namespace"], last["name"]))
                out.append(obj)
            if not page.continue_token:
                break
            cont = page.continue_token
    return Fetched(out, rv if rv is not None else store.current_revision(), "")


def view_rows(kind: str, namespaces: list[str | None], selector, q: str, keys: frozenset | None = None,
              state: kinds.State | None = None, now: datetime | None = None):
    """The typed rows of a view (namespace limits, label selector pushed down where it can
    be, name search, the objects it is limited to, state), and the selector's rest to check in
    Python (None: nothing left)."""
    rows = by_kind(kind).model.objects.all()
    if namespaces != [None]:
        rows = rows.filter(namespace__in=namespaces)
    if q:
        rows = rows.filter(name__icontains=q)
    if keys is not None:
        rows = rows.filter(keys_q(keys)) if keys else rows.none()
    if state is not None and state.where is not None:
        rows = rows.filter(state.where)
    elif state is not None:   # (in Python: a Lease's is time-derived)
        moment = now or utcnow()
        rows = rows.filter(id__in=[pk for pk, *values in rows.values_list("id", *state.columns)
                                   if state.test(tuple(values), moment)])
    if selector is None or selector.empty:
        return rows, None
    pushed = label_selector_q(selector)
    return (rows.filter(pushed) if pushed is not None else rows), selector


def keys_q(keys) -> Q:
    """The rows of these (namespace, name) keys (a non-empty set), by name first (indexed)."""
    return Q(name__in={name for _, name in keys}) & Q(namespace__in={ns for ns, _ in keys}) & \
        functools.reduce(operator.or_, (Q(namespace=ns, name=name) for ns, name in keys))


def state_test(kind: str, state: kinds.State | None, at: asof.At | None = None):
    """A state filter over an object, at the moment it is asked, or on a page as of a past
    moment at that moment (`at`) (None: no filter): the state's test on the object's typed
    columns as the store computes them (Resource.typed_columns)."""
    if state is None:
        return None
    columns = by_kind(kind).typed_columns

    def in_state(obj: dict) -> bool:
        values = columns(obj)
        return state.test(tuple(values[c] for c in state.columns), at.moment if at is not None else utcnow())

    return in_state


def view_predicate(principal: Principal, q: str, keys: frozenset | None = None, kind: str = "",
                   state: kinds.State | None = None):
    """A view's filter in Python, for the objects the hub offers a live page and for its
    snapshots: the viewer's namespace limits, a share link's selector, the name search, the
    objects the view is limited to and the state (of `kind`), as one condition (None: nothing
    to check)."""
    allowed = set(principal.namespaces_here)
    own = scope.own_selector(principal)
    needle = q.lower()
    in_state = state_test(kind, state)
    if not allowed and not needle and own is None and keys is None and in_state is None:
        return None

    def visible(obj: dict) -> bool:
        m = obj["metadata"]
        return ((not allowed or m.get("namespace") in allowed) and (not needle or needle in m["name"].lower())
                and (own is None or own.matches(m.get("labels") or {}))
                and (keys is None or (m.get("namespace"), m["name"]) in keys)
                and (in_state is None or in_state(obj)))

    return visible


def view_objects(kind: str, namespace: str | None, selector, names: tuple[str, ...], visible,
                 at: int = 0) -> tuple[int, list[dict]]:
    """A live page's objects of one kind (its namespace, selector, and name for a detail page),
    read from one snapshot (at revision `at`, if given) and kept where `visible` (view_predicate)
    says: (the snapshot's revision, the objects in (namespace, name) order)."""
    query = lists.ListQuery(namespace=namespace, label_selector=selector, names=names)
    if at:
        query.resource_version, query.resource_version_match = at, "Exact"
    page = lists.list_objects(by_kind(kind), query)
    return page.resource_version, [o for o in map(orjson.loads, page.items) if visible is None or visible(o)]


def view_totals(web: kinds.KindWeb, namespaces: list[str | None], selector, q: str, now: datetime,
                keys: frozenset | None = None, state: kinds.State | None = None) -> dict:
    """The whole filtered view's counts, not one page's: its number of objects (`text`: "1
    lease") and the kind's overview part over them (e.g. held / expired, with the expiry
    instants live.js recounts as time passes), for the list's heading and pager. The live push
    sends them again after every change (live.totals_fragment), so they stay exact."""
    rows, rest = view_rows(web.kind, namespaces, selector, q, keys, state, now)
    if rest is not None:
        rows = rows.filter(id__in=[pk for pk, labels in rows.values_list("id", "labels") if rest.matches(labels)])
    part = _summed([web.overview.card(found, now) for found in web.overview.counts(rows).values()]) \
        or web.overview.card(None, now)
    total = part.get(web.overview.count_key) or 0
    return {"total": total, "text": web.counted(total), "part": part,
            "template": f"{web.list_template}#{web.overview.partial}"}


def sorted_keys(web: kinds.KindWeb, namespaces: list[str | None], selector, q: str, sort: str,
                now: datetime, keys: frozenset | None = None,
                state: kinds.State | None = None) -> list[tuple[int, str, str]]:
    """(row id, namespace, name) of the whole view in `sort` order (see kinds.Sort)."""
    spec = web.sort(sort.lstrip("-"))
    rows, rest = view_rows(web.kind, namespaces, selector, q, keys, state, now)
    keyed, missing = [], []
    for row in rows.values_list("id", "namespace", "name", "labels", *spec.columns):
        if rest is not None and not rest.matches(row[3]):
            continue
        value = spec.value(row[4:], now)
        (missing if value is None else keyed).append((value, row[1], row[2], row[0]))
    keyed.sort(key=lambda k: (k[1], k[2]))
    keyed.sort(key=lambda k: k[0], reverse=sort.startswith("-"))   # stable: ties stay in key order
    missing.sort(key=lambda k: (k[1], k[2]))
    return [(k[3], k[1], k[2]) for k in keyed + missing]


def page_keys(web: kinds.KindWeb, namespaces: list[str | None], selector, q: str, sort: str, page: int,
              limit: int, now: datetime, keys: frozenset | None = None,
              state: kinds.State | None = None) -> tuple[list[tuple[int, str, str]], int]:
    """One page of a sorted view: its (id, namespace, name) keys, and the view's total."""
    spec = web.sort(sort.lstrip("-"))
    if spec.field:   # ordered and paged by SQL, when nothing is left to check in Python
        rows, rest = view_rows(web.kind, namespaces, selector, q, keys, state, now)
        if rest is None:
            column = F(spec.field)
            order = column.desc(nulls_last=True) if sort.startswith("-") else column.asc(nulls_last=True)
            found = rows.order_by(order, "namespace", "name").values_list("id", "namespace", "name")
            return list(found[(page - 1) * limit:page * limit]), rows.count()
    found = sorted_keys(web, namespaces, selector, q, sort, now, keys, state)
    return found[(page - 1) * limit:page * limit], len(found)


def position(kind: str, namespaces: list[str | None], selector, q: str, start: tuple[str, str] | None,
             limit: int, keys: frozenset | None = None, state: kinds.State | None = None) -> dict:
    """Where a page sits in its whole view, from the typed table (the current state): the
    number of rows before it, the total, and the key the previous page resumes after (None:
    the previous page is the first)."""
    rows, rest = view_rows(kind, namespaces, selector, q, keys, state)
    rows = rows.order_by("namespace", "name")
    if rest is None:
        total = rows.count()
        before = rows.filter(Q(namespace__lt=start[0]) | Q(namespace=start[0], name__lte=start[1])).count() \
            if start else 0
        at = before - limit - 1
        prev = tuple(rows.values_list("namespace", "name")[at]) if at >= 0 else None
    else:
        keys = [(ns, name) for ns, name, labels in rows.values_list("namespace", "name", "labels")
                if rest.matches(labels)]
        total = len(keys)
        before = bisect.bisect_right(keys, tuple(start)) if start else 0
        at = before - limit - 1
        prev = keys[at] if at >= 0 else None
    return {"before": before, "total": total, "prev": prev}


def state_changes(web: kinds.KindWeb, namespaces: list[str | None], selector, q: str, state: kinds.State,
                  since: datetime, now: datetime) -> tuple[list[dict], datetime | None]:
    """A time-derived state's changes (kinds.State.until) for a live page: the view's objects
    (its state aside) whose answer changed by time alone in (since, now], as stored now, and the
    next instant one will (None: none)."""
    rows, _ = view_rows(web.kind, namespaces, selector, q)
    changed, following = [], None
    for pk, *values in rows.values_list("id", *state.columns):
        at = state.until(tuple(values))
        if at is None:
            continue
        if since < at <= now:
            changed.append(pk)
        elif at > now and (following is None or at < following):
            following = at
    texts = revlog.with_current(web.resource.model.objects.filter(id__in=changed), "id") if changed else ()
    return [orjson.loads(text) for _, text in texts], following


# ---------------------------------------------------------------------------------------------
# The Overview


def overview_namespaces(principal: Principal, namespace: str | None) -> list[str] | None:
    """The namespaces the Overview shows (its cards, totals and warnings line): the one it
    asks for, else the viewer's own (a namespace-limited viewer's, those without objects too),
    else None: every namespace that holds an object."""
    if namespace:
        return [namespace]
    return sorted(principal.namespaces_here) if principal.namespaces_here else None


def namespace_cards(now: datetime, namespaces: list[str] | None = None) -> list[dict]:
    """One overview card per namespace (all in use, or just `namespaces`), from the typed
    columns: one grouped query per kind (its Overview.counts), no per-object work beyond
    what a kind's card sums."""
    parts: dict[str, dict] = {}
    for web in kinds.registered():
        rows = web.resource.model.objects.all()
        if namespaces is not None:
            rows = rows.filter(namespace__in=namespaces)
        parts[web.plural] = web.overview.counts(rows)
    names = set(namespaces or ()).union(*parts.values())
    return [p.namespace_card(ns, now, **{plural: found.get(ns) for plural, found in parts.items()})
            for ns in sorted(names)]


def namespace_summary(namespace: str, now: datetime) -> dict:
    """One namespace's overview card (the `ns` of "web/overview.html#namespace"); all zero
    when the namespace no longer holds any object."""
    return namespace_cards(now, [namespace])[0]


def _summed(parts: list[dict]) -> dict:
    """A kind's overview parts of several namespaces as one (numbers added, texts such as a
    Lease part's expiry instants joined): a whole cluster's part, for the clusters table."""
    out: dict = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, str):
                out[key] = " ".join(t for t in (out.get(key, ""), value) if t)
            else:
                out[key] = out.get(key, 0) + (value or 0)
    return out


def cluster_rows(principal: Principal, now: datetime, current_cards: list[dict] | None = None,
                 namespace: str = "", page_at: asof.At | None = None) -> list[dict]:
    """The overview's table across clusters: one row per cluster the viewer may see, each
    kind's overview counts over the whole cluster (its namespace cards, summed; only `namespace`'s
    when the Overview shows one, its links kept in it), the follower's state and last event.
    Empty when no cluster is followed. current_cards: the page's own cards of the current
    cluster (the same namespaces: not read twice).
    `now` is the real time: each cluster's counts are computed at its own moment (a cluster that
    is not current: as of its last word, Cluster.moment). page_at: the page's past moment (?at=:
    its links keep it; None: live)."""
    names = cluster_scope.visible_clusters(principal)
    if names in ([], [clusters.LOCAL]):
        return []

    followed = {c.name: c for c in Cluster.objects.filter(name__in=names)}
    only = overview_namespaces(principal, namespace or None)
    in_ns = f"?{urlencode({'namespace': namespace})}" if namespace else ""
    rows = []
    for name in names:
        row = followed.get(name)
        at = row.moment(now) if row is not None else now
        if name == clusters.current() and current_cards is not None:
            cards = current_cards
        else:
            with clusters.within(name):
                cards = namespace_cards(at, only)
        last = row.last_event_at if row is not None else None
        stale = row is not None and cluster_scope.staleness(row, now) is not None
        heard = row.known_at if stale else None
        rows.append({
            "name": name, "url": cluster_scope.in_cluster("/" + in_ns, name, page_at), "current": name == clusters.current(),
            "state": row.state if row is not None else "local", "stale": stale,
            "tone": cluster_scope.state_tone(row, stale) if row is not None else "", "last_event": p.iso(last),
            "last_event_ago": p.age(last, now) if last else "",
            "heard": p.iso(heard) if heard else "", "heard_ago": p.age(heard, now) if heard else "",
            "heard_clock": p.clock(heard) if heard else "",
            "kinds": [{"web": web, "link": cluster_scope.in_cluster(web.list_url + in_ns, name, page_at), "part": part,
                       "count": part.get(web.overview.count_key, 0),
                       "template": f"{web.list_template}#{web.overview.partial}"}
                      for web in kinds.registered()
                      for part in [_summed([c[web.plural] for c in cards]) or web.overview.card(None, at)]],
        })
    return rows


def last_deletion(web: kinds.KindWeb, namespace: str, name: str):
    """(the object as it was when deleted, when) from the revision log, when the object's last
    logged write is its deletion; else None (never there, or its history compacted away). The
    deleted object's page, and the push that tells an open detail page it was deleted."""
    last = revlog.object_revisions(web.kind, namespace, name, 1)
    if not last or last[0][1] != revlog.DELETED:
        return None
    return last[0][2], last[0][3]

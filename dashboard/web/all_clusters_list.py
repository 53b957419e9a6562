"""A kind's list across every cluster the viewer may see: `/<plural>/?cluster=*` (issue 40).

The same filters as the kind's own list (views.Filters: namespace, label selector, name search,
state and column filters, warnings of the last hour, sort, page size), read from the typed rows
of every visible cluster at once (`cluster IN (...)`), with a Cluster column and a `cluster` sort.
Pages are numbered (`?page=`) in every order. A row's time-derived state is computed at its
cluster's moment (a stale cluster's: as of its last word, Cluster.moment), and each row links to
the object's page in its own cluster. The columns are the kind's Table columns (kubectl get's).
The page is live through AllClustersConsumer (all_clusters_socket.py), which renders the same
`#rows` partial again after a change in any of the clusters.

The page runs about the cluster "*" (cluster_scope: ALL), so every link it builds through
in_cluster (filters, pager, menu) stays across clusters; its reads name their clusters themselves.
"""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from types import SimpleNamespace

import orjson
from django.db.models import F
from django.http import QueryDict
from django.shortcuts import render

from dashboard.access import clusters
from dashboard.access.principals import Principal
from dashboard.follow.models import Cluster
from dashboard.kube import context, revlog
from dashboard.kube.errors import ApiError
from dashboard.kube.formats import parse_time
from dashboard.kube.meta import now as utcnow
from dashboard.kube.selectors import label_selector_q, parse_label_selector

from . import all_clusters, cluster_scope, kinds, scope, warnings
from . import present as p

CLUSTER_SORT = "cluster"


def _filters_of(query: QueryDict, web: kinds.KindWeb, filters_class, page_at=None):
    """views.Filters of the address, plus the `cluster` sort it does not know, and the page (in
    every order here, not only in a sorted one). page_at: the page's past moment (?at=; None: live)."""
    sort = (query.getlist("sort") or [""])[-1].strip()
    rest = query.copy()
    if sort.lstrip("-") == CLUSTER_SORT:
        rest.pop("sort")
    from_request = filters_class.from_request(SimpleNamespace(GET=rest), web, page_at)   # (it reads the query only)
    page = (query.getlist("page") or [""])[-1].strip()
    page = int(page) if page.isdigit() and int(page) >= 1 else 1
    return replace(from_request, sort=sort if sort.lstrip("-") == CLUSTER_SORT else from_request.sort,
                   page=page, continue_token="")


def moments(names: list[str], now: datetime) -> tuple[dict[str, datetime], dict[str, datetime]]:
    """Each cluster's moment (now for the local store and a current followed cluster), and the
    clusters that are not current, with the last moment their copy is known at."""
    at, stale = {name: now for name in names}, {}
    for row in Cluster.objects.filter(name__in=names):
        at[row.name] = row.moment(now)
        if cluster_scope.staleness(row, now) is not None:
            stale[row.name] = row.known_at
    return at, stale


def view_rows(web: kinds.KindWeb, names: list[str], namespaces: list[str | None], selector, filters,
              at: dict[str, datetime]):
    """The typed rows of the view in every cluster, and what is left to check in Python
    (the selector's rest, a time-derived state, the warned keys) as a test over
    (cluster, labels, state values), or None."""
    rows = web.resource.model.everywhere.filter(cluster__in=names)
    if namespaces != [None]:
        rows = rows.filter(namespace__in=namespaces)
    if filters.q:
        rows = rows.filter(name__icontains=filters.q)
    state = web.view_filter(filters.state, dict(filters.columns))
    if state is not None and state.where is not None:
        rows, state = rows.filter(state.where), None
    rest = None
    if selector is not None and not selector.empty:
        pushed = label_selector_q(selector)
        if pushed is not None:
            rows = rows.filter(pushed)
        rest = selector
    warned = None
    if filters.warnings:
        warned = set()
        for name in names:
            with clusters.within(name):
                warned |= {(name, *key) for key in warnings.warned_keys(web.kind, at[name], namespaces)}
    return rows, state, rest, warned


def sorted_page(web: kinds.KindWeb, rows, state, rest, warned, sort: str, page: int, limit: int,
                at: dict[str, datetime]) -> tuple[list[int], int]:
    """One page of row ids in `sort` order (then cluster, namespace, name), and the view's total."""
    key = sort.lstrip("-")
    spec = web.sort(key) if key and key not in (CLUSTER_SORT, "namespace") else None   # (the default order)
    reverse = sort.startswith("-")
    if state is None and rest is None and warned is None and (spec is None or spec.field):
        if spec is None:
            order = [F(f).desc() if reverse else F(f).asc() for f in ("cluster", "namespace", "name")]
        else:
            column = F(spec.field)
            order = [column.desc(nulls_last=True) if reverse else column.asc(nulls_last=True),
                     "cluster", "namespace", "name"]
        ids = rows.order_by(*order).values_list("id", flat=True)
        return list(ids[(page - 1) * limit:page * limit]), rows.count()
    columns = tuple(dict.fromkeys((*(state.columns if state else ()), *(spec.columns if spec else ()))))
    keyed, missing = [], []
    for pk, cluster, namespace, name, labels, *values in rows.values_list(
            "id", "cluster", "namespace", "name", "labels", *columns):
        row = dict(zip(columns, values))
        if rest is not None and not rest.matches(labels):
            continue
        if warned is not None and (cluster, namespace, name) not in warned:
            continue
        if state is not None and not state.test(tuple(row[c] for c in state.columns), at[cluster]):
            continue
        value = spec.value(tuple(row[c] for c in spec.columns), at[cluster]) if spec else None
        (missing if spec and value is None else keyed).append((value, cluster, namespace, name, pk))
    keyed.sort(key=lambda k: k[1:4], reverse=reverse and spec is None)
    if spec is not None:
        keyed.sort(key=lambda k: k[0], reverse=reverse)   # stable: ties stay in (cluster, namespace, name)
    missing.sort(key=lambda k: k[1:4])
    found = keyed + missing
    return [k[4] for k in found[(page - 1) * limit:page * limit]], len(found)


def page_rows(web: kinds.KindWeb, ids: list[int], at: dict[str, datetime],
              stale: dict[str, datetime] | None = None, page_at=None) -> list[dict]:
    """The page's rows in `ids` order: cluster, the object's link in its cluster (at page_at, the
    page's past moment, if any), its Table cells, and for a cluster that is not current the
    moment its row is as of."""
    stale = stale or {}
    by_id = {pk: (cluster, text) for pk, cluster, text in
             revlog.with_current(web.resource.model.everywhere.filter(id__in=ids), "id", "cluster")}
    columns = [c for c in web.resource.columns if c.priority == 0]
    has_pages = kinds.by_plural(web.plural) is not None   # (a feed, the Events, has its list only)
    out = []
    for pk in ids:
        if pk not in by_id:
            continue   # deleted since the page's ids were read
        cluster, text = by_id[pk]
        obj = orjson.loads(text)
        meta = obj["metadata"]
        now = at[cluster]
        cells = [c.cell(obj, now) for c in columns]
        if web.resource.name_and_age_columns:
            cells.append(p.age(parse_time(meta.get("creationTimestamp")), now))
        out.append({"cluster": cluster, "namespace": meta.get("namespace", ""), "name": meta["name"],
                    "dom_id": p.dom_id(web.kind, f"{cluster}--{meta.get('namespace', '')}", meta["name"]),
                    "url": cluster_scope.in_cluster(p.detail_url(web.kind, meta.get("namespace", ""), meta["name"]),
                                                    cluster, page_at) if has_pages else "",
                    "cluster_url": cluster_scope.in_cluster(web.list_url, cluster, page_at),
                    "as_of": p.iso(stale[cluster]) if cluster in stale else "",
                    "as_of_clock": p.clock(stale[cluster]) if cluster in stale else "",
                    "cells": ["" if v is None else v for v in cells]})
    return out


def headings(web: kinds.KindWeb) -> list[str]:
    names = [c.name for c in web.resource.columns if c.priority == 0]
    return names + (["Age"] if web.resource.name_and_age_columns else [])


def rows_context(web: kinds.KindWeb, principal: Principal, query: QueryDict, filters_class, page_at=None) -> dict:
    """What the page and its pushes render (the `#rows` partial): {"error": ...} when the view
    asked for is not one. page_at: the page's past moment (?at=: its links keep it; None: live)."""
    filters = _filters_of(query, web, filters_class, page_at)
    if filters.errors:
        field, message = filters.errors[0]
        return {"error": message, "error_field": field, "filters": filters}
    names = cluster_scope.visible_clusters(principal)
    if not names:
        return {"error": "You may see no cluster.", "filters": filters}
    with clusters.within(names[0]):   # (the viewer's namespace limits are the same in every cluster)
        namespaces = scope.list_scope(principal, filters.namespace, web.kind)
    if namespaces is None:
        return {"error": f"You may not list {web.list_noun} in namespace “{filters.namespace}”.",
                "error_field": "namespace", "filters": filters, "status": 403}
    try:
        selector = parse_label_selector(filters.label_selector)
    except ApiError as exc:
        return {"error": f"Label selector: {exc.message}", "error_field": "labelSelector", "filters": filters}
    at, stale = moments(names, utcnow())
    rows, state, rest, warned = view_rows(web, names, namespaces, selector, filters, at)
    ids, total = sorted_page(web, rows, state, rest, warned, filters.sort, filters.page, filters.limit, at)
    before = (filters.page - 1) * filters.limit
    ctx = {"filters": filters, "clusters_shown": names, "rows": page_rows(web, ids, at, stale, page_at), "total": total,
           "total_text": web.counted(total), "headings": headings(web), "page": web}
    if total > filters.limit or filters.page > 1:
        ctx.update(rows_from=f"{before + 1:,}" if ids else "0", rows_to=f"{before + len(ids):,}",
                   rows_total=f"{total:,}")
    if before + len(ids) < total:
        ctx["next_url"] = "?" + filters.query(page=str(filters.page + 1))
    if filters.page > 1:
        ctx["first_page"] = "?" + filters.query(cluster=all_clusters.ALL)
        ctx["prev_url"] = "?" + filters.query(page=str(filters.page - 1) if filters.page > 2 else "")
    return ctx


def list_page(request, web: kinds.KindWeb, principal: Principal, base: dict, filters_class):
    """The page (views.KindListView hands `?cluster=*` here, with its base context)."""
    ctx = {**base, **rows_context(web, principal, request.GET, filters_class, context.of(request).at), "page": web,
           "all_clusters": True, "list_search": True}
    filters = ctx["filters"]
    with clusters.within(ctx.get("clusters_shown", [clusters.LOCAL])[0]):
        namespaces = scope.known_namespaces(principal) if principal.namespaces else sorted(
            set(web.resource.model.everywhere.filter(cluster__in=ctx.get("clusters_shown", []))
                .values_list("namespace", flat=True).distinct()))
    # The default order is by cluster first: the "namespace" order of a cluster's list, named as it is here.
    sorts = [(s.key, "Cluster, namespace" if s.key == "namespace" else s.label) for s in web.all_sorts()]
    ctx.update(namespaces=namespaces, state_options=[(s.key, s.label) for s in web.states],
               column_filters=[(f, dict(filters.columns).get(f.param, "")) for f in web.column_filters],
               page_sizes=(50, 100, 500, 1000), default_limit=100, sort_options=sorts,
               ws_url=all_clusters.WS_PATH + "?" + _ws_query(web, request.GET) if "error" not in ctx else "", rv="")
    status = ctx.get("status", 400) if "error" in ctx else 200
    return render(request, "web/all_clusters_list.html", ctx, status=status)


def _ws_query(web: kinds.KindWeb, query: QueryDict) -> str:
    """The socket's address: the list and the page's own view (its query, as asked)."""
    params = query.copy()
    params["list"] = web.plural
    params.pop(cluster_scope.PARAM, None)
    return params.urlencode()

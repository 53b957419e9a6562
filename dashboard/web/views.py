"""The pages: server-rendered lists and details over the store, one shareable URL each.

Each list and detail page is the same generic view configured by its kind's declaration
(web.kinds.KindWeb, registered by the kind app's web.py). Lists are read by queries.py, the
module the live pushes read through too (lists.list_objects: one consistent snapshot,
continue tokens), and the rows are built by present.present(), as the pushes build theirs.

Query parameters (all kept in the URL): namespace, labelSelector (Kubernetes syntax), q (name
substring), state (a key of the kind's kinds.State) and the kind's column filters (an Event's
type, reason: kinds.ColumnFilter), limit (page size) and continue (the next page of the same
snapshot); sort (a column key, "-key" descending; see kinds.Sort; a kind may have another default
than (namespace, name): KindWeb.default_sort) and page (the page number of a sorted view).

Sorted views: the default order, (namespace, name), pages through the API's own snapshot
(continue tokens). Any other order is read from the typed table (the current state): one query
reads the sort columns of the whole view, Python orders them, and the page's objects are
then read by id. Live updates on a sorted view change rows in place and never move them (a
row does not jump away under the pointer); new objects are announced ("N new — show").
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import parse_qsl, urlencode

import orjson
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.http import require_safe

from dashboard.access import clusters
from dashboard.access.principals import Principal
from dashboard.kube import asof, context as request_context, lists, revlog, store
from dashboard.kube.storage import rows as stored_rows
from dashboard.kube.errors import ApiError
from dashboard.kube.meta import now as utcnow
from dashboard.kube.selectors import parse_label_selector

from . import all_clusters, all_clusters_list, cluster_scope, export, kinds, scope, timetravel, warnings
from . import columns as list_columns
from . import present as p
from .queries import (PAGE_SIZE, Fetched, cluster_rows, last_deletion, fetch, namespace_cards, overview_namespaces, page_keys,
                      position, view_rows, view_totals)
from .scope import known_namespaces, list_scope, may_create_somewhere
from .share import page_principal, shared_namespaces, viewer_required

MAX_PAGE_SIZE = 5000
PAGE_SIZES = (50, 100, 500, 1000)   # the "Per page" choices


# ---------------------------------------------------------------------------------------------
# Shared helpers


def ws_url(view: str, rv: int | str | None, at: asof.At | None = None, **params: str) -> str:
    """The page's websocket address: what it shows and the revision it was rendered at ("": a
    page as of a past moment, `at`, has no socket, timetravel.py)."""
    if at is not None:
        return ""
    query = {"view": view, **{k: v for k, v in params.items() if v}}
    if not clusters.is_local():
        query["cluster"] = clusters.current()   # the socket follows the page's cluster
    if rv not in (None, ""):
        query["rv"] = str(rv)
    return "/ws/live/?" + urlencode(query)


def base_context(request, principal: Principal, active: str) -> dict:
    return {"principal": principal, "active": active, "server_now": p.iso(utcnow()),
            "share_link": getattr(request, "share_link", None),
            "heartbeat_ms": int(settings.KUBEDASH_LIVE_HEARTBEAT_SECONDS * 1000),   # live.js
            **timetravel.context(request)}   # ?at=: the banner and the time bar


def share_url(principal: Principal, kind: str, filters: "Filters") -> str:
    """The "Share this view" target, for those who may share this view (else ""): the link's
    scope (namespace, selector) and the view it opens (name search, order, size, page). A
    namespace-limited user on "All namespaces" shares their own namespaces (share.shared_namespaces)."""
    if shared_namespaces(principal, filters.namespace, kind) is None or kinds.by_kind(kind).form is None:
        return ""   # (nor a read-only feed: a share link opens a kind's pages)
    view = filters.query(page=str(filters.page) if filters.page > 1 else "", warnings="")   # (a link shares no warnings filter; `at` it keeps)
    return cluster_scope.in_cluster(f"/share/new/?kind={kind}" + (f"&{view}" if view else ""), at=filters.at)


@dataclass
class Filters:
    namespace: str = ""
    label_selector: str = ""
    q: str = ""
    state: str = ""     # a key of the kind's states
    columns: tuple = ()  # (param, value) of the kind's column filters (kinds.ColumnFilter)
    limit: int = PAGE_SIZE
    continue_token: str = ""
    sort: str = ""      # "" (namespace, name), "key" or "-key"
    page: int = 1       # of a sorted view
    warnings: str = ""  # "1h": only the objects with warnings in the last hour (web/warnings.py)
    default_sort: str = ""   # the list's order when the address names none (kinds.KindWeb.default_sort)
    chosen: tuple = ()  # the chosen columns (?columns=, web/columns.py; (): the kind's own)
    at: asof.At | None = None   # a page as of a past moment (?at=: the request's context, timetravel.py)

    # What is wrong with the address's view settings: (the filter field, what to say).
    errors: tuple = ()

    @classmethod
    def from_request(cls, request, web: kinds.KindWeb | None = None, at: asof.At | None = None) -> "Filters":
        """The view an address asks for. Each setting is one parameter (the last one, if
        repeated: views.canonical_redirect then drops the rest); a value that is no setting of
        this list (an unknown sort, a page size or page that is no number) is an error the
        page says, never silently another view. `at`: the page's past moment (the request's
        context's, timetravel.py; None: live)."""
        g = request.GET
        errors = []

        def last(name: str) -> str:
            return (g.getlist(name) or [""])[-1].strip()

        def number(name: str, what: str, default: int) -> int:
            text = last(name)
            if not text:
                return default
            if text.isdigit() and int(text) >= 1:
                return int(text)
            errors.append((name, f"{what}: “{text}” is not a number of at least 1."))
            return default

        limit, page = number("limit", "Per page", PAGE_SIZE), number("page", "Page", 1)
        sort = last("sort")
        if sort and web is not None and web.sort(sort.lstrip("-")) is None:
            known = ", ".join(s.key for s in web.all_sorts())
            errors.append(("sort", f"Sort: “{sort}” is not an order of this list (one of {known}, or -key for "
                                   "the reverse order)."))
            sort = ""
        state = last("state")
        if state and (web is None or web.state(state) is None):
            known = ", ".join(s.key for s in web.states) if web is not None else ""
            errors.append(("state", f"State: “{state}” is not a state of this list (one of {known})." if known
                                    else f"State: this list has no state filter (“{state}”)."))
            state = ""
        default = web.default_sort if web is not None else ""
        sort = sort or default
        if web is None or sort == "namespace":
            sort = ""   # the (namespace, name) order, read through continue tokens
        warned = last("warnings")
        if warned and warned != warnings.WINDOW_PARAM:
            errors.append(("warnings", f"Warnings: “{warned}” is not a window of this list (only "
                                       f"{warnings.WINDOW_PARAM}, the last hour)."))
            warned = ""
        columns = []
        for f in web.column_filters if web is not None else ():
            value = last(f.param)
            if value and f.choices and value not in f.choices:
                errors.append((f.param, f"{f.label}: “{value}” is not one of {', '.join(f.choices)}."))
            elif value:
                columns.append((f.param, value))
        chosen, wrong = list_columns.parse(web, g.getlist(list_columns.PARAM)) if web is not None else ((), "")
        if wrong:
            errors.append((list_columns.PARAM, wrong))
        return cls(namespace=last("namespace"), label_selector=last("labelSelector"), warnings=warned, chosen=chosen,
                   q=last("q"), state=state, columns=tuple(columns), limit=min(limit, MAX_PAGE_SIZE),
                   continue_token="" if sort else last("continue"), sort=sort, page=page if sort else 1,
                   default_sort=default, errors=tuple(errors), at=at)

    def canonical(self) -> str:
        """This view's one address (its query string): each setting once, defaults left out."""
        return self.query(page=str(self.page) if self.page > 1 else "", **{"continue": self.continue_token})

    @property
    def custom_limit(self) -> int | None:
        return self.limit if self.limit != PAGE_SIZE else None

    @property
    def active(self) -> bool:
        return bool(self.namespace or self.label_selector or self.q or self.warnings or self.state or self.columns)

    def query(self, **extra) -> str:
        """This page's filters as a query string (for links: next page, clear)."""
        params = {"namespace": self.namespace, "labelSelector": self.label_selector, "q": self.q,
                  "warnings": self.warnings, "state": self.state, **dict(self.columns),
                  "sort": self.sort or "namespace", list_columns.PARAM: ",".join(self.chosen)}
        if self.limit != PAGE_SIZE:
            params["limit"] = str(self.limit)
        params.update(timetravel.query_param(self.at))   # a page as of a past moment: its links stay there
        params.update(extra)
        if (params["sort"] or "namespace") == (self.default_sort or "namespace"):
            params["sort"] = ""   # the list's default order: no parameter
        return urlencode({k: v for k, v in params.items() if v})


def canonical_redirect(request, filters: Filters):
    """A redirect to the view's one address when this one says it another way (a setting
    repeated or empty, a default spelled out: `sort=&sort=expiry`, `limit=100`); else None."""
    given = sorted((k, v) for k, values in request.GET.lists() if k != cluster_scope.PARAM for v in values)
    canonical = filters.canonical()
    if given == sorted(parse_qsl(canonical)):
        return None
    return redirect(cluster_scope.in_cluster(request.path + (f"?{canonical}" if canonical else ""), at=filters.at))


def fetch_sorted(web: kinds.KindWeb, namespaces: list[str | None], selector, q: str, sort: str, page: int,
                 limit: int, now: datetime, keys: frozenset | None = None,
                 state: kinds.State | None = None) -> tuple[Fetched, int]:
    """A page of a sorted view (the objects, the revision read before them, no token) and the
    view's total. The objects are at least as new as the revision: live updates replayed
    from it can only repeat a change, never miss one."""
    rv = store.current_revision()
    found, total = page_keys(web, namespaces, selector, q, sort, page, limit, now, keys, state)
    texts = dict(revlog.with_current(web.resource.model.objects.filter(id__in=[k[0] for k in found]), "id"))
    return Fetched([orjson.loads(texts[k[0]]) for k in found if k[0] in texts], rv, ""), total


def sort_headers(web: kinds.KindWeb, sort: str) -> dict:
    """Per sort key: aria-sort ("ascending", "descending" or "") and the order its header
    button asks for (the reverse of the current one on the sorted column)."""
    current, desc = sort.lstrip("-") or "namespace", sort.startswith("-")
    out = {}
    for s in web.all_sorts():
        on = s.key == current
        out[s.key] = {"aria": ("descending" if desc else "ascending") if on else "",
                      "next": (s.key if desc else f"-{s.key}") if on else s.key, "label": s.label}
    return out


def forbidden_page(request, principal, active: str, namespace: str):
    ctx = base_context(request, principal, active)
    message = (f"You have no access to namespace “{namespace}”." if namespace and not principal.is_share
               else "This view is outside what you may see.")
    ctx.update(title="Not allowed", message=message)
    return render(request, "web/error.html", ctx, status=403)


# ---------------------------------------------------------------------------------------------
# List pages


@method_decorator(viewer_required, name="dispatch")
class KindListView(View):
    web: kinds.KindWeb | None = None   # set by the URLconf: KindListView.as_view(web=...)

    def get(self, request):
        page = self.web
        principal = page_principal(request)
        if all_clusters.wants_all(request):   # `?cluster=*`: the list across every cluster (issue 40)
            return all_clusters_list.list_page(request, page, principal, base_context(request, principal, page.plural),
                                               Filters)
        filters = Filters.from_request(request, page, request_context.of(request).at)
        if export.requested(request):   # ?format=csv|json|yaml: the whole view as a file
            return export.download(request, page, principal, filters)
        if not filters.errors:
            moved = canonical_redirect(request, filters)
            if moved is not None:
                return moved
        ctx = base_context(request, principal, page.plural)
        # list_search: "/" is this list's name search, not the header's (base.html says so)
        ctx.update(page=page, filters=filters, namespaces=known_namespaces(principal), items=[], error="", list_search=True,
                   state_options=[(s.key, s.label) for s in page.states],
                   column_filters=[(f, dict(filters.columns).get(f.param, "")) for f in page.column_filters],
                   page_sizes=PAGE_SIZES, default_limit=PAGE_SIZE, sorting=sort_headers(page, filters.sort),
                   sort_options=[(s.key, s.label) for s in page.all_sorts()])
        ctx.update(list_columns.page_context(page, filters, ctx))   # ?columns=: the cells, headers, sorts
        ctx["can_create"] = page.form is not None and may_create_somewhere(principal, filters.namespace, page.kind) \
            and filters.at is None
        if not ctx["can_create"] and not clusters.is_local():   # why not, in the read-only note
            ctx["write_refusal"] = scope.write_refusal(principal, "create", filters.namespace or None, page.kind)
        namespaces = list_scope(principal, filters.namespace, page.kind)
        if namespaces is None:
            return forbidden_page(request, principal, page.plural, filters.namespace)
        scope.remember_namespace(request, filters.namespace)
        if filters.errors:
            ctx["error_field"], ctx["error"] = filters.errors[0]
            ctx["first_page"] = "?" + filters.query()   # the same view without what was wrong
            return render(request, page.list_template, ctx, status=400)
        try:
            # A share link's own selector always applies; the visitor can only narrow it.
            selector = scope.narrow(principal, parse_label_selector(filters.label_selector))
        except ApiError as exc:
            ctx["error"] = f"Label selector: {exc.message}"
            ctx["error_field"] = "labelSelector"
            return render(request, page.list_template, ctx, status=400)
        # ?warnings=1h: the objects (existing, in this view) with warnings in the last hour.
        keys = warnings.warned_keys(page.kind, filters.at.moment if filters.at else utcnow(),
                                    namespaces) if filters.warnings else None
        state = page.view_filter(filters.state, dict(filters.columns))
        if filters.sort:
            return self.sorted(request, ctx, filters, namespaces, selector, principal, keys, state)
        try:
            fetched = fetch(page.kind, namespaces, selector, filters.q, filters.limit, filters.continue_token,
                            keys, state, at=filters.at)
        except ApiError as exc:
            # A garbage or compacted continue token: say so, and offer the first page.
            ctx["error"] = ("This page of results has expired; start again from the first page."
                            if exc.code == 410 else "This link's page position is not valid.")
            ctx["first_page"] = "?" + filters.query()
            return render(request, page.list_template, ctx, status=exc.code if exc.code in (400, 410) else 400)
        now = cluster_scope.moment(at=filters.at)
        ctx.update(p.page_context(page.kind, fetched.objects, now))
        warnings.annotate(page.kind, ctx["items"], now)
        ctx["rv"] = fetched.resource_version
        ctx["totals"] = view_totals(page, namespaces, selector, filters.q, now, keys, state)
        if fetched.next_token:
            ctx["next_url"] = "?" + filters.query(**{"continue": fetched.next_token})
        if filters.continue_token:
            ctx["first_page"] = "?" + filters.query()
        if fetched.next_token or filters.continue_token:
            # "Rows 51–100 of 1,004", and the previous page (same snapshot) when not the first.
            start = lists.decode_continue(filters.continue_token)[1:] if filters.continue_token else None
            where = position(page.kind, namespaces, selector, filters.q, start, filters.limit, keys, state)
            shown = len(fetched.objects)
            ctx["offset"] = where["before"]
            ctx["rows_from"] = f"{where['before'] + 1:,}" if shown else "0"
            ctx["rows_to"] = f"{where['before'] + shown:,}"
            ctx["rows_total"] = f"{max(where['total'], where['before'] + shown):,}"
            if filters.continue_token:
                prev = where["prev"]
                ctx["prev_url"] = "?" + (filters.query(**{"continue": lists.encode_continue(
                    fetched.resource_version, *prev)}) if prev else filters.query())
        paged = bool(fetched.next_token or filters.continue_token)
        rows = [o["metadata"] for o in fetched.objects]
        ctx["ws_url"] = ws_url(page.plural, fetched.resource_version, filters.at, namespace=filters.namespace,
                               labelSelector=filters.label_selector, q=filters.q, warnings=filters.warnings,
                               state=filters.state, **dict(filters.columns), paged="1" if paged else "", columns=",".join(filters.chosen),
                               first=f"{rows[0]['namespace']}/{rows[0]['name']}" if paged and rows else "",
                               last=f"{rows[-1]['namespace']}/{rows[-1]['name']}" if paged and rows else "",
                               offset=str(ctx.get("offset", "")))
        ctx["share_url"] = share_url(principal, page.kind, filters)
        ctx["exports"] = export.links(filters.query)
        return render(request, page.list_template, ctx)

    def sorted(self, request, ctx, filters: Filters, namespaces, selector, principal, keys, state):
        """A list in another order than (namespace, name): numbered pages of the current state."""
        page, now = self.web, cluster_scope.moment(at=filters.at)
        fetched, total = fetch_sorted(page, namespaces, selector, filters.q, filters.sort, filters.page,
                                      filters.limit, now, keys, state)
        ctx.update(p.page_context(page.kind, fetched.objects, now))
        warnings.annotate(page.kind, ctx["items"], now)
        ctx["rv"] = fetched.resource_version
        ctx["totals"] = view_totals(page, namespaces, selector, filters.q, now, keys, state)
        before, shown = (filters.page - 1) * filters.limit, len(fetched.objects)
        paged = total > filters.limit or filters.page > 1
        if paged:
            ctx["offset"] = before
            ctx["rows_from"] = f"{before + 1:,}" if shown else "0"
            ctx["rows_to"] = f"{before + shown:,}"
            ctx["rows_total"] = f"{total:,}"
        if before + shown < total:
            ctx["next_url"] = "?" + filters.query(page=str(filters.page + 1))
        if filters.page > 1:
            ctx["first_page"] = "?" + filters.query()
            ctx["prev_url"] = "?" + filters.query(page=str(filters.page - 1) if filters.page > 2 else "")
        ctx["ws_url"] = ws_url(page.plural, fetched.resource_version, filters.at, namespace=filters.namespace,
                               labelSelector=filters.label_selector, q=filters.q, warnings=filters.warnings,
                               state=filters.state, sort=filters.sort, **dict(filters.columns), columns=",".join(filters.chosen),
                               page=str(filters.page), limit=str(filters.limit), offset=str(ctx.get("offset", "")))
        ctx["share_url"] = share_url(principal, page.kind, filters)
        ctx["exports"] = export.links(filters.query)
        return render(request, page.list_template, ctx)


# ---------------------------------------------------------------------------------------------
# Detail pages


def yaml_download(obj: dict) -> HttpResponse:
    """The object as a file, as `kubectl get -o yaml` writes it (managedFields left out, as
    kubectl does by default)."""
    meta = obj["metadata"]
    resp = HttpResponse(p.object_yaml(obj), content_type="application/yaml; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="{meta["namespace"]}-{meta["name"]}.yaml"'
    resp["Cache-Control"] = "no-store"
    return resp


@method_decorator(viewer_required, name="dispatch")
class DetailView(View):
    web: kinds.KindWeb | None = None   # set by the URLconf: DetailView.as_view(web=...)

    def get(self, request, namespace: str, name: str):
        page = self.web
        principal = page_principal(request)
        if not principal.can("get", namespace, page.kind):
            return forbidden_page(request, principal, page.plural, namespace)
        at = request_context.of(request).at
        try:
            obj = store.get(page.resource, namespace, name) if at is None else shadowed(page, namespace, name)
        except ApiError as exc:
            if exc.code == 404:
                return deleted_page(request, principal, page, namespace, name)
            raise
        except Http404:   # (as of a past moment: not there then)
            return absent_page(request, principal, page, namespace, name)
        if not scope.sees(principal, page.kind, obj):
            # Outside a share link's selector: as if it did not exist.
            raise Http404(f"{page.kind} {namespace}/{name} not found")
        if request.GET.get("download") == "yaml":
            return yaml_download(obj)
        now = cluster_scope.moment(at=at)
        ctx = base_context(request, principal, page.plural)
        rv = obj["metadata"].get("resourceVersion", "")
        ctx.update(item=p.present(page.kind, obj, now), yaml=p.object_yaml(obj), rv=rv,
                   ws_url=ws_url(page.detail_view, rv, at, namespace=namespace, name=name),
                   # edit / delete / actions: the role, and on a followed cluster its write mode and
                   # what it answers an access review for this user (scope.write_refusal)
                   write_refusal=scope.write_refusal(principal, "update", namespace, page.kind)
                   if at is None else "This page is as of a past moment: nothing can be changed from it.")
        ctx["can_edit"] = ctx["write_refusal"] is None
        if page.detail_context is not None:
            ctx.update(page.detail_context(namespace, name, now, at))
        return render(request, page.detail_template, ctx)


def shadowed(web: kinds.KindWeb, namespace: str, name: str) -> dict:
    """The object as of the pinned moment (asof.pinned's rows; no process cache), or Http404."""
    hit = stored_rows.load_raw(web.resource, namespace, name)
    if hit is None:
        raise Http404(f"{web.kind} {namespace}/{name} did not exist then")
    return orjson.loads(hit[1])


def absent_page(request, principal: Principal, web: kinds.KindWeb, namespace: str, name: str):
    """A detail page as of a moment the object did not exist (not yet, or deleted by then): 404,
    with its History (which knows when it existed)."""
    ctx = base_context(request, principal, web.plural)
    ctx.update(title=f"{web.kind} {namespace}/{name} did not exist then",
               message=f"{web.kind} {namespace}/{name} did not exist at {ctx['at_clock']} (not yet created, or "
                       "deleted by then). Its History shows when it did.",
               history_url=cluster_scope.in_cluster(f"{web.detail_url(namespace, name)}history/",
                                                    at=request_context.of(request).at))
    return render(request, "web/error.html", ctx, status=404)


def deleted_page(request, principal: Principal, web: kinds.KindWeb, namespace: str, name: str):
    """A deleted object's address: when it was deleted, its last known YAML (the revision log),
    and, for those who may create it, "Create it again" (bulk_views.restore). 404 all the same;
    a plain 404 when the log does not know it (or a share link's selector does not cover it)."""
    found = last_deletion(web, namespace, name)
    if found is None or not scope.sees(principal, web.kind, found[0]):
        raise Http404(f"{web.kind} {namespace}/{name} not found")
    obj, when = found
    now = utcnow()
    ctx = base_context(request, principal, web.plural)
    ctx.update(web=web, namespace=namespace, name=name, yaml=p.object_yaml(obj), deleted_at=p.iso(when),
               deleted_clock=p.clock(when), deleted_ago=p.age(when, now),
               list_url=cluster_scope.in_cluster(f"{web.list_url}?namespace={namespace}"),
               restore_url=f"{web.list_url}{namespace}/{name}/restore/",
               can_restore=scope.write_refusal(principal, "create", namespace, web.kind) is None)
    return render(request, "web/deleted.html", ctx, status=404)


# ---------------------------------------------------------------------------------------------
# Search across kinds

SEARCH_SHOWN = 50   # results shown per kind (all of one kind's: ?kind=<Kind>, up to SEARCH_ALL)
SEARCH_ALL = 5000


def search_kind(web: kinds.KindWeb, principal: Principal, term: str, shown: int = SEARCH_SHOWN,
                namespace: str = "") -> dict | None:
    """One kind's part of the search: objects whose name, namespace, a label (key, value or
    "key=value") or one of the kind's search columns contain `term` (case-insensitive),
    within what the principal may list (and `namespace`, when one is chosen); None when it may
    list none of this kind there."""
    namespaces = list_scope(principal, namespace, web.kind)
    if namespaces is None:
        return None
    rows, _ = view_rows(web.kind, namespaces, None, "")
    needle = term.lower()
    match = Q(name__icontains=term) | Q(namespace__icontains=term) | Q(labels__icontains=term.split("=")[0])
    for column, _label in web.search_columns:
        match |= Q(**{f"{column}__icontains": term})
    own = scope.own_selector(principal)
    found = []
    extra = [c for c, _ in web.search_columns]
    for ns, name, labels, *values in rows.filter(match).order_by("namespace", "name").values_list(
            "namespace", "name", "labels", *extra):
        if own is not None and not own.matches(labels):
            continue
        why = [what for what, text in (("name", name), ("namespace", ns)) if needle in text.lower()]
        why += [f"label {k}={v}" for k, v in sorted(labels.items())
                if needle in k.lower() or needle in v.lower() or needle == f"{k}={v}".lower()
                or (("=" in needle) and f"{k}={v}".lower().startswith(needle))]
        why += [f"{label} {value}" for (_, label), value in zip(web.search_columns, values)
                if value and needle in str(value).lower()]
        if why:   # (the labels' JSON text can match on its punctuation alone)
            found.append({"namespace": ns, "name": name, "url": web.detail_url(ns, name), "why": why})
    return {"web": web, "total": len(found), "items": found[:shown], "shown": min(shown, len(found)),
            "all_url": "/search/?" + urlencode({"q": term, "kind": web.kind, **({"namespace": namespace} if namespace else {})})}


@method_decorator(viewer_required, name="dispatch")
class SearchView(View):
    def get(self, request):
        principal = page_principal(request)
        term = (request.GET.get("q") or "").strip()[:253]
        # ?namespace=: the search within one namespace (the one the pages follow: base.html).
        namespace = (request.GET.get("namespace") or "").strip()
        if namespace and not principal.can("list", namespace):
            return forbidden_page(request, principal, "search", namespace)
        scope.remember_namespace(request, namespace)
        ctx = base_context(request, principal, "search")
        # ?kind=<Kind>: every match of that kind (the "Show all" link of its section).
        only = kinds.by_kind(request.GET.get("kind") or "")
        searched = [only] if only else kinds.registered()
        shown = SEARCH_ALL if only else SEARCH_SHOWN
        groups = [g for g in (search_kind(web, principal, term, shown, namespace) for web in searched) if g] \
            if term else []
        in_ns = {"namespace": namespace} if namespace else {}
        ctx.update(term=term, groups=groups, found=sum(g["total"] for g in groups), only=only, namespace=namespace,
                   namespaces=known_namespaces(principal),
                   all_kinds_url=cluster_scope.in_cluster("/search/?" + urlencode({"q": term, **in_ns})),
                   all_namespaces_url=cluster_scope.in_cluster("/search/?" + urlencode(
                       {"q": term, **({"kind": only.kind} if only else {})})))
        return render(request, "web/search.html", ctx)


# ---------------------------------------------------------------------------------------------
# Overview


@login_required
@require_safe
def overview(request):
    principal = page_principal(request)
    if principal.is_share:   # all kinds at once: never part of a shared view
        return forbidden_page(request, principal, "overview", "")
    if all_clusters.wants_all(request):   # `/?cluster=*`: every cluster at once (issue 40)
        return all_clusters.overview(request, principal, base_context(request, principal, "overview"))
    namespace = (request.GET.get("namespace") or "").strip()
    if namespace and not principal.can("list", namespace):
        return forbidden_page(request, principal, "overview", namespace)
    scope.remember_namespace(request, namespace)
    # The revision first: the cards show at least this state, so replaying events after it
    # can only repeat a change, never miss one.
    rv = store.current_revision()
    at = request_context.of(request).at
    now = cluster_scope.moment(at=at) if at is not None else utcnow()
    only = overview_namespaces(principal, namespace)
    cards = namespace_cards(cluster_scope.moment(now, at=at), only)
    ctx = base_context(request, principal, "overview")
    ctx.update(cards=cards, rv=rv, filters=Filters(namespace=namespace), namespaces=known_namespaces(principal),
               ws_url=ws_url("overview", rv, at, namespace=namespace),
               totals=p.overview_totals(cards),
               warnings=warnings.overview(cluster_scope.moment(now, at=at), only, namespace),
               cluster_rows=cluster_rows(principal, now, cards, namespace, at))
    return render(request, "web/overview.html", ctx)

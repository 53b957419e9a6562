"""What changed between two moments: /changes/?from=…&to=… (issue 38).

Every object created, changed or deleted in (from, to], grouped by object: the field-level diff
from its state at `from` to its state at `to` (the History page's diff, web/history.py), the
managers that wrote it in between (managedFields), how many revisions lay between, and links to
its page at `from` and at `to`. Filters: the lists' namespace, labelSelector (matched against
either end), kind, name, and ?cluster= (the page runs within its cluster, cluster_scope.py);
paged by object. Counts at the top come from each kind's change_facts (kinds.KindWeb). `from`
and `to` take what `?at=` takes (an RFC 3339 time or rv:N, web/timetravel.py); `to` unset is now.
"""
from __future__ import annotations

from urllib.parse import urlencode

import orjson
from django.db.models import Count, Max
from django.shortcuts import render
from django.views.decorators.http import require_safe

from dashboard.access import clusters
from dashboard.kube import asof, store
from dashboard.kube.errors import ApiError
from dashboard.kube.models import Revision
from dashboard.kube.selectors import parse_label_selector

from . import cluster_scope, history, kinds, scope, timetravel
from .present import clock
from .share import page_principal, viewer_required
from .views import base_context, forbidden_page

PAGE = 50   # objects per page
GENERIC = ("created", "changed", "deleted", "came and went")   # counted after the kinds' own facts


def _moment(text: str, default_now: bool):
    """(revision, time, the parameter as given) of `from` / `to`."""
    if not text and default_now:
        rv = store.current_revision()
        return rv, asof.written_at(rv), ""
    at = timetravel.parse(text)
    return at.rv, at.moment, at.asked


def writers(before: dict | None, after: dict | None) -> list[dict]:
    """The managers whose managedFields entry is new or was re-stamped between the two states."""
    was, now = history._entries(before), history._entries(after)
    moved = [e for key, e in now.items() if key not in was or was[key].get("time") != e.get("time")]
    seen, out = set(), []
    for e in sorted(moved, key=lambda e: e.get("time") or ""):
        who = history._who(e)
        if who["manager"] not in seen:
            seen.add(who["manager"])
            out.append(who)
    return out


@viewer_required
@require_safe
def changes(request):
    principal = page_principal(request)
    g = request.GET
    ctx = base_context(request, principal, "changes")
    namespace, kind, name = g.get("namespace", "").strip(), g.get("kind", "").strip(), g.get("name", "").strip()
    selector_text = g.get("labelSelector", "").strip()
    page = int(g["page"]) if g.get("page", "").isdigit() and int(g["page"]) >= 1 else 1
    ctx.update(namespace=namespace, kind=kind, name=name, selector=selector_text, from_text=g.get("from", ""),
               to_text=g.get("to", ""), kind_options=[w.kind for w in kinds.registered()], groups=[], counts=[])
    webs = [w for w in kinds.registered() if not kind or w.kind == kind]
    if not webs:
        ctx["error"] = f"kind: “{kind}” is not one of {', '.join(ctx['kind_options'])}."
        return render(request, "web/changes.html", ctx, status=400)
    if namespace and not principal.can("list", namespace):
        return forbidden_page(request, principal, "changes", namespace)
    try:
        selector = scope.narrow(principal, parse_label_selector(selector_text))
        if not g.get("from"):
            raise timetravel.BadAt("from: the window's start is required (an RFC 3339 time or rv:N).")
        start, start_at, start_text = _moment(g["from"], False)
        end, end_at, end_text = _moment(g.get("to", ""), True)
    except timetravel.BadAt as exc:
        ctx["error"] = str(exc)
        return render(request, "web/changes.html", ctx, status=400)
    except ApiError as exc:
        ctx["error"] = f"Label selector: {exc.message}"
        return render(request, "web/changes.html", ctx, status=400)
    if end < start:
        ctx["error"] = "The window ends before it starts: `to` must be after `from`."
        return render(request, "web/changes.html", ctx, status=400)

    written = Revision.objects.filter(rv__gt=start, rv__lte=end, kind__in=[w.kind for w in webs])
    if namespace:
        written = written.filter(namespace=namespace)
    elif principal.namespaces:
        written = written.filter(namespace__in=list(principal.namespaces))
    if name:
        written = written.filter(name=name)
    keys = list(written.values("kind", "namespace", "name").annotate(n=Count("rv"), last=Max("rv"))
                .order_by("kind", "namespace", "name"))

    states, cluster = {}, clusters.current()   # kind -> (texts at the start, texts at the end), by (namespace, name)
    for web in webs:
        if any(k["kind"] == web.kind for k in keys):
            states[web.kind] = tuple({(ns, n): text for c, ns, n, _, text in asof.state_at(web.kind, rv)
                                      if c == cluster} for rv in (start, end))
    found, facts = [], {}
    for key in keys:
        web = kinds.by_kind(key["kind"])
        before_text, after_text = (side.get((key["namespace"], key["name"])) for side in states[web.kind])
        before = orjson.loads(before_text) if before_text else None
        after = orjson.loads(after_text) if after_text else None
        either = after or before
        if not principal.can("get", key["namespace"], web.kind):
            continue
        if selector is not None and not selector.empty and not any(
                selector.matches(((o or {}).get("metadata") or {}).get("labels") or {}) for o in (before, after)):
            continue
        if either is not None and not scope.sees(principal, web.kind, either):
            continue
        what = ("created" if before is None and after is not None else "deleted" if after is None and before is not None
                else "changed" if before is not None else "came and went")
        for fact in (web.change_facts(before, after) if web.change_facts else []) + [what]:
            facts[(web.kind, fact)] = facts.get((web.kind, fact), 0) + 1
        found.append((web, key, before, after, what))

    def link(web, key, rv_text: str, present: bool) -> str:
        url = web.detail_url(key["namespace"], key["name"]) if present else \
            f"{web.detail_url(key['namespace'], key['name'])}history/"
        return cluster_scope.in_cluster(url + (f"?{urlencode({'at': rv_text})}" if rv_text else ""))

    shown = found[(page - 1) * PAGE:page * PAGE]
    for web, key, before, after, what in shown:
        ctx["groups"].append({
            "kind": web.kind, "namespace": key["namespace"], "name": key["name"], "what": what,
            "revisions": key["n"], "changes": history.diff(before, after) if before and after else [],
            "writers": writers(before, after) if after is not None else [],
            "facts": web.change_facts(before, after) if web.change_facts else [],
            "from_url": link(web, key, f"rv:{start}", before is not None),
            "to_url": link(web, key, f"rv:{end}" if end_text else "", after is not None),
        })
    order = {w.kind: i for i, w in enumerate(kinds.registered())}
    ctx["counts"] = [f"{n} {kinds.by_kind(k).noun if n == 1 else kinds.by_kind(k).list_noun} {fact}"
                     for (k, fact), n in sorted(facts.items(), key=lambda kv: (order[kv[0][0]], kv[0][1] in GENERIC, -kv[1]))]
    base = {k: v for k, v in (("from", start_text), ("to", end_text), ("namespace", namespace), ("kind", kind),
                              ("name", name), ("labelSelector", selector_text)) if v}
    ctx.update(start_rv=start, end_rv=end, start_clock=clock(start_at) if start_at else "",
               end_clock=clock(end_at) if end_at else "", total=len(found), page=page,
               first_row=(page - 1) * PAGE + 1, last_row=(page - 1) * PAGE + len(shown))
    if page * PAGE < len(found):
        ctx["next_url"] = "?" + urlencode({**base, "page": page + 1})
    if page > 1:
        ctx["prev_url"] = "?" + urlencode({**base, **({"page": page - 1} if page > 2 else {})})
    return render(request, "web/changes.html", ctx)

"""What changed between two moments: /changes/?from=…&to=… (issue 38).

Every object created, changed or deleted in (from, to], grouped by object: the field-level diff
from its state at `from` to its state at `to` (the History page's diff, web/history.py), the
managers that wrote it in between (managedFields), how many revisions lay between, and links to
its page at `from` and at `to`. Filters: the lists' namespace, labelSelector (matched against
either end), kind, name, and ?cluster= (the page runs within its cluster, cluster_scope.py);
paged by object. Counts at the top come from each kind's change_facts (kinds.KindWeb). `from`
and `to` take what `?at=` takes (an RFC 3339 time or rv:N, web/timetravel.py); `to` unset is now.

Streamed (a StreamingHttpResponse, sent piece by piece by the server's lanes as a whole list is):
the page's head, then each row as soon as it is found, key by key; the counts, the totals and
the pager once the whole window is walked (the counts are sent last and shown at the top by the
stylesheet). Every error is answered before the first byte.
"""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

import orjson
from django.http import StreamingHttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_safe

from dashboard.access import clusters
from dashboard.kube import asof, revlog, store, yielding
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
               to_text=g.get("to", ""), kind_options=[w.kind for w in kinds.registered()])
    webs = sorted((w for w in kinds.registered() if not kind or w.kind == kind), key=lambda w: w.kind)
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

    ctx.update(start_rv=start, end_rv=end, start_clock=clock(start_at) if start_at else "",
               end_clock=clock(end_at) if end_at else "")
    # The page around its rows, rendered now (the request's context); the rows and the summary
    # (counts, totals, pager: known once the whole window is walked) follow as they are found.
    head, rest = render_to_string("web/changes.html", ctx, request).split(ROWS_MARK)
    middle, tail = rest.split(SUMMARY_MARK)
    window = Window(principal=principal, cluster=clusters.current(), webs=webs, start=start, end=end,
                    end_text=end_text, selector=selector, name=name,
                    namespaces=[namespace] if namespace else list(principal.namespaces or ()))
    base = {k: v for k, v in (("from", start_text), ("to", end_text), ("namespace", namespace), ("kind", kind),
                              ("name", name), ("labelSelector", selector_text)) if v}
    response = StreamingHttpResponse(_page(window, page, base, head, middle, tail), content_type="text/html; charset=utf-8")
    response["Cache-Control"] = "no-store"   # (not `compressible`: gzip would hold the first rows back)
    return response


ROWS_MARK, SUMMARY_MARK = "<!--kubedash:rows-->", "<!--kubedash:summary-->"   # (web/changes.html, streamed)


@dataclass
class Window:
    """What /changes/ walks: the window (start, end], its filters and who asks."""
    principal: object
    cluster: str
    webs: list
    start: int
    end: int
    end_text: str
    selector: object
    name: str
    namespaces: list


def _found(w: Window):
    """(web, namespace, name, revisions between, before, after, what) of every object written in
    the window that the viewer may see and the filters keep, in (kind, namespace, name) order,
    one at a time: each key of the kind that may have been written since the start
    (revlog.keys_written_since) is asked how many revisions it has in the window (revlog.key_window:
    index ranges, not the rows: an hour of 1,000 Leases renewing every 2 s is 1.8 M of them), and only those
    written in it read at both ends. Long walks let the fast lane go first (kube/yielding.py)."""
    for web in w.webs:
        table = web.resource.model._meta.db_table
        with clusters.within(w.cluster):   # (no yield inside: the body is read on another thread, piece by piece)
            keys = revlog.keys_written_since(web.kind, table, w.cluster, w.start, w.namespaces, w.name)
        for i, (ns, name) in enumerate(keys):
            yielding.every(i)
            if not w.principal.can("get", ns, web.kind):
                continue
            revisions, newest, then = revlog.key_window(web.kind, w.cluster, ns, name, w.start, w.end)
            if not revisions:
                continue
            texts = revlog.logged((then, newest), (w.cluster, web.kind, ns, name))
            before, after = (orjson.loads(texts[rv][1]) if rv in texts and texts[rv][0] != Revision.DELETED else None
                             for rv in (then, newest))
            if w.selector is not None and not w.selector.empty and not any(
                    w.selector.matches(((o or {}).get("metadata") or {}).get("labels") or {}) for o in (before, after)):
                continue
            either = after or before
            if either is not None and not scope.sees(w.principal, web.kind, either):
                continue
            what = ("created" if before is None and after is not None else "deleted" if after is None and before is not None
                    else "changed" if before is not None else "came and went")
            yield web, ns, name, revisions, before, after, what


def _group(w: Window, web, ns: str, name: str, revisions: int, before, after, what: str, facts: list) -> dict:
    def link(rv_text: str, present: bool) -> str:
        url = web.detail_url(ns, name) if present else f"{web.detail_url(ns, name)}history/"
        return cluster_scope.in_cluster(url + (f"?{urlencode({'at': rv_text})}" if rv_text else ""))

    return {"kind": web.kind, "namespace": ns, "name": name, "what": what, "revisions": revisions,
            "changes": history.diff(before, after) if before and after else [],
            "writers": writers(before, after) if after is not None else [], "facts": facts,
            "from_url": link(f"rv:{w.start}", before is not None),
            "to_url": link(f"rv:{w.end}" if w.end_text else "", after is not None)}


def _page(w: Window, page: int, base: dict, head: str, middle: str, tail: str):
    """The page's body, piece by piece: its head, each row of the page as soon as it is found,
    then (once the whole window is walked) the counts, the totals and the pager."""
    yield head.encode()
    first, last = (page - 1) * PAGE + 1, page * PAGE
    total, facts = 0, {}
    for web, ns, name, revisions, before, after, what in _found(w):
        total += 1
        own = web.change_facts(before, after) if web.change_facts else []
        for fact in own + [what]:
            facts[(web.kind, fact)] = facts.get((web.kind, fact), 0) + 1
        if first <= total <= last:
            with clusters.within(w.cluster):   # (its links: cluster_scope.in_cluster; no yield inside)
                row = render_to_string("web/changes.html#group", {"g": _group(w, web, ns, name, revisions, before,
                                                                              after, what, own)})
            yield row.encode()
    order = {web.kind: i for i, web in enumerate(kinds.registered())}
    summary = {"total": total, "first_row": first, "last_row": min(last, total), "counts": [
        f"{n} {kinds.by_kind(k).noun if n == 1 else kinds.by_kind(k).list_noun} {fact}"
        for (k, fact), n in sorted(facts.items(), key=lambda kv: (order[kv[0][0]], kv[0][1] in GENERIC, -kv[1]))]}
    if last < total:
        summary["next_url"] = "?" + urlencode({**base, "page": page + 1})
    if page > 1:
        summary["prev_url"] = "?" + urlencode({**base, **({"page": page - 1} if page > 2 else {})})
    with clusters.within(w.cluster):
        end = middle + render_to_string("web/changes.html#summary", summary) + tail
    yield end.encode()

"""A detail page's History and Field owners views (/<plural>/<namespace>/<name>/history/ and
/fields/), and their live fragments (web/live.py calls live_fragment for a page whose websocket
says tab=history or tab=fields).

Both read the object from the revision log, so they work for a deleted object too (its
deletion is its newest revision) as long as the log still holds it. Access is the detail
page's: the namespace for users, the link's kind, namespace and selector for share links.
"""
from __future__ import annotations

import functools

from django.http import Http404
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_safe

from dashboard.kube import context, revlog, store

from . import history, kinds, scope
from .live_page import PageView
from .present import detail_url
from .share import page_principal, viewer_required
from .views import base_context, forbidden_page, ws_url

HISTORY, FIELDS = kinds.DETAIL_TABS


def _head(web: kinds.KindWeb, namespace: str, name: str) -> dict:
    return {"kind": web.kind, "namespace": namespace, "name": name, "url": detail_url(web.kind, namespace, name)}


def _context(request, web, namespace: str, name: str, tab: str):
    """(principal, context, newest logged revision) or an error response."""
    principal = page_principal(request)
    if not principal.can("get", namespace, web.kind):
        return forbidden_page(request, principal, web.plural, namespace)
    rv = store.current_revision()   # before the log read: live pushes start after it
    at = context.of(request).at   # as of a past moment (?at=): the object's revisions up to then
    newest = history.latest(web.kind, namespace, name) if at is None else \
        next(iter(revlog.object_revisions(web.kind, namespace, name, 1, before=at.rv + 1)), None)
    if newest is None or not scope.sees(principal, web.kind, newest[2]):
        raise Http404(f"{web.kind} {namespace}/{name} not found")
    ctx = base_context(request, principal, web.plural)
    ctx.update(item=_head(web, namespace, name), tab=tab, web=web,
               deleted=newest[1] == revlog.DELETED)
    return principal, ctx, max(rv, newest[0]), newest


def tab_view(tab: str):
    """A detail page's tab view: for viewers who may see the object, called with what
    _context found (principal, context, revision, newest logged revision); else its refusal."""

    def decorate(view):
        @viewer_required
        @require_safe
        @functools.wraps(view)
        def wrapper(request, namespace: str, name: str, web: kinds.KindWeb):
            got = _context(request, web, namespace, name, tab)
            if not isinstance(got, tuple):
                return got
            return view(request, namespace, name, web, *got)

        return wrapper

    return decorate


@tab_view(HISTORY)
def history_view(request, namespace: str, name: str, web: kinds.KindWeb, principal, ctx, rv, newest):
    before = request.GET.get("before", "")
    show = request.GET.get("show", "")
    show = show if show in history.SHOW else ""
    at = context.of(request).at
    before = int(before) if before.isdigit() else None
    if at is not None:   # as of a past moment: nothing written after it
        before = min(before or at.rv + 1, at.rv + 1)
    page = history.history_page(web.kind, namespace, name, lambda o: scope.sees(principal, web.kind, o),
                                before=before)
    if page is None:
        raise Http404(f"no history of {web.kind} {namespace}/{name}")
    timeline = kinds.timeline()
    if timeline is not None:   # one timeline: the object's Events among its revisions
        happenings = timeline.entries(web.kind, namespace, name, None)
        if at is not None:
            happenings = [e for e in happenings if e["rv"] <= at.rv]
        page["entries"] = history.timeline_page(page, happenings, show)
    ctx.update(history=page, rv=rv, show=show, timeline=timeline is not None)
    if not page["paged"]:   # the newest page follows new revisions; an older one stays as it is
        ctx["ws_url"] = ws_url(web.detail_view, rv, at, namespace=namespace, name=name, tab=HISTORY, show=show)
    return render(request, "web/_history.html", ctx)


@tab_view(FIELDS)
def fields_view(request, namespace: str, name: str, web: kinds.KindWeb, principal, ctx, rv, newest):
    ctx.update(owners=history.field_owners(newest[2], web.kind), rv=rv,
               ws_url=ws_url(web.detail_view, rv, context.of(request).at, namespace=namespace, name=name, tab=FIELDS))
    return render(request, "web/_field_owners.html", ctx)


def live_fragment(view: PageView, kind: str, obj: dict | None, since: int) -> tuple[str, int]:
    """What a History or Field owners page is pushed when its object changed, and the newest
    revision the page shows then: the revisions written after `since` (the newest it showed),
    prepended, or the re-annotated YAML."""
    if view.tab == HISTORY:
        selector = view.label_selector   # the viewer's scope: already narrowed by a share link's selector

        def visible(o):
            return selector is None or selector.matches((o.get("metadata") or {}).get("labels") or {})

        kind = view.kinds[0]   # (a change of an Event about the object comes here too)
        entries = history.newer_entries(kind, view.namespace, view.name, visible, since)
        timeline = kinds.timeline()
        happenings = timeline.entries(kind, view.namespace, view.name, since) if timeline is not None else []
        if not entries and not happenings:
            return "", since
        reached = max([since] + [e["rv"] for e in entries + happenings])
        shown = history.merge(entries, happenings, view.show)
        # An Event seen again (count + 1) moves to the top: its old entry goes first.
        moved = "".join(f'<li id="event-{e["key"]}" hx-swap-oob="delete"></li>' for e in happenings)
        if not shown:
            return moved, reached
        entries = [e for e in entries if e in shown]
        html = render_to_string("web/_history.html#entries", {"entries": shown})
        # The page keeps the newest PAGE revisions (a Lease renewed every 2 s would otherwise
        # grow it without end): those pushed off the bottom go, and "Older revisions" moves.
        off = revlog.revision_numbers(kind, view.namespace, view.name, len(entries) + 1, offset=history.PAGE - 1)
        gone = "".join(f'<li id="rev-{rv}" hx-swap-oob="delete"></li>' for rv in off[1:])
        total = revlog.count_revisions(kind, view.namespace, view.name)
        tail = render_to_string("web/_history.html#count", {"oob": "true", "history": {"total": total}})
        if len(off) > 1:
            tail += render_to_string("web/_history.html#pager", {"oob": "true", "history": {"older": off[0]}})
        return f'{moved}<div hx-swap-oob="afterbegin:#history-entries">{html}</div>{gone}{tail}', reached
    newest = history.latest(kind, view.namespace, view.name)
    owners = history.field_owners(newest[2], kind) if newest else {"lines": [], "managers": [], "recorded": False}
    deleted = newest is None or newest[1] == revlog.DELETED
    html = render_to_string("web/_field_owners.html#owners", {"owners": owners, "deleted": deleted, "oob": "true"})
    return html, since

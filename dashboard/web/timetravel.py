"""`?at=` on the pages (issue 38): every page as of a past moment, read-only.

`at` is an RFC 3339 time (`2026-11-28T03:12:00Z`) or a revision (`rv:12345`). The Overview,
the lists (every filter, sort and page), the detail pages, History and Field owners run within
kube/asof.pinned: the typed tables show the state at that revision, rebuilt from the revision
log. The request's context carries the moment (kube/context.py RequestContext.at): the views
hand it to what reads it, cluster_scope.moment(at=) the first (time-derived states: a Lease held
or expired, its countdown, ages, a Job's duration), and put it in the templates' context (`at`,
which the template tags read). The page has no socket, no write button, and a banner "As
of <time> — not live" with "Back to now". Every write route refuses a request carrying `at`
(400), whatever its method; the share form keeps it (the shared view is as of then).
"""
from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpResponse
from django.urls import Resolver404, resolve

from dashboard.access import clusters
from dashboard.kube import asof, context as request_context, revlog, store
from dashboard.kube.formats import parse_time
from dashboard.kube.meta import now as utcnow

from . import cluster_scope, kinds

PARAM = "at"
RV_FORM = re.compile(r"^rv:(\d{1,18})$")

# The write routes (edit_urls.py, urls.py's bulk and restore): refused with `at`, even their
# GET forms (a form shown as of then would write now).
WRITE_ROUTES = {"object_new", "object_edit", "object_yaml", "object_delete", "object_actions",
                "bulk", "bulk_undo", "object_restore"}


# Forms that carry `at` on: "Share this view" (the shared view is as of then).
KEEPS_AT = {"share_new"}


def write_routes() -> set[str]:
    """WRITE_ROUTES and every kind's one-click actions."""
    return WRITE_ROUTES | {a.route for web in kinds.registered() for a in web.actions}


class BadAt(ValueError):
    """An `at` that names no moment kubedash can show (the message says why)."""


def parse(text: str, now: datetime | None = None) -> asof.At:
    """The moment `at` names: its revision (the newest written by then) and its time."""
    now = now or utcnow()
    text = text.strip()
    match = RV_FORM.match(text)
    if match:
        rv = int(match.group(1))
        if rv > store.current_revision():
            raise BadAt(f"Revision {rv} has not been written yet (the newest is {store.current_revision()}).")
        moment = asof.written_at(rv)
        if moment is None:
            raise BadAt(f"Revision {rv} is before the history kubedash keeps (KUBEDASH_HISTORY_SECONDS).")
    else:
        moment = parse_time(text) if re.match(r"^\d{4}-\d\d-\d\dT", text) else None
        if moment is None:
            raise BadAt(f"“{text}” is neither an RFC 3339 time (2026-11-28T03:12:00Z) nor a revision (rv:12345).")
        if moment > now:
            raise BadAt(f"{text} is in the future.")
        rv = asof.newest_at(moment)
    horizon = history_horizon()
    if rv < horizon[0] or (rv == 0 and horizon[1] is not None):
        when = horizon[1].strftime("%Y-%m-%d %H:%M:%S UTC") if horizon[1] else "its oldest revision"
        raise BadAt(f"{text} is before the history kubedash keeps (from {when}: KUBEDASH_HISTORY_SECONDS).")
    return asof.At(rv=rv, moment=moment, asked=text)


def history_horizon() -> tuple[int, datetime | None]:
    """(revision, time) the pages' history starts after: what compaction dropped for good."""
    return revlog.history_horizon()


def thinned_until() -> datetime | None:
    """Until when renewal-only revisions may have been thinned (None: nothing thinned)."""
    return revlog.thinned_until()


def travel_routes() -> set[str]:
    return kinds.page_route_names() | {web.plural for web in kinds.feeds()} | {"overview"}


def refusal(status: int, message: str) -> HttpResponse:
    return HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")


class TimeTravelMiddleware:
    """Runs a page request carrying `at` within asof.pinned; refuses write routes carrying it.
    (Sync only: the shadow tables belong to the request thread's connection, which the view uses.)"""

    sync_capable, async_capable = True, False

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not cluster_scope.is_page(request.path_info):
            return self.get_response(request)   # (the API ignores unknown parameters, `at` too)
        text = request.GET.get(PARAM, "")
        if not text and request.method == "POST" and request.content_type in ("application/x-www-form-urlencoded",
                                                                             "multipart/form-data"):
            text = request.POST.get(PARAM, "")
        if not text:
            return self.get_response(request)
        try:
            route = resolve(request.path_info).url_name or ""
        except Resolver404:
            return self.get_response(request)
        if route in write_routes() or (request.method not in ("GET", "HEAD") and route not in KEEPS_AT):
            return refusal(400, "This page is as of a past moment (?at=): nothing can be changed from it. "
                                "Go back to now to make changes.")
        if route not in travel_routes():
            return self.get_response(request)
        try:
            at = parse(text)
        except BadAt as exc:
            return refusal(400, f"at: {exc}")
        ctx = request_context.of(request)
        ctx.at = at
        try:
            with asof.pinned(at):
                return self.get_response(request)
        finally:
            ctx.at = None   # (what runs after the block reads the live tables; a streamed body pins itself)


def context(request) -> dict:
    """The banner's and time bar's context (base.html, web/_timebar.html): none on a page that
    does not travel (search, tokens, share links, /changes/ itself)."""
    at = request_context.of(request).at
    try:
        if at is None and (resolve(request.path_info).url_name or "") not in travel_routes():
            return {}
    except Resolver404:
        return {}
    back = request.GET.copy()
    back.pop(PARAM, None)
    for key in ("continue", "page"):   # (a page position belongs to its snapshot)
        back.pop(key, None)
    live = request.GET.copy()
    live.pop(PARAM, None)
    out = {"timebar": True, "timebar_live": request.path + (f"?{live.urlencode()}" if live else ""),
           "timebar_path": cluster_scope.in_cluster(request.path, at=at),   # (a GET form: its fields replace this query)
           "timebar_fields": [(k, v) for k, values in back.lists() for v in values],
           "timebar_presets": [(label, _moved(request, back, ago(seconds)))
                               for label, seconds in (("5 min ago", 300), ("1 h ago", 3600), ("1 day ago", 86400))]}
    newest = store.current_revision()
    shown = _shown(request)
    prev_rv, next_rv = revlog.neighbours(at.rv if at is not None else newest + 1, **shown)
    if at is None and prev_rv:   # (live: the previous change is the state before the newest one)
        prev_rv = revlog.neighbours(prev_rv, **shown)[0]
    if prev_rv:
        out["timebar_prev"] = _moved(request, back, f"rv:{prev_rv}")
    if next_rv and at is not None:
        out["timebar_next"] = _moved(request, back, f"rv:{next_rv}")
    out.update(_slider(at, shown))
    since = (at.moment if at is not None else utcnow()) - timedelta(hours=1)
    out["changes_query"] = urlencode({"from": since.strftime("%Y-%m-%dT%H:%M:%SZ"),
                                      "to": at.asked if at is not None else "",
                                      **{k: v for k, v in back.items() if k in ("namespace", "labelSelector")}})
    followed = None if clusters.is_local() else cluster_scope.followed(clusters.current())
    if followed is not None:   # the spans in which kubedash was not following it, on the slider
        out["timebar_gaps"] = _gaps(followed, out["slider_min"], out["slider_max"])
    if at is None:
        return out
    if followed is not None:   # nothing is known of it before kubedash followed it, nor in a gap
        gap = followed.gap_at(at.moment)
        if at.moment < followed.created:
            out["not_followed"] = (f"kubedash began following {followed.name} at "
                                   f"{followed.created.strftime('%Y-%m-%d %H:%M:%S UTC')}: what it held before is not known.")
        elif gap is not None:
            out["not_followed"] = (f"Not followed between {_clock(gap[0])} and {_clock(gap[1]) if gap[1] else 'now'}: "
                                   f"no state is shown as current for that span ({followed.name} as last known, "
                                   f"at {_clock(gap[0])}).")
    thinned = thinned_until()
    out.update(at=at, at_param=at.asked, at_iso=at.moment.isoformat().replace("+00:00", "Z"),
               at_clock=at.moment.strftime("%Y-%m-%d %H:%M:%S UTC"),
               at_input=at.moment.strftime("%Y-%m-%dT%H:%M:%S"),
               thinned=thinned is not None and at.moment < thinned,
               thinned_clock=thinned.strftime("%Y-%m-%d %H:%M") if thinned else "",
               thin_seconds=settings.KUBEDASH_HISTORY_THIN_SECONDS)
    return out


def _clock(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _gaps(followed, low: int, high: int) -> list[dict]:
    """The slider's "not followed" spans (Cluster.gaps) within its range (epoch seconds), as
    percentages of its width, each with its words."""
    span = max(high - low, 1)
    out = []
    for begin, end in followed.gaps(datetime.fromtimestamp(low, UTC), datetime.fromtimestamp(high, UTC)):
        left = max(begin.timestamp(), low)
        right = min(end.timestamp(), high) if end else high
        out.append({"left": round(100 * (left - low) / span, 2), "width": round(max(100 * (right - left) / span, 0.3), 2),
                    "from_iso": begin.isoformat().replace("+00:00", "Z"), "text": f"Not followed between {_clock(begin)} "
                    f"and {_clock(end) if end else 'now'}"})
    return out


SLIDER_MARKS = 200   # the newest changes of what the page shows, marked on the slider


def _slider(at: asof.At | None, shown: dict) -> dict:
    """The slider over the kept history (epoch seconds): its ends, the page's moment and the
    newest changes of what the page shows (a datalist: Chromium draws them as ticks)."""
    now = utcnow()
    oldest = revlog.oldest_written() or now
    horizon = history_horizon()[1]
    start = max(oldest, horizon) if horizon else oldest
    marks = revlog.change_times(SLIDER_MARKS, **shown)
    moment = at.moment if at is not None else now
    return {"slider_min": int(start.timestamp()), "slider_max": int(now.timestamp()) + 1,
            "slider_value": int(moment.timestamp()), "slider_text": moment.strftime("%Y-%m-%d %H:%M:%S UTC"),
            "slider_marks": sorted({int(m.timestamp()) for m in marks})}


def _shown(request) -> dict:
    """What the page shows, for the time bar's previous / next change: its kind (a list, or a
    detail page's object), its namespace; the Overview: every kind."""
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return {}
    web = kinds.by_view((match.url_name or "").removesuffix("-history").removesuffix("-fields"))
    if web is None:
        return {"namespace": request.GET.get("namespace", "")}
    if "name" in match.kwargs:
        return {"kinds": (web.kind,), "namespace": match.kwargs["namespace"], "name": match.kwargs["name"]}
    return {"kinds": (web.kind,), "namespace": request.GET.get("namespace", "")}


def _moved(request, query, value: str) -> str:
    query = query.copy()
    query[PARAM] = value
    return f"{request.path}?{query.urlencode()}"


def with_at(request, value: str) -> str:
    query = request.GET.copy()
    query[PARAM] = value
    return f"{request.path}?{query.urlencode()}"


def page_at(context) -> asof.At | None:
    """The page's past moment in a template's context (`at`, which context() puts there), or
    None (live; or an `at` of something else, e.g. a time in a pushed fragment's context)."""
    at = context.get("at")
    return at if isinstance(at, asof.At) else None


def query_param(at: asof.At | None) -> dict:
    """{"at": …} on a page as of `at` (links of the page keep it), else {}."""
    return {PARAM: at.asked} if at is not None else {}


def ago(seconds: int) -> str:
    return (utcnow() - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")

"""Which cluster a page shows: `?cluster=<name>` on every page (absent: the local store).

ClusterScopeMiddleware validates the parameter, checks the viewer may see that cluster and runs
the request about it (its context's within_cluster: access/clusters.py), so every store read of
the page (typed rows, the revision log) is about that cluster. A share session is pinned to its link's cluster.
`in_cluster(url, at=)` is the one helper every link a page builds goes through, so the next page
stays in the same cluster (and, on a page as of a past moment, at that moment: web/timetravel.py);
the websocket carries the same parameter (consumers.py).

A followed cluster is read-only here: `read_only_reason()` is what pages say instead of
offering a change, and the write views answer it with 405 (edit_views.editor_view).
"""
from __future__ import annotations

import re
import time
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.utils import timezone

from dashboard.access import clusters
from dashboard.access.middleware import EitherModeMiddleware
from dashboard.follow.models import HEARTBEAT_STALE, Cluster  # noqa: F401 (HEARTBEAT_STALE: re-exported)
from dashboard.kube import context
from dashboard.kube.formats import human_duration
from dashboard.kube.paths import API_ROOTS, CLUSTER_API_PATH

from . import kinds
from .present import iso
from .share import page_principal

PARAM = "cluster"

# Paths that are not pages: the Kubernetes API and static files; a followed cluster's API under
# /clusters/<name>/ says its cluster in its path, not in a query parameter (is_page).
_NOT_PAGES = (*API_ROOTS, "/static/")


def in_cluster(url: str, name: str | None = None, at=None) -> str:
    """`url` with `cluster=<name>` (default: the cluster the work is about) added to its query;
    unchanged for the local store, so local pages keep their plain addresses. `at`: the page's
    past moment (kube/asof.At; None: live), which its links keep (web/timetravel.py)."""
    name = clusters.current() if name is None else name
    if at is not None and url and not re.search(r"[?&]at=", url):
        url = _with_param(url, "at", at.asked)
    if name == clusters.LOCAL or not url:
        return url
    url, hash_, fragment = url.partition("#")
    joiner = "" if url.endswith(("?", "&")) else ("&" if "?" in url else "?")
    return f"{url}{joiner}{urlencode({PARAM: name})}{hash_}{fragment}"


def state_tone(row, stale: bool) -> str:
    """The badge tone of a followed cluster's state (the Clusters page and the overview agree):
    live and current is ok, syncing runs, stale is bad, live without a heartbeat warns."""
    if row.state == row.LIVE:
        return "warn" if stale else "ok"
    return {row.SYNCING: "run", row.STALE: "bad"}.get(row.state, "warn")


def read_only_reason(name: str | None = None) -> str:
    name = clusters.current() if name is None else name
    return "" if name == clusters.LOCAL else f"{name} is followed read-only: change it in the cluster itself."


def followed(name: str):
    """The follow.models.Cluster row of a followed cluster, or None."""
    return Cluster.objects.filter(name=name).first()


def visible_clusters(principal) -> list[str]:
    """"local" and the followed clusters' names this principal may see (in that order)."""
    names = [clusters.LOCAL, *Cluster.objects.values_list("name", flat=True)]
    return [n for n in names if principal is not None and principal.sees_cluster(n)]


_rows: dict[str, tuple[float, object]] = {}   # cluster -> (when read, its row): moment(cached=True)
ROW_CACHE_SECONDS = 1.0


def moment(now=None, cached: bool = False, at=None):
    """When the page's time-derived states (held / expired, countdowns, durations, ages) are
    computed: now, or for a followed cluster that is not current, the last moment kubedash knew
    its state (Cluster.moment). Every page and push of a cluster's objects takes its `now` here.
    `cached`: the cluster's row as read within the last second in this process (live pushes:
    every page of the cluster would read it again for each push). `at`: the page's past moment
    (kube/asof.At, ?at=: web/timetravel.py; None: live)."""
    now = now or timezone.now()
    if at is not None:
        now = min(now, at.moment)
    if clusters.is_local():
        return now
    name = clusters.current()
    read_at, row = _rows.get(name, (float("-inf"), None))
    if not cached or time.monotonic() - read_at > ROW_CACHE_SECONDS:
        row = followed(name)
        _rows[name] = (time.monotonic(), row)
    if row is None:
        return now
    if at is not None and (gap := row.gap_at(now)) is not None:
        return gap[0]   # (not followed then: its states as last known, never guessed past that)
    return row.moment(now)


def staleness(row, now=None) -> dict | None:
    """What the stale banner says about a followed cluster's copy; None while it is current
    (Cluster.is_current: live, every watch heard within the silence deadline, a fresh heartbeat)."""
    now = now or timezone.now()
    if row.is_current(now):
        return None
    first_sync = row.state == row.SYNCING and row.heartbeat_at is None and row.last_event_at is None
    if first_sync:
        why = "still syncing for the first time: objects may be missing"
    elif row.state == row.SYNCING:
        why = "the watch is relisting"
    elif row.state == row.STALE:
        why = "the watch is down"
    else:
        why = "the watch has not confirmed it is up"

    as_of = row.known_at
    last = row.last_event_at
    return {"name": row.name, "state": row.state, "why": why, "message": row.message, "as_of": as_of,
            "as_of_iso": iso(as_of), "age": human_duration(max((now - as_of).total_seconds(), 0)),
            "last_event_iso": iso(last) if last else "",
            "last_event_age": human_duration(max((now - last).total_seconds(), 0)) if last else "",
            "first_sync": first_sync, "key": (row.state, why, row.message, as_of)}


def _refuse(request, status: int, title: str, message: str):
    ctx = {"principal": page_principal(request), "title": title, "message": message,
           "share_link": getattr(request, "share_link", None)}
    response = render(request, "web/error.html", ctx, status=status)
    response["Cache-Control"] = "no-store"
    return response


def resolve(request):
    """(cluster name, None) for a page request, or (None, the refusal page)."""
    asked = request.GET.get(PARAM, "").strip()
    link = getattr(request, "share_link", None)
    if link is not None:
        # A share link shows its own cluster only: another one is refused, never shown.
        if asked and asked != link.cluster:
            return None, _refuse(request, 403, "Not allowed", "A shared view shows only its own cluster.")
        return link.cluster, None
    name = asked or clusters.LOCAL
    principal = page_principal(request)
    if principal is None:
        return clusters.LOCAL, None   # signed out: the view sends them to the login page
    if asked == ALL:
        return _all_clusters(request, principal)
    if not asked and not principal.sees_cluster(name) and request.method in ("GET", "HEAD"):
        # A user limited to followed clusters lands on the first of them, not on a refusal.
        visible = visible_clusters(principal)
        if visible:
            return None, HttpResponseRedirect(in_cluster(request.get_full_path(), visible[0]))
    if not principal.sees_cluster(name):
        # Checked before existence, so a limited viewer learns nothing of other clusters' names.
        return None, _refuse(request, 403, "Not allowed", f"You have no access to cluster “{name}”.")
    if name != clusters.LOCAL and (not clusters.NAME_RE.match(name) or followed(name) is None):
        return None, _refuse(request, 404, "No such cluster",
                             f"No followed cluster is called “{name}”. Choose one in the header.")
    return name, None


def _with_param(url: str, key: str, value: str) -> str:
    url, hash_, fragment = url.partition("#")
    joiner = "" if url.endswith(("?", "&")) else ("&" if "?" in url else "?")
    return f"{url}{joiner}{urlencode({key: value})}{hash_}{fragment}"


ALL = "*"   # every cluster the viewer may see (web/all_clusters.py)


def shows_all(path: str) -> bool:
    """The pages that show every cluster at once: the Overview and the kinds' lists."""
    return path == "/" or (path.count("/") == 2 and kinds.by_view(path.strip("/")) is not None
                           and not kinds.is_detail_view(path.strip("/")))


def _all_clusters(request, principal):
    """`?cluster=*`: the pages that show every cluster at once run about ALL (their links keep
    it: in_cluster; their queries name each cluster themselves); any other page goes to the
    all-clusters overview."""
    if not visible_clusters(principal):
        return None, _refuse(request, 403, "Not allowed", "You have no access to any cluster.")
    if not shows_all(request.path_info):
        return None, HttpResponseRedirect("/?" + urlencode({PARAM: ALL}))
    return ALL, None


def is_page(path: str) -> bool:
    if path.startswith(_NOT_PAGES):
        return False
    return not CLUSTER_API_PATH.match(path)   # /clusters/<name>/api...: a followed cluster's API


class ClusterScopeMiddleware(EitherModeMiddleware):
    """Runs every page request about its cluster (after auth and share links)."""

    def handle(self, request):
        if not is_page(request.path_info):
            return self.get_response(request)
        name, refusal = resolve(request)
        if refusal is not None:
            return refusal
        with context.of(request).within_cluster(name):
            return self.get_response(request)

    async def ahandle(self, request):
        if not is_page(request.path_info):
            return await self.get_response(request)
        name, refusal = await sync_to_async(resolve, thread_sensitive=True)(request)
        if refusal is not None:
            return refusal
        with context.of(request).within_cluster(name):
            return await self.get_response(request)

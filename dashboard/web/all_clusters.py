"""Every cluster at once (issue 40): the Overview's all-clusters mode, `/?cluster=*`.

One row per cluster the viewer may see (the local store and the followed clusters, within the
viewer's cluster limits: cluster_scope.visible_clusters), each with what needs a look there —
leases without a holder, Endpoints with an address not ready, failed Jobs, Warning Events of the
last hour — and how current the cluster's copy is. Each number links to that cluster's list
filtered to exactly those objects (the lists' `?state=`, the Events page's `?type=Warning`).

The counts are aggregate queries over every cluster at once: one grouped query per kind
(`cluster IN (...)`, GROUP BY cluster) and one indexed count per cluster for the Events (each
cluster's hour ends at its own moment: a stale cluster's counts are as of its last word,
Cluster.moment, and the page says "as of <time>" instead of showing them as current).
The page is live through AllClustersConsumer (all_clusters_socket.py), which renders the same
partial (`web/all_clusters.html#panel`).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Q
from django.shortcuts import render

from dashboard.access.principals import Principal
from dashboard.follow.models import Cluster
from dashboard.kube import context
from dashboard.kube.meta import now as utcnow
from dashboard.kube.registry import by_kind

from . import cluster_scope, kinds
from . import present as p

ALL = "*"                          # the `?cluster=` value that means every cluster the viewer may see
WARNING = "Warning"                # an Event's `type` (core/v1), as the Events page's ?type= takes it
WARNING_WINDOW = timedelta(hours=1)
WS_PATH = "/ws/clusters/"


@dataclass(frozen=True)
class Problem:
    """One column: objects of `kind` that need a look (`where`, over its typed columns), and the
    query of that cluster's list showing exactly them."""

    key: str
    heading: str
    noun: str      # "leases without a holder": the link's accessible text ("lease" for one: `one`)
    kind: str
    query: str     # the list's filter (its ?state=, or the Events page's type)
    where: Q | None = None
    one: str = ""

    def counted(self, n: int) -> str:
        return f"{n} {self.one if n == 1 else self.noun}"


def problems() -> tuple[Problem, ...]:
    """The columns, the kinds' own `?state=` filters where they are SQL (kinds.State.where)."""
    def where(kind: str, state: str) -> Q:
        return kinds.by_kind(kind).state(state).where

    return (
        # (a Lease's "unheld" is a Python test, lease_state() == "free": no holder at all)
        Problem("unheld", "Leases without holder", "leases without a holder", "Lease", "state=unheld",
                Q(holder_identity=""), "lease without a holder"),
        Problem("not_ready", "Endpoints not ready", "Endpoints objects with addresses not ready", "Endpoints",
                "state=not-ready", where("Endpoints", "not-ready"), "Endpoints object with addresses not ready"),
        Problem("failed", "Failing Jobs", "failed Jobs", "Job", "state=failed", where("Job", "failed"), "failed Job"),
        Problem("warnings", "Warning Events (last hour)", "Warning Events in the last hour", "Event",
                "type=Warning", None, "Warning Event in the last hour"),
    )


def _grouped(kind: str, where: Q, names: list[str], namespaces: tuple[str, ...]) -> dict[str, int]:
    rows = by_kind(kind).model.everywhere.filter(where, cluster__in=names)
    if namespaces:
        rows = rows.filter(namespace__in=namespaces)
    return dict(rows.values_list("cluster").annotate(n=Count("id")).order_by())


def _warnings(name: str, at: datetime, namespaces: tuple[str, ...]) -> int:
    rows = by_kind("Event").model.everywhere.filter(cluster=name, type=WARNING, last_seen__gt=at - WARNING_WINDOW,
                                                    last_seen__lte=at)
    if namespaces:
        rows = rows.filter(namespace__in=namespaces)
    return rows.count()


def cluster_health(principal: Principal, now: datetime, page_at=None) -> list[dict]:
    """The rows of the all-clusters overview, in the header's order (local first). page_at: the
    page's past moment (kube/asof.At, ?at=: its links keep it; None: live)."""
    names = cluster_scope.visible_clusters(principal)
    if not names or not principal.role or principal.is_share:   # (no role: may list nothing anywhere)
        return []
    followed = {c.name: c for c in Cluster.objects.filter(name__in=names)}
    columns = problems()
    found = {c.key: _grouped(c.kind, c.where, names, principal.namespaces) for c in columns if c.where is not None}
    rows = []
    for name in names:
        row = followed.get(name)
        at = row.moment(now) if row is not None else now
        stale = row is not None and cluster_scope.staleness(row, now) is not None
        heard = row.known_at if stale else None
        counts = []
        for c in columns:
            n = found[c.key].get(name, 0) if c.where is not None else _warnings(name, at, principal.namespaces)
            web = kinds.by_kind(c.kind)
            counts.append({"key": c.key, "n": n, "text": c.counted(n), "heading": c.heading,
                           "link": cluster_scope.in_cluster(f"{web.list_url}?{c.query}", name, page_at)})
        rows.append({
            "name": name, "dom_id": f"all-{name}", "url": cluster_scope.in_cluster("/", name, page_at),
            "state": row.state if row is not None else "local", "stale": stale,
            "tone": cluster_scope.state_tone(row, stale) if row is not None else "ok",
            "heard": p.iso(heard), "heard_clock": p.clock(heard) if heard else "",
            "heard_ago": p.age(heard, now) if heard else "",
            "counts": counts, "attention": sum(c["n"] for c in counts),
        })
    return rows


def panel_context(principal: Principal, now: datetime | None = None, page_at=None) -> dict:
    rows = cluster_health(principal, now or utcnow(), page_at)
    return {"rows": rows, "headings": [c.heading for c in problems()]}


def overview(request, principal: Principal, base: dict):
    """The page (views.overview hands `?cluster=*` here, with its base context)."""
    ctx = {**base, **panel_context(principal, page_at=context.of(request).at), "all_clusters": True, "ws_url": WS_PATH,
           "rv": ""}
    return render(request, "web/all_clusters.html", ctx)


def wants_all(request) -> bool:
    return request.GET.get(cluster_scope.PARAM, "").strip() == ALL



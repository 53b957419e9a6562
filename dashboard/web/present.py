"""View-models for the pages: one object (a Lease, Endpoints or Job dict) -> what its row or
card shows. Pure functions of (object, now), with no database access, so the full page, an
htmx fragment and a websocket push all render the same dict through the same template partial.

Contract with the live consumer:
    dom_id(kind, namespace, name) -> the row/card's HTML id
    present(kind, obj, now)       -> the `item` a list partial ("web/<plural>.html#item") or a
                                     detail partial ("web/<singular>_detail.html#detail") renders
    object_yaml(obj)              -> the `yaml` a detail partial shows
    namespace_card(...)           -> the `ns` of "web/overview.html#namespace"
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable

import yaml

from dashboard.batch.strategy import completions_text, duration_text, parse_index_intervals, phase
from dashboard.coordination import strategy as lease_rules
from dashboard.coordination.strategy import lease_expiry
from dashboard.core.strategy import address_key
from dashboard.kube.formats import human_duration, parse_time

UTC = timezone.utc

# Index grids beyond this many cells show a text summary for the rest (a 100,000-index job
# would otherwise be 100,000 elements per row).
GRID_CELLS = 500

LIST_URLS = {"Lease": "/leases/", "Endpoints": "/endpoints/", "Job": "/jobs/"}


def dom_id(kind: str, namespace: str, name: str) -> str:
    """A stable HTML id for an object. '.' would read as a class in CSS selectors, and '_'
    cannot occur in Kubernetes names, so '.' -> '_' keeps ids distinct. (Only a namespace or name
    containing "--" could make two ids alike; real names practically never do.)"""
    return f"{kind.lower()}-{namespace}--{name}".replace(".", "_")


def detail_url(kind: str, namespace: str, name: str) -> str:
    return f"{LIST_URLS[kind]}{namespace}/{name}/"


# ---------------------------------------------------------------------------------------------
# Time helpers


def iso(moment: datetime | None) -> str:
    """What the browser parses (Date.parse wants at most milliseconds)."""
    if moment is None:
        return ""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def clock(moment: datetime | None) -> str:
    """A compact absolute time for tables."""
    if moment is None:
        return ""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(seconds: float) -> str:
    return "just now" if seconds < 1 else f"{human_duration(seconds)} ago"


def countdown(expires: datetime, now: datetime) -> str:
    """"expires in 4s" / "expired 3s ago" (live.js computes the same text every second)."""
    left = (expires - now).total_seconds()
    if left > 0:
        return f"expires in {human_duration(left + 0.999)}"   # round up: 0.4s left is "1s"
    return f"expired {human_duration(-left)} ago"


def _labels(obj: dict) -> list[str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return [f"{k}={v}" for k, v in sorted(labels.items())]


def _base(kind: str, obj: dict) -> dict:
    m = obj.get("metadata") or {}
    ns, name = m.get("namespace", ""), m.get("name", "")
    return {
        "kind": kind,
        "dom_id": dom_id(kind, ns, name),
        "namespace": ns,
        "name": name,
        "url": detail_url(kind, ns, name),
        "uid": m.get("uid", ""),
        "resource_version": m.get("resourceVersion", ""),
        "labels": _labels(obj),
        "created": clock(parse_time(m.get("creationTimestamp"))),
        "deleting": bool(m.get("deletionTimestamp")),
    }


# ---------------------------------------------------------------------------------------------
# Lease


def present_lease(obj: dict, now: datetime) -> dict:
    spec = obj.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    renewed = parse_time(spec.get("renewTime"))
    acquired = parse_time(spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    expires = lease_expiry(spec)
    if not holder:
        state, state_text = "free", "no holder"
    elif expires is None:
        state, state_text = "unknown", "no expiry"
    elif expires > now:
        state, state_text = "held", "held"
    else:
        state, state_text = "expired", "expired"
    item = _base("Lease", obj)
    item.update({
        "holder": holder,
        # Long identities (pod_node_uuid) wrap after '_' (the template puts <wbr> there);
        # '-' is already a line-break opportunity in browsers.
        "holder_parts": [part for part in re.split(r"(?<=_)", holder) if part],
        "state": state,
        "state_text": state_text,
        # Only a held-or-expired lease counts down (and flips in the browser).
        "live": state in ("held", "expired"),
        "renewed_at": iso(renewed),
        "renewed_text": ("renewed " + ago((now - renewed).total_seconds())) if renewed else "never renewed",
        "renewed_clock": clock(renewed),
        "expires_at": iso(expires) if holder else "",
        "expires_text": countdown(expires, now) if (expires and holder) else "",
        "expires_clock": clock(expires),
        "duration_seconds": duration,
        "duration": f"{duration}s" if isinstance(duration, int) else "",
        "acquired_at": iso(acquired),
        "acquired_clock": clock(acquired),
        "transitions": spec.get("leaseTransitions"),
        "preferred_holder": spec.get("preferredHolder") or "",
        "strategy": spec.get("strategy") or "",
    })
    return item


# ---------------------------------------------------------------------------------------------
# Endpoints: the readiness matrix

CELL_TEXT = {"ready": "ready", "not-ready": "not ready", "absent": "absent"}


def _port_key(port: dict | None) -> tuple:
    if port is None:
        return ("", None, "")
    return (port.get("name") or "", port.get("port"), port.get("protocol") or "TCP")


def present_endpoints(obj: dict, now: datetime) -> dict:
    ports: dict[tuple, dict] = {}
    addresses: dict[tuple[str, str], dict] = {}
    cells: dict[tuple, str] = {}          # (address key, port key) -> ready / not-ready
    for subset in obj.get("subsets") or []:
        subset_ports = subset.get("ports") or [None]     # None: a subset without ports
        for port in subset_ports:
            pkey = _port_key(port)
            if pkey not in ports:
                if port is None:
                    ports[pkey] = {"name": "", "port": "", "protocol": "", "text": "no ports"}
                else:
                    ports[pkey] = {"name": pkey[0], "port": pkey[1], "protocol": pkey[2],
                                   "text": f"{pkey[0] + ' ' if pkey[0] else ''}{pkey[1]}/{pkey[2]}"}
        for state, field in (("ready", "addresses"), ("not-ready", "notReadyAddresses")):
            for address in subset.get(field) or []:
                akey = address_key(address)
                addresses.setdefault(akey, address)
                for port in subset_ports:
                    key = (akey, _port_key(port))
                    # Not ready wins, as the strategy's repacking decides.
                    if cells.get(key) != "not-ready":
                        cells[key] = state
    port_keys = sorted(ports, key=lambda k: (k[1] is None, k[1] or 0, k[0], k[2]))
    for pkey in port_keys:
        ports[pkey].update(ready=0, total=0)
    rows = []
    totals = {"ready": 0, "not_ready": 0, "absent": 0}
    for akey in sorted(addresses, key=_ip_sort_key):
        address = addresses[akey]
        ref = address.get("targetRef") or {}
        row_cells = []
        for pkey in port_keys:
            state = cells.get((akey, pkey), "absent")
            totals[state.replace("-", "_")] += 1
            ports[pkey]["total"] += state != "absent"
            ports[pkey]["ready"] += state == "ready"
            row_cells.append({"state": state, "text": CELL_TEXT[state], "port": ports[pkey]["text"]})
        states = {c["state"] for c in row_cells if c["state"] != "absent"}
        overall = ("ready" if states == {"ready"} else "not-ready" if states == {"not-ready"} else "partial")
        rows.append({
            "ip": address.get("ip", ""),
            "hostname": address.get("hostname") or "",
            "node": address.get("nodeName") or "",
            "target": f"{ref.get('kind') or '?'}/{ref.get('name') or ref.get('uid') or '?'}" if ref else "",
            "target_namespace": ref.get("namespace") or "",
            "state": overall,
            "state_text": {"ready": "ready", "not-ready": "not ready", "partial": "partly ready"}[overall],
            "cells": row_cells,
        })
    ready = sum(r["state"] == "ready" for r in rows)
    partial = sum(r["state"] == "partial" for r in rows)
    not_ready = len(rows) - ready - partial
    if not rows:
        health, health_text = "empty", "no addresses"
    elif ready == len(rows):
        health, health_text = "ok", "all ready"
    elif ready == 0 and partial == 0:
        health, health_text = "bad", "none ready"
    else:
        health, health_text = "warn", f"{ready} of {len(rows)} ready"
    item = _base("Endpoints", obj)
    item.update({
        "ports": [ports[k] for k in port_keys],
        "addresses": rows,
        "ready": ready,                 # ready on every port
        "not_ready": not_ready,         # ready on none
        "partial": partial,             # ready on some ports only
        "cells": totals,
        "health": health,
        "health_text": health_text,
    })
    return item


def _ip_sort_key(akey: tuple[str, str]) -> tuple:
    ip = akey[0]
    parts = ip.split(".")
    if len(parts) == 4 and all(p.isdigit() for p in parts):
        return (4, tuple(int(p) for p in parts), akey[1])
    return (6, (ip,), akey[1])


# ---------------------------------------------------------------------------------------------
# Job

PHASE_CLASS = {"Complete": "ok", "Failed": "bad", "Running": "run", "Suspended": "idle",
               "Terminating": "idle", "FailureTarget": "bad", "SuccessCriteriaMet": "ok"}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _index_set(text: str | None, completions: int) -> list[tuple[int, int]]:
    try:
        return parse_index_intervals(text or "", completions)
    except ValueError:
        return []


def _grid(spec: dict, status: dict) -> dict:
    completions = _int(spec.get("completions"))
    done = _index_set(status.get("completedIndexes"), completions)
    failed = _index_set(status.get("failedIndexes"), completions)
    state = ["pending"] * min(completions, GRID_CELLS)
    for intervals, name in ((done, "done"), (failed, "failed")):
        for first, last in intervals:
            for i in range(first, min(last, GRID_CELLS - 1) + 1):
                state[i] = name
    n_done = sum(b - a + 1 for a, b in done)
    n_failed = sum(b - a + 1 for a, b in failed)
    glyph = {"done": "✓", "failed": "✗", "pending": ""}
    word = {"done": "completed", "failed": "failed", "pending": "not completed"}
    cells = [{"i": i, "state": s, "glyph": glyph[s], "title": f"index {i}: {word[s]}"} for i, s in enumerate(state)]
    label = (f"Indexes: {n_done} of {completions} completed ({status.get('completedIndexes') or 'none'})"
             + (f", {n_failed} failed ({status.get('failedIndexes')})" if n_failed else ""))
    return {"cells": cells, "label": label, "more": max(0, completions - GRID_CELLS),
            "done": n_done, "failed": n_failed, "pending": completions - n_done - n_failed}


def _grouped(conditions: list[dict]) -> list[dict]:
    """True conditions that share a reason and message (Complete + SuccessCriteriaMet, Failed
    + FailureTarget) shown once, with their types joined."""
    out: dict[tuple[str, str], dict] = {}
    for c in conditions:
        key = (c["reason"], c["message"])
        if key in out:
            out[key]["type"] += ", " + c["type"]
        else:
            out[key] = dict(c)
    return list(out.values())


def present_job(obj: dict, now: datetime) -> dict:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    succeeded = _int(status.get("succeeded"))
    completions = spec.get("completions")
    target = completions if isinstance(completions, int) else 1
    status_text = phase(obj)
    conditions = [{
        "type": c.get("type", ""),
        "status": c.get("status", ""),
        "reason": c.get("reason") or "",
        "message": c.get("message") or "",
        "time": clock(parse_time(c.get("lastTransitionTime"))),
    } for c in status.get("conditions") or []]
    indexed = spec.get("completionMode") == "Indexed"
    item = _base("Job", obj)
    item.update({
        "phase": status_text,
        "phase_class": PHASE_CLASS.get(status_text, "run"),
        "progress_text": completions_text(obj),
        "progress_value": min(succeeded, target),
        "progress_max": target,
        "progress_pct": round(100 * min(succeeded, target) / target) if target else 0,
        "succeeded": succeeded,
        "completions": completions,
        "parallelism": spec.get("parallelism"),
        "active": _int(status.get("active")),
        "ready": _int(status.get("ready")),
        "failed": _int(status.get("failed")),
        "terminating": status.get("terminating"),
        "backoff_limit": spec.get("backoffLimit"),
        "backoff_limit_per_index": spec.get("backoffLimitPerIndex"),
        "suspended": bool(spec.get("suspend")),
        "duration": duration_text(obj, now),
        "start_time": clock(parse_time(status.get("startTime"))),
        "completion_time": clock(parse_time(status.get("completionTime"))),
        "conditions": _grouped([c for c in conditions if c["status"] == "True"]),
        "all_conditions": conditions,
        "indexed": indexed,
        "completion_mode": spec.get("completionMode") or "NonIndexed",
        "grid": _grid(spec, status) if indexed and isinstance(completions, int) else None,
    })
    return item


# ---------------------------------------------------------------------------------------------
# Dispatch

_PRESENTERS = {"Lease": present_lease, "Endpoints": present_endpoints, "Job": present_job}


def present(kind: str, obj: dict, now: datetime) -> dict:
    """The view-model of one object for its row (Lease, Job) or card (Endpoints)."""
    return _PRESENTERS[kind](obj, now)


def page_context(kind: str, objects: Iterable[dict], now: datetime) -> dict:
    """`items` for a list page, plus the Endpoints namespace roll-up."""
    items = [present(kind, obj, now) for obj in objects]
    context: dict = {"items": items}
    if kind == "Endpoints":
        context["rollup"] = endpoints_rollup(items)
    counts: dict[str, int] = {}
    for item in items:
        key = item.get("state") or item.get("health") or item.get("phase_class") or ""
        counts[key] = counts.get(key, 0) + 1
    context["counts"] = counts
    return context


def endpoints_rollup(items: list[dict]) -> list[dict]:
    """Per namespace: objects, addresses ready / not ready, objects fully ready."""
    out: dict[str, dict] = {}
    for item in items:
        row = out.setdefault(item["namespace"], {"namespace": item["namespace"], "objects": 0, "ready": 0,
                                                 "not_ready": 0, "healthy": 0})
        row["objects"] += 1
        row["ready"] += item["ready"]
        row["not_ready"] += item["not_ready"] + item["partial"]
        row["healthy"] += item["health"] == "ok"
    return [out[k] for k in sorted(out)]


class _YamlDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    pass


_STR_TAG = "tag:yaml.org,2002:str"


def _str_representer(dumper, data: str):
    # As kubectl prints: multi-line strings as literal blocks, and strings that would read as
    # another type (times, numbers, booleans) in double quotes.
    if "\n" in data:
        style = "|"
    elif dumper.resolve(yaml.ScalarNode, data, (True, False)) != _STR_TAG:
        style = '"'
    else:
        style = None
    return dumper.represent_scalar(_STR_TAG, data, style=style)


_YamlDumper.add_representer(str, _str_representer)


def object_yaml(obj: dict) -> str:
    """The object as `kubectl get -o yaml` shows it: keys sorted, managedFields left out."""
    shown = dict(obj)
    meta = dict(shown.get("metadata") or {})
    meta.pop("managedFields", None)
    shown["metadata"] = meta
    return yaml.dump(shown, Dumper=_YamlDumper, sort_keys=True, default_flow_style=False,
                     allow_unicode=True, width=120)


# ---------------------------------------------------------------------------------------------
# Overview: one card per namespace


def namespace_card(namespace: str, now: datetime, *, leases: Iterable[tuple[str, datetime | None, int | None]] = (),
                   endpoints: dict | None = None, jobs: dict[str, int] | None = None) -> dict:
    """The `ns` of the overview's namespace partial.

    leases: (holderIdentity, renewTime, leaseDurationSeconds) per Lease;
    endpoints: {"objects", "ready", "not_ready", "healthy"} sums of the typed columns;
    jobs: phase -> count.
    """
    held = expired = free = held_base = 0
    expiries: list[int] = []
    for holder, renewed, duration in leases:
        if not holder:
            free += 1
            continue
        if renewed is None or duration is None:
            held_base += 1                # a holder without an expiry counts as held
            continue
        expires = lease_rules.expiry(renewed, duration)
        expiries.append(int(expires.timestamp() * 1000))
        if expires > now:
            held += 1
        else:
            expired += 1
    held += held_base
    ep = {"objects": 0, "ready": 0, "not_ready": 0, "healthy": 0, **(endpoints or {})}
    jobs = jobs or {}
    running = jobs.get("Running", 0)
    complete = jobs.get("Complete", 0) + jobs.get("SuccessCriteriaMet", 0)
    failed = jobs.get("Failed", 0) + jobs.get("FailureTarget", 0)
    other = sum(jobs.values()) - running - complete - failed
    return {
        "dom_id": f"ns-{namespace}",
        "namespace": namespace,
        "leases": {"total": held + expired + free, "held": held, "expired": expired, "free": free,
                   "held_base": held_base,
                   # Expiry instants of held-or-expired leases: live.js recounts held/expired.
                   "expiries": " ".join(map(str, sorted(expiries)))},
        "endpoints": ep,
        "jobs": {"total": sum(jobs.values()), "running": running, "complete": complete, "failed": failed,
                 "other": other},
        "links": {kind: f"{url}?namespace={namespace}" for kind, url in LIST_URLS.items()},
    }


# ---------------------------------------------------------------------------------------------
# Lease holder history, from the revision log


@dataclass
class _Span:
    holder: str
    start: datetime
    last_renew: datetime
    duration: int | None
    renewals: int = 0
    end: datetime | None = None
    end_reason: str = ""


def holder_history(revisions: Iterable[tuple[str, dict, datetime]], now: datetime) -> dict:
    """Who held a Lease, from when to when, and the gaps with no holder.

    revisions: (event type, object, write time) in revision order, oldest first.
    Returns {"entries": [...], "start", "end"} where each entry is a holder span or a gap,
    with `left`/`width` percentages for the timeline bar.
    """
    spans: list[_Span] = []
    cur: _Span | None = None
    first: datetime | None = None
    for event, obj, written in revisions:
        first = first or written
        if event == "DELETED":
            if cur is not None:
                _close(cur, written, "lease deleted")
                cur = None
            continue
        spec = obj.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        renewed = parse_time(spec.get("renewTime")) or written
        duration = spec.get("leaseDurationSeconds")
        if cur is not None and holder == cur.holder:
            cur.last_renew, cur.duration = max(cur.last_renew, renewed), duration
            cur.renewals += 1
            continue
        started = parse_time(spec.get("acquireTime")) or written
        if cur is not None:
            # Taken over at the new holder's acquireTime; released (holder cleared) at its renewTime.
            _close(cur, min(started, written) if holder else min(renewed, written), "taken over" if holder else "released")
        cur = _Span(holder, started, renewed, duration) if holder else None
        if cur is not None:
            spans.append(cur)
    if cur is not None:
        expiry = cur.last_renew + timedelta(seconds=cur.duration) if cur.duration else None
        if expiry is not None and expiry <= now:
            cur.end, cur.end_reason = expiry, "expired"
    start = min([first] + [s.start for s in spans]) if first else now
    entries: list[dict] = []
    cursor = start
    for span in spans:
        if span.start > cursor + timedelta(seconds=1):
            entries.append(_entry(None, cursor, span.start, "", 0))
        entries.append(_entry(span.holder, span.start, span.end, span.end_reason, span.renewals))
        cursor = max(cursor, span.end or now)
    if cursor < now - timedelta(seconds=1) and (not spans or spans[-1].end is not None):
        entries.append(_entry(None, cursor, None, "", 0))
    total = max((now - start).total_seconds(), 1.0)
    for e in entries:
        e["left"] = round(100 * (e["_start"] - start).total_seconds() / total, 2)
        e["width"] = max(round(100 * ((e["_end"] or now) - e["_start"]).total_seconds() / total, 2), 0.3)
        e["length"] = human_duration(((e["_end"] or now) - e["_start"]).total_seconds())
    return {"entries": entries, "start": clock(start), "start_at": iso(start), "revisions": first is not None}


def _close(span: _Span, at: datetime, reason: str) -> None:
    expiry = span.last_renew + timedelta(seconds=span.duration) if span.duration else None
    if expiry is not None and expiry < at:
        span.end, span.end_reason = expiry, "expired"      # (the gap that follows shows the rest)
    else:
        span.end, span.end_reason = at, reason


def _entry(holder: str | None, start: datetime, end: datetime | None, reason: str, renewals: int) -> dict:
    return {
        "holder": holder or "",
        "gap": holder is None,
        "hue": _hue(holder) if holder else 0,
        "from": clock(start),
        "from_at": iso(start),
        "to": clock(end) if end else "",
        "to_at": iso(end),
        "ongoing": end is None,
        "end_reason": reason,
        "renewals": renewals,
        "_start": start,
        "_end": end,
    }


def _hue(holder: str) -> int:
    """A stable colour per holder (the name is always shown too)."""
    return int(hashlib.sha1(holder.encode()).hexdigest()[:4], 16) % 360

"""The rule kinds: what each one watches and how it reads one object (pure functions of the object,
the rule and the time; the engine keeps the episodes and the timers).

Two shapes:
- a *condition* (lease-unheld, job-failed, job-succeeded, job-stalled, endpoints-not-ready,
  warning-event): bad or not at a moment. An episode opens (fires) when it has been bad for the
  rule's --for, and closes (resolves) when it has been good for as long, so flapping within
  --for is one episode. Kinds that report a fact that cannot end (a Job that succeeded, a Warning
  Event) fire and never resolve: the episode ends silently with the object.
- a *change* (lease-holder-changed): each change is an episode of its own, fired at once.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from dashboard.coordination.strategy import expiry
from dashboard.kube.formats import parse_time


@dataclass(frozen=True)
class Check:
    """A condition's reading of one object at a moment."""

    bad: bool
    summary: str = ""
    details: dict | None = None
    flips_at: datetime | None = None   # when it turns bad with no write (a lease's expiry), if it is good


@dataclass(frozen=True)
class Kind:
    name: str
    watches: str                  # the object kind it reads (Lease, Job, Endpoints, Event)
    help: str
    condition: object = None      # (obj, rule, now, memory: dict) -> Check
    change: object = None         # (obj, memo: dict) -> (new memo or None, details or None)
    resolves: bool = True
    uses_for: bool = False        # --for is the window of the condition itself (job-stalled) or of its episodes
    window_inside: bool = False   # --for is part of the condition (job-stalled): episodes open at once
    uses_below: bool = False
    uses_reason: bool = False


def _spec(obj: dict) -> dict:
    return obj.get("spec") or {}


def _status(obj: dict) -> dict:
    return obj.get("status") or {}


@lru_cache(maxsize=4096)
def _expiry(renew_time, duration):
    """coordination's expiry rule, its time parsed once per renewal (every lease-unheld rule asks)."""
    return expiry(parse_time(renew_time), duration)


def lease_unheld(obj, rule, now, memory) -> Check:
    spec = _spec(obj)
    holder = spec.get("holderIdentity") or ""
    if not holder:
        return Check(True, "has no holder", {"holder": ""})
    duration = spec.get("leaseDurationSeconds")
    expires = _expiry(spec.get("renewTime"), duration if isinstance(duration, int) else None)
    if expires is not None and expires <= now:
        return Check(True, f"expired: {holder} did not renew", {"holder": holder, "expired": expires.isoformat()})
    return Check(False, flips_at=expires)


def holder_change(obj, memo):
    """A new (non-empty) holder other than the last one seen: from -> to. A release alone is no
    change (lease-unheld says that); A, released, then B is one change, A -> B."""
    holder = _spec(obj).get("holderIdentity") or ""
    if not holder:
        return None, None
    if "holder" not in memo:
        return {"holder": holder}, None   # first seen: remembered, not reported
    if memo["holder"] == holder:
        return None, None
    return {"holder": holder}, {"from": memo["holder"], "to": holder}


def _condition(obj, type_) -> bool:
    return any(c.get("type") == type_ and c.get("status") == "True" for c in _status(obj).get("conditions") or ())


def job_failed(obj, rule, now, memory) -> Check:
    if _condition(obj, "Failed"):
        failed = next((c for c in _status(obj).get("conditions") or () if c.get("type") == "Failed"), {})
        return Check(True, f"failed ({failed.get('reason') or 'Failed'})",
                     {"reason": failed.get("reason") or "", "message": failed.get("message") or "",
                      "failed": _status(obj).get("failed") or 0})
    return Check(False)


def job_succeeded(obj, rule, now, memory) -> Check:
    if _condition(obj, "Complete"):
        return Check(True, "succeeded", {"succeeded": _status(obj).get("succeeded") or 0})
    return Check(False)


def job_stalled(obj, rule, now, memory) -> Check:
    """Active, and its counts (succeeded, failed, ready, active) unchanged for --for seconds; the
    moment of the last change is kept in `memory` (this process's: a new leader starts the window
    again)."""
    status = _status(obj)
    finished = _condition(obj, "Complete") or _condition(obj, "Failed")
    progress = [status.get(k) or 0 for k in ("succeeded", "failed", "ready", "active")]
    if memory.get("progress") != progress:
        memory["progress"], memory["since"] = progress, now
    if finished or not status.get("active"):
        return Check(False)
    stalled_at = memory["since"] + timedelta(seconds=rule.for_seconds)
    if now >= stalled_at:
        return Check(True, f"no progress for {int(rule.for_seconds)} s",
                     {"active": status.get("active"), "succeeded": status.get("succeeded") or 0})
    return Check(False, flips_at=stalled_at)


def ready_share(obj) -> tuple[int, int]:
    """(ready addresses, all addresses) over the object's subsets."""
    ready = total = 0
    for subset in obj.get("subsets") or ():
        n_ready = len(subset.get("addresses") or ())
        ready += n_ready
        total += n_ready + len(subset.get("notReadyAddresses") or ())
    return ready, total


def endpoints_not_ready(obj, rule, now, memory) -> Check:
    """Ready share below --below percent (no addresses at all: 0 %, nothing serves)."""
    ready, total = ready_share(obj)
    percent = 100.0 * ready / total if total else 0.0
    below = rule.below_percent if rule.below_percent is not None else 100.0
    if percent < below:
        return Check(True, f"{ready}/{total} addresses ready ({percent:.0f} % < {below:g} %)",
                     {"ready": ready, "total": total, "percent": round(percent, 1)})
    return Check(False)


def warning_event(obj, rule, now, memory) -> Check:
    """A Warning Event (its reason matching --reason, if set) first seen after the rule was made."""
    if obj.get("type") != "Warning":
        return Check(False)
    reason = obj.get("reason") or ""
    if rule.reason and not re.search(rule.reason, reason):
        return Check(False)
    seen = parse_time(obj.get("lastTimestamp")) or parse_time(obj.get("eventTime")) or \
        parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    if seen is not None and seen < rule.created.replace(microsecond=0):
        return Check(False)
    about = obj.get("involvedObject") or {}
    return Check(True, f"{reason}: {obj.get('message') or ''}"[:500],
                 {"reason": reason, "message": (obj.get("message") or "")[:1000],
                  "object": {"kind": about.get("kind") or "", "name": about.get("name") or ""},
                  "count": obj.get("count") or 1})


def _labels(obj: dict):
    return (obj.get("metadata") or {}).get("labels")


def lease_reading(obj: dict):
    """What the Lease kinds read (holder, duration, labels for selectors) and, held, until when:
    a renewal moves only that later, which changes no rule's state (engine.evaluate_object)."""
    spec = _spec(obj)
    holder = spec.get("holderIdentity") or ""
    duration = spec.get("leaseDurationSeconds")
    duration = duration if isinstance(duration, int) else None
    return (holder, duration, _labels(obj)), _expiry(spec.get("renewTime"), duration) if holder else None


# Per object kind: (content the rule kinds read, held-until or None). The same content decides
# the same (time-derived changes are timers). Events: always evaluated (each is news).
READS = {
    "Lease": lease_reading,
    "Job": lambda obj: ((_status(obj), _labels(obj)), None),
    "Endpoints": lambda obj: ((obj.get("subsets"), _labels(obj)), None),
}


KINDS = {k.name: k for k in (
    Kind("lease-holder-changed", "Lease", "a Lease's holder changed (from → to)", change=holder_change),
    Kind("lease-unheld", "Lease", "a Lease has no holder, or expired, for --for seconds",
         condition=lease_unheld, uses_for=True),
    Kind("job-failed", "Job", "a Job failed", condition=job_failed),
    Kind("job-succeeded", "Job", "a Job succeeded", condition=job_succeeded, resolves=False),
    Kind("job-stalled", "Job", "a Job is active with no progress for --for seconds",
         condition=job_stalled, uses_for=True, window_inside=True),
    Kind("endpoints-not-ready", "Endpoints", "ready addresses below --below percent for --for seconds",
         condition=endpoints_not_ready, uses_for=True, uses_below=True),
    Kind("warning-event", "Event", "a Warning Event (its reason matching --reason)", condition=warning_event,
         resolves=False, uses_reason=True),
)}


def rule_refusal(kind: str, for_seconds: float, below: float | None, reason: str) -> str | None:
    """Why a rule cannot be made as given (the command's and the page's words), or None."""
    k = KINDS.get(kind)
    if k is None:
        return f'unknown kind "{kind}": one of {", ".join(KINDS)}'
    if for_seconds < 0:
        return "--for must be 0 or more seconds"
    if k.window_inside and for_seconds <= 0:
        return f"{kind} needs --for SECONDS (how long without progress)"
    if below is not None and not k.uses_below:
        return f"--below applies to endpoints-not-ready, not {kind}"
    if below is not None and not 0 < below <= 100:
        return "--below must be a percentage above 0, at most 100"
    if reason and not k.uses_reason:
        return f"--reason applies to warning-event, not {kind}"
    if reason:
        try:
            re.compile(reason)
        except re.error as err:
            return f"--reason is not a regular expression: {err}"
    return None

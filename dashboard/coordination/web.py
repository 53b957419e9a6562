"""Lease pages: the presenter (a row, the detail page, the holder timeline), the form, and
the declaration that registers them with the pages (web.kinds, like an admin.ModelAdmin)."""
from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Callable, Iterable

from django import forms

from dashboard.kube import asof, revlog, store
from dashboard.kube.formats import human_duration, parse_time
from dashboard.kube.lists import TimeText
from dashboard.web import kinds
from dashboard.web.forms import ObjectForm, count_field, parse_time_text, put, field_text, time_field
from dashboard.web.present import UTC, ago, base_item, clock, countdown, iso, iso_text, time_text_iso

from . import strategy
from .actions import do_release_lease
from .resource import LEASES
from .strategy import expiry, lease_expiry

HISTORY_REVISIONS = 2000   # the newest revisions a lease timeline reads


# ---------------------------------------------------------------------------------------------
# Presenter


STATE_TEXT = {"free": "no holder", "unknown": "no expiry", "held": "held", "expired": "expired"}


def lease_state(holder: str, expires: datetime | None, now: datetime) -> str:
    """free (no holder), unknown (a holder, no expiry: counted as held), held or expired: what a
    row shows, the overview counts and the list's `?state=` filter selects (LEASE_STATES)."""
    if not holder:
        return "free"
    if expires is None:
        return "unknown"
    return "held" if expires > now else "expired"


def present_lease(obj: dict, now: datetime) -> dict:
    spec = obj.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    renewed = parse_time(spec.get("renewTime"))
    acquired = parse_time(spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    expires = lease_expiry(spec)
    state = lease_state(holder, expires, now)
    state_text = STATE_TEXT[state]
    item = base_item("Lease", obj, now)
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
        "renew_time": renewed,
        "expires_at": iso(expires) if holder else "",
        "expires_text": countdown(expires, now) if (expires and holder) else "",
        "expires_clock": clock(expires),
        "expiry_time": expires,
        "duration_seconds": duration,
        "duration": f"{duration}s" if isinstance(duration, int) else "",
        "acquired_at": iso(acquired),
        "acquired_clock": clock(acquired),
        "acquire_time": acquired,
        "transitions": spec.get("leaseTransitions"),
        "preferred_holder": spec.get("preferredHolder") or "",
        "strategy": spec.get("strategy") or "",
    })
    return item


# ---------------------------------------------------------------------------------------------
# Holder history, from the revision log (the detail page's timeline)


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
        expires = expiry(cur.last_renew, cur.duration) if cur.duration else None
        if expires is not None and expires <= now:
            cur.end, cur.end_reason = expires, "expired"
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
    return {"entries": entries, "start": clock(start), "start_time": start, "start_at": iso(start),
            "revisions": first is not None}


def _close(span: _Span, at: datetime, reason: str) -> None:
    expires = expiry(span.last_renew, span.duration) if span.duration else None
    if expires is not None and expires < at:
        span.end, span.end_reason = expires, "expired"      # (the gap that follows shows the rest)
    else:
        span.end, span.end_reason = at, reason


def _entry(holder: str | None, start: datetime, end: datetime | None, reason: str, renewals: int) -> dict:
    return {
        "holder": holder or "",
        "gap": holder is None,
        "hue": _hue(holder) if holder else 0,
        "from": clock(start),
        "from_time": start,
        "from_at": iso(start),
        "to": clock(end) if end else "",
        "to_time": end,
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


def detail_context(namespace: str, name: str, now: datetime, at: asof.At | None = None) -> dict:
    """The holder timeline of one Lease from the revision log (the newest HISTORY_REVISIONS; on a
    page as of a past moment `at`, those written by then: kube/asof.py)."""
    revisions = revlog.history("Lease", namespace, name, HISTORY_REVISIONS, upto=at.rv if at is not None else None)
    return {"history": holder_history(revisions, now)}


# ---------------------------------------------------------------------------------------------
# Form


class LeaseForm(ObjectForm):
    KIND = "Lease"
    CAUSES = (("spec.holderIdentity", "holder"), ("spec.leaseDurationSeconds", "duration"),
              ("spec.acquireTime", "acquire_time"), ("spec.renewTime", "renew_time"),
              ("spec.leaseTransitions", "transitions"))
    TIME_HELP = "UTC, RFC 3339 (e.g. 2025-01-02T03:04:05Z), or “now”. Empty: not set."

    holder = forms.CharField(required=False, strip=False, label="Holder identity",
                             help_text="Who holds the lease. Empty: nobody.",
                             widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}))
    # Ranges: strategy.validate (duration > 0, transitions >= 0), both int32.
    duration = count_field("Lease duration (seconds)",
                           "How long other candidates wait after the last renewal before taking over.", 1)
    acquire_time = time_field("Acquire time", TIME_HELP)
    renew_time = time_field("Renew time", TIME_HELP)
    transitions = count_field("Leader transitions", "How many times the lease changed holders.", 0)

    @classmethod
    def data_from_object(cls, obj):
        data = super().data_from_object(obj)
        spec = obj.get("spec") or {}
        data.update(holder=spec.get("holderIdentity") or "", duration=field_text(spec.get("leaseDurationSeconds")),
                    acquire_time=spec.get("acquireTime") or "", renew_time=spec.get("renewTime") or "",
                    transitions=field_text(spec.get("leaseTransitions")))
        return data

    def clean_acquire_time(self):
        return parse_time_text(self.cleaned_data.get("acquire_time"))

    def clean_renew_time(self):
        return parse_time_text(self.cleaned_data.get("renew_time"))

    def apply(self, obj):
        super().apply(obj)
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        obj["spec"] = spec
        c = self.cleaned_data
        put(spec, "holderIdentity", c.get("holder"))
        put(spec, "leaseDurationSeconds", c.get("duration"))
        put(spec, "acquireTime", c.get("acquire_time"))
        put(spec, "renewTime", c.get("renew_time"))
        put(spec, "leaseTransitions", c.get("transitions"))
        return obj

    def sections(self):
        return super().sections() + [{"legend": "Holder", "fields": [
            self[n] for n in ("holder", "duration", "acquire_time", "renew_time", "transitions")]}]


# ---------------------------------------------------------------------------------------------
# Overview: a namespace's leases, from the typed columns


def overview_counts(rows) -> dict[str, list[tuple[str, datetime | None, int | None]]]:
    """namespace -> (holderIdentity, renewTime, leaseDurationSeconds) of each Lease."""
    out: dict[str, list] = {}
    for ns, holder, renewed, duration in rows.values_list(
            "namespace", "holder_identity", "renew_time", "lease_duration_seconds"):
        out.setdefault(ns, []).append((holder, renewed, duration))
    return out


def overview_card(leases: Iterable[tuple[str, datetime | None, int | None]] | None, now: datetime) -> dict:
    """Held / expired / free counts, and the expiry instants live.js recounts held/expired from."""
    held = expired = free = held_base = 0
    expiries: list[int] = []
    for holder, renewed, duration in leases or ():
        expires = strategy.expiry(renewed, duration)
        state = lease_state(holder, expires, now)
        if state == "free":
            free += 1
            continue
        if state == "unknown":
            held_base += 1                # a holder without an expiry counts as held
            continue
        expiries.append(int(expires.timestamp() * 1000))
        if state == "held":
            held += 1
        else:
            expired += 1
    held += held_base
    return {"total": held + expired + free, "held": held, "expired": expired, "free": free, "held_base": held_base,
            # Expiry instants of held-or-expired leases: live.js recounts held/expired.
            "expiries": " ".join(map(str, sorted(expiries)))}


def _later_iso(renewed_at: str, duration: int, expires: Callable[[], datetime]) -> str:
    """iso(expires()) for the expiry = the renewal (`renewed_at`, its iso text) + `duration`
    whole seconds: within the renewal's minute only the seconds differ, so the text is the
    renewal's with them changed (isoformat was a fifth of a 10,000-row CSV export's cells);
    else iso of the expiry, computed only then."""
    second = int(renewed_at[17:19]) + duration
    return f"{renewed_at[:17]}{second:02}{renewed_at[19:]}" if 0 <= second < 60 else iso(expires())


def export_lease(obj: dict, now: datetime) -> dict:
    """What the export's columns (LEASE_COLUMNS, label and annotation ones) read, without the
    page's texts: the same values as present_lease's (a test holds them equal), at a fraction of
    its cost, for a 10,000-row CSV (web/export.py)."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    expires = lease_expiry(spec) if holder else None   # (only a holder's lease has a state by time)
    renewed_at = iso_text(spec.get("renewTime"))
    return {"namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
            "state_text": STATE_TEXT[lease_state(holder, expires, now)], "holder": holder,
            "renewed_at": renewed_at,
            "expires_at": "" if expires is None else _later_iso(renewed_at, spec["leaseDurationSeconds"], lambda: expires),
            "duration_seconds": spec.get("leaseDurationSeconds"), "acquired_at": iso_text(spec.get("acquireTime")),
            "transitions": spec.get("leaseTransitions"), "created_at": iso_text(meta.get("creationTimestamp")),
            "label_map": meta.get("labels") or {}, "annotation_map": meta.get("annotations") or {}}


@functools.lru_cache(maxsize=64)
def _held_after(now: datetime, duration: int) -> str:
    """The renewal (as lists.TimeText's text) after which a lease of `duration` seconds is still
    held at `now` (renewal + duration > now), compared as text: the same width, or one without
    the fraction (a prefix: then at or before), in time order."""
    return (now - timedelta(seconds=duration)).astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")


def typed_lease(values: tuple, now: datetime) -> dict:
    """export_lease's item for the lease's own columns from its typed row (LEASE_TYPED's values
    after web/export.TYPED_BASE's), no object parsed: the same values (a test holds the files equal)."""
    ns, name, created, holder, duration, renewed, acquired, transitions = values
    renewed_at = time_text_iso(renewed)
    if not holder:
        state, expires_at = "free", ""
    elif renewed is None or duration is None:
        state, expires_at = "unknown", ""
    else:
        state = "held" if renewed > _held_after(now, duration) else "expired"
        expires_at = _later_iso(renewed_at, duration,
                                lambda: expiry(datetime.fromisoformat(renewed).replace(tzinfo=UTC), duration))
    return {"namespace": ns, "name": name, "state_text": STATE_TEXT[state], "holder": holder,
            "renewed_at": renewed_at, "expires_at": expires_at, "duration_seconds": duration,
            "acquired_at": time_text_iso(acquired), "transitions": transitions, "created_at": time_text_iso(created)}


LEASE_TYPED = kinds.TypedExport(
    ("holder_identity", "lease_duration_seconds", TimeText("renew_time"), TimeText("acquire_time"),
     "lease_transitions"), typed_lease,
    frozenset({"state_text", "holder", "renewed_at", "expires_at", "duration_seconds", "acquired_at", "transitions"}))


# ---------------------------------------------------------------------------------------------
# One-click actions and the declaration


# ---------------------------------------------------------------------------------------------
# Sort keys (from the typed columns)


def _stamp(moment):
    return moment.timestamp() if moment is not None else None


def _state_order(values, now):
    """Expired first (what needs attention), then held, held with no expiry, no holder."""
    holder, renewed, duration = values
    if not holder:
        return 3
    if renewed is None or duration is None:
        return 2
    return 1 if strategy.expiry(renewed, duration) > now else 0


def _expiry(values, now):
    holder, renewed, duration = values
    if not holder or renewed is None or duration is None:
        return None
    return strategy.expiry(renewed, duration).timestamp()


def _lease_state(values, now):
    holder, renewed, duration = values
    return lease_state(holder, strategy.expiry(renewed, duration), now)


def _lease_expiry(values):
    holder, renewed, duration = values
    return strategy.expiry(renewed, duration) if holder else None


_LEASE_COLUMNS = ("holder_identity", "renew_time", "lease_duration_seconds")
LEASE_STATES = (   # ?state=: a holder without an expiry is held, as the overview counts it
    kinds.State("held", "Held", _LEASE_COLUMNS, lambda v, now: _lease_state(v, now) in ("held", "unknown"),
                until=_lease_expiry),
    kinds.State("expired", "Expired", _LEASE_COLUMNS, lambda v, now: _lease_state(v, now) == "expired",
                until=_lease_expiry),
    kinds.State("unheld", "No holder", _LEASE_COLUMNS, lambda v, now: _lease_state(v, now) == "free"),
)


def change_facts(before: dict | None, after: dict | None) -> list[str]:
    """What changed (issue 38): "changed holder" when both ends have a lease and the holders differ."""
    if before is None or after is None:
        return []
    holder = [((o.get("spec") or {}).get("holderIdentity") or "") for o in (before, after)]
    return ["changed holder"] if holder[0] != holder[1] else []


LEASE_SORTS = (
    kinds.Sort("state", "State", ("holder_identity", "renew_time", "lease_duration_seconds"), _state_order),
    kinds.Sort("holder", "Holder", ("holder_identity",), lambda v, now: v[0] or None),
    kinds.Sort("expiry", "Expiry", ("holder_identity", "renew_time", "lease_duration_seconds"), _expiry),
    kinds.Sort("duration", "Duration", ("lease_duration_seconds",), lambda v, now: v[0]),
    kinds.Sort("acquired", "Acquired", ("acquire_time",), lambda v, now: _stamp(v[0])),
    kinds.Sort("transitions", "Transitions", ("lease_transitions",), lambda v, now: v[0]),
)


# The list's columns, as the export writes them (kinds.Column).
LEASE_COLUMNS = (   # (widths: leases.css says why)
    replace(kinds.NAME_COLUMN, label="Lease", width="minmax(8.5em, 1.3fr)", min_em=8.5),
    kinds.column("state", "State", ("State", "state_text"), sort="state", width="8.5em", min_em=8.5),
    kinds.column("holder", "Holder", ("Holder", "holder"), sort="holder", width="minmax(7em, 1.5fr)"),
    kinds.column("expiry", "Renewal", ("Renewed", "renewed_at"), ("Expires", "expires_at"), sort="expiry",
                 width="12.5em", min_em=12.5),
    kinds.column("duration", "Duration", ("Duration (s)", "duration_seconds"), sort="duration", css="opt num",
                 width="7.5em", min_em=7.5),
    kinds.column("acquired", "Acquired", ("Acquired", "acquired_at"), sort="acquired", css="opt",
                 width="minmax(8em, 15.5em)", min_em=8),
    kinds.column("transitions", "Transitions", ("Transitions", "transitions"), sort="transitions", css="opt num",
                 width="9.5em", min_em=9.5),
    kinds.AGE_COLUMN,
)


def release(data, namespace: str, name: str, principal, through):
    """The Release button: carries the holder the user saw (refused if it changed since)."""
    holder = data.get("holder", "")
    result = do_release_lease(namespace, name, holder=holder, acting=principal, through=through)
    return result, f"Lease {namespace}/{name} released: “{holder}” no longer holds it."


def bulk_release(namespace: str, name: str, principal, through):
    """Release from the list: whoever holds it now (the confirmation page showed the holders)."""
    holder = (store.get(LEASES, namespace, name).get("spec") or {}).get("holderIdentity") or ""
    return do_release_lease(namespace, name, holder=holder, acting=principal, through=through)


LEASE_PAGES = kinds.register(kinds.KindWeb(
    kind="Lease", plural="leases", detail_view="lease", title="Leases", heading="Leader holders",
    noun="lease", list_noun="leases",
    stylesheets=("coordination/leases.css",), scripts=("coordination/leases.js",),
    present=present_lease, export_item=export_lease, typed_export=LEASE_TYPED, count_by="state", form=LeaseForm,
    overview=kinds.Overview(counts=overview_counts, card=overview_card, count_key="total", warn_key="expired"),
    change_facts=change_facts,
    create_initial={"duration": "15"},
    yaml_skeleton={"spec": {"holderIdentity": "", "leaseDurationSeconds": 15}},
    actions=(kinds.Action("release", "lease_release", release),),
    bulk_actions=(kinds.BulkAction("release", "Release", "released", perform=bulk_release,
                                   note="Releasing cannot be undone: the holders must acquire the leases again."),),
    detail_context=detail_context, detail_partials=("history",),
    sorts=LEASE_SORTS,
    states=LEASE_STATES,
    columns=LEASE_COLUMNS,
    search_columns=(("holder_identity", "holder"),),
))

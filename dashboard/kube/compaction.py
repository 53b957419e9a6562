"""Compaction: bound the revision log, in two windows (issue 38; docs/ARCHITECTURE.md).

The watch window (KUBEDASH_RETAIN_REVISIONS / KUBEDASH_RETAIN_SECONDS) sets the compaction
point: API lists and watches that need a revision below it are answered 410 Expired, as before.
The revisions themselves are kept longer, for the pages' history (?at=, /changes/):

- past the watch window, a revision that changes only heartbeat fields (a Lease's renewTime,
  a status condition's lastHeartbeatTime / lastProbeTime, managedFields' times) is thinned to
  one per KUBEDASH_HISTORY_THIN_SECONDS per object; every other revision is kept, and so is each
  key's newest revision at or below the point (lists at a revision above it read it);
- past KUBEDASH_HISTORY_SECONDS, everything goes except each key's newest revision (the state
  every later moment builds on: a live object's current revision among them);
- the revisions kept past the watch window (but each key's newest there) are stored as deltas
  against a full revision of the same key (kube/delta.py): a renewal is ~150 bytes, not ~1 KB;
- once a span of KUBEDASH_HISTORY_PACK_SECONDS (an hour) lies wholly past the watch window, each
  key's kept MODIFIED revisions in it (but its newest) are packed into one row (kube/pack.py):
  ~20 bytes a revision instead of ~200 bytes of row and ~190 of delta.
"""
from __future__ import annotations

from datetime import timedelta
from itertools import chain

import orjson
from django.conf import settings
from django.db import transaction
from django.dispatch import Signal

from . import asof, delta, pack, registry, revlog, store
from .meta import now
from .models import CompactionState, RevisionPack


# Sent in compaction's transaction when the pages' history is cut; kwargs: `before`, the time it
# now starts at. Apps that keep records of that history (follow's FollowSpans) prune theirs.
history_cut = Signal()


def compaction_point(keep: int | None = None, keep_seconds: int | None = None) -> int:
    """The highest revision that may go: older than both the count and the age retention."""
    keep = settings.KUBEDASH_RETAIN_REVISIONS if keep is None else keep
    keep_seconds = settings.KUBEDASH_RETAIN_SECONDS if keep_seconds is None else keep_seconds
    point = store.current_revision() - keep
    if keep_seconds:
        cutoff = now() - timedelta(seconds=keep_seconds)
        aged = revlog.newest_before(cutoff)
        point = min(point, aged)
    return max(point, 0)


def overdue_seconds(keep: int | None = None, keep_seconds: int | None = None) -> float:
    """How long the oldest revision above the compaction horizon has been due to go (0: none is).

    A revision is due once both retentions are behind it: KUBEDASH_RETAIN_SECONDS since it was
    written, and KUBEDASH_RETAIN_REVISIONS newer revisions written. While compaction runs this
    stays below its interval whatever the write rate (the log's length grows with the load);
    when compaction stops, it grows with the clock (/metrics, the KubedashCompactionStalled alert).
    """
    keep = settings.KUBEDASH_RETAIN_REVISIONS if keep is None else keep
    keep_seconds = settings.KUBEDASH_RETAIN_SECONDS if keep_seconds is None else keep_seconds
    oldest = revlog.first_from(revlog.compacted_revision() + 1)
    if oldest is None:
        return 0.0
    rv, written = oldest
    pushed_out = revlog.first_from(rv + keep)   # the write that took it out of the newest `keep`
    if pushed_out is None:
        return 0.0
    due = max(written + timedelta(seconds=keep_seconds), pushed_out[1])
    return max((now() - due).total_seconds(), 0.0)


def compact(keep: int | None = None, keep_seconds: int | None = 0, history_seconds: int | None = None) -> int:
    """Compact now; returns how many revisions were removed.

    What thinning deletes is worked out before the transaction (revisions below the compaction
    point never change: reading them needs no lock), so the writers' lock is held for the
    deletes alone, not for reading a minute of renewals."""
    history_seconds = settings.KUBEDASH_HISTORY_SECONDS if history_seconds is None else history_seconds
    point = compaction_point(keep, keep_seconds)
    seen = CompactionState.objects.filter(pk=1).values_list("compacted_rv", "history_rv", "thinned_rv").first()
    compacted, history_rv, thinned_rv = seen or (0, 0, 0)
    if point <= compacted:
        return 0
    moment = now()
    # (a binary search: the plain query would read back through a week of revisions every round)
    history = min(point, asof.newest_at(moment - timedelta(seconds=history_seconds)))
    doomed, deltas = plan(max(thinned_rv, history_rv, history), point, floor=history)
    with transaction.atomic():
        state, _ = CompactionState.objects.select_for_update().get_or_create(pk=1)
        if (state.compacted_rv, state.history_rv, state.thinned_rv) != (compacted, history_rv, thinned_rv):
            return 0   # (another compaction ran meanwhile: the next round starts from its result)
        removed = 0
        if history > state.history_rv:
            removed += revlog.drop_before_history(history)
            state.history_rv, state.history_at = history, revlog_time(history) or moment
            history_cut.send(sender=compact, before=state.history_at)
        removed += revlog.delete_revisions(doomed)
        revlog.store_deltas(deltas)
        state.thinned_rv, state.thinned_at = point, revlog_time(point) or moment
        state.compacted_rv, state.compacted_at = point, moment
        state.save(update_fields=["compacted_rv", "compacted_at", "history_rv", "history_at", "thinned_rv",
                                  "thinned_at"])
    pack_spans()
    return removed


# A round packs at most this many spans: the first round after an upgrade to packs (or after
# packing was off) finds the whole history unpacked, a week of it by default, and would plan it
# in memory and write it in one transaction; the rounds after it catch up a few hours at a time.
PACK_SPANS_PER_ROUND = 6


def pack_spans(seconds: int | None = None) -> int:
    """Pack (kube/pack.py) the kept revisions of the spans of `seconds` that ended before the
    thinned point was written and are not packed yet, the oldest PACK_SPANS_PER_ROUND of them;
    returns how many revisions went into packs. Planned before the transaction, like thinning:
    revisions below the thinned point change only by compaction, and the state's check catches
    another round."""
    seconds = settings.KUBEDASH_HISTORY_PACK_SECONDS if seconds is None else seconds
    seen = CompactionState.objects.filter(pk=1).values_list("thinned_rv", "packed_rv").first()
    if seconds <= 0 or not seen or not (written := revlog_time(seen[0])):
        return 0
    thinned, packed = seen
    end = pack.span_start(pack.span(written, seconds), seconds)   # (the thinned point's span is still filling)
    if (first := revlog.first_from(packed + 1)) is not None:
        end = min(end, pack.span_start(pack.span(first[1], seconds) + PACK_SPANS_PER_ROUND, seconds))
    upto = min(asof.newest_at(end - timedelta(microseconds=1)), thinned)
    if upto <= packed:
        return 0
    packs = plan_packs(packed, upto, thinned, seconds)
    with transaction.atomic():
        state = CompactionState.objects.select_for_update().get(pk=1)
        if state.packed_rv != packed or state.thinned_rv < upto:
            return 0
        held = revlog.store_packs(packs)
        state.packed_rv = upto
        state.save(update_fields=["packed_rv"])
        return held


def plan_packs(after: int, upto: int, thinned: int, seconds: int) -> list[RevisionPack]:
    """The packs of the revisions in (after, upto]: per key, each run of MODIFIED revisions within
    one span with no other revision of the key between them; never the key's newest revision at
    or below `thinned` (the next round's thinning and deltas start from it; the newest of all, which
    the typed row and the writes read, is one), nor one a delta above `upto` (up to `thinned`)
    names as its base: those stay rows."""
    named = revlog.delta_bases(upto, thinned)
    out: list[RevisionPack] = []
    key, rows = None, []
    for row in chain(revlog.packable(after, upto), [None]):   # (streamed: an hour of texts is ~150 MB)
        if row is None or tuple(row[1:5]) != key:
            if key is not None and rows:
                if not revlog.written_between(*key, rows[-1][0], thinned):
                    rows.pop()   # (its newest at or below the thinned point: the next thinning reads it)
                out.extend(_packs(key, rows, named, seconds))
            if row is None:
                break
            key, rows = tuple(row[1:5]), []
        rows.append(row)
    return out


def _packs(key: tuple, rows: list[tuple], named: set[int], seconds: int) -> list[RevisionPack]:
    """One key's packs of these revisions (packable's rows): see plan_packs."""
    runs: list[list[tuple]] = [[]]
    for row in rows:
        rv, event, created = row[0], row[5], row[7]
        if event != "MODIFIED" or rv in named:
            runs.append([])
            continue
        if runs[-1] and pack.span(runs[-1][-1][7], seconds) != pack.span(created, seconds):
            runs.append([])
        runs[-1].append(row)
    out = []
    cluster, kind, namespace, name = key
    for run in filter(None, runs):
        texts = revlog.full_texts([row[6] for row in run])
        entries, body = pack.encode([(row[0], row[7], row[8]) for row in run], texts)
        out.append(RevisionPack(first_rv=run[0][0], last_rv=run[-1][0], first_at=run[0][7], count=len(run),
                                cluster=cluster, kind=kind, namespace=namespace, name=name, entries=entries,
                                texts=body))
    return out


def revlog_time(rv: int):
    """When the newest revision at or below rv was written (None: none is logged)."""
    return revlog.last_at_or_below_any(rv)


# ---------------------------------------------------------------------------------------------
# Thinning


HEARTBEAT_CONDITION_FIELDS = ("lastHeartbeatTime", "lastProbeTime")


def without_heartbeats(obj: dict) -> dict:
    """obj without what a heartbeat changes: its resourceVersion, managedFields' times, a Lease's
    renewTime, its status conditions' heartbeat and probe times."""
    meta = dict(obj.get("metadata") or {})
    meta.pop("resourceVersion", None)
    meta["managedFields"] = [{k: v for k, v in e.items() if k != "time"} for e in meta.get("managedFields") or ()]
    out = {**obj, "metadata": meta}
    if obj.get("kind") == "Lease" and isinstance(obj.get("spec"), dict):
        out["spec"] = {k: v for k, v in obj["spec"].items() if k != "renewTime"}
    status = obj.get("status")
    if isinstance(status, dict) and isinstance(status.get("conditions"), list):
        out["status"] = {**status, "conditions": [
            {k: v for k, v in c.items() if k not in HEARTBEAT_CONDITION_FIELDS} if isinstance(c, dict) else c
            for c in status["conditions"]]}
    return out


def thin(after: int, upto: int, every: int | None = None) -> int:
    """Delete what thinnable() finds in (after, upto]; returns how many went."""
    return revlog.delete_revisions(thinnable(after, upto, every))


def thinnable(after: int, upto: int, every: int | None = None) -> list[int]:
    """In (after, upto]: the heartbeat-only revisions (without_heartbeats equal to the key's
    previous revision's) written less than `every` seconds after the key's last kept one; never
    a key's newest revision at or below upto."""
    return plan(after, upto, every)[0]


KEYFRAME_SECONDS = 6 * 3600   # a key's deltas name a base at most this much older


def plan(after: int, upto: int, every: int | None = None, floor: int = 0) -> tuple[list[int], list[tuple[int, str]]]:
    """What compaction does to (after, upto]: the revisions thinning deletes (thinnable), and
    (rv, delta text) for the kept ones stored as deltas (kube/delta.py).

    Deltas: each key's revisions at or below upto, but its newest there (the head: lists above
    the compaction point and the writes read it), are stored as a delta against the key's newest
    full revision before them (a keyframe), unless that is more than KEYFRAME_SECONDS older, at
    or below `floor` (this round's history cut may delete it), or the delta is not at most half
    the text: then the revision stays full and is the next ones' keyframe. The previous round's
    head (the key's newest at or below `after`) is decided the same way now. Nothing names a
    head, so turning it into a delta breaks nothing; a keyframe is never thinned (only revisions
    in (after, upto] are) and outlives the deltas naming it (revlog.drop_before_history)."""
    every = settings.KUBEDASH_HISTORY_THIN_SECONDS if every is None else every
    if upto <= after:
        return [], []
    doomed: list[int] = []
    deltas: list[tuple[int, str]] = []
    for res in registry.all_resources():
        key, kept_at, kept_shape, pending = None, None, None, None
        kept: list[tuple] = []   # this key's kept revisions (rv, type, text, created), in order
        for rv, cluster, ns, name, event, text, created in revlog.key_revisions(res.kind, after, upto):
            if (cluster, ns, name) != key:
                if key is not None:   # (the previous key's: its newest, if pending, is kept)
                    deltas.extend(_deltas(res.kind, key, kept + ([pending] if pending else []), floor))
                key = (cluster, ns, name)
                before = revlog.last_at_or_below(res.kind, cluster, ns, name, after)
                kept = [before] if before else []
                kept_at = before[3] if before else None
                kept_shape = without_heartbeats(orjson.loads(revlog.full_texts([before[2]])[0])) \
                    if before and before[1] != "DELETED" else None
                pending = None
            shape = without_heartbeats(orjson.loads(text)) if event == "MODIFIED" else None
            if pending is not None:   # the previous one was thinnable and is not the key's newest
                if every > 0:
                    doomed.append(pending[0])
                else:
                    kept.append(pending)
                pending = None
            if shape is not None and shape == kept_shape and kept_at is not None \
                    and (created - kept_at).total_seconds() < every:
                pending = (rv, event, text, created)   # goes unless it is the key's newest in the range
                continue
            kept.append((rv, event, text, created))
            kept_at, kept_shape = created, shape if shape is not None else (
                None if event == "DELETED" else without_heartbeats(orjson.loads(text)))
        if key is not None:
            deltas.extend(_deltas(res.kind, key, kept + ([pending] if pending else []), floor))
    return doomed, deltas


def _same_span(a, b) -> bool:
    """Are two write times in one packing span (a delta names a base packed with it: kube/pack.py)?"""
    seconds = settings.KUBEDASH_HISTORY_PACK_SECONDS
    return seconds <= 0 or pack.span(a, seconds) == pack.span(b, seconds)


def _deltas(kind: str, key: tuple, kept: list[tuple], floor: int) -> list[tuple[int, str]]:
    """(rv, delta text) for kept[:-1] (one key's kept revisions in order, the head last; kept[0]
    may be the previous round's head): see plan()."""
    out: list[tuple[int, str]] = []
    frame = None   # (rv, text, created) of the keyframe the next revision may name
    if kept and not delta.is_delta(kept[0][2]):
        prior = revlog.last_at_or_below(kind, *key, kept[0][0] - 1)
        if prior is not None and prior[1] != "DELETED":
            base = delta.base_of(prior[2]) if delta.is_delta(prior[2]) else prior[0]
            hit = prior if base == prior[0] else revlog.last_at_or_below(kind, *key, base)
            frame = (hit[0], hit[2], hit[3]) if hit and hit[0] == base else None
    for rv, event, text, created in kept[:-1]:
        if delta.is_delta(text):
            continue   # (decided in an earlier round)
        if event != "MODIFIED":
            frame = None if event == "DELETED" else (rv, text, created)
            continue
        stored = None
        if frame is not None and frame[0] > floor and (created - frame[2]).total_seconds() <= KEYFRAME_SECONDS \
                and _same_span(frame[2], created):
            stored = delta.encode(text, frame[0], frame[1])
            if stored is not None and len(stored) * 2 > len(text):
                stored = None
        if stored is None:
            frame = (rv, text, created)
        else:
            out.append((rv, stored))
    return out

"""Rule evaluation, in the maintenance leader only, from the change stream (no polling of objects).

The Engine takes a snapshot of the objects its rules read, then follows the revision log itself
(every process's commits, every cluster's), in batches: a commit in this process rings it, and it
reads at most every GATHER_SECONDS, so a stream of renewals wakes it a few times a second, not once
per commit (and this process's watch hub may rest). Another process's commit rings it through
this process's watch-hub follower (kube/notify.listen_for_growth: Redis, SQLite's data_version, a
poll of the revision counter while Redis is down), which reads no log for it, resting or not; a
slow safety poll (KUBEDASH_WATCH_POLL_SECONDS) covers a lost ring. Rules are indexed by (cluster,
kind, namespace): a revision meets only the rules that can see it. A revision whose content, as the rules' kinds read
it (rules.READS), is what they last evaluated decides nothing and is skipped (a renewal of a held
lease). Time-derived states (a lease's expiry, a --for window, a Job without progress) are timers
in this thread.

Each decision (an episode opening or closing, a lease's new holder) is one transaction: the
rule's Episode row for the object, the outbox rows for its channels and the owner's in-app
notification. Decisions are made from state, not from deltas: evaluating the same object twice
decides nothing new, and a message's id (messages.message_id) is unique per channel, so a second
evaluator (a leader takeover's overlap) cannot write a message twice. A new leader starts from
the persisted episodes and the current objects: what changed while no one led is decided then
(several holder changes in that gap are one, from the last remembered holder to the current one);
--for windows still open are started again (a notification may come up to --for late, never lost).
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone as dt_timezone

import orjson
from django.conf import settings
from django.db import DatabaseError, IntegrityError, close_old_connections, connection, transaction

from dashboard.access import clusters
from dashboard.access.models import AccessChange, GroupBinding
from dashboard.access.principals import Principal
from dashboard.kube import notify, registry, revlog, store
from dashboard.kube.errors import ApiError
from dashboard.kube.hub import hub
from dashboard.kube.outage import Outage
from dashboard.kube.storage import revision_committed
from dashboard.kube.revlog import DELETED
from dashboard.kube.selectors import parse_label_selector

from . import conf, messages, metrics, owners
from .messages import FIRING, RESOLVED
from .models import Episode, Rule
from .rules import KINDS, READS

log = logging.getLogger(__name__)

BATCH = 2000              # revisions read at once
# After a read that found several revisions (commits keep coming), the next waits this long: the
# commits meanwhile are read together (a renewal storm costs a few reads a second); a commit after
# a quiet read is read at once.
GATHER_SECONDS = 0.05
HUB_START_SECONDS = 30    # how long starting this process's watch hub (its follower) may take
RULE_FIELDS = ("pk", "name", "kind", "cluster", "namespace", "selector", "for_seconds", "below_percent", "reason",
               "owner_id", "owner_group", "muted_until", "created")


def utcnow() -> datetime:
    return datetime.now(dt_timezone.utc)


@dataclass
class LoadedRule:
    rule: Rule
    principal: Principal
    selector: object
    channels: list = field(default_factory=list)
    allowed: dict = field(default_factory=dict)   # (cluster, namespace) -> may the owner see it (per load)

    def signature(self):
        r = self.rule
        return (r.pk, r.kind, r.cluster, r.namespace, r.selector, r.for_seconds, r.below_percent, r.reason,
                r.owner_id, r.owner_group, r.muted_until, tuple(c.pk for c in self.channels), self.principal)


def load_rules() -> list[LoadedRule]:
    out = []
    for rule in Rule.objects.select_related("owner", "owner__kube_profile").prefetch_related("channels"):
        try:
            selector = parse_label_selector(rule.selector) if rule.selector else None
        except ApiError:
            continue   # (checked when made)
        out.append(LoadedRule(rule, owners.rule_principal(rule), selector, list(rule.channels.all())))
    return out


def rules_stamp() -> tuple:
    """What the loaded rules depend on, in three small reads (no principal built): the rules, their
    channels, the group bindings (a group's rights, a member's). Compared at every reload: the
    rules and their owners' rights are loaded again only when it changed (or an owner's access did)."""
    return (tuple(Rule.objects.order_by("pk").values_list(*RULE_FIELDS)),
            tuple(Rule.channels.through.objects.order_by("pk").values_list("rule_id", "channel_id")),
            tuple(GroupBinding.objects.order_by("group").values_list("group", "role", "namespaces", "clusters")))


class Engine:
    def __init__(self, wake_sender=lambda: None, loop: asyncio.AbstractEventLoop | None = None):
        self.wake_sender = wake_sender
        self.loop = loop   # the watch hub's: its follower rings the engine for other processes' commits
        self.doorbell = threading.Event()
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None
        self.rules: dict[int, LoadedRule] = {}
        # (cluster, kind) -> namespace ("": the rules of every namespace) -> rules: the index
        self.index: dict[tuple[str, str], dict[str, list[LoadedRule]]] = {}
        self.after = 0                              # the last revision read
        self.read_at = 0.0                          # (monotonic) when the log was last read
        self.busy = False                           # that read found several revisions
        self.stamp = None                           # rules_stamp() of the loaded rules
        self.access_after = 0                       # the last access notice read
        # (cluster, kind, ns, name) -> (content, expires) of the object as last evaluated by every rule
        self.evaluated: dict[tuple, tuple] = {}
        self.episodes: dict[tuple, Episode] = {}    # (rule id, cluster, kind, ns, name) -> its row
        self.memory: dict[tuple, dict] = {}         # same key -> this process's windows (bad/good since, progress)
        self.timers: list = []                      # heap of (when, seq, key)
        self.seq = itertools.count()
        self.floor = 0                              # revisions up to this are in the snapshot
        self.seen: dict[tuple, int] = {}            # (cluster, kind, ns, name) -> the snapshot's revision of it
        self.reloaded_at = 0.0
        self.health = Outage(log, "notifications: evaluating rules")
        self.listening = False                      # rung by the hub's follower (_listen)
        self.rung_rv = 0                            # the newest revision this process's commits rang for

    # --- the thread

    def start(self) -> None:
        revision_committed.disconnect(dispatch_uid="notifications-engine")   # (an engine not stopped: this one rung)
        revision_committed.connect(self._ring, weak=False, dispatch_uid="notifications-engine")
        self.thread = threading.Thread(target=self._run, name="notifications-engine", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        revision_committed.disconnect(dispatch_uid="notifications-engine")
        self._listen(False)
        self.stopped.set()
        self.doorbell.set()
        if self.thread is not None:
            self.thread.join(timeout=10)

    def _ring(self, sender, rv=None, **kwargs) -> None:
        """(On commit, in the committing thread) a revision to read: one Event.set()."""
        if rv is not None and rv > self.rung_rv:
            self.rung_rv = rv
        self.doorbell.set()

    def _grown(self, rv: int | None) -> None:
        """(The hub's follower) the log holds revisions up to rv: ring unless they are read or rung
        for already (this process's own commits, which the follower sees too)."""
        if rv is None or rv > max(self.after, self.rung_rv):
            self.doorbell.set()

    def _listen(self, on: bool) -> None:
        """Be rung by the hub's follower for other processes' commits, or not: only while there are
        rules (with none, an idle follower looks at nothing)."""
        if on != self.listening:
            self.listening = on
            (notify.listen_for_growth if on else notify.stop_listening_for_growth)(self._grown)

    def _start_hub(self) -> None:
        """Start this process's watch hub (resting while nobody watches here), whose follower rings
        the engine for other processes' commits; without it they wait for the safety poll."""
        if self.loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(hub.start(), self.loop).result(HUB_START_SECONDS)
        except Exception as err:   # noqa: BLE001 - the rules still run, other processes' commits later
            log.warning("notifications: the watch hub did not start (%r): other processes' commits are read "
                        "every %s s", err, settings.KUBEDASH_WATCH_POLL_SECONDS)

    def _run(self) -> None:
        close_old_connections()
        self._start_hub()
        try:
            while not self.stopped.is_set():
                try:
                    self._step(conf.RULES_RELOAD_SECONDS)
                    self.health.ok()
                except Exception as err:   # noqa: BLE001 - the database, or a bug: logged, started again
                    self.health.failed(err, trace=not isinstance(err, DatabaseError))
                    connection.close()
                    # Start again from the episodes and a snapshot: a transaction may not have committed.
                    self.episodes.clear()
                    self.rules, self.stamp = {}, None
                    self.stopped.wait(1)
                    self.reloaded_at = 0.0
        finally:
            connection.close()

    def _step(self, reload_seconds: float) -> None:
        if time.monotonic() - self.reloaded_at >= reload_seconds:
            self.reload()
        if self.rules:
            self._follow()
        self._run_timers()
        wait = reload_seconds - (time.monotonic() - self.reloaded_at)
        if self.rules:
            wait = min(wait, settings.KUBEDASH_WATCH_POLL_SECONDS)   # (a lost ring)
        if self.timers:
            wait = min(wait, (self.timers[0][0] - utcnow()).total_seconds())
        if not self.rules:
            self.stopped.wait(max(0.0, wait))   # (not the doorbell: with no rule, commits wake nobody)
        elif self.doorbell.wait(max(0.0, wait)):
            self.doorbell.clear()
            gather = self.read_at + GATHER_SECONDS - time.monotonic()
            if self.busy and gather > 0 and not self.stopped.is_set():
                self.stopped.wait(gather)

    def _follow(self) -> None:
        """Evaluate the revisions committed since the last read (every cluster's: one log)."""
        self.read_at, self.busy = time.monotonic(), False
        while not self.stopped.is_set():
            rows = revlog.read_after(self.after, BATCH)
            self.busy = self.busy or len(rows) > 1
            for rv, kind, namespace, name, type_, text, cluster in rows:
                self.on_revision(rv, cluster, kind, namespace, name, type_, text)
            if rows:
                self.after = rows[-1][0]
            if len(rows) < BATCH:
                return

    # --- rules and subscriptions

    def _owners_access_changed(self) -> bool:
        """Did an access notice (access/signals.py) name a rule's owner since the last look?"""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id, subject FROM {AccessChange._meta.db_table} WHERE id > %s ORDER BY id",
                           [self.access_after])
            rows = cursor.fetchall()
        if not rows:
            return False
        self.access_after = rows[-1][0]
        owners_ = {f"user:{lr.rule.owner_id}" for lr in self.rules.values() if not lr.rule.owner_group}
        return any(subject in owners_ for _, subject in rows)

    def reload(self) -> None:
        self.reloaded_at = time.monotonic()
        stamp = rules_stamp()
        if self._owners_access_changed() or stamp != self.stamp:
            self.stamp = None
        if self.stamp is not None:
            return   # nothing the rules or their owners' rights depend on changed: nothing read again
        loaded = {lr.rule.pk: lr for lr in load_rules()}
        old = {pk: lr.signature() for pk, lr in self.rules.items()}
        self.stamp = stamp
        if {pk: lr.signature() for pk, lr in loaded.items()} == old and (self.index or not loaded):
            return
        for pk in set(old) - set(loaded) | {pk for pk in loaded if pk in old and loaded[pk].signature() != old[pk]}:
            for key in [k for k in self.memory if k[0] == pk]:
                del self.memory[key]
        self.rules = loaded
        self.index, self.evaluated = {}, {}
        for lr in loaded.values():
            scope = (lr.rule.cluster, KINDS[lr.rule.kind].watches)
            self.index.setdefault(scope, {}).setdefault(lr.rule.namespace, []).append(lr)
        self.episodes = {(e.rule_id, e.cluster, e.kind, e.namespace, e.name): e for e in Episode.objects.all()}
        metrics.RULES.set(len(loaded))
        self._listen(bool(loaded))
        if not loaded:
            return   # no rule: nothing read (nothing costs)
        self._snapshot()

    def _snapshot(self) -> None:
        """Every rule against the current objects (what changed while nobody evaluated it)."""
        self.floor = self.after = store.current_revision()
        self.seen = {}
        now = utcnow()
        for cluster, kind in self.index:
            res = registry.by_kind(kind)
            with clusters.within(cluster):
                rows = list(revlog.with_current(res.model.objects.all(), "namespace", "name", "current_id"))
            present = set()
            for namespace, name, rv, text in rows:
                self.seen[(cluster, kind, namespace, name)] = rv
                present.add((namespace, name))
                self.evaluate_object(self.rules_for(cluster, kind, namespace), cluster, kind, namespace, name,
                                     orjson.loads(text), now, rv)
            # Episodes of objects gone meanwhile: resolved (or forgotten).
            for key in [k for k in self.episodes if k[1] == cluster and k[2] == kind and (k[3], k[4]) not in present]:
                lr = self.rules.get(key[0])
                if lr is not None:
                    self.evaluate(lr, cluster, kind, key[3], key[4], None, now, None)

    # --- evaluation

    def rules_for(self, cluster: str, kind: str, namespace: str) -> list[LoadedRule]:
        """The rules that can see an object there: its namespace's and every namespace's."""
        by_ns = self.index.get((cluster, kind))
        if by_ns is None:
            return []
        own, every = by_ns.get(namespace), by_ns.get("")
        return (own + every if every else own) if own else (every or [])

    def on_revision(self, rv, cluster, kind, namespace, name, type_, text) -> None:
        rules = self.rules_for(cluster, kind, namespace)
        if not rules:
            return   # no rule can see it: not even parsed
        key = (cluster, kind, namespace, name)
        if rv <= self.floor or rv <= self.seen.get(key, 0):
            return   # already in the snapshot
        self.seen.pop(key, None)
        metrics.EVALUATED.inc()
        self.evaluate_object(rules, cluster, kind, namespace, name, None if type_ == DELETED else orjson.loads(text),
                             utcnow(), rv)

    def evaluate_object(self, rules, cluster, kind, namespace, name, obj, now, rv) -> None:
        """Every rule that can see the object; none when it reads as it did when they last did
        (content equal, and a held lease held at least as long as then: nothing a rule decides
        from can have changed; its timers are set)."""
        key = (cluster, kind, namespace, name)
        reading = READS.get(kind)
        if obj is None or reading is None:
            self.evaluated.pop(key, None)
        else:
            content, expires = reading(obj)
            last = self.evaluated.get(key)
            if last is not None and last[0] == content and (
                    last[1] == expires or (last[1] is not None and expires is not None and now < last[1] <= expires)):
                return
            self.evaluated[key] = (content, expires)
        for lr in rules:
            self.evaluate(lr, cluster, kind, namespace, name, obj, now, rv)

    def in_scope(self, lr: LoadedRule, cluster: str, namespace: str, obj: dict) -> bool:
        rule = lr.rule
        if rule.namespace and namespace != rule.namespace:
            return False
        allowed = lr.allowed.get((cluster, namespace))
        if allowed is None:
            with clusters.within(cluster):
                allowed = lr.allowed[(cluster, namespace)] = lr.principal.can("get", namespace,
                                                                              KINDS[rule.kind].watches)
        if not allowed:
            return False   # the owner may not see it: not told
        if lr.selector is not None:
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if obj.get("kind") == "Event":
                labels = self._involved_labels(cluster, namespace, obj)
            if not lr.selector.matches(labels):
                return False
        return True

    def _involved_labels(self, cluster: str, namespace: str, event: dict) -> dict:
        about = event.get("involvedObject") or {}
        res = registry.by_kind(about.get("kind") or "")
        if res is None:
            return {}
        try:
            with clusters.within(cluster):
                return (store.get(res, about.get("namespace") or namespace, about.get("name") or "")
                        .get("metadata") or {}).get("labels") or {}
        except ApiError:
            return {}

    def evaluate(self, lr: LoadedRule, cluster, kind, namespace, name, obj, now, rv) -> None:
        if obj is not None and not self.in_scope(lr, cluster, namespace, obj):
            obj = None   # out of scope (labels changed, access narrowed): as if gone
        rule, k = lr.rule, KINDS[lr.rule.kind]
        key = (rule.pk, cluster, kind, namespace, name)
        ep = self.episodes.get(key)
        if k.change is not None:
            if obj is None:
                if ep is not None:
                    self._forget(key, ep)
                return
            memo, details = k.change(obj, ep.memo if ep else {})
            if memo is None:
                return
            if details is None:
                self._decide(lr, key, ep, memo=memo)
            else:
                summary = f"holder changed: {details['from']} → {details['to']}"
                self._decide(lr, key, ep, memo=memo, state=FIRING, summary=summary, details=details, rv=rv, now=now)
            return
        mem = self.memory.setdefault(key, {})
        if obj is None:
            self.memory.pop(key, None)
            if ep is not None and ep.firing and k.resolves:
                self._decide(lr, key, ep, state=RESOLVED, summary="gone", details={"deleted": True}, rv=rv, now=now)
            elif ep is not None:
                self._forget(key, ep)
            return
        check = k.condition(obj, rule, now, mem)
        delay = timedelta(seconds=0 if k.window_inside else rule.for_seconds)
        firing = ep is not None and ep.firing
        if check.bad:
            mem.pop("good_since", None)
            if not firing:
                since = mem.setdefault("bad_since", now)
                if now - since >= delay:
                    self._decide(lr, key, ep, state=FIRING, summary=check.summary, details=check.details, rv=rv,
                                 now=now)
                else:
                    self._timer(since + delay, key)
            return
        mem.pop("bad_since", None)
        if firing and k.resolves:
            since = mem.setdefault("good_since", now)
            if now - since >= delay:
                self._decide(lr, key, ep, state=RESOLVED, summary="resolved", details=check.details, rv=rv, now=now)
            else:
                self._timer(since + delay, key)
        if check.flips_at is not None:
            mem["flips_at"] = check.flips_at
            self._timer(check.flips_at, key)
        else:
            mem.pop("flips_at", None)

    def _timer(self, when: datetime, key: tuple) -> None:
        """Evaluate the object again at `when`: one timer per object and rule (the earliest asked
        for; evaluating then asks for the next), so a lease renewed every second costs no timer each."""
        mem = self.memory.setdefault(key, {})
        queued = mem.get("queued")
        if queued is not None and queued <= when:
            return
        mem["queued"] = when
        heapq.heappush(self.timers, (when, next(self.seq), key))

    def _run_timers(self) -> None:
        now = utcnow()
        due = set()
        while self.timers and self.timers[0][0] <= now:
            when, _, key = heapq.heappop(self.timers)
            mem = self.memory.get(key)
            if mem is None or mem.get("queued") != when:
                continue   # superseded by an earlier one, or the object is gone
            del mem["queued"]
            flips = mem.get("flips_at")
            if flips is not None and flips > now and "bad_since" not in mem and "good_since" not in mem:
                # Only waiting for a time the object has moved since (a lease renewed after this
                # timer was set): wait for that one, without reading the object.
                self._timer(flips, key)
                continue
            due.add(key)
            self.evaluated.pop(key[1:], None)   # (evaluated from its current state below: the next write is news)
        objects: dict[tuple, dict | None] = {}   # each object read once, whatever the rules due on it
        for key in due:
            rule_id, cluster, kind, namespace, name = key
            lr = self.rules.get(rule_id)
            if lr is None:
                continue
            where = (cluster, kind, namespace, name)
            if where not in objects:
                try:
                    with clusters.within(cluster):
                        objects[where] = store.get(registry.by_kind(kind), namespace, name)
                except ApiError:
                    objects[where] = None
            self.evaluate(lr, cluster, kind, namespace, name, objects[where], utcnow(), None)

    # --- decisions

    def _forget(self, key: tuple, ep: Episode) -> None:
        Episode.objects.filter(pk=ep.pk).delete()
        self.episodes.pop(key, None)

    def _decide(self, lr: LoadedRule, key: tuple, ep: Episode | None, *, memo=None, state=None, summary="",
                details=None, rv=None, now=None) -> None:
        """One transaction: the episode row, and (for a transition) the outbox rows and the owner's
        notification. A clash with another evaluator's row: re-read, and evaluate again later."""
        rule = lr.rule
        _, cluster, kind, namespace, name = key
        fresh = ep is None
        if fresh:
            ep = Episode(rule=rule, cluster=cluster, kind=kind, namespace=namespace, name=name)
        if memo is not None:
            ep.memo = memo
        sent = 0
        try:
            with transaction.atomic():
                if state == FIRING:
                    ep.number += 1
                    ep.firing = KINDS[rule.kind].change is None   # a change is its own episode: nothing stays open
                elif state == RESOLVED:
                    ep.firing = False
                ep.changed = now or utcnow()
                if state is not None:
                    msg_id = messages.message_id(rule, cluster, kind, namespace, name, ep.number, state)
                    payload = messages.body(rule, state, msg_id, cluster, kind, namespace, name, summary, details,
                                            ep.changed, rv)
                    if state == RESOLVED and not ep.sent:
                        pass   # its firing was muted: its end is not news
                    else:
                        sent = messages.write(rule, payload, lr.channels)
                    ep.sent = bool(sent) or not rule.muted() if state == FIRING else False
                ep.save(force_insert=fresh)
        except IntegrityError:
            # Another evaluator wrote this decision (a takeover's overlap): take its rows as they are.
            log.warning("notifications: %s on %s/%s decided elsewhere; re-reading", rule.name, namespace, name)
            self.episodes = {(e.rule_id, e.cluster, e.kind, e.namespace, e.name): e for e in Episode.objects.all()}
            self.evaluated.pop(key[1:], None)
            return
        self.episodes[key] = ep
        if state is not None:
            metrics.DECISIONS.labels(state).inc()
            log.info("notifications: %s %s %s %s/%s (%s)", rule.name, state, kind, namespace, name, summary)
        if sent:
            self.wake_sender()

"""Work done once per deployment, by one elected process: compaction, clean-ups, and
following the followed clusters (dashboard/follow/runner.py).

Every serving process runs an Elector: client-go's leader election over a Lease in
kubedash's own store (kube-system/kubedash-maintenance, written through kube/store.py, so it
shows on the Leases page and in watches like any other Lease). Its semantics are client-go's
(k8s.io/client-go/tools/leaderelection):

- holderIdentity is `hostname_pid`; acquireTime/renewTime are MicroTime; leaseDurationSeconds
  is the lease duration;
- a candidate may take the Lease when it has no holder, or when the record it last observed
  has not changed for leaseDurationSeconds by the candidate's own clock (so clocks of
  different machines need not agree): coordination's expiry rule, applied to the moment of
  observation instead of renewTime; a takeover sets acquireTime and adds one to
  leaseTransitions; renewals keep both;
- every write is conditional on the resourceVersion read (409: someone else won);
- the leader renews every retry period and stops leading when it could not renew within the
  renew deadline; on shutdown it releases the Lease (coordination's do_release_lease: no
  holder, duration 1 s) so another process takes over at once.
- like client-go's resourcelock with an event recorder, it records `LeaderElection` Events on
  the Lease ("<identity> became leader", "<identity> stopped leading"), through the store as
  any client's Events (dashboard/events/recorder.py: client-go's recorder and correlator).

While it leads, a second thread runs the periodic jobs every KUBEDASH_MAINTENANCE_INTERVAL,
a third keeps a follower running for each followed cluster (stopping them all when it
stops leading), and a fourth the notifications' rule engine and their one sender
(dashboard/notifications/runner.py).
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import threading
import time
from datetime import datetime, timedelta, timezone as dt_timezone

from django.conf import settings
from django.contrib.sessions.models import Session
from django.db import DatabaseError, close_old_connections, connection
from django.db.models import Q
from django.utils import timezone
from prometheus_client import Counter, Gauge

from dashboard.access.models import ApiToken, ShareLink
from dashboard.coordination.actions import do_release_lease
from dashboard.coordination.resource import LEASES
from dashboard.coordination.strategy import expiry
from dashboard.events.recorder import NORMAL, Recorder
from dashboard.follow.runner import Followers
from dashboard.kube import registry, store
from dashboard.kube.compaction import compact
from dashboard.kube.errors import ApiError
from dashboard.kube.expiry import expire
from dashboard.kube.formats import format_micro_time
from dashboard.kube.meta import now as utcnow
from dashboard.kube.outage import Outage
from dashboard.notifications.actions import purge_old as purge_notifications
from dashboard.notifications.runner import Notifier

log = logging.getLogger(__name__)

NAMESPACE, NAME = "kube-system", "kubedash-maintenance"
# Share links and tokens that stopped working this long ago are deleted (the share and token
# pages list the recent ones, so their owners can see why a link or kubeconfig stopped).
SHARE_LINK_RETENTION = timedelta(days=30)
FOLLOW_SYNC_SECONDS = 1.0   # how soon a cluster added (or removed) is followed (or dropped)

LEADER = Gauge("kubedash_maintenance_leader", "1 in the process that holds the maintenance Lease",
               multiprocess_mode="livesum")
RUNS = Counter("kubedash_maintenance_runs_total", "Maintenance jobs run by the elected process", ["job"])
REMOVED = Counter("kubedash_maintenance_removed_total", "Rows the maintenance jobs removed", ["job"])
FAILED = Counter("kubedash_maintenance_failures_total", "Maintenance jobs that failed (retried next round)", ["job"])


def identity() -> str:
    return f"{socket.gethostname()}_{os.getpid()}"


def _own_clock(seconds: float | None = None) -> datetime:
    """A reading of this process's monotonic clock (now, or a past reading) as a datetime, so
    coordination's expiry rule applies to it: differences are true seconds, the date is not."""
    return datetime.fromtimestamp(time.monotonic() if seconds is None else seconds, dt_timezone.utc)


EVENT_COMPONENT = "kubedash-maintenance"   # the recorder's source.component (the field manager too)


def _event_writer():
    """The recorder's two writes of core/v1 Events, through the store; False when refused."""
    def create(namespace: str, event: dict) -> bool:
        try:
            store.create(registry.lookup("", "v1", "events"), namespace, event, manager=EVENT_COMPONENT)
            return True
        except (ApiError, DatabaseError):
            log.warning("maintenance: could not record an event", exc_info=True)
            return False

    def patch(namespace: str, name: str, change: dict) -> bool:
        try:
            store.update(registry.lookup("", "v1", "events"), namespace, name, lambda current: {**current, **change},
                         is_patch=True, manager=EVENT_COMPONENT)
            return True
        except (ApiError, DatabaseError):
            return False

    return create, patch


class Elector:
    """client-go's LeaderElector over a Lease in the store (see the module docstring)."""

    def __init__(self, name: str = NAME, namespace: str = NAMESPACE, holder: str | None = None):
        self.name, self.namespace = name, namespace
        self.holder = holder or identity()
        # The store unreachable or not migrated: one line when it starts and when it ends.
        self.store = Outage(log, "maintenance election: reaching the store")
        self.lease_duration = settings.KUBEDASH_MAINTENANCE_LEASE_SECONDS
        self.renew_deadline = settings.KUBEDASH_MAINTENANCE_RENEW_DEADLINE
        self.retry_period = settings.KUBEDASH_MAINTENANCE_RETRY_PERIOD
        self.observed: tuple | None = None     # the record as last read
        self.observed_at = 0.0                 # when it last changed, by our monotonic clock
        self.renewed_at = 0.0                  # our last successful acquire/renew
        self.leading = False
        self.stopped = threading.Event()
        self.lease: dict | None = None         # the Lease as we last wrote it (the events' object)
        self.recorder = Recorder(EVENT_COMPONENT, "", *_event_writer())

    def is_leader(self) -> bool:
        return self.leading and time.monotonic() - self.renewed_at < self.renew_deadline

    def try_acquire_or_renew(self) -> bool:
        res = LEASES
        stamp = format_micro_time(utcnow())
        try:
            current = store.get(res, self.namespace, self.name)
        except ApiError as err:
            if err.code != 404:
                raise
            spec = {"holderIdentity": self.holder, "leaseDurationSeconds": int(self.lease_duration),
                    "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}
            try:
                self.lease = store.create(res, self.namespace, {
                    "apiVersion": res.api_version, "kind": res.kind,
                    "metadata": {"name": self.name, "namespace": self.namespace}, "spec": spec}).object
            except ApiError:
                return False   # another process created it first
            self._observe((self.holder, stamp), renewed=True)
            return True
        spec = dict(current.get("spec") or {})
        holder = spec.get("holderIdentity") or ""
        self._observe((holder, spec.get("renewTime"), spec.get("leaseDurationSeconds")))
        expires = expiry(_own_clock(self.observed_at), spec.get("leaseDurationSeconds") or int(self.lease_duration))
        if holder and holder != self.holder and expires is not None and _own_clock() < expires:
            return False   # held by someone who renewed within their lease duration
        if holder != self.holder:
            spec["acquireTime"] = stamp
            spec["leaseTransitions"] = (spec.get("leaseTransitions") or 0) + 1
        spec.update(holderIdentity=self.holder, leaseDurationSeconds=int(self.lease_duration), renewTime=stamp)
        meta = {"name": self.name, "namespace": self.namespace,
                "resourceVersion": current["metadata"]["resourceVersion"]}
        for key in ("labels", "annotations"):
            if current["metadata"].get(key):
                meta[key] = current["metadata"][key]
        try:
            self.lease = store.update(res, self.namespace, self.name, {
                "apiVersion": res.api_version, "kind": res.kind, "metadata": meta, "spec": spec}).object
        except ApiError as err:
            if err.code in (404, 409):
                return False   # changed (or deleted) since we read it: someone else acted
            raise
        self._observe((self.holder, stamp, int(self.lease_duration)), renewed=True)
        return True

    def _observe(self, record: tuple, renewed: bool = False) -> None:
        now = time.monotonic()
        if record != self.observed:
            self.observed, self.observed_at = record, now
        if renewed:
            self.renewed_at = now

    def record(self, what: str) -> None:
        """client-go's LeaseLock.RecordEvent: a Normal LeaderElection Event on the Lease."""
        if self.lease is not None:
            self.recorder.event(self.lease, NORMAL, "LeaderElection", f"{self.holder} {what}")

    def release(self) -> None:
        """client-go's release(): no holder, a 1 s duration, so the next candidate takes over now."""
        if not self.leading:
            return
        self.leading = False
        LEADER.set(0)
        self.record("stopped leading")
        try:
            do_release_lease(self.namespace, self.name, holder=self.holder)
        except (ApiError, DatabaseError):
            pass   # someone else holds it, or the database is gone: the lease runs out anyway

    def step(self) -> None:
        """One round: acquire or renew; lose leadership past the renew deadline."""
        try:
            ok = self.try_acquire_or_renew()
        except (ApiError, DatabaseError) as err:
            self.store.failed(err)
            connection.close()
            ok = False
        else:
            self.store.ok()
        if ok and not self.leading:
            self.leading = True
            LEADER.set(1)
            log.warning("maintenance: %s leads (%s/%s)", self.holder, self.namespace, self.name)
            self.record("became leader")
        elif not ok and self.leading and time.monotonic() - self.renewed_at >= self.renew_deadline:
            self.leading = False
            LEADER.set(0)
            log.warning("maintenance: %s lost the lease", self.holder)
            self.record("stopped leading")

    def run(self) -> None:
        close_old_connections()
        try:
            while not self.stopped.is_set():
                self.step()
                # client-go waits retryPeriod between rounds, jittered while it is not the leader.
                wait = self.retry_period * (1 if self.leading else 1 + 0.2 * random.random())
                self.stopped.wait(wait)
        finally:
            connection.close()


def compact_log() -> int:
    return compact(keep_seconds=None)   # the configured retention (count and age)


def purge_share_links() -> int:
    cutoff = timezone.now() - SHARE_LINK_RETENTION
    return ShareLink.objects.filter(Q(expires__lt=cutoff) | Q(revoked_at__lt=cutoff)).delete()[0]


def purge_tokens() -> int:
    """API tokens expired over SHARE_LINK_RETENTION ago (revoked ones have no revocation time
    to age from: they stay until their owner deletes them)."""
    return ApiToken.objects.filter(expires__lt=timezone.now() - SHARE_LINK_RETENTION).delete()[0]


def clear_sessions() -> int:
    return Session.objects.filter(expire_date__lt=timezone.now()).delete()[0]


def expire_objects() -> int:
    """Events (any kind with a TTL) past their time to live."""
    return expire()


JOBS = {"compaction": compact_log, "ttl": expire_objects, "share_links": purge_share_links, "tokens": purge_tokens,
        "sessions": clear_sessions, "notifications": purge_notifications}


def run_jobs() -> None:
    for name, job in JOBS.items():
        try:
            removed = job()
        except DatabaseError:
            log.warning("maintenance job %s failed; retrying next round", name, exc_info=True)
            FAILED.labels(name).inc()
            connection.close()
            continue
        RUNS.labels(name).inc()
        if removed:
            REMOVED.labels(name).inc(removed)


class Maintenance:
    """The elector's thread and the jobs' thread of this process."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None):
        self.elector = Elector()
        self.followers = Followers()
        self.notifier = Notifier(loop, self.elector.is_leader)
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        self.threads = [threading.Thread(target=self.elector.run, name="maintenance-elector", daemon=True),
                        threading.Thread(target=self._jobs, name="maintenance-jobs", daemon=True),
                        threading.Thread(target=self._follow, name="maintenance-follow", daemon=True),
                        threading.Thread(target=self._notify, name="maintenance-notify", daemon=True)]
        for thread in self.threads:
            thread.start()

    def _jobs(self) -> None:
        stopped = self.elector.stopped
        try:
            while not stopped.wait(settings.KUBEDASH_MAINTENANCE_INTERVAL):
                if self.elector.is_leader():
                    close_old_connections()
                    run_jobs()
        finally:
            connection.close()

    def _follow(self) -> None:
        stopped = self.elector.stopped
        try:
            while not stopped.wait(FOLLOW_SYNC_SECONDS):
                close_old_connections()
                self.followers.sync(self.elector.is_leader())
        finally:
            self.followers.stop()
            connection.close()

    def _notify(self) -> None:
        stopped = self.elector.stopped
        try:
            while not stopped.wait(FOLLOW_SYNC_SECONDS):
                self.notifier.sync(self.elector.is_leader())
        finally:
            self.notifier.stop()
            connection.close()

    def stop(self, release: bool = True) -> None:
        """Stop electing and working; release the Lease if held (from any thread)."""
        self.elector.stopped.set()
        for thread in self.threads:
            thread.join(timeout=10)
        if release:
            self.elector.release()
            connection.close()


_maintenance: Maintenance | None = None


def start() -> Maintenance | None:
    """Called by each serving process once it listens (dashboard.server serve)."""
    global _maintenance
    if settings.KUBEDASH_MAINTENANCE and _maintenance is None:
        # The loop serve's reactor runs (the watch hub's), set up before this is called: the
        # notifications' engine subscribes to the hub on it.
        loop = asyncio.get_event_loop_policy().get_event_loop()
        _maintenance = Maintenance(loop)
        _maintenance.start()
    return _maintenance


def stop() -> None:
    if _maintenance is not None:
        _maintenance.stop()

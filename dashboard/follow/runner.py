"""Which clusters this process follows: all of them while it leads, none otherwise.

The maintenance leader (server/maintenance.py, elected through a Lease in kubedash's own
store) calls sync() every second: it starts a ClusterFollower for each Cluster row without
one and stops those whose row is gone; when this process stops leading, it stops them all.
A new leader's followers relist (reconciling the copy), so a handover loses nothing.
"""
from __future__ import annotations

import logging
import time

from django.db import DatabaseError
from django.utils import timezone

from dashboard.kube.outage import Outage

from . import destination, keys
from .following import cluster_api_client
from .informer import ClusterFollower
from .upstream_kubeconfig import KubeconfigError
from .models import Cluster
from .secrets import CredentialsError

log = logging.getLogger(__name__)

RETRY_SECONDS = 30   # a cluster whose follower could not start is tried again after this


class Followers:
    def __init__(self):
        keys.clean_stale()   # key material a process killed while following left behind
        self.running: dict[str, tuple[int, ClusterFollower]] = {}   # name -> (row id, follower)
        self.retry_at: dict[int, float] = {}   # row id -> when to try a cluster that failed to start
        self.reading = Outage(log, "follow: reading the followed clusters")

    def sync(self, leading: bool) -> None:
        wanted = {}
        if leading:
            try:
                wanted = {c.name: c for c in Cluster.objects.all()}
            except DatabaseError as err:
                self.reading.failed(err)
                return
            self.reading.ok()
        for name, (row_id, follower) in list(self.running.items()):
            if name not in wanted or wanted[name].pk != row_id:
                follower.stop()
                del self.running[name]
                log.warning("follow: stopped following %s", name)
        for name, cluster in wanted.items():
            if name not in self.running and time.monotonic() >= self.retry_at.get(cluster.pk, 0):
                follower = self._start(cluster)
                if follower is not None:
                    self.running[name] = (cluster.pk, follower)

    def _start(self, cluster: Cluster) -> ClusterFollower | None:
        """A running follower, or None: its credentials cannot be used (say why on the cluster's
        row, for the Clusters page and the banner; try again after RETRY_SECONDS)."""
        client = None
        try:
            client = cluster_api_client(cluster)
            follower = ClusterFollower(cluster, client)
        except Exception as err:   # noqa: BLE001 - a wrong key, a kubeconfig the client refuses
            if client is not None:
                client.close()   # (its key material with it)
            self.retry_at[cluster.pk] = time.monotonic() + RETRY_SECONDS
            # Our own words only: a library's text may hold the credentials themselves.
            why = str(err) if isinstance(err, (CredentialsError, KubeconfigError)) else \
                f"the client library refused them ({type(err).__name__})"
            message = f"cannot use its credentials: {why}"[:1000]
            log.warning("follow %s: %s", cluster.name, message)
            Cluster.objects.filter(pk=cluster.pk).update(state=Cluster.STALE, state_since=timezone.now(),
                                                          message=message)
            return None
        self.retry_at.pop(cluster.pk, None)
        follower.start()
        log.warning("follow: following %s (%s)", cluster.name, destination.shown(cluster.server))
        return follower

    def stop(self) -> None:
        self.sync(leading=False)

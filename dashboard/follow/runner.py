"""Which clusters this process follows: all of them while it leads, none otherwise.

The maintenance leader (server/maintenance.py, elected through a Lease in kubedash's own
store) calls sync() every second: it starts a ClusterFollower for each Cluster row without
one and stops those whose row is gone; when this process stops leading, it stops them all.
A new leader's followers relist (reconciling the copy), so a handover loses nothing.
"""
from __future__ import annotations

import logging

from django.db import DatabaseError, close_old_connections

from .informer import ClusterFollower
from .models import Cluster

log = logging.getLogger(__name__)


class Followers:
    def __init__(self):
        self.running: dict[str, tuple[int, ClusterFollower]] = {}   # name -> (row id, follower)

    def sync(self, leading: bool) -> None:
        wanted = {}
        if leading:
            close_old_connections()
            try:
                wanted = {c.name: c for c in Cluster.objects.all()}
            except DatabaseError:
                log.warning("follow: could not read the followed clusters", exc_info=True)
                return
        for name, (row_id, follower) in list(self.running.items()):
            if name not in wanted or wanted[name].pk != row_id:
                follower.stop()
                del self.running[name]
                log.warning("follow: stopped following %s", name)
        for name, cluster in wanted.items():
            if name not in self.running:
                self.running[name] = (cluster.pk, self._start(cluster))

    @staticmethod
    def _start(cluster: Cluster) -> ClusterFollower:
        from .clusters import cluster_api_client

        follower = ClusterFollower(cluster, cluster_api_client(cluster))
        follower.start()
        log.warning("follow: following %s (%s)", cluster.name, cluster.server)
        return follower

    def stop(self) -> None:
        self.sync(leading=False)

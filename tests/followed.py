"""Followed clusters in a live server as its follower would leave them, without a follower:
rows of follow.models.Cluster and their objects written by kube/mirror.py (`manage.py shell`)."""
from __future__ import annotations

import json


def shell(server, code: str) -> str:
    return server.manage("shell", "-c", code)


MIRROR = """
from django.utils import timezone
from dashboard.follow.models import Cluster
from dashboard.kube import mirror, registry
args = {args}
def obj(name, holder, rv):
    return {{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {{"name": name, "namespace": args["ns"], "uid": "u-" + name,
                         "creationTimestamp": "2026-01-02T03:04:05Z", "resourceVersion": str(rv)}},
            "spec": {{"holderIdentity": holder, "leaseDurationSeconds": 3600,
                     "renewTime": timezone.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}}}
mirror.mirror(args["cluster"], [mirror.Mirrored(registry.by_kind("Lease"), args["ns"], n, obj(n, h, rv))
                                 for n, h, rv in args["leases"]])
"""


def mirror(server, cluster: str, ns: str, leases: list[tuple[str, str, int]]) -> None:
    shell(server, MIRROR.format(args=json.dumps({"cluster": cluster, "ns": ns, "leases": leases})))


def set_state(server, cluster: str, **fields) -> None:
    shell(server, "from django.utils import timezone\nfrom dashboard.follow.models import Cluster\n"
                   f"Cluster.objects.filter(name={cluster!r}).update(**{fields!r}, state_since=timezone.now())")

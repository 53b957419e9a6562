from django.db import models

from dashboard.kube.models import ObjectRow


class Lease(ObjectRow):
    holder_identity = models.TextField(blank=True, default="")   # free-form and unbounded, as in kube
    lease_duration_seconds = models.IntegerField(null=True)
    acquire_time = models.DateTimeField(null=True)
    renew_time = models.DateTimeField(null=True)
    lease_transitions = models.IntegerField(null=True)

    class Meta(ObjectRow.Meta):
        constraints = [models.UniqueConstraint(fields=["cluster", "namespace", "name"], name="lease_key")]
        ordering = ["namespace", "name"]
        # The all-clusters overview's count of leases without a holder (web/all_clusters.py): a
        # partial index, as holderIdentity is unbounded (too long for a PostgreSQL B-tree entry).
        indexes = [models.Index(fields=["cluster"], condition=models.Q(holder_identity=""), name="lease_unheld")]

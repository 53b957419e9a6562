from django.db import models

from dashboard.kube.models import ObjectRow


class Endpoints(ObjectRow):
    ready_addresses = models.IntegerField(default=0)
    not_ready_addresses = models.IntegerField(default=0)
    ports = models.IntegerField(default=0)

    class Meta(ObjectRow.Meta):
        constraints = [models.UniqueConstraint(fields=["cluster", "namespace", "name"], name="endpoints_key")]
        ordering = ["namespace", "name"]
        # The all-clusters overview's count of Endpoints not ready (web/all_clusters.py).
        indexes = [models.Index(fields=["cluster"], condition=models.Q(not_ready_addresses__gt=0),
                                name="endpoints_not_ready")]
        verbose_name_plural = "endpoints"

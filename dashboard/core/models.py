from django.db import models

from dashboard.kube.models import ObjectRow


class Endpoints(ObjectRow):
    ready_addresses = models.IntegerField(default=0)
    not_ready_addresses = models.IntegerField(default=0)
    ports = models.IntegerField(default=0)

    class Meta(ObjectRow.Meta):
        constraints = [models.UniqueConstraint(fields=["cluster", "namespace", "name"], name="endpoints_key")]
        ordering = ["namespace", "name"]
        verbose_name_plural = "endpoints"

from django.db import models

from dashboard.kube.models import ObjectRow


class Job(ObjectRow):
    completions = models.IntegerField(null=True)
    parallelism = models.IntegerField(null=True)
    succeeded = models.IntegerField(null=True)
    failed = models.IntegerField(null=True)
    active = models.IntegerField(null=True)
    ready = models.IntegerField(null=True)
    suspend = models.BooleanField(default=False)
    completion_mode = models.CharField(max_length=16, default="NonIndexed")
    start_time = models.DateTimeField(null=True)
    completion_time = models.DateTimeField(null=True)
    phase = models.CharField(max_length=32, default="")

    class Meta(ObjectRow.Meta):
        constraints = [models.UniqueConstraint(fields=["cluster", "namespace", "name"], name="job_key")]
        ordering = ["namespace", "name"]
        # The all-clusters overview's count of failed Jobs and the lists' ?state= (web/all_clusters.py).
        indexes = [models.Index(fields=["cluster", "phase"], name="job_phase")]

from django.db import models

from dashboard.kube.models import ObjectRow


class Event(ObjectRow):
    """One core/v1 Event (served as events.k8s.io/v1 too): the columns a page's timeline and
    the warning counts query."""

    involved_kind = models.CharField(max_length=63, blank=True, default="")
    involved_namespace = models.CharField(max_length=253, blank=True, default="")
    involved_name = models.CharField(max_length=253, blank=True, default="")
    involved_uid = models.CharField(max_length=36, blank=True, default="")
    type = models.CharField(max_length=32, blank=True, default="")
    reason = models.CharField(max_length=128, blank=True, default="")
    count = models.IntegerField(default=1)
    last_seen = models.DateTimeField(null=True)

    class Meta(ObjectRow.Meta):
        constraints = [models.UniqueConstraint(fields=["cluster", "namespace", "name"], name="event_key")]
        indexes = [models.Index(fields=["cluster", "involved_kind", "involved_namespace", "involved_name"],
                                name="event_involved"),
                   models.Index(fields=["cluster", "type", "last_seen"], name="event_type_seen"),
                   # The Events page, newest first: ordered and paged by the index (web.py EVENT_PAGES).
                   models.Index(fields=["cluster", "last_seen", "namespace", "name"], name="event_seen")]
        ordering = ["namespace", "name"]

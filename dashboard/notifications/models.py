"""Notifications: channels (where), rules (when), each rule's state per object (episodes), the
outbox (what is to be sent, written with the decision) and the in-app notifications (the bell).

Not to be confused with kube/notify.py, the watch hub's doorbell (how a process learns of commits).
"""
from django.conf import settings
from django.db import models
from django.utils import timezone


class Channel(models.Model):
    """Where notifications go: a webhook (http/https: the structured JSON body, signed when it has
    a secret) or any Apprise URL (slack://, mailto://, ntfy://, ...). The URL and the secret are
    encrypted at rest (follow/secrets.py's key) and never shown again: only `shown`."""

    name = models.CharField(max_length=63, unique=True)
    url = models.BinaryField()                         # encrypted
    secret = models.BinaryField(null=True, blank=True)  # encrypted; None: unsigned
    shown = models.CharField(max_length=32)            # "slack://…": the scheme, the rest masked
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Rule(models.Model):
    """When to tell: a kind of change (rules.KINDS) within a scope, evaluated with its owner's rights."""

    name = models.CharField(max_length=63, unique=True)
    kind = models.CharField(max_length=32)
    cluster = models.CharField(max_length=63, default="local")
    namespace = models.CharField(max_length=253, blank=True, default="")     # "": every namespace
    selector = models.CharField(max_length=1000, blank=True, default="")    # a label selector ("": all)
    for_seconds = models.FloatField(default=0)
    below_percent = models.FloatField(null=True, blank=True)
    reason = models.CharField(max_length=500, blank=True, default="")       # a regex (warning-event)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_rules")
    # A group owns the rule instead (an admin made it): evaluated with the group's binding's rights
    # (access/models.py GroupBinding), its in-app notifications go to every member (owners.py).
    owner_group = models.CharField(max_length=256, blank=True, default="")
    channels = models.ManyToManyField(Channel, blank=True, related_name="rules")
    muted_until = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def muted(self, now=None) -> bool:
        return self.muted_until is not None and self.muted_until > (now or timezone.now())


class Episode(models.Model):
    """A rule's state for one object: how many episodes it has had, whether one is open (firing),
    and what the rule remembers of the object (a lease's last holder). Written only when a decision
    is (with its outbox rows, in one transaction): never per renewal."""

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="episodes")
    cluster = models.CharField(max_length=63)
    kind = models.CharField(max_length=32)
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    number = models.PositiveIntegerField(default=0)   # episodes so far (the open one's number while firing)
    firing = models.BooleanField(default=False)
    sent = models.BooleanField(default=False)         # the open episode's firing went out (not muted)
    memo = models.JSONField(default=dict, blank=True)
    changed = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["rule", "cluster", "kind", "namespace", "name"],
                                               name="notifications_episode_object")]


class Outbox(models.Model):
    """One message for one channel, written in the transaction that decided it; sent by the
    maintenance leader only. `message_id` is stable per episode and transition (retries and
    every channel reuse it): receivers dedupe by it."""

    PENDING, DELIVERED, FAILED, DIGESTED = "pending", "delivered", "failed", "digested"
    STATUSES = (PENDING, DELIVERED, FAILED, DIGESTED)

    message_id = models.CharField(max_length=200)
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="outbox")
    rule = models.ForeignKey(Rule, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    payload = models.JSONField()
    created = models.DateTimeField(default=timezone.now)
    status = models.CharField(max_length=10, default=PENDING, choices=[(s, s) for s in STATUSES])
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=32, blank=True, default="")   # delivery.ERRORS: never a receiver's body
    digest = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="folded")

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [models.UniqueConstraint(fields=["message_id", "channel"], name="notifications_outbox_once")]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="notifications_outbox_due")]


class Notification(models.Model):
    """In the app: one per message for the rule's owner, or each member of its owning group (the
    bell counts the unread ones)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    message_id = models.CharField(max_length=200)
    payload = models.JSONField()
    created = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created", "-id"]
        constraints = [models.UniqueConstraint(fields=["user", "message_id"], name="notifications_inapp_once")]

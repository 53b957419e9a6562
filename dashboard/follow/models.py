"""Followed clusters: where they are, how to reach them (encrypted), how their copy is doing."""
from datetime import timedelta

from django.db import models
from django.utils import timezone

HEARTBEAT_STALE = timedelta(seconds=15)   # a live follower writes its heartbeat more often than this


class Cluster(models.Model):
    """A real cluster whose Leases, Endpoints and Jobs kubedash follows, read-only.

    Its objects live in kubedash's store under `name` (access/clusters.py). `credentials` is
    the kubeconfig reduced to the one context used, files inlined, encrypted (follow/secrets.py):
    never shown again, never logged.
    """

    SYNCING, LIVE, STALE = "syncing", "live", "stale"
    # How the dashboard's writes reach the cluster (follow/writes.py); the follower only reads.
    READ_ONLY, AS_USER, OWN_CREDENTIALS = "read-only", "as-user", "own-credentials"
    WRITE_MODES = (READ_ONLY, AS_USER, OWN_CREDENTIALS)

    name = models.CharField(max_length=63, unique=True)
    server = models.CharField(max_length=1000)                 # the API server URL (shown)
    context = models.CharField(max_length=253, blank=True, default="")   # the kubeconfig context used (shown)
    namespace = models.CharField(max_length=253, blank=True, default="")  # "": every namespace
    credentials = models.BinaryField()
    writes = models.CharField(max_length=16, default=READ_ONLY,
                              choices=[(m, m) for m in (READ_ONLY, AS_USER, OWN_CREDENTIALS)])
    created = models.DateTimeField(default=timezone.now)
    # What the follower last said (written by the elected process, read by every page).
    state = models.CharField(max_length=8, default=SYNCING)    # syncing (first list / relist), live, stale
    state_since = models.DateTimeField(default=timezone.now)
    last_event_at = models.DateTimeField(null=True, blank=True)   # the last change read upstream
    heartbeat_at = models.DateTimeField(null=True, blank=True)    # the follower last confirmed the watch is up
    # The last word from the cluster (an event, a bookmark, a list): its copy is known as of then.
    heard_at = models.DateTimeField(null=True, blank=True)
    message = models.CharField(max_length=1000, blank=True, default="")   # why it is stale (the last error)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def is_current(self, now=None) -> bool:
        """Is the copy live now: the follower says every watch heard from the cluster within the
        silence deadline, and it said so lately (a follower that died says nothing)? Pages,
        `follow list` and /metrics all ask this."""
        now = now or timezone.now()
        return (self.state == self.LIVE and self.heartbeat_at is not None
                and now - self.heartbeat_at <= HEARTBEAT_STALE)

    @property
    def known_at(self):
        """The last moment kubedash knew the cluster's state: its last word (an event, a
        bookmark, a list); rows from before heard_at existed: the follower's last report."""
        return self.heard_at or self.heartbeat_at or self.last_event_at or self.state_since

    def moment(self, now=None):
        """When a page computes this cluster's time-derived states (held / expired, countdowns,
        durations): now while the copy is current, else the moment it is known as of: what
        happened since is unknown, and a guess ("expired") is not shown as a fact."""
        now = now or timezone.now()
        return now if self.is_current(now) else min(now, self.known_at)

    def gaps(self, start, end) -> list[tuple]:
        """(from, to) of each span in [start, end] in which kubedash was not following this
        cluster (no FollowSpan covers it: before it first was live, between two spans, and
        after the last one unless the copy is current now); `to` None: until now."""
        out, known = [], max(start, self.created)
        for since, until in self.spans.filter(until__gte=start, since__lte=end).order_by("since").values_list(
                "since", "until"):
            if since > known:
                out.append((known, since))
            known = max(known, until)
        if known < end and not self.is_current():
            out.append((known, None))
        return out

    def gap_at(self, moment) -> tuple | None:
        """The gap (from, to) that `moment` lies in (to None: until now), or None: followed then,
        or before kubedash was told to follow it (`created`)."""
        if moment < self.created or self.spans.filter(since__lte=moment, until__gte=moment).exists():
            return None
        after = self.spans.filter(since__gt=moment).order_by("since").values_list("since", flat=True).first()
        if after is None and self.is_current():
            return None   # (after the open span's last heartbeat, which lags by at most HEARTBEAT_SECONDS)
        before = self.spans.filter(until__lt=moment).order_by("-until").values_list("until", flat=True).first()
        return (before or self.created, after)


class FollowSpan(models.Model):
    """A span in which kubedash's copy of a followed cluster was current: its follower watched
    every kind and heard from it (Cluster.LIVE). Written by the follower (follow/informer.py):
    opened when the copy becomes live, `until` moved on with each heartbeat, and set back to the
    last word heard when it stops being live (silent, disconnected, relisting after a 410). A
    process that dies leaves its last heartbeat. Outside the spans the cluster was not followed:
    a page as of a moment there says so and shows nothing as current (web/timetravel.py)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="spans")
    since = models.DateTimeField()
    until = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["cluster", "since"], name="follow_span_since")]

    @classmethod
    def prune(cls, before) -> int:
        """Delete the spans that ended before the pages' history starts (`before`: compaction cut
        it there) and are not needed to say when a gap after the cut began (Cluster.gap_at): each
        one followed by a later span that began before the cut. So a span that straddles the cut
        stays, and so does the last span before it when none straddles. Returns how many went."""
        later = cls.objects.filter(cluster=models.OuterRef("cluster"), since__lte=before,
                                   until__gt=models.OuterRef("until"))
        return cls.objects.filter(until__lt=before).filter(models.Exists(later)).delete()[0]


class UserCredentials(models.Model):
    """One user's own kubeconfig for a cluster in `own-credentials` mode: the same rules as the
    cluster's (one context, files inlined or refused, no exec), encrypted, never shown again."""

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="cluster_credentials")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="user_credentials")
    credentials = models.BinaryField()
    saved = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "cluster"], name="one_credentials_per_user_cluster")]

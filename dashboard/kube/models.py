"""Storage: a global revision log plus one typed table per kind.

Revision.rv is the etcd-like revision: global across kinds, strictly increasing, and the
resourceVersion of the object it wrote. Revision.object is the object's JSON exactly as
served, so a GET or a list streams stored text without re-encoding it.

Each kind's table (an ObjectRow subclass) holds one row per live object: the ObjectMeta
columns and the typed columns the pages query, and `current`, the revision that holds the
object's JSON. Compaction never removes a live object's current revision.

Every row belongs to a cluster (access/clusters.py): "local" for kubedash's own objects, or
the name of a followed cluster (dashboard/follow). `objects` sees only the cluster the work
is about (the context variable); `everywhere` sees all of them (the watch hub, compaction).
"""
from django.db import models

from dashboard.access import clusters


class InCluster(models.Manager):
    """The rows of the cluster the current work is about (access/clusters.py)."""

    def get_queryset(self):
        return super().get_queryset().filter(cluster=clusters.current())


def cluster_column():
    # The default is read when a row is created: the cluster the work is about.
    return models.CharField(max_length=63, default=clusters.current, db_default=clusters.LOCAL)


class RevisionCounter(models.Model):
    """A single row (id=1) whose value is the last revision handed out."""

    value = models.BigIntegerField(default=0)

    class Meta:
        db_table = "kube_revision_counter"


class CompactionState(models.Model):
    """A single row (id=1): revisions at or below compacted_rv may be gone (410 Expired)."""

    compacted_rv = models.BigIntegerField(default=0)
    compacted_at = models.DateTimeField(null=True)   # when the last compaction ran (the history pages say so)
    # The pages' history (issue 38, compaction.py): nothing at or below history_rv (written
    # before history_at) is kept but each key's newest revision there; revisions up to
    # thinned_rv (written before thinned_at) had their renewal-only writes thinned.
    history_rv = models.BigIntegerField(default=0, db_default=0)
    history_at = models.DateTimeField(null=True)
    thinned_rv = models.BigIntegerField(default=0, db_default=0)
    thinned_at = models.DateTimeField(null=True)
    # Kept revisions up to packed_rv were packed (kube/pack.py) where they could be.
    packed_rv = models.BigIntegerField(default=0, db_default=0)

    class Meta:
        db_table = "kube_compaction"


class Revision(models.Model):
    ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"

    rv = models.BigIntegerField(primary_key=True)
    cluster = cluster_column()
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    type = models.CharField(max_length=8)
    object = models.TextField()
    created = models.DateTimeField()
    # A followed cluster's own resourceVersion of the object (kept beside rv, kubedash's).
    upstream_rv = models.CharField(max_length=64, blank=True, default="", db_default="")

    objects = InCluster()
    everywhere = models.Manager()

    class Meta:
        db_table = "kube_revision"
        base_manager_name = "everywhere"
        indexes = [models.Index(fields=["cluster", "kind", "namespace", "name", "rv"], name="kube_rev_key"),
                   # The deletions (few): the pages' past (kube/asof.py) finds the keys deleted since a moment.
                   models.Index(fields=["kind", "rv"], condition=models.Q(type="DELETED"), name="kube_rev_deleted")]


class RevisionPack(models.Model):
    """Kept revisions of one object past the watch window, several in one row (kube/pack.py:
    the format; kube/revlog.py reads them beside the log's rows)."""

    first_rv = models.BigIntegerField(primary_key=True)
    cluster = cluster_column()
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    last_rv = models.BigIntegerField()
    first_at = models.DateTimeField()   # (when its first revision was written: ?at= a time finds its pack)
    count = models.IntegerField()
    entries = models.BinaryField()
    texts = models.BinaryField()

    objects = InCluster()
    everywhere = models.Manager()

    class Meta:
        db_table = "kube_revision_pack"
        base_manager_name = "everywhere"
        indexes = [models.Index(fields=["cluster", "kind", "namespace", "name", "first_rv"], name="kube_pack_key"),
                   # (the packs holding a revision: last_rv >= rv and first_rv <= rv, read from the index)
                   models.Index(fields=["last_rv", "first_rv"], name="kube_pack_last"),
                   models.Index(fields=["first_at"], name="kube_pack_time")]


class ObjectRow(models.Model):
    """ObjectMeta columns shared by every kind; subclasses add typed columns."""

    cluster = cluster_column()
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=36)
    # Not indexed: nothing looks a row up by its revision (reads join the log's primary key from
    # here), and an index on a column every write changes kept PostgreSQL from updating the
    # row in place (a HOT update): each renewal added an entry to every index of the table.
    current = models.ForeignKey(Revision, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False,
                                db_column="resource_version", related_name="+")
    generation = models.BigIntegerField(null=True)
    creation_timestamp = models.DateTimeField()
    deletion_timestamp = models.DateTimeField(null=True)
    labels = models.JSONField(default=dict)

    objects = InCluster()
    everywhere = models.Manager()

    class Meta:
        abstract = True
        base_manager_name = "everywhere"

    @property
    def resource_version(self) -> int:
        return self.current_id

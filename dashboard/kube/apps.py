from django.apps import AppConfig
from django.db.models.signals import post_migrate


class KubeConfig(AppConfig):
    name = "dashboard.kube"
    label = "kube"
    verbose_name = "Kubernetes API machinery"

    def ready(self):
        from dashboard.access import authentication  # noqa: PLC0415 (in ready(): it imports models, only once the registry is set up)

        # (notify connects the hub's doorbell to revision_committed and access_changed)
        from . import notify  # noqa: F401, PLC0415 (in ready(): it imports models)
        from . import storage  # noqa: PLC0415 (in ready(): it imports models)

        db = storage.backend()
        # (a flush sends it too: a flushed database numbers revisions from 1 again)
        post_migrate.connect(db.forget_cache, dispatch_uid="kubedash-storage-forget-cache")
        # A database whose writes check a token in their own statement hashes the token's caller
        # into a fingerprint that the token query reads (access imports nothing of kube: handed over).
        fingerprint = db.fingerprint_sql(authentication.FINGERPRINT_COLUMNS)
        if fingerprint is not None:
            authentication.use_fingerprint(fingerprint)

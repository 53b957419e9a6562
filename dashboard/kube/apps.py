from django.apps import AppConfig


class KubeConfig(AppConfig):
    name = "dashboard.kube"
    label = "kube"
    verbose_name = "Kubernetes API machinery"

    def ready(self):
        # (in ready(): notify imports models, which may be imported only once the app registry is set up)
        from django.db.models.signals import post_migrate

        from . import notify  # noqa: F401  (connects the hub's doorbell to revision_committed, access_changed)
        from . import objcache

        # (a flush sends it too: a flushed database numbers revisions from 1 again)
        post_migrate.connect(objcache.clear, dispatch_uid="kubedash-objcache-clear")

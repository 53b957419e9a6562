from django.apps import AppConfig


class KubeConfig(AppConfig):
    name = "dashboard.kube"
    label = "kube"
    verbose_name = "Kubernetes API machinery"

    def ready(self):
        # (in ready(): notify imports models, which may be imported only once the app registry is set up)
        from . import notify  # noqa: F401  (connects the hub's doorbell to revision_committed, access_changed)

from django.apps import AppConfig


class KubeConfig(AppConfig):
    name = "dashboard.kube"
    label = "kube"
    verbose_name = "Kubernetes API machinery"

    def ready(self):
        from . import watch  # noqa: F401  (connects the hub to revision_committed)

from django.apps import AppConfig


class KubeConfig(AppConfig):
    name = "dashboard.kube"
    label = "kube"
    verbose_name = "Kubernetes API machinery"

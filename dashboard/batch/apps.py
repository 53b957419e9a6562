from django.apps import AppConfig


class BatchConfig(AppConfig):
    name = "dashboard.batch"
    label = "batch"

    def ready(self):
        from . import resource  # noqa: F401, PLC0415 (in ready(): registers the kind)

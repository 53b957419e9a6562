from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "dashboard.core"
    label = "core"

    def ready(self):
        from . import resource  # noqa: F401, PLC0415 (in ready(): registers the kind)

from django.apps import AppConfig


class CoordinationConfig(AppConfig):
    name = "dashboard.coordination"
    label = "coordination"

    def ready(self):
        from . import resource  # noqa: F401, PLC0415 (in ready(): registers the kind)

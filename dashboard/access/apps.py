from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "dashboard.access"
    label = "access"

    def ready(self):
        from . import signals

        signals.connect()

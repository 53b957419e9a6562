from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "dashboard.access"
    label = "access"

    def ready(self):
        from . import signals  # noqa: PLC0415 (in ready(): it imports models, loadable only once the app registry is set up)

        signals.connect()

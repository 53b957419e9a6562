from django.apps import AppConfig


class EventsConfig(AppConfig):
    name = "dashboard.events"
    label = "events"

    def ready(self):
        from . import resource  # noqa: F401, PLC0415 (in ready(): registers the kind, as v1 and events.k8s.io/v1)

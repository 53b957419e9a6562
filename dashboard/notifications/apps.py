from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "dashboard.notifications"
    label = "notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import bell  # noqa: PLC0415 (the apps' registrations in ready(): the header's bell with web)

        bell.register()

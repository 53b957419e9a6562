from django.apps import AppConfig


class SavedConfig(AppConfig):
    """Saved views, default views and pins (issue 40): a person's own shape of the pages."""

    name = "dashboard.saved"
    label = "saved"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # The Overview's live panels: the pinned objects, pushed with its other panels.
        from dashboard.web import live   # noqa: PLC0415 (models load before apps are ready)

        from . import pins   # noqa: PLC0415
        live.OVERVIEW_PANELS.append(pins.panel_fragment)

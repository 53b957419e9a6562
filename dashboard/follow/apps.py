from django.apps import AppConfig


class FollowConfig(AppConfig):
    name = "dashboard.follow"
    label = "follow"
    default_auto_field = "django.db.models.BigAutoField"

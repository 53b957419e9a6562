from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "dashboard.web"
    label = "web"

    def ready(self):
        # Each installed app's web.py registers its kinds' pages (web.kinds), as admin.py
        # modules register with the admin site.
        from django.utils.module_loading import autodiscover_modules

        autodiscover_modules("web")

        # Share-link revocation across worker processes when no Redis carries it (share.py).
        from django.conf import settings

        if not settings.REDIS_URL:
            from dashboard.kube.watch import hub

            from .share import close_stopped_share_sockets

            hub.change_listeners.append(close_stopped_share_sockets)

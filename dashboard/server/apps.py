from django.apps import AppConfig
from django.conf import settings


class ServerConfig(AppConfig):
    name = "dashboard.server"
    label = "server"

    def ready(self):
        if not settings.REDIS_URL:
            from dashboard.kube.watch import hub

            from .follow import close_stopped_share_sockets

            hub.change_listeners.append(close_stopped_share_sockets)

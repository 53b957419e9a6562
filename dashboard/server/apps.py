from django.apps import AppConfig


class ServerConfig(AppConfig):
    name = "dashboard.server"
    label = "server"

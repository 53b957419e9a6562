from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class WebConfig(AppConfig):
    name = "dashboard.web"
    label = "web"

    def ready(self):
        # Each installed app's web.py registers its kinds' pages (web.kinds), as admin.py
        # modules register with the admin site.
        autodiscover_modules("web")

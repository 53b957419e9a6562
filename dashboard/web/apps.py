from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "dashboard.web"
    label = "web"

    def ready(self):
        # Each installed app's web.py registers its kinds' pages (web.kinds), as admin.py
        # modules register with the admin site.
        from django.utils.module_loading import autodiscover_modules

        autodiscover_modules("web")

"""Django's admin app with kubedash's site (admin_site.py), which INSTALLED_APPS names instead of
django.contrib.admin. Apart from the site: this is imported before the models are."""
from django.contrib.admin.apps import AdminConfig


class KubedashAdminConfig(AdminConfig):
    default_site = "dashboard.web.admin_site.KubedashAdminSite"

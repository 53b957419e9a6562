"""Routes of the write pages (included by dashboard/web/urls.py before the detail pages).

/<kind>/new/                                create (?as=yaml: from YAML; ?namespace=: preset)
/<kind>/<namespace>/<name>/edit/            edit with the form
/<kind>/<namespace>/<name>/yaml/            edit as YAML
/<kind>/<namespace>/<name>/delete/          confirm (GET) and delete (POST)
/<kind>/<namespace>/<name>/actions/         the detail page's action panel (htmx refresh)
/leases/<namespace>/<name>/release/         POST: release the holder
/endpoints/<namespace>/<name>/readiness/    POST ip, ready=true|false: move an address
/jobs/<namespace>/<name>/suspend/           POST suspend=true|false

<kind> is leases, endpoints or jobs. Every one of these paths has three segments after the
kind or a fixed "new", so none can be mistaken for a detail page (/<kind>/<namespace>/<name>/).
"""
from django.urls import path, register_converter

from . import edit_views as v


class KindConverter:
    regex = "leases|endpoints|jobs"

    def to_python(self, value):
        return value

    def to_url(self, value):
        return value


register_converter(KindConverter, "kind")

urlpatterns = [
    path("<kind:plural>/new/", v.create, name="object_new"),
    path("<kind:plural>/<str:namespace>/<str:name>/edit/", v.edit, name="object_edit"),
    path("<kind:plural>/<str:namespace>/<str:name>/yaml/", v.edit_yaml, name="object_yaml"),
    path("<kind:plural>/<str:namespace>/<str:name>/delete/", v.delete, name="object_delete"),
    path("<kind:plural>/<str:namespace>/<str:name>/actions/", v.actions, name="object_actions"),
    # Kind-specific actions: the kind is fixed by the path, not taken from it.
    path("leases/<str:namespace>/<str:name>/release/", v.release, {"plural": "leases"}, name="lease_release"),
    path("endpoints/<str:namespace>/<str:name>/readiness/", v.readiness, {"plural": "endpoints"},
         name="endpoints_readiness"),
    path("jobs/<str:namespace>/<str:name>/suspend/", v.suspend, {"plural": "jobs"}, name="job_suspend"),
]

"""Routes of the write pages (included by dashboard/web/urls.py before the detail pages).

/<plural>/new/                                create (?as=yaml: from YAML; ?namespace=: preset)
/<plural>/<namespace>/<name>/edit/            edit with the form
/<plural>/<namespace>/<name>/yaml/            edit as YAML
/<plural>/<namespace>/<name>/delete/          confirm (GET) and delete (POST)
/<plural>/<namespace>/<name>/actions/         the detail page's action panel (htmx refresh)
/<plural>/<namespace>/<name>/<action>/        POST: a one-click action of the kind (KindWeb.actions)

<plural> is a registered kind's (web.kinds). Every one of these paths has three segments after
the kind or a fixed "new", so none can be mistaken for a detail page (/<plural>/<namespace>/<name>/).
"""
from django.urls import path, register_converter

from . import edit_views as v
from . import kinds


class KindConverter:
    """One of the registered kinds' plurals (a choice: "a|b|c")."""

    regex = "|".join(kinds.plurals())

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
]
# Kind-specific actions: the kind and the action are fixed by the path, not taken from it.
urlpatterns += [
    path(f"{web.plural}/<str:namespace>/<str:name>/{a.name}/", v.run_action, {"plural": web.plural, "action": a.name},
         name=a.route)
    for web in kinds.registered() for a in web.actions
]

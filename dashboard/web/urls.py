"""The pages (included at the root by dashboard/urls.py, after the API paths): the overview,
the write pages, a list and a detail page for every registered kind and a list for every feed
(web.kinds)."""
from django.urls import include, path

from . import bulk_views, changes_views, column_views, history_views, kinds, oidc_views, views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("search/", views.SearchView.as_view(), name="search"),
    path("changes/", changes_views.changes, name="changes"),   # what changed between two moments (issue 38)
    path("", include("dashboard.web.edit_urls")),
    path("<kind:plural>/bulk/", bulk_views.bulk, name="bulk"),
    path("<kind:plural>/bulk-undo/", bulk_views.undo, name="bulk_undo"),
    path("<kind:plural>/<str:namespace>/<str:name>/restore/", bulk_views.restore, name="object_restore"),
]
for web in kinds.registered():
    urlpatterns += [
        path(f"{web.plural}/", views.KindListView.as_view(web=web), name=web.plural),
        path(f"{web.plural}/columns/", column_views.ColumnsView.as_view(web=web), name=f"{web.plural}-columns"),
        path(f"{web.plural}/<str:namespace>/<str:name>/", views.DetailView.as_view(web=web), name=web.detail_view),
        path(f"{web.plural}/<str:namespace>/<str:name>/history/", history_views.history_view, {"web": web},
             name=f"{web.detail_view}-history"),
        path(f"{web.plural}/<str:namespace>/<str:name>/fields/", history_views.fields_view, {"web": web},
             name=f"{web.detail_view}-fields"),
    ]
urlpatterns += [p for web in kinds.feeds() for p in (   # read-only lists: no detail pages
    path(f"{web.plural}/", views.KindListView.as_view(web=web), name=web.plural),
    path(f"{web.plural}/columns/", column_views.ColumnsView.as_view(web=web), name=f"{web.plural}-columns"))]
urlpatterns += [
    path("accounts/login/", oidc_views.LoginView.as_view(), name="login"),
    path("accounts/oidc/login/", oidc_views.oidc_login, name="oidc_login"),
    path("accounts/oidc/callback/", oidc_views.oidc_callback, name="oidc_callback"),
    path("accounts/no-access/", oidc_views.no_access, name="no_access"),
    path("accounts/logout/", oidc_views.LogoutView.as_view(), name="logout"),
    path("accounts/signed-out/", oidc_views.signed_out, name="signed_out"),
    path("accounts/oidc/backchannel-logout/", oidc_views.backchannel_logout, name="oidc_backchannel_logout"),
]

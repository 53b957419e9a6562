"""The pages (included at the root by dashboard/urls.py, after the API paths): the overview,
the write pages, a list and a detail page for every registered kind and a list for every feed
(web.kinds)."""
from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import bulk_views, changes_views, history_views, kinds, views

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
        path(f"{web.plural}/<str:namespace>/<str:name>/", views.DetailView.as_view(web=web), name=web.detail_view),
        path(f"{web.plural}/<str:namespace>/<str:name>/history/", history_views.history_view, {"web": web},
             name=f"{web.detail_view}-history"),
        path(f"{web.plural}/<str:namespace>/<str:name>/fields/", history_views.fields_view, {"web": web},
             name=f"{web.detail_view}-fields"),
    ]
urlpatterns += [path(f"{web.plural}/", views.KindListView.as_view(web=web), name=web.plural)
                for web in kinds.feeds()]   # read-only lists: no detail pages
urlpatterns += [
    path("accounts/login/", auth_views.LoginView.as_view(template_name="registration/login.html",
                                                         redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="/accounts/login/"), name="logout"),
]

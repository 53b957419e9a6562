"""The pages (included at the root by dashboard/urls.py, after the API paths)."""
from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("", include("dashboard.web.edit_urls")),
    path("leases/", views.LeaseListView.as_view(), name="leases"),
    path("leases/<str:namespace>/<str:name>/", views.LeaseDetailView.as_view(), name="lease"),
    path("endpoints/", views.EndpointsListView.as_view(), name="endpoints"),
    path("endpoints/<str:namespace>/<str:name>/", views.EndpointsDetailView.as_view(), name="endpoints_detail"),
    path("jobs/", views.JobListView.as_view(), name="jobs"),
    path("jobs/<str:namespace>/<str:name>/", views.JobDetailView.as_view(), name="job"),
    path("accounts/login/", auth_views.LoginView.as_view(template_name="registration/login.html",
                                                         redirect_authenticated_user=True), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="/accounts/login/"), name="logout"),
]

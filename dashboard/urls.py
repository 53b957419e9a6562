"""HTTP routes: the Kubernetes API paths (all kinds, one generic view each) and the pages."""
from django.contrib import admin
from django.urls import include, path, re_path

from dashboard.kube import discovery_views as disc
from dashboard.kube import reviews
from dashboard.kube.review_views import ReviewView
from dashboard.kube.views import NotFoundView, ObjectView
from dashboard.kube.watch_views import collection_or_watch, watch_path
from dashboard.server.metrics import metrics

obj = ObjectView.as_view()


# The same shapes under /api/{version} (core group) and /apis/{group}/{version}.
def kube_paths(prefix):
    return [
        path(f"{prefix}/watch/<str:plural>", watch_path),
        path(f"{prefix}/watch/namespaces/<str:namespace>/<str:plural>", watch_path),
        path(f"{prefix}/watch/namespaces/<str:namespace>/<str:plural>/<str:name>", watch_path),
        path(f"{prefix}/<str:plural>", collection_or_watch),
        path(f"{prefix}/namespaces/<str:namespace>/<str:plural>", collection_or_watch),
        path(f"{prefix}/namespaces/<str:namespace>/<str:plural>/<str:name>", obj),
        path(f"{prefix}/namespaces/<str:namespace>/<str:plural>/<str:name>/<str:subresource>", obj),
    ]


urlpatterns = [
    path("healthz", disc.healthz),
    path("livez", disc.healthz),
    path("readyz", disc.readyz),
    path("readyz/<str:check>", disc.readyz),
    path("metrics", metrics),
    path("version", disc.VersionView.as_view()),
    path("version/", disc.VersionView.as_view()),
    path("api", disc.CoreDiscoveryView.as_view()),
    path("api/", disc.CoreDiscoveryView.as_view()),
    path("apis", disc.GroupsDiscoveryView.as_view()),
    path("apis/", disc.GroupsDiscoveryView.as_view()),
    # Discovery answers with and without a trailing slash (client-go keeps it: /apis/batch/).
    path("api/<str:version>", disc.ResourceListView.as_view()),
    path("api/<str:version>/", disc.ResourceListView.as_view()),
    path("apis/<str:group>", disc.GroupView.as_view()),
    path("apis/<str:group>/", disc.GroupView.as_view()),
    path("apis/<str:group>/<str:version>", disc.ResourceListView.as_view()),
    path("apis/<str:group>/<str:version>/", disc.ResourceListView.as_view()),
    path("openapi/v3", disc.OpenAPIv3RootView.as_view()),
    re_path(r"^openapi/v3/(?P<gv>.+)$", disc.OpenAPIv3DocView.as_view()),
    path("openapi/v2", disc.OpenAPIv2View.as_view()),
    *[path(r.path()[1:], ReviewView.as_view(review=r)) for r in reviews.REVIEWS],
    *kube_paths("api/<str:version>"),
    *kube_paths("apis/<str:group>/<str:version>"),
    re_path(r"^(api|apis|openapi)(/.*)?$", NotFoundView.as_view()),
    path("admin/", admin.site.urls),
    path("", include("dashboard.web.share_urls")),
    path("", include("dashboard.web.people_urls")),
    path("", include("dashboard.web.cluster_urls")),
    path("", include("dashboard.notifications.urls")),
    path("", include("dashboard.saved.urls")),
    path("", include("dashboard.web.urls")),
]

handler400 = "dashboard.kube.errors.handler400"
handler500 = "dashboard.kube.errors.handler500"

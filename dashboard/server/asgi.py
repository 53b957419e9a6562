"""ASGI entry point: HTTP (API + pages) and websockets (live pages)."""
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

import django  # noqa: E402

django.setup(set_prefix=False)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.utils.module_loading import import_string  # noqa: E402

from dashboard.server.cluster_paths import ClusterPaths  # noqa: E402
from dashboard.server.dispatch import LanedHTTP  # noqa: E402
from dashboard.server.handlers import SharedThreadASGIHandler  # noqa: E402
from dashboard.server.lanes import PagesLane  # noqa: E402
from dashboard.server.observe import Observed, ObservedWebsocket  # noqa: E402

# The websocket routes are named by a setting, as ROOT_URLCONF names the HTTP ones: the server
# serves the dashboard without importing it.
websocket_urlpatterns = import_string(f"{settings.WEBSOCKET_URLCONF}.websocket_urlpatterns")

application = ProtocolTypeRouter({
    # Buffered requests in one hop to their lane's thread; watch streams via ASGI.
    # Observed: Audit-ID, request metrics and the JSON log line (dashboard.server.observe).
    # ClusterPaths: /clusters/<name>/api... is that followed cluster's API, read-only.
    "http": Observed(ClusterPaths(LanedHTTP(SharedThreadASGIHandler()))),
    # Same-origin only (no cross-site websocket hijacking), then the session's user.
    "websocket": ObservedWebsocket(PagesLane(AllowedHostsOriginValidator(AuthMiddlewareStack(
        URLRouter(websocket_urlpatterns))))),
})

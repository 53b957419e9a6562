"""ASGI entry point: HTTP (API + pages) and websockets (live pages)."""
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

import django  # noqa: E402

django.setup(set_prefix=False)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from dashboard.server.bridge import LanedHTTP, PagesLane, SharedThreadASGIHandler  # noqa: E402
from dashboard.web.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter({
    # Buffered requests in one hop to their lane's thread; watch streams via ASGI.
    "http": LanedHTTP(SharedThreadASGIHandler()),
    # Same-origin only (no cross-site websocket hijacking), then the session's user.
    "websocket": PagesLane(AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))),
})

"""Security headers and per-request secure cookies (one middleware, no I/O).

Django's SecurityMiddleware and XFrameOptionsMiddleware already send nosniff,
Referrer-Policy and X-Frame-Options on every response (settings.py). This adds:

- a Content-Security-Policy on HTML pages: scripts and styles from this origin only (style
  *attributes* are allowed: the templates use a few for widths and hues; scripts never
  inline), websockets to this host, no framing, no plugins, forms post only here;
- the `Secure` flag on every cookie set in answer to an HTTPS request. The same server
  answers plain HTTP (local pages) and HTTPS (API clients), so Django's global
  SESSION_COOKIE_SECURE / CSRF_COOKIE_SECURE can't express this: it is decided per request.
"""
from __future__ import annotations

import re

from django.core.exceptions import DisallowedHost

from dashboard.access.middleware import EitherModeMiddleware

# A Host header that passed ALLOWED_HOSTS can still carry odd characters; keep it only if it
# is a plain host[:port] before putting it into a header value.
_HOST = re.compile(r"^[A-Za-z0-9.\-]+(:\d+)?$|^\[[0-9A-Fa-f:.]+\](:\d+)?$")

PAGE_POLICY = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
               "font-src 'self'; connect-src 'self'{ws}; object-src 'none'; base-uri 'self'; "
               "form-action 'self'; frame-ancestors 'none'")


def content_security_policy(request) -> str:
    try:
        host = request.get_host()
    except DisallowedHost:  # Django answers 400 anyway; keep the strict policy
        host = ""
    # 'self' covers same-host websockets in current browsers; name them for older ones.
    ws = f" ws://{host} wss://{host}" if host and _HOST.match(host) else ""
    return PAGE_POLICY.format(ws=ws)


def decorate(request, response) -> None:
    if "Content-Security-Policy" not in response and response.get("Content-Type", "").startswith("text/html"):
        response["Content-Security-Policy"] = content_security_policy(request)
    if request.is_secure():
        for morsel in response.cookies.values():
            morsel["secure"] = True


class SecurityHeadersMiddleware(EitherModeMiddleware):
    """Outermost middleware: sees every response, including other middlewares' cookies."""

    def handle(self, request):
        response = self.get_response(request)
        decorate(request, response)
        return response

    async def ahandle(self, request):
        response = await self.get_response(request)
        decorate(request, response)
        return response

"""Page HTML compressed on the wire: a 1,000-row list is ~1 MB of HTML and ~100 KB gzipped.

Django's GZipMiddleware, for buffered responses, and for streamed ones that say they may be
compressed (`compressible`: a whole API list, which was buffered and gzipped before it was
streamed); other streamed ones (API watches, YAML downloads) keep flowing unbuffered, and the
API keeps its own negotiation (bearer-token calls skip this middleware altogether:
settings.KUBEDASH_API_MIDDLEWARE). BREACH: Django
pads each gzip response with random bytes, and the CSRF token is masked per response.
"""
from __future__ import annotations

from django.middleware.gzip import GZipMiddleware


class PageGZipMiddleware(GZipMiddleware):
    def process_response(self, request, response):
        if response.streaming and not getattr(response, "compressible", False):
            return response
        return super().process_response(request, response)

"""Whole lists gzipped for API clients that ask (`Accept-Encoding: gzip`: client-go and kubectl
do by default), as kube-apiserver does (its APIResponseCompression, gzip level 1).

A Table of 3,000 Jobs is ~3 MB of JSON and ~0.2 MB gzipped. Only streamed whole lists
(`compressible`, kube/views.py stream_list) are compressed: they run on the expensive lane, in
the heavy child by default, so the compression takes the child's CPU (niced, paced), and the
serving process, which relays every byte to the client beside the renewals it serves, relays
an eighth or less of them (issue 42). Single objects and pages stay as they are: they are
answered on the fast lane, often on the event loop itself, where compressing would cost the
renewals. Each piece is flushed (Z_SYNC_FLUSH): it leaves as soon as it is built, never empty.
"""
from __future__ import annotations

import re
import zlib

from django.utils.cache import patch_vary_headers

from dashboard.access.middleware import EitherModeMiddleware

GZIP_LEVEL = 1   # kube-apiserver's: most of the saving for a fraction of level 6's CPU
ACCEPTS_GZIP = re.compile(r"\bgzip\b")


def gzipped(pieces):
    """The pieces as one gzip stream (wbits 31: a gzip header and trailer), a piece out per piece in."""
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
    for piece in pieces:
        yield compressor.compress(piece) + compressor.flush(zlib.Z_SYNC_FLUSH)
    yield compressor.flush(zlib.Z_FINISH)


class ListGzipMiddleware(EitherModeMiddleware):
    """A streamed whole list gzipped when the client accepts gzip (settings.KUBEDASH_API_MIDDLEWARE).
    Either mode: the async chain (watches) passes through it untouched but awaited."""

    def handle(self, request):
        return self._gzipped(request, self.get_response(request))

    async def ahandle(self, request):
        return self._gzipped(request, await self.get_response(request))

    def _gzipped(self, request, response):
        if not (response.streaming and getattr(response, "compressible", False)) or response.has_header("Content-Encoding"):
            return response
        patch_vary_headers(response, ("Accept-Encoding",))
        if not ACCEPTS_GZIP.search(request.META.get("HTTP_ACCEPT_ENCODING", "")):
            return response
        response.streaming_content = gzipped(response.streaming_content)
        response["Content-Encoding"] = "gzip"
        return response

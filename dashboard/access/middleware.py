"""The shape of kubedash's own middlewares: sync or async as the chain around them is."""
from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction


class EitherModeMiddleware:
    """Runs in the chain's own mode: async views (watch streams) get no hop to a thread, sync
    requests no hop to the loop. Subclasses write `handle(request)` and `ahandle(request)`."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.ahandle(request)
        return self.handle(request)

    def handle(self, request):
        raise NotImplementedError

    async def ahandle(self, request):
        raise NotImplementedError

"""Django internals kubedash relies on (checked with Django 5.2.19; tests/test_compat.py).

The request handlers' middleware chain and the step it ends in, the ASGI handler's per-request
thread, URL resolution inside the handler, and the connection handler's per-thread connections.
"""
from __future__ import annotations

from contextlib import contextmanager

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response
from django.core.handlers.wsgi import WSGIHandler
from django.db import DEFAULT_DB_ALIAS, connections

# --------------------------------------------------------------------------------------------
# Request handlers


def exception_response(get_response):
    """get_response wrapped as Django wraps each middleware: an exception becomes the response
    Django makes of it (django.core.handlers.exception.convert_exception_to_response)."""
    return convert_exception_to_response(get_response)


def view_step(handler, asynchronous: bool = False):
    """The step a handler's middleware chain ends in: resolve the URL, the view middleware, call
    the view, template responses (BaseHandler._get_response, or _get_response_async)."""
    return handler._get_response_async if asynchronous else handler._get_response


def install_middleware_chain(handler, chain) -> None:
    """What BaseHandler.load_middleware would leave: chain as the handler's middleware
    (_middleware_chain, which get_response calls), with no view, template-response or exception
    middleware hooks (_view_middleware, _template_response_middleware, _exception_middleware)."""
    handler._view_middleware, handler._template_response_middleware, handler._exception_middleware = [], [], []
    handler._middleware_chain = chain


class CallersThreadASGIHandler(ASGIHandler):
    """Django's ASGI handler without a thread of its own per request: its sync work goes to the
    thread of the ThreadSensitiveContext its caller opened. ASGIHandler.__call__ opens a new
    ThreadSensitiveContext around ASGIHandler.handle(scope, receive, send), the request's work;
    this calls handle() directly."""

    async def __call__(self, scope, receive, send):
        await self.handle(scope, receive, send)


class HookedWSGIHandler(WSGIHandler):
    """Django's WSGI handler with two of its private steps open to subclasses.

    direct_response(request): a response made without URL resolution, or None for Django's
    way (BaseHandler._get_response: the step the middleware chain ends in).
    view_for(view): the view a resolved URL calls instead of view (BaseHandler.resolve_request,
    which _get_response calls, returns the ResolverMatch whose func it then calls)."""

    def _get_response(self, request):
        response = self.direct_response(request)
        return response if response is not None else super()._get_response(request)

    def direct_response(self, request):
        return None

    def resolve_request(self, request):
        match = super().resolve_request(request)
        match.func = self.view_for(match.func)
        return match

    def view_for(self, view):
        return view


# --------------------------------------------------------------------------------------------
# Database connections


def new_connection(alias: str = DEFAULT_DB_ALIAS):
    """A new DatabaseWrapper for alias, not the thread's (ConnectionHandler.create_connection)."""
    return connections.create_connection(alias)


@contextmanager
def thread_connection(connection, alias: str = DEFAULT_DB_ALIAS):
    """connection as this thread's for alias while the block runs (ConnectionHandler's
    __setitem__: Django keeps sync code's connections per thread, in its thread-local store)."""
    previous = connections[alias]
    connections[alias] = connection
    try:
        yield
    finally:
        connections[alias] = previous

"""Django internals kubedash relies on (checked with Django 5.2.19; tests/serving/test_compat.py).

The request handlers' middleware chain and the step it ends in, the request log's mark on a
response already logged, the ASGI handler's per-request thread, URL resolution inside the handler, the connection handler's per-thread connections, and
the database backends' steps kubedash's ENGINEs (kube/sqlite, kube/postgresql) change: where a
SQLite transaction begins and ends and its statements are rewritten, where a PostgreSQL
connection is made and checked.
"""
from __future__ import annotations

import functools
import select
from contextlib import contextmanager

from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.exception import convert_exception_to_response
from django.core.handlers.wsgi import WSGIHandler
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.postgresql import base as postgresql_base
from django.db.backends.sqlite3 import base as sqlite3_base

# --------------------------------------------------------------------------------------------
# Request handlers


def exception_response(get_response):
    """get_response wrapped as Django wraps each middleware: an exception becomes the response
    Django makes of it (django.core.handlers.exception.convert_exception_to_response)."""
    return convert_exception_to_response(get_response)


def logged_already(response):
    """The response, marked so Django's request log (django.utils.log.log_response) does not log
    it: an expected 500 whose cause is logged elsewhere, once (/readyz's failing checks)."""
    response._has_been_logged = True
    return response


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


# --------------------------------------------------------------------------------------------
# Database backends


class SQLiteWrapper(sqlite3_base.DatabaseWrapper):
    """Django's SQLite DatabaseWrapper with the ends of its transactions open to subclasses, and
    cursors that remember their statements' rewrite (RememberingSQLiteCursor).

    before_begin(): before a transaction's BEGIN (_start_transaction_under_autocommit: how
    atomic() begins on SQLite, `BEGIN <transaction_mode>`); transaction_ended(): after its COMMIT
    or ROLLBACK (_commit, _rollback), and after a BEGIN that failed; connection_closed(): after
    the connection closed (_close). create_cursor: Django's, with that cursor class."""

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=RememberingSQLiteCursor)

    def _start_transaction_under_autocommit(self):
        self.before_begin()
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self.transaction_ended()
            raise

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self.transaction_ended()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self.transaction_ended()

    def _close(self):
        try:
            return super()._close()
        finally:
            self.connection_closed()

    def before_begin(self) -> None:
        pass

    def transaction_ended(self) -> None:
        pass

    def connection_closed(self) -> None:
        pass


REMEMBERED_QUERY_CHARS = 4096   # longer statements (an IN list of 5,000 names) are not kept


@functools.lru_cache(maxsize=1024)
def sqlite_placeholders(query: str) -> str:
    """query with Django's "%s" placeholders as SQLite's "?", remembered (SQLiteCursorWrapper's
    convert_query without named parameters: it uses no state then, so it is called unbound)."""
    return sqlite3_base.SQLiteCursorWrapper.convert_query(None, query)


class RememberingSQLiteCursor(sqlite3_base.SQLiteCursorWrapper):
    """Django's SQLite cursor, remembering each statement's "%s" -> "?" rewrite: the same few
    statements run on every request, and the regex was 3% of a renewal. Relies on execute and
    executemany rewriting through convert_query(query, *, param_names) (named parameters, a
    mapping's names, go Django's way)."""

    def convert_query(self, query, *, param_names=None):
        if param_names is None and len(query) <= REMEMBERED_QUERY_CHARS:
            return sqlite_placeholders(query)
        return super().convert_query(query, param_names=param_names)


class PostgreSQLWrapper(postgresql_base.DatabaseWrapper):
    """Django's PostgreSQL DatabaseWrapper whose new connections a subclass may make, and whose
    health check asks the socket before the server.

    make_connection(make, conn_params): a new psycopg connection, make(conn_params) being
    Django's way (get_new_connection, which connect() calls).

    With CONN_HEALTH_CHECKS Django checks a persistent connection before each request's first
    query (close_if_health_check_failed calls is_usable, Django's a `SELECT 1`: one of the four
    round trips of a Lease renewal, and one more wait for the GIL when a Table thread is busy).
    A connection the server (or a pooler) has closed shows as a readable socket: the server's
    goodbye message, or EOF. So the socket is asked first, without waiting; only when something
    is there (a closed connection, or a rare notice) does Django's `SELECT 1` run and decide."""

    def get_new_connection(self, conn_params):
        return self.make_connection(super().get_new_connection, conn_params)

    def make_connection(self, make, conn_params):
        return make(conn_params)

    def is_usable(self):
        if self.connection is None or self.connection.closed:
            return False
        try:
            poll = select.poll()   # (not select(): descriptors above 1024)
            poll.register(self.connection.fileno(), select.POLLIN)
            if not poll.poll(0):
                return True        # nothing from the server since our last answer: still open
        except (OSError, ValueError, postgresql_base.Database.Error):
            pass
        return super().is_usable()

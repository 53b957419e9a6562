"""What kubedash relies on inside its libraries (dashboard/compat/, and the hooks server/ overrides),
checked against the installed versions.

A check that fails says which of kubedash's functions or classes relies on what, and the
library and version that changed it. Two kinds: RELIED_ON (a private attribute, a hook's
signature, or a name the library's own code must still use, read from its code object), and
behaviours (a real HTTPChannel fed bytes, a real TCP transport's buffer, Daphne's request and
websocket factory, Django's handlers, asyncio's running loop, Django's SQLite and PostgreSQL
backends and psycopg on real databases: a file of SQLite's, and the machine's PostgreSQL as
tests/pg_support.py finds it). Each check is also made to fail once, the attribute deleted or
the behaviour changed, to show that it would notice.
"""
from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import io
import platform
import select
import selectors
import socket
import tempfile
import time
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace

import daphne.server
import psycopg
import pytest
from autobahn.websocket.protocol import WebSocketProtocol as AutobahnProtocol
from autobahn.websocket.protocol import WebSocketServerFactory
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.ws_protocol import WebSocketFactory
from daphne.ws_protocol import WebSocketProtocol as DaphneWebSocketProtocol
from django.core.handlers import exception as django_exception
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.core.handlers.wsgi import WSGIRequest
from django.db import DEFAULT_DB_ALIAS, DatabaseError, OperationalError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql import base as postgresql_base
from django.db.backends.sqlite3 import base as sqlite3_base
from django.db.utils import ConnectionHandler
from django.http import HttpResponse
from django.urls import ResolverMatch, get_resolver
from django.utils import log as django_log
from django.utils.connection import BaseConnectionHandler
from psycopg import waiting
from twisted.internet import abstract, protocol, ssl, tcp
from twisted.internet.testing import StringTransport
from twisted.protocols.basic import LineReceiver
from twisted.protocols.policies import ProtocolWrapper, TimeoutMixin
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.web import http
from twisted.web.http import HTTPChannel

import pg_support
from dashboard.compat import asyncio as asyncio_compat
from dashboard.compat import daphne as daphne_compat
from dashboard.compat import django as django_compat
from dashboard.compat import psycopg as psycopg_compat
from dashboard.compat import twisted as twisted_compat
from dashboard.kube.postgresql.base import Connection as GreenConnection
from dashboard.kube.postgresql.base import DatabaseWrapper as PostgreSQLEngine
from dashboard.kube.sqlite.base import DatabaseWrapper as SQLiteEngine
from dashboard.server.handlers import APIStreamsHandler, APIWSGIHandler
from dashboard.server.protocol import LimitedChannel, LimitedHTTPFactory, LimitedRequest
from dashboard.server.ws_limits import LimitedWebSocketProtocol


def version(library: str) -> str:
    return platform.python_version() if library == "Python" else importlib.metadata.version(library)


def name_of(thing) -> str:
    if isinstance(thing, ModuleType):
        return thing.__name__
    return f"{thing.__module__}.{thing.__qualname__}"


def expect(ok: bool, user, library: str, what: str) -> None:
    """Fail, naming who relies on what, in which library and version, unless ok."""
    if not ok:
        raise AssertionError(f"{name_of(user)} relies on {what}, which {library} {version(library)} changed")


# --------------------------------------------------------------------------------------------
# Names the code relies on


@dataclass(frozen=True)
class Attribute:
    """owner.name exists (a callable with these parameters, when params is given)."""

    user: object
    library: str
    owner: object
    name: str
    params: tuple | None = None

    def check(self) -> None:
        where = f"{name_of(self.owner)}.{self.name}"
        found = getattr(self.owner, self.name, Attribute)
        expect(found is not Attribute, self.user, self.library, where)
        if self.params is not None:
            params = tuple(inspect.signature(found).parameters)
            expect(params == self.params, self.user, self.library, f"{where}{self.params} (now {params})")

    def change(self, monkeypatch) -> None:
        if self.params is None:
            monkeypatch.delattr(defining(self.owner, self.name), self.name)
        else:   # (deleted, a base class's might answer: another signature instead)
            monkeypatch.setattr(defining(self.owner, self.name), self.name, lambda *args, **kwargs: None)


@dataclass(frozen=True)
class Uses:
    """The library's own owner.function still refers to these names (attributes it reads or sets,
    globals it looks up, methods it calls), read from its code object."""

    user: object
    library: str
    owner: type
    function: str
    names: tuple

    def check(self) -> None:
        code = inspect.unwrap(getattr(self.owner, self.function)).__code__
        missing = [name for name in self.names if name not in code.co_names]
        expect(not missing, self.user, self.library,
               f"{name_of(self.owner)}.{self.function} using {', '.join(self.names)} (not {', '.join(missing)})")

    def change(self, monkeypatch) -> None:
        monkeypatch.setattr(self.owner, self.function, lambda *args, **kwargs: None)


def defining(owner, name: str):
    """The class (or module) whose own namespace holds name."""
    if isinstance(owner, ModuleType):
        return owner
    return next(cls for cls in owner.__mro__ if name in vars(cls))


tw, dp, ab, dj, pg, py = "Twisted", "daphne", "autobahn", "Django", "psycopg", "Python"

RELIED_ON = [
    # Twisted
    Attribute(twisted_compat.header_bytes_received, tw, HTTPChannel, "_receivedHeaderSize"),
    Uses(twisted_compat.header_bytes_received, tw, HTTPChannel, "lineReceived", ("_receivedHeaderSize",)),
    Uses(twisted_compat.pause_reading, tw, HTTPChannel, "connectionMade", ("_networkProducer",)),
    Uses(twisted_compat.resume_reading, tw, HTTPChannel, "requestDone", ("_networkProducer",)),
    Uses(twisted_compat.request_line, tw, HTTPChannel, "lineReceived", ("_command", "_path")),
    Uses(twisted_compat.request_target, tw, HTTPChannel, "lineReceived", ("_path",)),
    Attribute(twisted_compat.HeldContinueChannel, tw, HTTPChannel, "_send100Continue", ("self",)),
    Uses(twisted_compat.HeldContinueChannel, tw, HTTPChannel, "allHeadersReceived", ("_send100Continue",)),
    Attribute(twisted_compat.disconnected, tw, http.Request, "_disconnected"),
    Attribute(twisted_compat.request_factory_without_form_parsing, tw, http.Request, "__init__",
              ("self", "channel", "queued", "parsePOSTFormSubmission")),
    Attribute(twisted_compat.queued_bytes, tw, abstract.FileDescriptor, "dataBuffer"),
    Attribute(twisted_compat.queued_bytes, tw, abstract.FileDescriptor, "offset"),
    Uses(twisted_compat.queued_bytes, tw, abstract.FileDescriptor, "__init__", ("_tempDataLen",)),
    Attribute(twisted_compat.DirectChunkWriter, tw, abstract.FileDescriptor, "_writeDisconnected"),
    Attribute(twisted_compat.DirectChunkWriter, tw, abstract.FileDescriptor, "connected"),
    Attribute(twisted_compat.DirectChunkWriter, tw, abstract.FileDescriptor, "disconnecting"),
    Uses(twisted_compat.DirectChunkWriter, tw, tcp.Connection, "__init__", ("socket",)),
    Uses(twisted_compat.DirectChunkWriter, tw, abstract.FileDescriptor, "write", ("_tempDataLen", "_writeDisconnected")),
    Attribute(twisted_compat.DirectChunkWriter, tw, http.Request, "_disconnected"),
    Uses(twisted_compat.http_channels, tw, tcp.Connection, "__init__", ("protocol",)),
    Uses(twisted_compat.http_channels, tw, ProtocolWrapper, "__init__", ("wrappedProtocol",)),
    Attribute(twisted_compat.close_after_response, tw, HTTPChannel, "checkPersistence", ("self", "request", "version")),
    Uses(twisted_compat.close_after_response, tw, HTTPChannel, "allHeadersReceived", ("checkPersistence", "persistent")),
    Uses(twisted_compat.close_after_response, tw, HTTPChannel, "requestDone", ("persistent", "_handlingRequest")),
    Attribute(twisted_compat.after_each_accept, tw, tcp.Port, "doRead", ("self",)),
    Uses(twisted_compat.after_each_accept, tw, tcp.Port, "doRead", ("numberAccepts",)),
    # ... and the hooks protocol.py overrides
    Attribute(LimitedChannel, tw, LineReceiver, "MAX_LENGTH"),
    Attribute(LimitedChannel, tw, HTTPChannel, "totalHeadersSize"),
    Attribute(LimitedChannel, tw, HTTPChannel, "lineReceived", ("self", "line")),
    Attribute(LimitedChannel, tw, LineReceiver, "lineLengthExceeded", ("self", "line")),
    Attribute(LimitedChannel, tw, HTTPChannel, "allHeadersReceived", ("self",)),
    Attribute(LimitedChannel, tw, HTTPChannel, "allContentReceived", ("self",)),
    Attribute(LimitedChannel, tw, HTTPChannel, "requestDone", ("self", "request")),
    Attribute(LimitedChannel, tw, HTTPChannel, "connectionLost", ("self", "reason")),
    Attribute(LimitedChannel, tw, TimeoutMixin, "timeOut"),
    Attribute(LimitedChannel, tw, TimeoutMixin, "setTimeout", ("self", "period")),
    Attribute(LimitedChannel, tw, TimeoutMixin, "resetTimeout", ("self",)),
    Uses(LimitedChannel, tw, HTTPChannel, "allContentReceived", ("setTimeout", "_savedTimeOut")),
    Uses(LimitedChannel, tw, HTTPChannel, "dataReceived", ("resetTimeout",)),
    Attribute(LimitedRequest, tw, http.Request, "gotLength", ("self", "length")),
    Attribute(LimitedRequest, tw, http.Request, "handleContentChunk", ("self", "data")),
    Attribute(LimitedRequest, tw, http.Request, "requestReceived", ("self", "command", "path", "version")),
    # Daphne
    Attribute(daphne_compat.install_http_factory, dp, daphne.server, "HTTPFactory"),
    Uses(daphne_compat.install_http_factory, dp, daphne.server.Server, "run", ("HTTPFactory",)),
    Uses(daphne_compat.http_factory, dp, daphne.server.Server, "run", ("http_factory",)),
    Attribute(daphne_compat.listening, dp, daphne.server.Server, "listen_success", ("self", "port")),
    Uses(daphne_compat.listen_on_no_endpoint, dp, daphne.server.Server, "run", ("endpoints",)),
    Uses(daphne_compat.failed_to_listen, dp, daphne.server.Server, "stop", ("abort_start",)),
    Uses(daphne_compat.connections, dp, daphne.server.Server, "run", ("connections",)),
    Uses(daphne_compat.connections, dp, daphne.server.Server, "protocol_connected", ("connections",)),
    Attribute(daphne_compat.Server, dp, daphne.server.Server, "create_application", ("self", "protocol", "scope")),
    Uses(daphne_compat.Server, dp, WebRequest, "process", ("create_application",)),
    Uses(daphne_compat.Server, dp, daphne.server.Server, "create_application", ("application",)),
    Attribute(daphne_compat.Request, dp, WebRequest, "handle_reply", ("self", "message")),
    Uses(daphne_compat.Request, dp, WebRequest, "process", ("application_queue", "clean_headers")),
    Uses(daphne_compat.Request, dp, WebRequest, "finish", ("application_queue",)),
    Uses(daphne_compat.Request, dp, WebRequest, "connectionLost", ("application_queue",)),
    Uses(daphne_compat.Request, dp, daphne.server.Server, "handle_reply", ("handle_reply",)),
    Uses(daphne_compat.install_websocket_protocol, dp, daphne.server.Server, "run", ("ws_factory",)),
    Attribute(daphne_compat.install_websocket_protocol, ab, WebSocketServerFactory, "setProtocolOptions"),
    Uses(daphne_compat.forwarded_address_header, dp, WebSocketFactory, "__init__", ("server_class",)),
    Uses(daphne_compat.forwarded_address_header, dp, daphne.server.Server, "__init__", ("proxy_forwarded_address_header",)),
    Attribute(daphne_compat.FrameGateProtocol, ab, AutobahnProtocol, "processData", ("self",)),
    Uses(daphne_compat.FrameGateProtocol, ab, AutobahnProtocol, "processData", ("data",)),
    Attribute(daphne_compat.send_close, ab, AutobahnProtocol, "STATE_OPEN"),
    Attribute(daphne_compat.send_close, ab, AutobahnProtocol, "sendCloseFrame", ("self", "code", "reasonUtf8", "isReply")),
    # ... and the hooks ws_limits.py overrides
    Attribute(LimitedWebSocketProtocol, dp, DaphneWebSocketProtocol, "onConnect", ("self", "request")),
    Attribute(LimitedWebSocketProtocol, dp, DaphneWebSocketProtocol, "onMessage", ("self", "payload", "isBinary")),
    Attribute(LimitedWebSocketProtocol, dp, DaphneWebSocketProtocol, "onClose", ("self", "wasClean", "code", "reason")),
    # Django
    Attribute(django_compat.exception_response, dj, django_exception, "convert_exception_to_response", ("get_response",)),
    Attribute(django_compat.view_step, dj, BaseHandler, "_get_response", ("self", "request")),
    Uses(django_compat.logged_already, dj, django_log, "log_response", ("_has_been_logged",)),
    Attribute(django_compat.view_step, dj, BaseHandler, "_get_response_async", ("self", "request")),
    Uses(django_compat.install_middleware_chain, dj, BaseHandler, "get_response", ("_middleware_chain",)),
    Uses(django_compat.install_middleware_chain, dj, BaseHandler, "get_response_async", ("_middleware_chain",)),
    Uses(django_compat.install_middleware_chain, dj, BaseHandler, "_get_response",
         ("_view_middleware", "_template_response_middleware")),
    Uses(django_compat.install_middleware_chain, dj, BaseHandler, "process_exception_by_middleware",
         ("_exception_middleware",)),
    Attribute(django_compat.CallersThreadASGIHandler, dj, ASGIHandler, "handle", ("self", "scope", "receive", "send")),
    Uses(django_compat.CallersThreadASGIHandler, dj, ASGIHandler, "__call__", ("ThreadSensitiveContext", "handle")),
    Attribute(django_compat.HookedWSGIHandler, dj, BaseHandler, "resolve_request", ("self", "request")),
    Uses(django_compat.HookedWSGIHandler, dj, BaseHandler, "_get_response", ("resolve_request",)),
    Attribute(django_compat.HookedWSGIHandler, dj, ResolverMatch, "__getitem__", ("self", "index")),
    Uses(django_compat.HookedWSGIHandler, dj, ResolverMatch, "__getitem__", ("func",)),
    Attribute(django_compat.new_connection, dj, ConnectionHandler, "create_connection", ("self", "alias")),
    Attribute(django_compat.thread_connection, dj, BaseConnectionHandler, "__setitem__", ("self", "key", "value")),
    Attribute(django_compat.SQLiteWrapper, dj, sqlite3_base.DatabaseWrapper, "_start_transaction_under_autocommit",
              ("self",)),
    Uses(django_compat.SQLiteWrapper, dj, BaseDatabaseWrapper, "set_autocommit", ("_start_transaction_under_autocommit",)),
    Attribute(django_compat.SQLiteWrapper, dj, BaseDatabaseWrapper, "_commit", ("self",)),
    Uses(django_compat.SQLiteWrapper, dj, BaseDatabaseWrapper, "commit", ("_commit",)),
    Attribute(django_compat.SQLiteWrapper, dj, BaseDatabaseWrapper, "_rollback", ("self",)),
    Uses(django_compat.SQLiteWrapper, dj, BaseDatabaseWrapper, "rollback", ("_rollback",)),
    Attribute(django_compat.SQLiteWrapper, dj, BaseDatabaseWrapper, "_close", ("self",)),
    Uses(django_compat.SQLiteWrapper, dj, BaseDatabaseWrapper, "close", ("_close",)),
    Attribute(django_compat.SQLiteWrapper, dj, sqlite3_base.DatabaseWrapper, "create_cursor", ("self", "name")),
    Uses(django_compat.SQLiteWrapper, dj, BaseDatabaseWrapper, "_cursor", ("create_cursor",)),
    Attribute(django_compat.sqlite_placeholders, dj, sqlite3_base.SQLiteCursorWrapper, "convert_query",
              ("self", "query", "param_names")),
    Uses(django_compat.RememberingSQLiteCursor, dj, sqlite3_base.SQLiteCursorWrapper, "execute", ("convert_query",)),
    Uses(django_compat.RememberingSQLiteCursor, dj, sqlite3_base.SQLiteCursorWrapper, "executemany", ("convert_query",)),
    Attribute(django_compat.PostgreSQLWrapper, dj, postgresql_base.DatabaseWrapper, "get_new_connection",
              ("self", "conn_params")),
    Uses(django_compat.PostgreSQLWrapper, dj, BaseDatabaseWrapper, "connect", ("get_new_connection",)),
    Attribute(django_compat.PostgreSQLWrapper, dj, postgresql_base.DatabaseWrapper, "is_usable", ("self",)),
    Uses(django_compat.PostgreSQLWrapper, dj, BaseDatabaseWrapper, "close_if_health_check_failed", ("is_usable",)),
    Attribute(django_compat.PostgreSQLWrapper, dj, postgresql_base, "Database"),
    # psycopg
    Attribute(psycopg_compat.WaitHookedConnection, pg, psycopg.Connection, "wait", ("self", "gen", "interval", "timeout")),
    Uses(psycopg_compat.WaitHookedConnection, pg, psycopg.Cursor, "execute", ("wait",)),
    Uses(psycopg_compat.WaitHookedConnection, pg, psycopg.Connection, "commit", ("wait",)),
    Uses(psycopg_compat.WaitHookedConnection, pg, psycopg.Connection, "rollback", ("wait",)),
    Attribute(psycopg_compat.wait_on_loop, pg, waiting, "wait_async", ("gen", "fileno", "interval", "timeout")),
    # asyncio
    Attribute(asyncio_compat.loop_hidden, py, asyncio.events, "_get_running_loop", ()),
    Attribute(asyncio_compat.loop_hidden, py, asyncio.events, "_set_running_loop", ("loop",)),
]


def _id(relied) -> str:
    detail = relied.name if isinstance(relied, Attribute) else f"{relied.function}:{'+'.join(relied.names)}"
    return f"{relied.user.__name__}-{getattr(relied.owner, '__name__', relied.owner)}.{detail}"


@pytest.mark.parametrize("relied", RELIED_ON, ids=_id)
def test_relied_on(relied):
    relied.check()


@pytest.mark.parametrize("relied", RELIED_ON, ids=_id)
def test_a_change_is_noticed(relied, monkeypatch):
    relied.change(monkeypatch)
    with pytest.raises(AssertionError) as failed:
        relied.check()
    message = str(failed.value)
    assert name_of(relied.user) in message and f"{relied.library} {version(relied.library)}" in message, message


# --------------------------------------------------------------------------------------------
# Private names of kubedash's subclasses of library classes: a library that starts using one of
# them would read or overwrite kubedash's state (and kubedash its).

OUR_SUBCLASSES = [LimitedChannel, LimitedRequest, LimitedHTTPFactory, LimitedWebSocketProtocol, APIWSGIHandler,
                  APIStreamsHandler, SQLiteEngine, PostgreSQLEngine, GreenConnection]
# (compat's classes override these on purpose)
OVERRIDDEN = {"_send100Continue", "_get_response", "_start_transaction_under_autocommit", "_commit", "_rollback",
              "_close"}
DISTRIBUTIONS = {"twisted": tw, "daphne": dp, "autobahn": ab, "django": dj, "psycopg": pg}


def private_names_in_use(cls) -> None:
    ours = {name for c in cls.__mro__ if c.__module__.startswith("dashboard.") for name in vars(c)
            if name.startswith("_") and not name.startswith("__")}
    for base in cls.__mro__:
        library = DISTRIBUTIONS.get(base.__module__.split(".")[0])
        if library is not None:
            clash = sorted((ours & set(vars(base))) - OVERRIDDEN)
            expect(not clash, cls, library, f"{name_of(base)} not using its names {', '.join(clash)}")


@pytest.mark.parametrize("cls", OUR_SUBCLASSES, ids=lambda cls: cls.__name__)
def test_private_names_are_ours(cls):
    private_names_in_use(cls)


def test_a_private_name_taken_is_noticed(monkeypatch):
    monkeypatch.setattr(HTTPChannel, "_refused", False, raising=False)
    with pytest.raises(AssertionError, match=r"LimitedChannel relies on twisted\.web\.http\.HTTPChannel not using "
                                             r"its names _refused, which Twisted [\d.]+ changed"):
        private_names_in_use(LimitedChannel)


# --------------------------------------------------------------------------------------------
# Behaviours


class Unprocessed(http.Request):
    """A request that is read, never answered."""

    def process(self):
        pass


def channel(cls=HTTPChannel, request_factory=Unprocessed):
    ch = cls()
    ch.requestFactory = request_factory
    transport = StringTransport()
    ch.makeConnection(transport)
    return ch, transport


class NoReactor:
    """Enough of a reactor for a TCP transport whose reads and writes the test drives itself."""

    def addReader(self, reader): pass
    def removeReader(self, reader): pass
    def addWriter(self, writer): pass
    def removeWriter(self, writer): pass
    def callLater(self, *args, **kwargs): pass


def header_count_and_request_line():
    ch, _ = channel()
    line, header = b"PUT /apis/x?watch=1 HTTP/1.1", b"Host: kubedash"
    ch.dataReceived(line + b"\r\n" + header + b"\r\n")
    counted = twisted_compat.header_bytes_received(ch)
    expect(counted == len(line) + len(header), twisted_compat.header_bytes_received, tw,
           f"HTTPChannel._receivedHeaderSize counting the request and header lines ({counted})")
    parsed = twisted_compat.request_line(ch)
    expect(parsed == (b"PUT", b"/apis/x?watch=1"), twisted_compat.request_line, tw,
           f"HTTPChannel._command/_path holding the parsed request line ({parsed})")
    expect(twisted_compat.request_target(ch) == b"/apis/x?watch=1", twisted_compat.request_target, tw,
           "HTTPChannel._path holding the request's target")
    ch.dataReceived(b"Content-Length: 2\r\n\r\nab")
    expect(twisted_compat.header_bytes_received(ch) == 0, twisted_compat.header_bytes_received, tw,
           "HTTPChannel._receivedHeaderSize back to 0 once a request is in")
    expect(twisted_compat.request_line(ch) == (None, None), twisted_compat.request_line, tw,
           "HTTPChannel._command/_path deleted once a request is in")


def reading_paused_and_resumed():
    ch, transport = channel()
    twisted_compat.pause_reading(ch)
    expect(transport.producerState == "paused", twisted_compat.pause_reading, tw,
           "HTTPChannel._networkProducer being the transport")
    twisted_compat.resume_reading(ch)
    expect(transport.producerState == "producing", twisted_compat.resume_reading, tw,
           "HTTPChannel._networkProducer being the transport")


def continue_held_then_sent():
    class Held(twisted_compat.HeldContinueChannel):
        def continue_allowed(self):
            return False

    ch, transport = channel(Held)
    ch.dataReceived(b"PUT / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
    expect(transport.value() == b"", twisted_compat.HeldContinueChannel, tw,
           "HTTPChannel sending `100 Continue` only through _send100Continue")
    ch.send_continue()
    expect(transport.value() == b"HTTP/1.1 100 Continue\r\n\r\n", twisted_compat.HeldContinueChannel, tw,
           "HTTPChannel._send100Continue writing `100 Continue`")
    ch, transport = channel(twisted_compat.HeldContinueChannel)
    ch.dataReceived(b"PUT / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
    expect(transport.value() == b"HTTP/1.1 100 Continue\r\n\r\n", twisted_compat.HeldContinueChannel, tw,
           "HTTPChannel.allHeadersReceived calling _send100Continue for Expect: 100-continue")


def disconnect_seen():
    ch, _ = channel()
    ch.dataReceived(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    request = ch.requests[0]
    expect(not twisted_compat.disconnected(request), twisted_compat.disconnected, tw, "Request._disconnected")
    request.connectionLost(None)
    expect(twisted_compat.disconnected(request), twisted_compat.disconnected, tw,
           "Request.connectionLost setting Request._disconnected")


def forms_not_parsed():
    form = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 3\r\n\r\na=1"
    ch, _ = channel(request_factory=twisted_compat.request_factory_without_form_parsing(Unprocessed))
    ch.dataReceived(form)
    expect(ch.requests[0].args == {}, twisted_compat.request_factory_without_form_parsing, tw,
           "Request(parsePOSTFormSubmission=False) leaving a form's fields unparsed")


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of a TCP connection over the loopback, with small buffers (ours sends, theirs reads)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        theirs = socket.socket()
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        theirs.connect(listener.getsockname())
        ours, _ = listener.accept()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
    return ours, theirs


def tcp_buffer_and_direct_writes():
    ours, theirs = tcp_pair()
    try:
        ours.setblocking(False)
        transport = tcp.Connection(ours, protocol.Protocol(), NoReactor())
        transport.connected = 1
        request = SimpleNamespace(finished=False, _disconnected=False, channel=SimpleNamespace(transport=transport))
        writer = twisted_compat.DirectChunkWriter(request)
        user = twisted_compat.DirectChunkWriter
        expect(writer.write(b"hello") == 0 and theirs.recv(100) == b"5\r\nhello\r\n", user, tw,
               "tcp.Connection's socket taking a chunk sent directly while its buffer is empty")
        big = b"x" * (4 << 20)   # more than the socket takes: the rest is queued in the transport
        behind = writer.write(big)
        queued = twisted_compat.queued_bytes(transport)
        expect(0 < behind == queued < len(big) + 20, twisted_compat.queued_bytes, tw,
               f"tcp.Connection's write buffer (dataBuffer, offset, _tempDataLen) holding what the socket "
               f"did not take ({behind}, {queued})")
        expect(twisted_compat.queued_bytes(SimpleNamespace(transport=transport)) == queued,
               twisted_compat.queued_bytes, tw, "a TLS wrapper's transport being the TCP connection beneath")
        taken = len(theirs.recv(1 << 16))
        transport.doWrite()   # the reactor's: the buffer goes on to the socket
        expect(twisted_compat.queued_bytes(transport) < queued, twisted_compat.queued_bytes, tw,
               f"tcp.Connection.doWrite moving its offset ({taken} taken)")
        request._disconnected = True
        expect(writer.write(b"late") == -1, user, tw, "Request._disconnected")
    finally:
        ours.close()
        theirs.close()


def tls_layout():
    class Factory(protocol.Factory):
        protocol = HTTPChannel

    tls = TLSMemoryBIOFactory(ssl.CertificateOptions(), False, Factory()).buildProtocol(("127.0.0.1", 1))
    ours, theirs = tcp_pair()
    try:
        ours.setblocking(False)
        transport = tcp.Connection(ours, tls, NoReactor())
        transport.connected = 1
        tls.makeConnection(transport)
        reactor = SimpleNamespace(getReaders=lambda: [transport])
        expect(list(twisted_compat.http_channels(reactor)) == [tls.wrappedProtocol], twisted_compat.http_channels, tw,
               "tcp.Connection.protocol being the TLS wrapper, its wrappedProtocol the HTTPChannel")
        transport.write(b"x" * 10)
        expect(twisted_compat.queued_bytes(tls) == twisted_compat.queued_bytes(transport) >= 10,
               twisted_compat.queued_bytes, tw, "TLSMemoryBIOProtocol.transport being the TCP connection")
    finally:
        ours.close()
        theirs.close()


def keep_alive_ended():
    ch, _ = channel()
    ch.dataReceived(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    answering = twisted_compat.close_after_response(ch)
    expect(answering and ch.persistent is False, twisted_compat.close_after_response, tw,
           "HTTPChannel._handlingRequest while a request is answered")
    idle, _ = channel()
    expect(not twisted_compat.close_after_response(idle), twisted_compat.close_after_response, tw,
           "HTTPChannel._handlingRequest False while idle")
    idle.dataReceived(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    closing = idle.requests[0].responseHeaders.getRawHeaders(b"Connection")
    expect(idle.persistent is False and closing == [b"close"], twisted_compat.close_after_response, tw,
           "HTTPChannel.allHeadersReceived asking checkPersistence")


def one_accept_per_wakeup():
    built = []

    class Factory(protocol.Factory):
        def buildProtocol(self, addr):
            built.append(addr)
            return protocol.Protocol()

    port = tcp.Port(0, Factory(), interface="127.0.0.1", reactor=NoReactor())
    port.startListening()
    address = port.getHost()
    clients = [socket.create_connection((address.host, address.port)) for _ in range(3)]
    try:
        time.sleep(0.05)   # (all three in the listen queue)
        after = []
        twisted_compat.after_each_accept(port, lambda: after.append(len(built)))
        port.doRead()
        expect(built and after == [1], twisted_compat.after_each_accept, tw,
               f"tcp.Port.doRead accepting tcp.Port.numberAccepts connections ({len(built)})")
    finally:
        for client in clients:
            client.close()
        port.socket.close()


class FakeDaphneServer:
    """What Daphne's WebRequest asks of its server."""

    proxy_forwarded_address_header = None
    root_path = ""
    request_buffer_size = 1 << 20
    server_name = "kubedash"

    def __init__(self):
        self.connections, self.created = {}, []

    def protocol_connected(self, proto):
        self.connections[proto] = {}

    def protocol_disconnected(self, proto):
        self.connections[proto]["disconnected"] = True

    def create_application(self, proto, scope):
        self.created.append((proto, scope["path"]))
        proto.queue = []
        return SimpleNamespace(put_nowait=proto.queue.append)

    def log_action(self, *args):
        pass


def daphne_request():
    class Factory(HTTPFactory):
        protocol = HTTPChannel

    server = FakeDaphneServer()
    ch = Factory(server).buildProtocol(("127.0.0.1", 1))
    ch.requestFactory = daphne_compat.Request
    transport = StringTransport()
    ch.makeConnection(transport)
    ch.dataReceived(b"GET /watch HTTP/1.1\r\nHost: x\r\n\r\n")
    request = ch.requests[0]
    expect(server.created == [(request, "/watch")], daphne_compat.Server, dp,
           "WebRequest.process making the application with itself and its scope (Server.create_application)")
    user = daphne_compat.Request
    expect(request.application_queue is not None and request.clean_headers == [(b"host", b"x")], user, dp,
           "WebRequest.application_queue and clean_headers")
    request.handle_reply({"type": "http.response.start", "status": 200, "headers": []})
    request.handle_reply({"type": "http.response.body", "body": b"a", "more_body": True})
    request.take_response()
    request.handle_reply({"type": "http.response.body", "body": b""})
    expect(not request.finished, user, dp, "WebRequest.handle_reply ending the response with the last body message")
    queued = list(request.queue)
    request.finish()
    expect(request.queue == queued, user, dp, "WebRequest.finish telling the application only through application_queue")
    expect(transport.value().endswith(b"1\r\na\r\n0\r\n\r\n"), user, dp, "WebRequest writing the body as chunks")


def daphne_application_scope():
    started = []

    async def application(scope, receive, send):
        started.append(scope)

    async def create():
        server = daphne_compat.Server(application=application, endpoints=["tcp:port=0"])
        proto = object()
        server.connections = {proto: {}}   # (made in Server.run())
        server.create_application(proto, {"type": "http", "path": "/"})
        await server.connections[proto]["application_instance"]
        return proto

    proto = asyncio.run(create())
    expect(len(started) == 1 and started[0].get(daphne_compat.REQUEST) is proto, daphne_compat.Server, dp,
           "Server.create_application starting the application with the scope it was given")


def daphne_server():
    server = daphne.server.Server(application=None, endpoints=["tcp:port=0"])
    server.listen_success(SimpleNamespace(getHost=lambda: SimpleNamespace(host="127.0.0.1", port=1)))
    expect(server.listening_addresses == [("127.0.0.1", 1)], daphne_compat.listening, dp,
           "Server.listen_success recording the address")
    with pytest.raises(SystemExit):
        daphne.server.Server(application=None, endpoints=[])   # why listen_on_no_endpoint exists
    server.stop()    # (the reactor not running: as when an endpoint fails before it runs)
    expect(daphne_compat.failed_to_listen(server), daphne_compat.failed_to_listen, dp,
           "Server.stop setting abort_start before the reactor runs")


def websocket_factory_and_frames():
    server = SimpleNamespace(proxy_forwarded_address_header="X-Forwarded-For")
    server.ws_factory = WebSocketFactory(server, server="kubedash")
    daphne_compat.install_websocket_protocol(server, daphne_compat.FrameGateProtocol, failByDrop=False)
    proto = server.ws_factory.buildProtocol(("127.0.0.1", 1))
    expect(isinstance(proto, daphne_compat.FrameGateProtocol) and server.ws_factory.failByDrop is False,
           daphne_compat.install_websocket_protocol, ab, "WebSocketServerFactory.protocol and setProtocolOptions")
    expect(daphne_compat.forwarded_address_header(proto) == "X-Forwarded-For", daphne_compat.forwarded_address_header,
           dp, "WebSocketFactory.server_class being the server")
    transport = StringTransport()
    proto.makeConnection(transport)
    proto.state, proto.websocket_version = AutobahnProtocol.STATE_OPEN, 13
    daphne_compat.send_close(proto, 1012, b"service restart")
    expect(transport.value() == b"\x88\x11\x03\xf4service restart", daphne_compat.send_close, ab,
           f"WebSocketProtocol.sendCloseFrame writing a close frame ({transport.value()!r})")
    proto.data = b"\x81\x85abcdxxxxx"   # a masked text frame, read and not parsed yet
    proto.stop_reading()
    expect(proto.processData() is False and proto.data == b"" and transport.producerState == "paused",
           daphne_compat.FrameGateProtocol, ab, "WebSocketProtocol.processData parsing `data`")


class BareHandler(django_compat.HookedWSGIHandler):
    """Django's WSGI handler with no middleware: its view step alone."""

    def load_middleware(self, is_async=False):
        django_compat.install_middleware_chain(self, django_compat.exception_response(django_compat.view_step(self)))


def call(handler, path: str) -> bytes:
    """GET path through the handler's middleware chain (not its __call__: no request signals, so
    no database connection is touched)."""
    request = WSGIRequest({"REQUEST_METHOD": "GET", "PATH_INFO": path, "SERVER_NAME": "x", "SERVER_PORT": "80",
                           "wsgi.input": io.BytesIO(), "wsgi.url_scheme": "http"})
    return handler.get_response(request).content


def django_handler_steps():
    class Direct(BareHandler):
        def direct_response(self, request):
            return HttpResponse(b"direct")

    class Swapped(BareHandler):
        def view_for(self, view):
            return lambda request, *args, **kwargs: HttpResponse(b"swapped")

    expect(call(Direct(), "/no/such/page/") == b"direct", django_compat.HookedWSGIHandler, dj,
           "BaseHandler._get_response as the chain's last step")
    expect(call(Swapped(), "/version") == b"swapped", django_compat.HookedWSGIHandler, dj,
           "BaseHandler.resolve_request giving the view _get_response calls")
    expect(b"swapped" not in call(Swapped(), "/no/such/page/"), django_compat.install_middleware_chain, dj,
           "BaseHandler._middleware_chain turning a failed resolve into a 404")


def django_thread_connection():
    fresh = django_compat.new_connection()
    try:
        expect(fresh is not connections[DEFAULT_DB_ALIAS], django_compat.new_connection, dj,
               "ConnectionHandler.create_connection making a connection apart from the thread's")
        with django_compat.thread_connection(fresh):
            expect(connections[DEFAULT_DB_ALIAS] is fresh, django_compat.thread_connection, dj,
                   "ConnectionHandler.__setitem__ setting the thread's connection")
        expect(connections[DEFAULT_DB_ALIAS] is not fresh, django_compat.thread_connection, dj,
               "ConnectionHandler.__setitem__ putting the thread's back")
    finally:
        fresh.close()


def running_loop_hidden():
    async def inside():
        loop = asyncio.get_running_loop()
        with asyncio_compat.loop_hidden():
            try:
                asyncio.get_running_loop()
                hidden = False
            except RuntimeError:
                hidden = True
        return hidden, asyncio.get_running_loop() is loop

    hidden, back = asyncio.run(inside())
    expect(hidden and back, asyncio_compat.loop_hidden, py, "asyncio.events._set_running_loop(None) hiding the running loop")


def database_settings(**settings) -> dict:
    """A DatabaseWrapper's settings: the default database's (Django's defaults filled in), changed."""
    return {**connections.settings[DEFAULT_DB_ALIAS], "OPTIONS": {}, **settings}


class RecordingSQLite(django_compat.SQLiteWrapper):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.events = []

    def before_begin(self):
        self.events.append("begin")

    def transaction_ended(self):
        self.events.append("ended")

    def connection_closed(self):
        self.events.append("closed")


def sqlite_transaction_ends():
    user = django_compat.SQLiteWrapper
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/db.sqlite3"
        db = RecordingSQLite(database_settings(ENGINE="django.db.backends.sqlite3", NAME=path,
                                               OPTIONS={"timeout": 0, "transaction_mode": "IMMEDIATE"}), "compat")
        with django_compat.thread_connection(db):
            with transaction.atomic():
                db.cursor().execute("CREATE TABLE t (x integer)")
            expect(db.events == ["begin", "ended"], user, dj,
                   f"atomic() beginning with _start_transaction_under_autocommit and ending with _commit ({db.events})")
            with pytest.raises(LookupError), transaction.atomic():
                db.cursor().execute("INSERT INTO t VALUES (1)")
                raise LookupError("rolled back")
            expect(db.events[2:] == ["begin", "ended"], user, dj, f"atomic() ending with _rollback ({db.events})")
            holder = sqlite3_base.Database.connect(path, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")   # (the write lock held elsewhere: this BEGIN fails)
            try:
                with pytest.raises(OperationalError), transaction.atomic():
                    pass
            finally:
                holder.execute("ROLLBACK")
                holder.close()
            expect(db.events[4:] == ["begin", "ended"], user, dj,
                   f"_start_transaction_under_autocommit sending BEGIN IMMEDIATE (transaction_mode) ({db.events})")
        db.close()
        expect(db.events[6:] == ["closed"], user, dj, f"close() closing with _close ({db.events})")


def sqlite_statements_rewritten():
    user = django_compat.RememberingSQLiteCursor
    expect(django_compat.sqlite_placeholders("SELECT %s, '%%'") == "SELECT ?, '%'", django_compat.sqlite_placeholders,
           dj, "SQLiteCursorWrapper.convert_query rewriting %s as ? without named parameters")
    with tempfile.TemporaryDirectory() as tmp:
        db = django_compat.SQLiteWrapper(database_settings(ENGINE="django.db.backends.sqlite3",
                                                           NAME=f"{tmp}/db.sqlite3"), "compat")
        try:
            django_compat.sqlite_placeholders.cache_clear()
            cursor = db.cursor()
            cursor.execute("SELECT %s + 1", [41])
            answer = cursor.fetchone()
            cursor.execute("SELECT %(a)s + 1", {"a": 41})
            named = cursor.fetchone()
        finally:
            db.close()
    remembered = django_compat.sqlite_placeholders.cache_info().currsize
    expect(answer == named == (42,) and remembered == 1, user, dj,
           f"SQLiteCursorWrapper.execute rewriting through convert_query ({remembered} remembered)")


class RecordingPostgreSQL(django_compat.PostgreSQLWrapper):
    made = 0

    def make_connection(self, make, conn_params):
        self.made += 1
        return make(conn_params)


def postgresql_connections_made_and_checked():
    pg_support.require_postgres()
    user = django_compat.PostgreSQLWrapper
    db = RecordingPostgreSQL(database_settings(
        ENGINE="django.db.backends.postgresql", NAME="postgres", USER=pg_support.PG_USER, PASSWORD="",
        HOST=pg_support.PG_HOST, PORT=str(pg_support.PG_PORT), CONN_MAX_AGE=None, CONN_HEALTH_CHECKS=True), "compat")
    try:
        db.cursor().execute("SELECT 1")
        expect(db.made == 1, user, dj, "DatabaseWrapper.connect making its connection with get_new_connection")
        db.close_if_unusable_or_obsolete()   # (a request's start: its first query checks the connection)
        db.cursor().execute("SELECT 1")
        expect(db.made == 1, user, dj, "DatabaseWrapper.is_usable keeping a connection that is open")
        with pg_support.connect() as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [db.connection.info.backend_pid])
        poll = select.poll()
        poll.register(db.connection.fileno(), select.POLLIN)
        poll.poll(5000)   # (the server's goodbye arrives)
        db.close_if_unusable_or_obsolete()
        try:
            db.cursor().execute("SELECT 1")
            answered = True
        except DatabaseError:
            answered = False
        expect(answered and db.made == 2, user, dj,
               "close_if_health_check_failed asking is_usable before a request's first query, and closing a "
               f"connection the server closed ({db.made} made)")
    finally:
        db.close()


WAITS = []   # (the generators CountingConnection was handed)


class CountingConnection(psycopg_compat.WaitHookedConnection):
    __slots__ = ()

    def wait_for_server(self, gen):
        WAITS.append(gen)
        return super().wait_for_server(gen)


class LoopConnection(psycopg_compat.WaitHookedConnection):
    __slots__ = ()

    def wait_for_server(self, gen):
        return asyncio.run(psycopg_compat.wait_on_loop(gen, self.pgconn.socket))


def psycopg_waits_handed_over():
    pg_support.require_postgres()
    user = psycopg_compat.WaitHookedConnection
    with pg_support.connect(autocommit=False) as conn:
        expect(psycopg_compat.adopt(conn, CountingConnection) is conn and type(conn) is CountingConnection,
               psycopg_compat.adopt, pg, "psycopg.Connection's class being swapped for a subclass without state")
        WAITS.clear()
        answer = conn.execute("SELECT 41 + 1").fetchone()
        conn.commit()
        expect(answer == (42,) and len(WAITS) == 2, user, pg,
               f"Cursor.execute and Connection.commit waiting through Connection.wait ({len(WAITS)} waits)")
        list(conn.notifies(timeout=0))
        expect(len(WAITS) == 2, user, pg, "Connection.notifies waiting with a timeout")


def psycopg_waits_on_a_loop():
    pg_support.require_postgres()
    with pg_support.connect() as conn:
        psycopg_compat.adopt(conn, LoopConnection)
        try:
            answer = conn.execute("SELECT 41 + 1").fetchone()
        except Exception:   # (whatever a changed wait makes of the conversation)
            answer = None
    expect(answer == (42,), psycopg_compat.wait_on_loop, pg,
           "psycopg.waiting.wait_async driving a connection's protocol generator on the running loop")


TURNS = []   # (a timeout per turn of the loop CountingSelector served)


class CountingSelector(selectors.DefaultSelector):
    """Counts the loop's turns: each turn asks its selector once."""

    def select(self, timeout=None):
        TURNS.append(timeout)
        return super().select(timeout)


class TurnCountingConnection(psycopg_compat.WaitHookedConnection):
    __slots__ = ()

    def wait_for_server(self, gen):
        loop = asyncio.SelectorEventLoop(CountingSelector())
        try:
            return loop.run_until_complete(psycopg_compat.wait_on_loop(gen, self.pgconn.socket))
        finally:
            loop.close()


def psycopg_waits_on_a_loop_without_spinning():
    """A wait for an answer that takes 0.3 s wakes the loop a few times (WAIT_INTERVAL 0.1: about 3),
    not at every turn (psycopg 3.3's wait_async with its default interval 0.0 turned it thousands
    of times: a busy loop)."""
    pg_support.require_postgres()
    with pg_support.connect() as conn:
        psycopg_compat.adopt(conn, TurnCountingConnection)
        TURNS.clear()
        conn.execute("SELECT pg_sleep(0.3)").fetchone()
    turns = len(TURNS)
    expect(turns < 50, psycopg_compat.wait_on_loop, pg,
           f"psycopg.waiting.wait_async sleeping between its interval's wake-ups ({turns} turns of the loop "
           "in a 0.3 s wait)")


BEHAVIOURS = [header_count_and_request_line, reading_paused_and_resumed, continue_held_then_sent, disconnect_seen,
              forms_not_parsed, tcp_buffer_and_direct_writes, tls_layout, keep_alive_ended, one_accept_per_wakeup,
              daphne_request, daphne_application_scope, daphne_server, websocket_factory_and_frames,
              django_handler_steps, django_thread_connection, running_loop_hidden, sqlite_transaction_ends,
              sqlite_statements_rewritten, postgresql_connections_made_and_checked, psycopg_waits_handed_over,
              psycopg_waits_on_a_loop]


@pytest.mark.parametrize("behaviour", BEHAVIOURS, ids=lambda b: b.__name__)
def test_behaviour(behaviour, django_db_blocker):
    with django_db_blocker.unblock():   # (the database behaviours open connections of their own)
        behaviour()


# Each behaviour made to fail by a change in its library, as a new version could make it.

_REQUEST_INIT, _PORT_DO_READ = http.Request.__init__, tcp.Port.doRead


def _init_parsing_forms(self, *args, parsePOSTFormSubmission=True):
    _REQUEST_INIT(self, *args)


def _accept_all(self):
    self.numberAccepts = 100
    return _PORT_DO_READ(self)


def _finish_telling_application(self):
    self.queue.append({"type": "http.disconnect"})


def _resolve_without_hook(self, request):
    match = get_resolver().resolve(request.path_info)
    return match.func(request, *match.args, **match.kwargs)


_SET_AUTOCOMMIT = BaseDatabaseWrapper.set_autocommit


def _set_autocommit_never_beginning(self, autocommit, force_begin_transaction_with_broken_autocommit=False):
    return _SET_AUTOCOMMIT(self, autocommit)


def _execute_rewriting_itself(self, query, params=None):
    if isinstance(params, dict):
        query = query % {name: f":{name}" for name in params}
    return sqlite3_base.Database.Cursor.execute(self, query.replace("%s", "?"), params or ())


def _execute_waiting_itself(self, query, params=None, **kwargs):
    with self._conn.lock:
        waiting.wait(self._execute_gen(query, params, **kwargs), self._conn.pgconn.socket)
    return self


async def _wait_async_answering_nothing(gen, fileno, interval=0.0, timeout=None):
    return None


CHANGES = {
    header_count_and_request_line: lambda mp: mp.setattr(HTTPChannel, "_receivedHeaderSize",
                                                         property(lambda self: 0, lambda self, value: None)),
    reading_paused_and_resumed: lambda mp: mp.setattr(StringTransport, "pauseProducing", lambda self: None),
    continue_held_then_sent: lambda mp: mp.setattr(twisted_compat.HeldContinueChannel, "_send100Continue",
                                                   HTTPChannel._send100Continue),
    forms_not_parsed: lambda mp: mp.setattr(http.Request, "__init__", _init_parsing_forms),
    tcp_buffer_and_direct_writes: lambda mp: mp.setattr(abstract.FileDescriptor, "offset", 1 << 40),
    one_accept_per_wakeup: lambda mp: mp.setattr(tcp.Port, "doRead", _accept_all),
    daphne_request: lambda mp: mp.setattr(WebRequest, "finish", _finish_telling_application),
    websocket_factory_and_frames: lambda mp: mp.setattr(AutobahnProtocol, "sendCloseFrame", lambda *a, **k: None),
    django_handler_steps: lambda mp: mp.setattr(BaseHandler, "_get_response", _resolve_without_hook),
    # (asyncio's setter changed as loop_hidden sees it only: the test's own loop must keep running)
    running_loop_hidden: lambda mp: mp.setattr(asyncio_compat, "asyncio", SimpleNamespace(events=SimpleNamespace(
        _get_running_loop=asyncio.events._get_running_loop, _set_running_loop=lambda loop: None))),
    sqlite_transaction_ends: lambda mp: mp.setattr(BaseDatabaseWrapper, "set_autocommit", _set_autocommit_never_beginning),
    sqlite_statements_rewritten: lambda mp: mp.setattr(sqlite3_base.SQLiteCursorWrapper, "execute",
                                                       _execute_rewriting_itself),
    postgresql_connections_made_and_checked: lambda mp: mp.setattr(BaseDatabaseWrapper, "close_if_health_check_failed",
                                                                   lambda self: None),
    psycopg_waits_handed_over: lambda mp: mp.setattr(psycopg.Cursor, "execute", _execute_waiting_itself),
    psycopg_waits_on_a_loop: lambda mp: mp.setattr(waiting, "wait_async", _wait_async_answering_nothing),
    # (psycopg 3.3's default interval, which the module passes its own over)
    psycopg_waits_on_a_loop_without_spinning: lambda mp: mp.setattr(psycopg_compat, "WAIT_INTERVAL", 0.0),
}


@pytest.mark.parametrize("behaviour", list(CHANGES), ids=lambda b: b.__name__)
def test_a_changed_behaviour_is_noticed(behaviour, monkeypatch, django_db_blocker):
    CHANGES[behaviour](monkeypatch)
    with pytest.raises(AssertionError, match=r"relies on .*, which \w+ [\d.]+ changed"), django_db_blocker.unblock():
        behaviour()

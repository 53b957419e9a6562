"""`manage.py serve`: run Daphne with an HTTP and an HTTPS listener, on every core.

HTTP is for the pages and local tools; HTTPS is for API clients, because kubectl sends a
bearer token only over TLS. The TLS material comes from a local CA (dashboard.access.tls)
that kubeconfigs written by `manage.py kubeconfig` trust.

`--workers N` (default: the number of cores) binds the sockets once and runs N Daphne worker
processes on them (dashboard.server.workers); `--workers 1` serves in this process, unless
PROMETHEUS_MULTIPROC_DIR is set: the folder must be emptied before the serving process creates
its first metric, and this process created some when its modules were imported
(prometheus_client opens a file per metric type then; emptying the folder under it left its
samples in deleted files). So it binds, empties the folder, and becomes its one worker (exec:
the same pid, the sockets inherited, no metric kept) rather than keep a supervisor in memory.
"""
from __future__ import annotations

import argparse
import gc
import logging
import os
import resource
import sys

from daphne.access import AccessLogGenerator
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.urls import get_resolver

from dashboard.access.own_kubeconfig import WILDCARDS, client_url
from dashboard.access.tls import ensure_tls
# Daphne's server installs Twisted's asyncio reactor when imported (compat.daphne imports it); it
# must come before anything imports twisted.internet.reactor (the daphne app in INSTALLED_APPS
# already did this).
from dashboard.compat.daphne import Server, failed_to_listen, install_http_factory, listen_on_no_endpoint
from dashboard.follow.secrets import CredentialsError, check_configured_key
from dashboard.kube import registry, schema, schema_state
from dashboard.server import lanes, logs, maintenance, protocol, shutdown, workers, ws_limits

# A backstop for requests that never finish, not a limit on normal use: watches end on
# their own (timeoutSeconds, or the server's 30-60 minute default), well before this.
DEFAULT_HTTP_TIMEOUT = 2 * 3600
# Pages reconnect and catch up after a close, so a day is plenty for one websocket.
DEFAULT_WEBSOCKET_TIMEOUT = 24 * 3600

# The banner and the supervisor's lines: log records, JSON like every other line (server/logs.py).
log = logging.getLogger("kubedash.serve")

# The placeholder values of .env.example and deploy/kubernetes/secret.yaml ("change-me...").
PLACEHOLDER = "change-me"


def placeholders() -> list[str]:
    """The secrets still holding a placeholder: a deployment must never run on them (anyone who
    read .env.example could sign sessions, or read /metrics)."""
    found = []
    if PLACEHOLDER in settings.SECRET_KEY.lower():
        found.append("DJANGO_SECRET_KEY")
    if PLACEHOLDER in str(settings.DATABASES["default"].get("PASSWORD") or "").lower():
        found.append("the database password (POSTGRES_PASSWORD, in DATABASE_URL)")
    if PLACEHOLDER in settings.KUBEDASH_METRICS_TOKEN.lower():
        found.append("KUBEDASH_METRICS_TOKEN")
    return found


def refusal(dev: bool) -> str | None:
    """Why this configuration must not serve, or None. Placeholders are allowed in development
    (DJANGO_DEBUG, `manage.py start`); a credentials key that is no key never is."""
    found = [] if dev else placeholders()
    if found:
        return (f"refusing to start: {', '.join(found)} still {'holds' if len(found) == 1 else 'hold'} the "
                f"placeholder from .env.example / secret.yaml ('{PLACEHOLDER}...'): set a long random value "
                '(python3 -c "import secrets; print(secrets.token_urlsafe(50))")')
    try:
        check_configured_key()
    except CredentialsError as err:
        return f"refusing to start: {err}"
    return None


def raise_file_limit() -> None:
    """Every watch and page websocket is a socket: lift the soft fd limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else max(soft, 65536), hard))
        except (ValueError, OSError):
            pass


def _escape(value: str) -> str:
    # Twisted endpoint strings use ':' as separator and '\' as escape (IPv6 hosts, paths).
    return str(value).replace("\\", "\\\\").replace(":", "\\:")


def endpoints(host: str, port: int, tls_port: int | None, tls=None) -> list[str]:
    interface = _escape(host.strip("[]"))
    out = [f"tcp:port={port}:interface={interface}"]
    if tls_port is not None:
        out.append(f"ssl:port={tls_port}:interface={interface}"
                   f":privateKey={_escape(tls.server_key)}:certKey={_escape(tls.server_cert)}")
    return out


def tls_hosts(host: str) -> list[str]:
    """Extra names the serving certificate must cover for clients to reach this listener."""
    host = host.strip("[]")
    return [] if host in WILDCARDS else [host]


class Command(BaseCommand):
    help = "Run the server (Daphne): HTTP for pages, HTTPS with a local CA for API clients."

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1",
                            help="address to listen on (0.0.0.0 or :: for all; default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=8000, help="HTTP port (default 8000)")
        parser.add_argument("--tls-port", type=int, default=8443, help="HTTPS port (default 8443)")
        parser.add_argument("--no-tls", action="store_true", help="serve plain HTTP only")
        parser.add_argument("--access-log", action="store_true",
                            help="also Daphne's access log: a second line per request, in Apache's format, as the "
                                 "message of a kubedash.access log line (off by default: it costs throughput, and "
                                 "the request log, on unless KUBEDASH_REQUEST_LOG=0, already has each request with "
                                 "its user, Audit-ID, client and latency)")
        parser.add_argument("--http-timeout", type=int, default=DEFAULT_HTTP_TIMEOUT,
                            help=f"close any HTTP request after this many seconds, 0 for never "
                                 f"(default {DEFAULT_HTTP_TIMEOUT})")
        parser.add_argument("--websocket-timeout", type=int, default=DEFAULT_WEBSOCKET_TIMEOUT,
                            help=f"close websockets after this many seconds, -1 for never "
                                 f"(default {DEFAULT_WEBSOCKET_TIMEOUT})")
        parser.add_argument("--proxy-headers", action="store_true",
                            help="trust X-Forwarded-For/-Port/-Proto (only behind a reverse proxy)")
        parser.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                            help="Daphne worker processes sharing the listening sockets "
                                 "(default: the number of cores; 1 serves in this process)")
        # Set by the supervisor for its workers: the inherited listening sockets.
        parser.add_argument("--listen-fds", default="", help=argparse.SUPPRESS)
        # Set by `manage.py start` (development): placeholder secrets are no reason to refuse.
        parser.add_argument("--allow-placeholders", action="store_true", help=argparse.SUPPRESS)

    def handle(self, *args, **options):
        logs.install_excepthooks()
        if not options["listen_fds"]:   # (the supervisor checked for its workers)
            why = refusal(dev=settings.DEBUG or options["allow_placeholders"])
            if why:
                log.critical(why)
                raise SystemExit(1)
        raise_file_limit()
        host, port = options["host"], options["port"]
        tls_port = None if options["no_tls"] else options["tls_port"]
        options["tls_port"] = tls_port
        tls = None
        if tls_port is not None:
            tls = ensure_tls(settings.DATA_DIR, tls_hosts(host))
        urls = [client_url("http", host, port)] + ([client_url("https", host, tls_port)] if tls_port else [])
        if tls_port is not None:
            # What the tokens page's kubeconfig download points at (inherited by the workers).
            os.environ["KUBEDASH_TLS_PORT"] = str(tls_port)
        # Kubedash's own pages port, for the destination checks of processes that do not hold the
        # listening sockets (the expensive lane's child: follow/destination.py own_listeners).
        os.environ["KUBEDASH_HTTP_PORT"] = str(port)
        if options["workers"] < 1:
            raise CommandError("--workers must be at least 1")
        if options["workers"] > 1 or (os.environ.get("PROMETHEUS_MULTIPROC_DIR") and not options["listen_fds"]):
            return self.supervise(options, tls, urls)
        self.serve(options, tls, urls)

    def supervise(self, options, tls, urls) -> None:
        host = options["host"]
        try:
            listeners = [workers.bind(host, options["port"], tls=False)]
            if options["tls_port"] is not None:
                listeners.append(workers.bind(host, options["tls_port"], tls=True))
        except OSError as err:
            raise CommandError(f"could not listen on {', '.join(urls)}: {err}") from None
        count = options["workers"]
        command = workers.worker_command(options)
        # (One worker with PROMETHEUS_MULTIPROC_DIR: see the module docstring. Not when another
        # command runs serve, `start`: it has its demo to stop afterwards, so it supervises.)
        if count == 1 and sys.argv[1:2] == ["serve"]:
            self.banner(urls, tls)
            workers.prepare_metrics_dir()
            os.execv(command[0], command + ["--listen-fds", workers.listen_fds_arg(listeners)])
        self.banner(urls, tls, f" ({count} worker process{'es' if count > 1 else ''})")

        def say(line: str) -> None:
            if options["verbosity"] >= 1:
                log.info("serve: %s", line)

        supervisor = workers.Supervisor(command, listeners, count, say)
        supervisor.run()

    def banner(self, urls, tls, suffix: str = "") -> None:
        log.info("Serving HTTP   on %s/  (pages)%s", urls[0], suffix)
        if len(urls) > 1:
            log.info("Serving HTTPS  on %s/  (API; CA: %s)", urls[1], tls.ca_cert)
        log.info("Quit with CONTROL-C.")

    def serve(self, options, tls, urls) -> None:
        host, port, tls_port = options["host"], options["port"], options["tls_port"]
        listen_fds = options["listen_fds"]

        # Static files are served by WhiteNoise's middleware (dashboard/web/staticfiles.py):
        # compressed and hashed once collected (`start` collects), from the finders before.
        # Here, not at the top: building the ASGI application loads the URL conf, the middleware
        # and the handlers, which `manage.py help` and the supervisor process never need.
        from dashboard.server.asgi import application   # noqa: PLC0415 (only when serving: see above)
        from dashboard.server import metrics   # noqa: PLC0415 (the URL conf's, loaded with the application)

        # process_* covers this server's processes: from the supervisor when this is its worker.
        supervised = workers.supervised()
        metrics.set_process_root(os.getppid() if supervised else os.getpid(), supervised=supervised)

        # A schema a newer release migrated (a rollback) is found and logged now, once; the
        # process then serves only the probes (kube/schema_state.py).
        schema_state.check_at_start()

        def ready():
            shutdown.install(server)   # SIGTERM/SIGINT drain the process (dashboard.server.shutdown)
            ws_limits.install(server)  # what a page socket's client may make us do (frames, handshakes)
            maintenance.start()        # the once-per-deployment work, if elected
            if lanes.lanes().heavy:
                lanes.lanes().heavy.start()   # its Django starts while the first requests come
            if listen_fds:
                from twisted.internet import reactor   # noqa: PLC0415 (importing it installs a reactor: Daphne's is first)

                workers.adopt(reactor, server, listen_fds, tls)
            else:
                self.banner(urls, tls)
            freeze_startup_objects()

        proxy = options["proxy_headers"]
        # Ours bounds what a client may send, and how slowly (dashboard.server.protocol).
        install_http_factory(protocol.LimitedHTTPFactory)
        server = Server(
            application=application,
            # A worker's listeners are adopted in ready(); Daphne insists on some endpoint.
            endpoints=["(inherited)"] if listen_fds else endpoints(host, port, tls_port, tls),
            signal_handlers=False,  # ours, installed in ready(): drain, then stop
            action_logger=AccessLogGenerator(logs.LogStream("kubedash.access")) if options["access_log"] else None,
            http_timeout=options["http_timeout"] or None,
            websocket_timeout=options["websocket_timeout"],
            application_close_timeout=10,
            request_buffer_size=protocol.request_buffer_size(),   # a body reaches the app in one piece
            websocket_max_message_size=settings.KUBEDASH_WEBSOCKET_MAX_MESSAGE_BYTES,
            websocket_max_frame_size=settings.KUBEDASH_WEBSOCKET_MAX_MESSAGE_BYTES,
            proxy_forwarded_address_header="X-Forwarded-For" if proxy else None,
            proxy_forwarded_port_header="X-Forwarded-Port" if proxy else None,
            proxy_forwarded_proto_header="X-Forwarded-Proto" if proxy else None,
            verbosity=options["verbosity"],
            ready_callable=ready,
            server_name="kubedash",
        )
        if listen_fds:
            listen_on_no_endpoint(server)
        server.run()
        if failed_to_listen(server):
            # Daphne logged why (address in use, permission denied, bad certificate).
            raise CommandError(f"could not listen on {', '.join(urls)}")


def freeze_startup_objects() -> None:
    """What start-up built (Django, the URL patterns, every kind's compiled schema) lives as
    long as the process: move it out of the garbage collector's sight (gc.freeze), so a full
    collection walks only what requests create — one took ~50 ms in a 1,000-row page render,
    and as long in the middle of whichever renewal it fell on."""
    get_resolver().url_patterns          # noqa: B018 (the resolver populates itself on first use)
    for res in registry.all_resources():
        schema.node(res.definition)
    gc.collect()
    gc.freeze()


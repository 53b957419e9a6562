"""Several Daphne worker processes on one listening socket per port.

The supervisor (`manage.py serve --workers N`, N > 1) binds the HTTP and HTTPS sockets once
and starts N `manage.py serve --listen-fds ...` children that inherit them; each child's
Daphne adopts the sockets (Twisted's adoptStreamPort; the HTTPS one wrapped in TLS by
TLSMemoryBIOFactory, as Twisted's own ssl endpoint does) and the kernel spreads incoming
connections over the processes accepting on them. The supervisor restarts a worker that
dies, forwards SIGTERM/SIGINT to the workers and exits once they have.

Every worker follows the revision log (dashboard.kube.notify), so a watch or a live page on
any worker sees every write, whichever worker took it.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from prometheus_client import multiprocess
from twisted.internet import ssl
from twisted.protocols.tls import TLSMemoryBIOFactory

from dashboard.compat.daphne import http_factory, listening
from dashboard.compat.twisted import after_each_accept

RESTART_BACKOFF_SECONDS = (0.1, 0.5, 1, 2, 5)   # a worker that keeps dying is restarted slower
STABLE_SECONDS = 30                              # ...and counts as healthy again after this long
STOP_GRACE_SECONDS = 15
LISTEN_BACKLOG = 1024


@dataclass
class Listener:
    sock: socket.socket
    tls: bool


def bind(host: str, port: int, tls: bool) -> Listener:
    """A bound socket the workers will inherit (raises OSError: address in use...).

    Not listening yet: the first worker to be ready calls listen(), so a client that connects
    finds a server that answers, as with a single process.
    """
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6 and host == "::":
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return Listener(sock, tls)


def listen_fds_arg(listeners: list[Listener]) -> str:
    """`--listen-fds` for a worker: fd[:tls],... (the worker learns each socket's family itself)."""
    return ",".join(f"{l.sock.fileno()}{':tls' if l.tls else ''}" for l in listeners)


def adopt(reactor, server, listen_fds: str, tls_paths) -> None:
    """In a worker, before its reactor runs: accept on the inherited sockets with Daphne's
    HTTP factory (the factory that also serves websockets)."""
    for item in listen_fds.split(","):
        fd_text, _, kind = item.partition(":")
        fd = int(fd_text)
        probe = socket.socket(fileno=fd)
        family = probe.family
        probe.listen(LISTEN_BACKLOG)  # a no-op when another worker got here first
        probe.detach()  # leave the fd open: it is the listening socket
        os.set_blocking(fd, False)  # the reactor accepts until EAGAIN
        factory = http_factory(server)
        if kind == "tls":
            pem = tls_paths.server_cert.read_bytes() + b"\n" + tls_paths.server_key.read_bytes()
            factory = TLSMemoryBIOFactory(ssl.PrivateCertificate.loadPEM(pem).options(), False, factory)
        port = reactor.adoptStreamPort(fd, family, factory)
        accept_in_turns(port)
        listening(server, port)


# After accepting, a worker leaves the shared socket to the others this long.
ACCEPT_PAUSE_SECONDS = 0.002
ADOPTED_PORTS: list = []     # the ports this worker accepts on (shutdown stops them, paused or not)


def accept_in_turns(port) -> None:
    """Every worker wakes for a new connection on the shared socket, and the one already
    running wins the race: Twisted's port then accepts up to 100 at a wake-up, so a burst of
    connections (wrk's 4, a client pool's 10) all went to one worker and the others idled. Here
    a worker accepts one connection, then leaves the socket to the others for 2 ms: a burst
    is spread over the workers free to take it, and no connection waits longer than that."""

    def pause():
        if not port.disconnecting:
            port.stopReading()
            port.reactor.callLater(ACCEPT_PAUSE_SECONDS, resume)

    def resume():
        if port.connected and not port.disconnecting:
            port.startReading()

    after_each_accept(port, pause)
    ADOPTED_PORTS.append(port)


def prepare_metrics_dir() -> Path | None:
    """Empty PROMETHEUS_MULTIPROC_DIR for this deployment, or make one (returned: ours to remove).

    Each worker writes its counters there (prometheus_client's multiprocess mode) and /metrics
    sums them; files left by an earlier run would be counted again, so it starts empty.
    """
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        path = Path(given)
        path.mkdir(parents=True, exist_ok=True)
        for stale in path.glob("*.db"):
            stale.unlink(missing_ok=True)
        return None
    path = Path(tempfile.mkdtemp(prefix="kubedash-metrics-"))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(path)
    return path


SUPERVISOR_ENV = "KUBEDASH_SUPERVISOR_PID"   # set for its workers: whose children they are


def supervised() -> bool:
    """Is this process a worker of a running supervisor (not a lone `serve`, nor one that became
    its only worker by exec)?"""
    return os.environ.get(SUPERVISOR_ENV) == str(os.getppid())


def worker_gone(pid: int) -> None:
    """A worker's live gauges (open watches, websockets, lane queues) stop counting."""
    multiprocess.mark_process_dead(pid)


class Supervisor:
    """Starts, watches and stops the worker processes."""

    def __init__(self, command: list[str], listeners: list[Listener], workers: int, log):
        self.command = command + ["--listen-fds", listen_fds_arg(listeners)]
        self.fds = [l.sock.fileno() for l in listeners]
        self.workers = workers
        self.log = log
        self.procs: dict[int, subprocess.Popen] = {}   # slot -> process
        self.started: dict[int, float] = {}
        self.failures: dict[int, int] = {}
        self.stopping = False

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        owned_metrics_dir = prepare_metrics_dir()
        os.environ[SUPERVISOR_ENV] = str(os.getpid())
        try:
            for slot in range(self.workers):
                self._spawn(slot)
            while not self.stopping:
                for slot, proc in list(self.procs.items()):
                    if proc.poll() is not None and not self.stopping:
                        self._restart(slot, proc.returncode)
                time.sleep(0.1)
            return self._wait_all()
        finally:
            if owned_metrics_dir is not None:
                shutil.rmtree(owned_metrics_dir, ignore_errors=True)

    def _spawn(self, slot: int) -> None:
        proc = subprocess.Popen(self.command, pass_fds=self.fds)
        self.procs[slot] = proc
        self.started[slot] = time.monotonic()
        self.log(f"worker {slot} started (pid {proc.pid})")

    def _restart(self, slot: int, code: int) -> None:
        if time.monotonic() - self.started[slot] > STABLE_SECONDS:
            self.failures[slot] = 0
        failures = self.failures.get(slot, 0)
        self.failures[slot] = failures + 1
        delay = RESTART_BACKOFF_SECONDS[min(failures, len(RESTART_BACKOFF_SECONDS) - 1)]
        self.log(f"worker {slot} (pid {self.procs[slot].pid}) exited with {code}; restarting in {delay}s")
        worker_gone(self.procs[slot].pid)
        time.sleep(delay)
        if not self.stopping:
            self._spawn(slot)

    def _stop(self, signum, frame) -> None:
        self.stopping = True
        for proc in self.procs.values():
            if proc.poll() is None:
                # SIGTERM whatever the signal: a worker started from a background shell
                # ignores SIGINT, and Twisted then leaves it ignored.
                proc.send_signal(signal.SIGTERM)

    def _wait_all(self) -> int:
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return 0


def worker_command(argv_options: dict) -> list[str]:
    """The `manage.py serve` command line of one worker (the supervisor's options, one worker)."""
    cmd = [sys.executable, str(settings.BASE_DIR / "manage.py"), "serve", "--workers", "1",
           "--host", argv_options["host"], "--port", str(argv_options["port"]),
           "--http-timeout", str(argv_options["http_timeout"]),
           "--websocket-timeout", str(argv_options["websocket_timeout"]),
           "--verbosity", str(argv_options["verbosity"])]
    if argv_options["tls_port"] is None:
        cmd.append("--no-tls")
    else:
        cmd += ["--tls-port", str(argv_options["tls_port"])]
    for flag in ("access_log", "proxy_headers"):
        if argv_options[flag]:
            cmd.append("--" + flag.replace("_", "-"))
    return cmd

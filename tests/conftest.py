"""What every folder of the suite shares.

- Signing in: `api` / `make_api` (the API as a bearer token, through the full Django stack),
  `login` (a page user's Django test Client), `log_in_form` (the login form over HTTP, against a
  live server). Chromium's fixtures and its sign-in are in tests/chromium.py, loaded below.
- Live servers: `LiveServer` is `manage.py serve` as a process of a test's own; `served()` migrates
  and runs one, `served_pair()` two of one deployment, `running()` any that a test built itself;
  `kube_server` is the session's shared one and `api_client` the official Python client on it.
- Waiting: `eventually()` polls for a positive signal (tests never sleep a fixed time and then
  assert that nothing happened: they wait for a later change instead).

Markers (pyproject.toml lists them; `.ci/run` selects its stages by them): a test that uses the
`chromium` fixture is marked `browser` here, by itself.
"""
from __future__ import annotations

import http.client
import os
import random
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from functools import cached_property
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode

import orjson
import pytest
from django.test import Client

import pg_support
from dashboard.access.models import Profile
from dashboard.access.tokens import ensure_user, issue_token

ROOT = Path(__file__).resolve().parent.parent

pytest_plugins = ["chromium"]


def pytest_collection_modifyitems(items):
    for item in items:
        if "chromium" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)


# ---------------------------------------------------------------------------------------------
# Signing in


class Api:
    """The Django test client speaking to the API as a given bearer token (full Django stack)."""

    def __init__(self, client, token: str | None):
        self.client = client
        self.token = token

    def _headers(self, headers):
        out = {}
        if self.token:
            out["HTTP_AUTHORIZATION"] = f"Bearer {self.token}"
        for key, value in (headers or {}).items():
            out["HTTP_" + key.upper().replace("-", "_")] = value
        return out

    def request(self, method, path, body=None, content_type="application/json", headers=None):
        data = body
        if body is not None and not isinstance(body, (bytes, str)):
            data = orjson.dumps(body)
        kwargs = self._headers(headers)
        fn = getattr(self.client, method.lower())
        if data is None:
            return fn(path, **kwargs)
        return fn(path, data=data, content_type=content_type, **kwargs)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, body, **kw)

    def patch(self, path, body, content_type="application/merge-patch+json", **kw):
        return self.request("PATCH", path, body, content_type=content_type, **kw)

    def delete(self, path, body=None, **kw):
        return self.request("DELETE", path, body, **kw)


@pytest.fixture
def make_api(db, client):
    """make_api(role, username=None, namespaces=None) -> an Api with a token of its own."""
    def make(role="admin", username=None, namespaces=None):
        token = issue_token(username or f"{role}-user", role)
        if namespaces is not None:
            Profile.objects.filter(user__username=username or f"{role}-user").update(namespaces=namespaces)
        return Api(client, token)

    return make


@pytest.fixture
def api(make_api):
    return make_api("admin")


@pytest.fixture
def login(db):
    """login(role, username=None, namespaces=None, clusters=None, **client_options) -> a Django test
    Client signed in as `username`: created with `role` if new, by default one user per role and
    limits ("page-viewer-team-a"); its profile's namespace and cluster limits set when given (None
    leaves them as they are). client_options go to Client (enforce_csrf_checks=True). A test that
    needs transactions says so itself (django_db(transaction=True), transactional_db)."""
    def sign_in(role: str, username: str | None = None, *, namespaces=None, clusters=None, **client_options):
        user = ensure_user(username or "-".join(["page", role, *(namespaces or ()), *(clusters or ())]), role)
        limits = {name: value for name, value in (("namespaces", namespaces), ("clusters", clusters))
                  if value is not None}
        if limits:
            Profile.objects.filter(user=user).update(**limits)
        client = Client(**client_options)
        client.force_login(user)
        return client

    return sign_in


def log_in_form(conn: http.client.HTTPConnection, origin: str, username: str, password: str, *,
                secure: bool = False) -> str:
    """The login form as a browser submits it (CSRF cookie and token, Origin); returns the
    Cookie header of the session. `secure`: every cookie must say Secure (HTTPS)."""
    def keep(resp) -> None:
        for name, value in resp.getheaders():
            if name.lower() == "set-cookie":
                assert not secure or "secure" in value.lower(), f"a cookie over HTTPS without Secure: {value}"
                jar.load(value)

    jar = SimpleCookie()
    conn.request("GET", "/accounts/login/")
    resp = conn.getresponse()
    resp.read()
    keep(resp)
    csrf = jar["csrftoken"].value
    form = urlencode({"csrfmiddlewaretoken": csrf, "username": username, "password": password, "next": "/"})
    conn.request("POST", "/accounts/login/", body=form, headers={
        "Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={csrf}",
        "Origin": origin, "Referer": origin + "/accounts/login/"})
    resp = conn.getresponse()
    resp.read()
    keep(resp)
    assert resp.status == 302 and "sessionid" in jar, f"login failed: {resp.status}"
    return f"csrftoken={csrf}; sessionid={jar['sessionid'].value}"


# ---------------------------------------------------------------------------------------------
# Live servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(data_dir: Path, **extra: str) -> dict:
    """The environment of a test's server: its own data dir (SQLite file, TLS material), none of
    the runner's database, Redis or metrics directory; `extra` on top."""
    drop = ("DATABASE_URL", "REDIS_URL", "PROMETHEUS_MULTIPROC_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["KUBEDASH_DATA_DIR"] = str(data_dir)
    env["DJANGO_SETTINGS_MODULE"] = "dashboard.settings"
    env["PYTHONPATH"] = str(ROOT)
    env["KUBEDASH_WATCH_BOOKMARK_SECONDS"] = "1"   # so bookmark tests take seconds, not minutes
    # No maintenance election: its Lease renewals would be writes the tests did not make (tests
    # that count revisions or cluster-wide Leases). Tests of maintenance turn it on.
    env["KUBEDASH_MAINTENANCE"] = "0"
    env.update(extra)
    return env


# A server that follows clusters: maintenance on (its leader runs the followers' informers), and
# elected within a second or so.
FOLLOWER_ENV = dict(KUBEDASH_MAINTENANCE="1", KUBEDASH_MAINTENANCE_RETRY_PERIOD="0.5",
                    KUBEDASH_MAINTENANCE_LEASE_SECONDS="5", KUBEDASH_MAINTENANCE_RENEW_DEADLINE="3")


def migrate(env: dict) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], env=env, cwd=ROOT, check=True,
                   timeout=300)


SESSION_SCRIPT = """
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from dashboard.access.tokens import ensure_user
user = ensure_user("{username}", "{role}")
store = SessionStore()
store[SESSION_KEY] = str(user.pk)
store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
store[HASH_SESSION_KEY] = user.get_session_auth_hash()
store.save()
print(store.session_key)
"""


class LiveServer:
    """`manage.py serve` as a process of a test's own, on ports of its own (kept across restarts):
    start, stop, kill, start again; its log; requests, watches, tokens and manage.py commands
    against it, in its environment (its database). `serve_args` go to serve; `tls=False` serves
    plain HTTP alone; `popen` goes to subprocess.Popen (start_new_session=True)."""

    host = "127.0.0.1"

    def __init__(self, data_dir: Path, *serve_args: str, env: dict | None = None, label: str = "server",
                 tls: bool = True, **popen):
        self.data_dir = Path(data_dir)
        self.env = env if env is not None else server_env(self.data_dir)
        self.label = label
        self.log_path = self.data_dir / f"{label}.log"
        self.http_port = free_port()
        self.tls_port = free_port() if tls else None
        self.http_url = f"http://{self.host}:{self.http_port}"
        self.https_url = f"https://{self.host}:{self.tls_port}" if tls else None
        listeners = ["--tls-port", str(self.tls_port)] if tls else ["--no-tls"]
        self.command = [sys.executable, str(ROOT / "manage.py"), "serve", "--port", str(self.http_port),
                        *listeners, *serve_args]
        self.popen = popen
        self.proc = None

    # --- the process

    def launch(self) -> None:
        """Start the process (its output appended to the log); wait_ready() waits for it."""
        with open(self.log_path, "ab") as log:   # (the child keeps a descriptor of its own)
            self.proc = subprocess.Popen(self.command, env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                         **self.popen)

    def wait_ready(self, timeout: float = 90) -> float:
        """Until it answers /livez (and its TLS port accepts connections); returns the moment its
        HTTP port first accepted one."""
        deadline = time.monotonic() + timeout
        listening = None
        while True:
            try:
                with socket.create_connection((self.host, self.http_port), timeout=1):
                    listening = listening or time.monotonic()
                if self.tls_port:
                    socket.create_connection((self.host, self.tls_port), timeout=1).close()
                if self.request("GET", "/livez", token="-")[0] == 200:
                    return listening
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serve ({self.label}) did not start: {self.log()[-3000:]}")
            time.sleep(0.05)

    def start(self) -> float:
        """launch() and wait_ready(): the moment the HTTP port accepted connections."""
        self.launch()
        return self.wait_ready()

    def stop(self) -> None:
        """SIGTERM (a graceful stop), SIGKILL if it has not ended within 30 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def kill(self) -> None:
        """SIGKILL the server and its worker processes: connections drop, nothing is said."""
        for pid in child_pids(self.proc.pid):
            os.kill(pid, signal.SIGKILL)
        self.proc.kill()
        self.proc.wait(10)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    # --- talking to it

    def request(self, method: str, path: str, body=None, token: str | None = None,
                content_type: str = "application/json", headers: dict | None = None):
        """One plain-HTTP request; returns (status, headers, parsed JSON or raw bytes)."""
        conn = http.client.HTTPConnection(self.host, self.http_port, timeout=30)
        hdrs = {"Authorization": f"Bearer {token or self.admin_token}", **(headers or {})}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else orjson.dumps(body)
            hdrs["Content-Type"] = content_type
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            parsed = raw
        return resp.status, dict(resp.getheaders()), parsed

    def watch(self, path: str, token: str | None = None, headers: dict | None = None) -> "WatchStream":
        return WatchStream(self, path, token or self.admin_token, headers or {})

    @cached_property
    def admin_token(self) -> str:
        """An admin's token, issued on first use (servers on one database may share one: assign it)."""
        return self.token("live-admin", "admin")

    def manage(self, *args) -> str:
        """A manage.py command in a process of its own, on the server's database; its stdout."""
        out = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=self.env, cwd=ROOT,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"manage.py {' '.join(args)[:200]} failed: {out.stderr[-3000:]}"
        return out.stdout

    def token(self, username="admin", role="admin") -> str:
        return self.manage("issue_token", username, "--role", role).strip().splitlines()[-1]

    def session(self, username="page-viewer", role="viewer") -> str:
        """A signed-in browser session of `username` (made as the login view makes one): its
        sessionid cookie value, for page sockets opened without a browser."""
        return self.manage("shell", "-c", SESSION_SCRIPT.format(username=username, role=role)).strip().splitlines()[-1]

    def kubeconfig(self, path: Path, username="admin", role="admin") -> Path:
        self.manage("kubeconfig", username, "--role", role, "--server", self.https_url, "--output", str(path))
        return path

    @property
    def ca_file(self) -> str:
        return str(self.data_dir / "tls" / "ca.crt")


def child_pids(pid: int) -> set[int]:
    """The direct children of a process (a supervisor's workers, a worker's heavy child)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return set()
    return {int(p) for p in text.split()}


@contextmanager
def running(*servers: LiveServer):
    """Start the servers together, wait until each answers, and stop them all at the end (also
    when a start fails)."""
    try:
        for server in servers:
            server.launch()
        for server in servers:
            server.wait_ready()
        yield
    finally:
        for server in servers:
            server.stop()


@contextmanager
def served(data_dir: Path, *serve_args: str, env: dict | None = None, label: str = "server", tls: bool = True):
    """Migrate, then run `manage.py serve` (+ serve_args) until the block ends; yields its LiveServer."""
    server = LiveServer(data_dir, *serve_args, env=env, label=label, tls=tls)
    migrate(server.env)
    with running(server):
        yield server


def scrape(server: LiveServer, token: str | None = None) -> str:
    """The server's /metrics, read as an admin (or with `token`)."""
    status, _, body = server.request("GET", "/metrics", token=token)
    assert status == 200, body
    return body.decode()


def sample(text: str, name: str, **labels) -> float:
    """The value of one sample of a /metrics text (0 when absent), labels matched exactly."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        head, _, value = line.rpartition(" ")
        found = dict(re.findall(r'(\w+)="([^"]*)"', head))
        if head.split("{")[0] == name and found == labels:
            return float(value)
    return 0.0


class ServerPair:
    """Two servers of one deployment (`a, b = pair`), and their database read directly."""

    def __init__(self, a: LiveServer, b: LiveServer, backend: str, dbname: str | None):
        self.a, self.b, self.backend, self.dbname = a, b, backend, dbname

    def __iter__(self):
        return iter((self.a, self.b))

    def query(self, sql: str, params: tuple = ()) -> list[tuple]:
        if self.dbname:
            with pg_support.connect(self.dbname) as conn:
                return [tuple(row) for row in conn.execute(sql, params).fetchall()]
        with sqlite3.connect(self.a.data_dir / "kubedash.sqlite3") as conn:
            return conn.execute(sql.replace("%s", "?"), params).fetchall()


@contextmanager
def served_pair(tmp_path_factory, backend: str, *serve_args: str, bouncer=None, tls: bool = True, prepare=None,
                **env: str):
    """Two single-worker `manage.py serve` processes of one deployment (a, b): one database
    ("sqlite": one file in a shared data dir, no Redis; "postgres": a fresh database, with the
    machine's Redis unless env names one; `bouncer`: reached through that PgBouncer only), one
    secret key, one admin token; serve_args, tls and env as LiveServer takes them; prepare(a),
    if given, runs once the database is migrated, before either starts. Yields their ServerPair."""
    shared = {"DJANGO_SECRET_KEY": secrets.token_urlsafe(40)}   # one deployment signs sessions alike
    dbname = None
    if backend == "sqlite":
        data_dirs = [tmp_path_factory.mktemp("pair-sqlite")] * 2
    else:
        pg_support.require_postgres()
        if "REDIS_URL" not in env:
            pg_support.require_redis()
        dbname = pg_support.create_database()
        data_dirs = [tmp_path_factory.mktemp(f"pair-{backend}-{label}") for label in "ab"]
        # Redis pub/sub channels are global, not per db index: the index only keeps the channel
        # layer's keys apart; another run on the same Redis just adds wake-ups.
        shared.update(DATABASE_URL=bouncer.url(dbname) if bouncer else pg_support.pg_url(dbname),
                      REDIS_URL=pg_support.redis_url(random.randint(1, 15)),
                      KUBEDASH_PGBOUNCER="1" if bouncer else "0")
    a, b = (LiveServer(data_dir, "--workers", "1", *serve_args, env=server_env(data_dir, **{**shared, **env}),
                       label=label, tls=tls) for data_dir, label in zip(data_dirs, "ab"))
    try:
        migrate(a.env)
        if prepare is not None:
            prepare(a)
        with running(a, b):
            b.admin_token = a.admin_token   # (tokens live in the shared database)
            yield ServerPair(a, b, backend, dbname)
    finally:
        if dbname:
            pg_support.drop_database(dbname)


class WatchStream:
    """A watch over plain HTTP, read event by event (each with a timeout)."""

    def __init__(self, server: LiveServer, path: str, token: str, headers: dict):
        self.conn = http.client.HTTPConnection(server.host, server.http_port, timeout=30)
        self.conn.request("GET", path, headers={"Authorization": f"Bearer {token}", **headers})
        self.response = self.conn.getresponse()
        self.status = self.response.status

    def next(self, timeout: float = 10.0):
        """The next event as a dict, or None when the server ended the stream."""
        self.conn.sock.settimeout(timeout)
        line = self.response.readline()
        if not line:
            return None
        return orjson.loads(line)

    def events(self, count: int, timeout: float = 10.0) -> list[dict]:
        out = []
        for _ in range(count):
            ev = self.next(timeout)
            if ev is None:
                break
            out.append(ev)
        return out

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@pytest.fixture(scope="session")
def kube_server(tmp_path_factory):
    """`manage.py serve` on free ports with its own SQLite database, for real clients."""
    with served(tmp_path_factory.mktemp("kubedash-live")) as server:
        yield server


@pytest.fixture(scope="module")
def api_client(kube_server):
    """The official Python client, as an admin, over HTTPS with the server's CA."""
    from kubernetes import client as k8s

    config = k8s.Configuration()
    config.host = kube_server.https_url
    config.ssl_ca_cert = kube_server.ca_file
    config.api_key = {"authorization": "Bearer " + kube_server.token("python-client", "admin")}
    with k8s.ApiClient(config) as c:
        yield c


def require_tool(name: str, where: str = "") -> str:
    """The path of a command a test drives; CI installs each (.ci/run), so there it is a failure
    to miss one, elsewhere a skip. `where`: the package that brings it."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is required in CI but was not found on PATH{f' ({where})' if where else ''}")
        pytest.skip(f"{name} is not installed on this machine")
    return path


def require_kubectl() -> str:
    return require_tool("kubectl")


# ---------------------------------------------------------------------------------------------
# Waiting for a positive signal


def eventually(check, timeout: float = 30.0, what: str = "condition"):
    """check()'s first true value within timeout, polled every 0.1 s; else fail naming what."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


# ---------------------------------------------------------------------------------------------
# The test database


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    """pytest-django's test database; on PostgreSQL, before it is dropped, the watch hub's
    follower is stopped (it closes its connection) and the sessions other threads still hold on
    it (a lane's, idle) are ended: else the DROP fails ("being accessed by other users") and
    the database stays behind."""
    yield
    from dashboard.kube import notify

    follower = notify._current
    if follower is not None:
        follower.stop()
        follower.join(10)
    with django_db_blocker.unblock():
        from django.db import connection

        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            connection.close()

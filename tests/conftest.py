"""Shared fixtures: an API client with bearer tokens, and a live `manage.py serve` server."""
from __future__ import annotations

import http.client
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parent.parent


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
    from dashboard.access.tokens import issue_token

    def make(role="admin", username=None, namespaces=None):
        token = issue_token(username or f"{role}-user", role)
        if namespaces is not None:
            from dashboard.access.models import Profile
            Profile.objects.filter(user__username=username or f"{role}-user").update(namespaces=namespaces)
        return Api(client, token)

    return make


@pytest.fixture
def api(make_api):
    return make_api("admin")


def log_in_form(conn: http.client.HTTPConnection, origin: str, username: str, password: str, *,
                secure: bool = False) -> str:
    """The login form as a browser submits it (CSRF cookie and token, Origin); returns the
    Cookie header of the session. `secure`: every cookie must say Secure (HTTPS)."""
    from http.cookies import SimpleCookie
    from urllib.parse import urlencode

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


def signed_in_client(role: str, username: str, **profile):
    """A Django test Client signed in as `username` (created with `role` if new), with the
    profile fields given (namespaces=[...], clusters=[...]; None leaves one as it is). The
    caller needs database access (a db fixture)."""
    from django.test import Client

    from dashboard.access.models import Profile
    from dashboard.access.tokens import ensure_user

    user = ensure_user(username, role)
    fields = {k: v for k, v in profile.items() if v is not None}
    if fields:
        Profile.objects.filter(user=user).update(**fields)
    client = Client()
    client.force_login(user)
    return client


async def open_socket(client, query: str):
    """A live page's websocket through the real ASGI stack, carrying a Django test Client's
    session cookie: (communicator, connected, close code)."""
    from channels.testing import WebsocketCommunicator

    from dashboard.server.asgi import application

    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost"), (b"cookie", cookie)]
    comm = WebsocketCommunicator(application, f"/ws/live/?{query}", headers=headers)
    connected, code = await comm.connect(timeout=5)
    return comm, connected, code


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    host = "127.0.0.1"

    def __init__(self, data_dir: Path, http_port: int, tls_port: int, proc):
        self.data_dir = data_dir
        self.http_port = http_port
        self._admin_token = None
        self.http_url = f"http://127.0.0.1:{http_port}"
        self.https_url = f"https://127.0.0.1:{tls_port}"
        self.proc = proc
        self.env = server_env(data_dir)

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

    @property
    def admin_token(self) -> str:
        if self._admin_token is None:
            self._admin_token = self.token("live-admin", "admin")
        return self._admin_token

    def manage(self, *args) -> str:
        out = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=self.env, cwd=ROOT,
                             capture_output=True, text=True, check=True)
        return out.stdout

    def token(self, username="admin", role="admin") -> str:
        return self.manage("issue_token", username, "--role", role).strip().splitlines()[-1]

    def kubeconfig(self, path: Path, username="admin", role="admin") -> Path:
        self.manage("kubeconfig", username, "--role", role, "--server", self.https_url, "--output", str(path))
        return path

    @property
    def ca_file(self) -> str:
        return str(self.data_dir / "tls" / "ca.crt")


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


def server_env(data_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env["KUBEDASH_DATA_DIR"] = str(data_dir)
    env["DJANGO_SETTINGS_MODULE"] = "dashboard.settings"
    env["PYTHONPATH"] = str(ROOT)
    env["KUBEDASH_WATCH_BOOKMARK_SECONDS"] = "1"   # so bookmark tests take seconds, not minutes
    # No maintenance election: its Lease renewals would be writes the tests did not make (tests
    # that count revisions or cluster-wide Leases). tests/test_maintenance.py turns it on.
    env["KUBEDASH_MAINTENANCE"] = "0"
    return env


def served(data_dir: Path, env: dict, *serve_args: str):
    """Migrate, run `manage.py serve` on free ports (+ serve_args) until both listen, yield its
    LiveServer, stop it. For fixtures: `yield from served(...)`."""
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    http_port, tls_port = free_port(), free_port()
    log = open(data_dir / "server.log", "wb")
    proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "serve", "--port", str(http_port),
                             "--tls-port", str(tls_port), *serve_args], env=env, cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", tls_port), timeout=1):
                with socket.create_connection(("127.0.0.1", http_port), timeout=1):
                    break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("serve did not start: " + (data_dir / "server.log").read_text()[-3000:])
            time.sleep(0.2)
    try:
        yield LiveServer(data_dir, http_port, tls_port, proc)
    finally:   # (also on close(): a test that stops a server by closing its generator)
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


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


@pytest.fixture(scope="session")
def kube_server(tmp_path_factory):
    """`manage.py serve` on free ports with its own SQLite database, for real clients."""
    data_dir = tmp_path_factory.mktemp("kubedash-live")
    yield from served(data_dir, server_env(data_dir))


def require_kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("kubectl is required in CI but was not found on PATH")
        pytest.skip("kubectl is not installed on this machine")
    return path


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

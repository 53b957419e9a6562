"""A real OpenID provider for the access tests: npm's oidc-provider (tests/oidc/provider.mjs) in a
node process of the test's own, on a free 127.0.0.1 port, serving HTTPS with a CA of its own.

`OidcProvider.people` is the accounts file the provider reads on every lookup: a test changes
someone's groups (or removes them) with `set_person` / `remove_person` while they are signed in.
"""
from __future__ import annotations

import json
import re
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from dashboard.access.tls import ensure_tls

HERE = Path(__file__).parent / "oidc"
CLIENT_ID = "kubedash"
CLIENT_SECRET = "kubedash-test-secret-0123456789abcdef"

PEOPLE = {
    "alice": {"email": "alice@example.test", "name": "Alice Admin", "groups": ["platform", "everyone"]},
    "bob": {"email": "bob@example.test", "name": "Bob Builder", "groups": ["team-a", "everyone"]},
    "carol": {"email": "carol@example.test", "name": "Carol Viewer", "groups": ["everyone"]},
    "dave": {"email": "dave@example.test", "name": "Dave Nobody", "groups": []},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_node() -> str:
    node = shutil.which("node")
    installed = (HERE / "node_modules" / "oidc-provider").is_dir()
    if node and installed:
        return node
    what = "node is not installed" if not node else "tests/oidc has no node_modules (cd tests/oidc && npm ci)"
    if os.environ.get("CI"):
        pytest.fail(f"{what}; CI must run the OpenID tests (.ci/run installs them)", pytrace=False)
    pytest.skip(what)


class OidcProvider:
    def __init__(self, workdir: Path, *, redirect_base: str, access_token_ttl: int = 3600, id_token_ttl: int = 3600):
        self.node = require_node()
        self.dir = Path(workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        tls = ensure_tls(self.dir)
        self.ca_file = str(tls.ca_cert)
        self.port = free_port()
        self.issuer = f"https://127.0.0.1:{self.port}"
        self.accounts = self.dir / "accounts.json"
        self.people = {name: dict(p) for name, p in PEOPLE.items()}
        self._write_people()
        self.client_id, self.client_secret = CLIENT_ID, CLIENT_SECRET
        self.config = {
            "port": self.port, "cert": str(tls.server_cert), "key": str(tls.server_key),
            "accounts": str(self.accounts), "accessTokenTTL": access_token_ttl, "idTokenTTL": id_token_ttl,
            "clients": [{
                "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET,
                "redirect_uris": [redirect_base + "/accounts/oidc/callback/"],
                "post_logout_redirect_uris": [redirect_base + "/accounts/login/"],
                "backchannel_logout_uri": redirect_base + "/accounts/oidc/backchannel-logout/",
                "backchannel_logout_session_required": True,
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_basic",
            }],
        }
        (self.dir / "provider.json").write_text(json.dumps(self.config))
        self.log_path = self.dir / "provider.log"
        self.proc = None

    def _write_people(self) -> None:
        tmp = self.accounts.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.people))
        tmp.replace(self.accounts)     # the provider never reads half a file

    def set_person(self, login: str, **fields) -> None:
        self.people.setdefault(login, {}).update(fields)
        self._write_people()

    def remove_person(self, login: str) -> None:
        self.people.pop(login, None)
        self._write_people()

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([self.node, str(HERE / "provider.mjs"), str(self.dir / "provider.json")],
                                         cwd=HERE, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        context = ssl.create_default_context(cafile=self.ca_file)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(self.issuer + "/.well-known/openid-configuration", context=context,
                                            timeout=2) as resp:
                    self.discovery = json.load(resp)
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("oidc-provider did not start: " + self.log()[-3000:]) from None
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kubedash_env(self, **extra: str) -> dict:
        """The environment that points a kubedash server at this provider."""
        return {"KUBEDASH_OIDC_ISSUER": self.issuer, "KUBEDASH_OIDC_CLIENT_ID": self.client_id,
                "KUBEDASH_OIDC_CLIENT_SECRET": self.client_secret, "KUBEDASH_OIDC_CA_FILE": self.ca_file,
                "KUBEDASH_OIDC_SCOPES": "openid profile email groups offline_access",
                "KUBEDASH_OIDC_NAME": "Test Provider",
                # (oidc-provider grants offline_access, a refresh token, only with prompt=consent,
                # as OpenID Connect Core 11 says)
                "KUBEDASH_OIDC_AUTH_PARAMS": "prompt=consent", **extra}


BINDINGS = (("platform", ["--role", "admin"]), ("team-a", ["--role", "editor", "--namespace", "team-a"]),
            ("everyone", ["--role", "viewer", "--namespace", "shared"]))


@contextmanager
def oidc_served(tmp_path_factory, access_token_ttl: int = 3600, env_for=None, **env: str):
    """A provider and a kubedash server signing in through it (BINDINGS bound): (provider, server).
    `env_for(provider, data_dir)`: more of the server's environment, made once the provider is known."""
    from conftest import LiveServer, migrate, running, server_env

    data = tmp_path_factory.mktemp("oidc-kubedash")
    server = LiveServer(data, label="oidc-server")
    provider = OidcProvider(tmp_path_factory.mktemp("oidc-provider"), redirect_base=server.http_url,
                            access_token_ttl=access_token_ttl)
    provider.start()
    try:
        server.env = server_env(data, **provider.kubedash_env(**env, **(env_for(provider, data) if env_for else {})))
        migrate(server.env)
        for group, args in BINDINGS:
            server.manage("group", "bind", group, *args)
        with running(server):
            yield provider, server
    finally:
        provider.stop()


def sign_in(chromium, server, login: str, next_path: str = "/", context=None, login_page_shot: str = ""):
    """A browser context (fresh, or `context`) signed in as `login` through the provider's own
    login and consent pages: (context, page). `login_page_shot`: a screenshot of kubedash's
    login page on the way."""
    from playwright.sync_api import expect

    from chromium import TRACK_SOCKETS, WAIT_MS

    expect.set_options(timeout=WAIT_MS)
    # (the browser does not know the provider's test CA; kubedash itself checks it: KUBEDASH_OIDC_CA_FILE)
    ctx = context or chromium.new_context(ignore_https_errors=True)
    ctx.add_init_script(TRACK_SOCKETS)
    page = ctx.new_page()
    page.goto(server.http_url + "/accounts/login/?next=" + next_path)
    if login_page_shot:
        page.screenshot(path=login_page_shot)
    page.click("#oidc-sign-in")
    page.wait_for_selector("input[name=login]")        # the provider's own login page
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any")
    page.click("button[type=submit]")
    page.wait_for_selector("button[type=submit]")      # its consent page
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(re.escape(server.http_url) + r"/.*"))
    return ctx, page


def count(provider: OidcProvider, line: str) -> int:
    """How many times the provider logged `line` (provider.mjs: grants, back-channel logouts)."""
    return sum(1 for x in provider.log().splitlines() if x.startswith(line))


def session_tokens(server, ctx) -> dict:
    """The tokens kubedash keeps in this browser context's session (server-side only)."""
    key = next(c["value"] for c in ctx.cookies() if c["name"] == "sessionid")
    out = server.manage("shell", "-c", (
        "import json\nfrom django.contrib.sessions.backends.db import SessionStore\n"
        f"print(json.dumps(SessionStore({key!r}).get('kubedash_oidc')))\n"))
    return json.loads(out.strip().splitlines()[-1])


def authentication_config(provider: OidcProvider, audiences=("kubedash",), **extra) -> str:
    """kube's AuthenticationConfiguration for this provider (YAML)."""
    import yaml

    issuer = {"url": provider.issuer, "audiences": list(audiences),
              "certificateAuthority": Path(provider.ca_file).read_text()}
    entry = {"issuer": issuer, "claimMappings": {"username": {"claim": "email", "prefix": ""},
                                                 "groups": {"claim": "groups", "prefix": ""}}, **extra}
    return yaml.safe_dump({"apiVersion": "apiserver.config.k8s.io/v1beta1", "kind": "AuthenticationConfiguration",
                           "jwt": [entry]})

"""Signing in with OpenID Connect through a real provider (issue 37): npm's oidc-provider
(tests/oidc_provider.py) on 127.0.0.1, its own login and consent pages in Chromium; the
identity provider's groups giving each role and limit through group bindings; a person without
any binding on a page that says whom to ask; the local form hidden with KUBEDASH_LOCAL_LOGIN=0.
"""
from __future__ import annotations

import http.client
import re
from urllib.parse import urlsplit

import pytest

from chromium import WAIT_MS
from conftest import LiveServer, migrate, running, server_env
from oidc_provider import OidcProvider

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def provider_and_server(tmp_path_factory):
    data = tmp_path_factory.mktemp("oidc-kubedash")
    server = LiveServer(data, label="oidc-server")
    provider = OidcProvider(tmp_path_factory.mktemp("oidc-provider"), redirect_base=server.http_url)
    provider.start()
    try:
        server.env = server_env(data, **provider.kubedash_env())
        migrate(server.env)
        for group, args in (("platform", ["--role", "admin"]), ("team-a", ["--role", "editor", "--namespace", "team-a"]),
                            ("everyone", ["--role", "viewer", "--namespace", "shared"])):
            server.manage("group", "bind", group, *args)
        with running(server):
            yield provider, server
    finally:
        provider.stop()


@pytest.fixture
def oidc_server(provider_and_server):
    return provider_and_server[1]


@pytest.fixture
def provider(provider_and_server):
    return provider_and_server[0]


def sign_in(chromium, server, login: str, next_path: str = "/"):
    """A fresh browser context signed in as `login` through the provider's own pages."""
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    # (the browser does not know the provider's test CA; kubedash itself checks it: KUBEDASH_OIDC_CA_FILE)
    ctx = chromium.new_context(ignore_https_errors=True)
    page = ctx.new_page()
    page.goto(server.http_url + "/accounts/login/?next=" + next_path)
    page.click("#oidc-sign-in")
    page.wait_for_selector("input[name=login]")        # the provider's own login page
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any")
    page.click("button[type=submit]")
    page.wait_for_selector("button[type=submit]")      # its consent page
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(re.escape(server.http_url) + r"/.*"))
    return ctx, page


def test_login_page_offers_the_provider_beside_the_local_form(oidc_server):
    conn = http.client.HTTPConnection(oidc_server.host, oidc_server.http_port, timeout=30)
    conn.request("GET", "/accounts/login/")
    body = conn.getresponse().read().decode()
    assert "Sign in with Test Provider" in body
    assert 'name="password"' in body


def test_sign_in_starts_the_code_flow_with_pkce_state_and_nonce(oidc_server, provider):
    conn = http.client.HTTPConnection(oidc_server.host, oidc_server.http_port, timeout=30)
    conn.request("GET", "/accounts/oidc/login/")
    resp = conn.getresponse()
    assert resp.status == 302
    url = resp.getheader("Location")
    assert url.startswith(provider.discovery["authorization_endpoint"] + "?")
    query = dict(p.split("=", 1) for p in urlsplit(url).query.split("&"))
    assert query["response_type"] == "code" and query["code_challenge_method"] == "S256"
    assert query["code_challenge"] and query["state"] and query["nonce"]
    assert "redirect_uri" in query and "accounts%2Foidc%2Fcallback" in query["redirect_uri"]
    assert "set-cookie" in {k.lower() for k, _ in resp.getheaders()}     # the state lives in the session


def test_admin_group_signs_in_as_admin(chromium, oidc_server):
    ctx, page = sign_in(chromium, oidc_server, "alice")
    try:
        assert page.url.rstrip("/") == oidc_server.http_url
        who = page.locator(".who").inner_text()
        assert "alice@example.test" in who and "admin" in who
        # tokens stay on the server: no cookie but the session's and CSRF's
        # (no JWT in any cookie, kubedash's or the provider's, nor in the page)
        assert "sessionid" in {c["name"] for c in ctx.cookies()}
        assert not [c["name"] for c in ctx.cookies() if "eyJ" in c["value"]]
        assert "eyJ" not in page.content()
    finally:
        ctx.close()


def test_limited_group_gets_its_namespace_and_the_union_of_bindings(chromium, oidc_server):
    ctx, page = sign_in(chromium, oidc_server, "bob")
    try:
        who = page.locator(".who").inner_text()
        # editor in team-a (group team-a) + viewer in shared (group everyone): the union
        assert "bob@example.test" in who and "editor" in who and "shared" in who and "team-a" in who
        page.goto(oidc_server.http_url + "/leases/?namespace=other")
        assert "no access to namespace" in page.content()
    finally:
        ctx.close()
    out = oidc_server.manage("shell", "-c", (
        "from django.contrib.auth import get_user_model\n"
        "from dashboard.access.principals import principal_for\n"
        "p = principal_for(get_user_model().objects.get(username='bob@example.test'))\n"
        "print(p.can('create', 'team-a', 'Lease'), p.can('create', 'shared', 'Lease'), p.can('list', 'shared', 'Lease'),"
        " p.can('list', 'other', 'Lease'), p.is_full_admin)\n"))
    assert out.strip().splitlines()[-1].split() == ["True", "False", "True", "False", "False"]


def test_no_binding_lands_on_a_page_that_says_whom_to_ask(chromium, oidc_server):
    oidc_server.manage("shell", "-c", "from dashboard.access.tokens import ensure_user\nensure_user('root-admin', 'admin')")
    ctx, page = sign_in(chromium, oidc_server, "dave")
    try:
        page.wait_for_selector("#no-access")
        assert page.url == oidc_server.http_url + "/accounts/no-access/"
        text = page.inner_text("main") if page.locator("main").count() else page.inner_text("body")
        assert "root-admin" in text and "dave@example.test" in text
        page.goto(oidc_server.http_url + "/leases/")     # any page: the same answer, not an error
        page.wait_for_selector("#no-access")
        page.screenshot(path=str(oidc_server.data_dir / "no-access.png"))
    finally:
        ctx.close()


def test_a_callback_without_its_state_is_refused(oidc_server):
    conn = http.client.HTTPConnection(oidc_server.host, oidc_server.http_port, timeout=30)
    conn.request("GET", "/accounts/oidc/callback/?code=forged&state=forged")
    resp = conn.getresponse()
    assert resp.status == 400
    assert "Sign-in failed" in resp.read().decode()


def test_local_login_hidden_and_refused(tmp_path, provider):
    env = server_env(tmp_path, **provider.kubedash_env(KUBEDASH_LOCAL_LOGIN="0"))
    server = LiveServer(tmp_path, env=env, tls=False)
    migrate(env)
    with running(server):
        conn = http.client.HTTPConnection(server.host, server.http_port, timeout=30)
        conn.request("GET", "/accounts/login/")
        resp = conn.getresponse()
        body = resp.read().decode()
        assert resp.status == 200 and "Sign in with Test Provider" in body and 'name="password"' not in body
        conn.request("POST", "/accounts/login/", body="username=a&password=b",
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status in (403, 405)

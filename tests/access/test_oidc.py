"""Signing in with OpenID Connect through a real provider (issue 37): npm's oidc-provider
(tests/oidc_provider.py) on 127.0.0.1, its own login and consent pages in Chromium; the
identity provider's groups giving each role and limit through group bindings; a person without
any binding on a page that says whom to ask; the local form hidden with KUBEDASH_LOCAL_LOGIN=0.
"""
from __future__ import annotations

import http.client
from urllib.parse import urlsplit

import pytest

from conftest import LiveServer, migrate, running, server_env
from oidc_provider import oidc_served, sign_in

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def provider_and_server(tmp_path_factory):
    with oidc_served(tmp_path_factory) as pair:
        yield pair


@pytest.fixture
def oidc_server(provider_and_server):
    return provider_and_server[1]


@pytest.fixture
def provider(provider_and_server):
    return provider_and_server[0]


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
    ctx, page = sign_in(chromium, oidc_server, "alice", login_page_shot=str(oidc_server.data_dir / "login.png"))
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
        # (the header names each grant: never "editor in shared, team-a")
        assert "bob@example.test" in who and "editor in team-a" in who and "viewer in shared" in who
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
        for method in ("GET", "POST"):   # nor Django admin's own login form
            conn.request(method, "/admin/login/?next=/admin/", body="username=a&password=b",
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
            resp = conn.getresponse()
            resp.read()
            # (a POST without a CSRF token: 403 before any password is looked at)
            assert (resp.status, resp.getheader("Location", "")[:16]) in ((302, "/accounts/login/"), (403, "")), \
                (method, resp.status, resp.getheader("Location"))


def token_for(server, username: str) -> str:
    """A kubedash API token of an existing user, its rights left as they are."""
    out = server.manage("shell", "-c", (
        "from django.contrib.auth import get_user_model\n"
        "from dashboard.access.tokens import create_token\n"
        f"print(create_token(get_user_model().objects.get(username={username!r}), 'test'))\n"))
    return out.strip().splitlines()[-1]


def test_whoami_says_where_each_right_comes_from(chromium, oidc_server, tmp_path):
    import json
    import subprocess

    from conftest import require_kubectl

    ctx, page = sign_in(chromium, oidc_server, "bob")
    try:
        page.goto(oidc_server.http_url + "/accounts/whoami/")
        rights = page.locator("#rights").inner_text()
        assert "editor in team-a (group team-a)" in rights and "viewer in shared (group everyone)" in rights
    finally:
        ctx.close()
    kubectl = require_kubectl()
    token = token_for(oidc_server, "bob@example.test")
    out = subprocess.run([kubectl, "--server", oidc_server.https_url, "--certificate-authority", oidc_server.ca_file,
                          "--token", token, "auth", "whoami", "-o", "json"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)["status"]["userInfo"]
    assert info["username"] == "bob@example.test"
    assert {"team-a", "everyone"} <= set(info["groups"])
    assert info["extra"]["kubedash.io/rights"] == ["viewer in shared (group everyone)", "editor in team-a (group team-a)"]
    # the same token: the union holds on the API too
    assert oidc_server.request("GET", "/apis/coordination.k8s.io/v1/namespaces/team-a/leases", token=token)[0] == 200
    assert oidc_server.request("GET", "/apis/coordination.k8s.io/v1/namespaces/other/leases", token=token)[0] == 403


def test_group_bindings_page_for_admins_only(chromium, oidc_server):
    ctx, page = sign_in(chromium, oidc_server, "alice", "/people/groups/")
    try:
        page.wait_for_selector("#group-bindings")
        page.fill("#binding-group", "auditors")
        page.select_option("#binding-role", "viewer")
        page.fill("#binding-namespaces", "audit, shared")
        page.click("form[aria-label='Bind a group'] button[type=submit]")
        row = page.locator("#group-bindings tr", has_text="auditors")
        assert "audit, shared" in row.inner_text()
        page.screenshot(path=str(oidc_server.data_dir / "groups.png"), full_page=True)
        assert "auditors\tviewer in namespaces audit, shared" in oidc_server.manage("group", "list")
        row.locator("button", has_text="Unbind").click()
        page.wait_for_selector("#group-bindings tr:has-text('platform')")
        assert page.locator("#group-bindings tr", has_text="auditors").count() == 0
    finally:
        ctx.close()
    ctx, page = sign_in(chromium, oidc_server, "bob", "/people/groups/")
    try:
        assert "Only an admin" in page.content()
        assert page.locator("#group-bindings").count() == 0
    finally:
        ctx.close()


def test_group_command(oidc_server):
    out = oidc_server.manage("group", "bind", "ops", "--role", "editor", "--namespace", "b", "--namespace", "a",
                             "--cluster", "prod")
    assert out.strip() == "group ops: editor in namespaces a, b; clusters prod"
    assert "ops\teditor in namespaces a, b; clusters prod" in oidc_server.manage("group", "list")
    assert oidc_server.manage("group", "unbind", "ops").strip() == "group ops: unbound"
    assert "ops\t" not in oidc_server.manage("group", "list")

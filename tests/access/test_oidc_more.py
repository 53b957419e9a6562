"""OpenID Connect sign-in, the rest of issue 37: share links made by a person whose rights come
from their provider's groups (and stopping when the provider takes the group away), the client
secret read from a file, and Entra ID's groups overage (a distributed groups claim: no group
roles, a warning in the log, the person's local grant only).
"""
from __future__ import annotations

import re

import pytest
import requests

from chromium import WAIT_MS
from conftest import eventually
from manifests import lease
from oidc_provider import count, oidc_served, sign_in

pytestmark = pytest.mark.slow

ACCESS_TTL = 8   # refresh due every few seconds (test_oidc_sessions.py)
SHARE_TOKEN = re.compile(r"/s/([A-Za-z0-9_-]{40,})/")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    with oidc_served(tmp_path_factory, access_token_ttl=ACCESS_TTL) as both:
        provider, server = both
        for name, ns in (("in-team-a", "team-a"), ("in-shared", "shared")):
            status, _, body = server.request("POST", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                                             lease(name, ns=ns))
            assert status == 201, body
        yield both


def test_share_link_of_a_group_editor_shows_its_namespace_and_dies_with_the_group(chromium, pair):
    from playwright.sync_api import expect

    provider, server = pair
    provider.set_person("ivan", email="ivan@example.test", name="Ivan", groups=["team-a", "everyone"])
    ctx, page = sign_in(chromium, server, "ivan", "/leases/?namespace=team-a")
    try:
        page.click("text=Share this view")
        page.wait_for_selector("form.filters input[name=label]")
        page.fill("input[name=label]", "team-a for the on-call team")
        page.click("button:has-text('Create link')")
        token = eventually(lambda: SHARE_TOKEN.search(page.content()), what="the new link").group(1)

        visitor = requests.Session()
        opened = visitor.get(f"{server.http_url}/s/{token}/", timeout=30)
        assert opened.status_code == 200 and opened.url == server.http_url + "/leases/?namespace=team-a"
        assert "in-team-a" in opened.text and "Read-only shared view" in opened.text
        # only that namespace, though Ivan may also see "shared" (group everyone)
        assert visitor.get(server.http_url + "/leases/?namespace=shared", timeout=30).status_code == 403
        assert "in-shared" not in visitor.get(server.http_url + "/leases/", timeout=30).text

        # team-a taken away at the provider: at the next refresh of Ivan's session (his open
        # page's socket re-checks when it is due) the link stops, as when a local user's rights narrow
        refreshes = count(provider, "grant refresh_token")
        page.goto(server.http_url + "/leases/?namespace=team-a")
        expect(page.locator("#live-status")).to_have_text("Live", timeout=WAIT_MS)
        provider.set_person("ivan", groups=["everyone"])
        expect(page.locator("#live-status")).to_have_text("No access — reload", timeout=3 * ACCESS_TTL * 1000)
        assert count(provider, "grant refresh_token") > refreshes
        gone = visitor.get(server.http_url + "/leases/?namespace=team-a", timeout=30)
        assert gone.status_code == 410 and "in-team-a" not in gone.text
    finally:
        ctx.close()


def test_groups_overage_gives_no_group_roles_and_a_warning(chromium, pair):
    provider, server = pair
    # a local grant of her own, made before her first sign-in
    server.manage("shell", "-c", (
        "from django.contrib.auth import get_user_model\n"
        "from dashboard.access.models import Profile\n"
        "u = get_user_model().objects.create(username='olga@example.test')\n"
        "Profile.objects.filter(user=u).update(role='viewer', namespaces=['olga-ns'])\n"))
    # Entra ID with over 200 groups: no groups claim, a link to Microsoft Graph instead
    provider.set_person("olga", email="olga@example.test", name="Olga", groups=None, claims={
        "_claim_names": {"groups": "src1"},
        "_claim_sources": {"src1": {"endpoint": "https://graph.microsoft.com/v1.0/users/olga/getMemberObjects"}}})
    ctx, page = sign_in(chromium, server, "olga", "/accounts/whoami/")
    try:
        rights = page.locator("#rights").inner_text()
        assert "olga-ns" in rights and "group" not in rights, rights
        # not even the binding of "everyone", which every other person here has
        assert "shared" not in rights
        page.goto(server.http_url + "/leases/?namespace=shared")
        assert "no access to namespace" in page.content()
    finally:
        ctx.close()
    eventually(lambda: "olga" in server.log() and "groups overage" in server.log(), what="the overage warning")
    line = next(x for x in server.log().splitlines() if "groups overage" in x)
    assert "WARNING" in line, line


def test_groups_overage_without_a_grant_says_so_on_the_no_access_page(chromium, pair):
    provider, server = pair
    provider.set_person("pia", email="pia@example.test", name="Pia", groups=None, claims={
        "_claim_names": {"groups": "src1"},
        "_claim_sources": {"src1": {"endpoint": "https://graph.microsoft.com/v1.0/users/pia/getMemberObjects"}}})
    provider.set_person("quinn", email="quinn@example.test", name="Quinn", groups=[])
    ctx, page = sign_in(chromium, server, "pia")
    try:
        page.wait_for_selector("#no-access")
        assert "too many groups" in page.inner_text("#groups-overage")
        page.screenshot(path=str(server.data_dir / "no-access-overage.png"))
    finally:
        ctx.close()
    ctx, page = sign_in(chromium, server, "quinn")      # no groups at all: no word of an overage
    try:
        page.wait_for_selector("#no-access")
        assert page.locator("#groups-overage").count() == 0
    finally:
        ctx.close()


def test_client_secret_from_a_file(chromium, tmp_path_factory):
    def secret_file(provider, data_dir):
        path = data_dir / "client-secret"
        path.write_text(provider.client_secret + "\n")     # as a mounted Secret may end
        return {"KUBEDASH_OIDC_CLIENT_SECRET": "", "KUBEDASH_OIDC_CLIENT_SECRET_FILE": str(path)}

    with oidc_served(tmp_path_factory, env_for=secret_file) as (provider, server):
        assert "KUBEDASH_OIDC_CLIENT_SECRET_FILE" in server.env and not server.env["KUBEDASH_OIDC_CLIENT_SECRET"]
        ctx, page = sign_in(chromium, server, "alice")
        try:
            # the code was exchanged at the token endpoint with the file's secret
            assert page.url.rstrip("/") == server.http_url
            assert "alice@example.test" in page.locator(".who").inner_text()
            assert count(provider, "grant authorization_code") == 1
        finally:
            ctx.close()

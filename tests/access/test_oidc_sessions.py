"""Sessions signed in through the identity provider (issue 37): refreshed before the access token
expires, once per session however many tabs; each refresh re-reads the groups and a change applies
at once to open pages and watches; a failed refresh signs out with a page that says so; logout ends
the provider's session too (RP-initiated), and the provider's back-channel logout ends every
kubedash session of it, closing its sockets.

The provider's access tokens live ACCESS_TTL seconds here, so a refresh is due every few seconds.
"""
from __future__ import annotations

import json

import pytest
import requests

from chromium import WAIT_MS
from oidc_provider import count, oidc_served, sign_in

pytestmark = pytest.mark.slow

ACCESS_TTL = 8   # refresh due 2 s before expiry (a quarter of the lifetime): every 6 s


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    with oidc_served(tmp_path_factory, access_token_ttl=ACCESS_TTL) as both:
        yield both


def live(page):
    from playwright.sync_api import expect

    expect(page.locator("#live-status")).to_have_text("Live", timeout=WAIT_MS)


def session_cookie(ctx) -> str:
    return next(c["value"] for c in ctx.cookies() if c["name"] == "sessionid")


def test_group_removed_at_the_provider_applies_at_the_next_refresh(chromium, pair):
    from playwright.sync_api import expect

    provider, server = pair
    provider.set_person("frank", email="frank@example.test", name="Frank", groups=["team-a", "everyone"])
    ctx, page = sign_in(chromium, server, "frank", "/leases/?namespace=team-a")
    try:
        live(page)
        refreshes = count(provider, "grant refresh_token")
        watch = requests.get(server.http_url + "/apis/coordination.k8s.io/v1/namespaces/team-a/leases?watch=1",
                             cookies={"sessionid": session_cookie(ctx)}, stream=True, timeout=60)
        assert watch.status_code == 200
        lines = watch.iter_lines()
        provider.set_person("frank", groups=["everyone"])      # team-a taken away at the provider
        # the page's socket: no longer allowed to see team-a (the next refresh re-read the groups)
        expect(page.locator("#live-status")).to_have_text("No access — reload", timeout=3 * ACCESS_TTL * 1000)
        # the watch: ends with an ERROR event carrying a Status
        last = None
        for line in lines:
            if line:
                last = json.loads(line)
        assert last is not None and last["type"] == "ERROR" and last["object"]["code"] in (401, 403), last
        assert count(provider, "grant refresh_token") > refreshes
        page.goto(server.http_url + "/accounts/whoami/")
        assert "team-a" not in page.locator("#rights").inner_text()
    finally:
        ctx.close()


def test_many_tabs_refresh_once(chromium, pair):
    provider, server = pair
    provider.set_person("grace", email="grace@example.test", name="Grace", groups=["everyone"])
    ctx, first = sign_in(chromium, server, "grace", "/leases/?namespace=shared")
    try:
        tabs = [first] + [ctx.new_page() for _ in range(3)]
        for tab in tabs[1:]:
            tab.goto(server.http_url + "/leases/?namespace=shared")
        for tab in tabs:
            live(tab)
        before = count(provider, "grant refresh_token")
        # the first refresh after the tabs opened: every tab's socket re-checks at the same moment
        wait_for(lambda: count(provider, "grant refresh_token") > before, "a refresh")
        assert count(provider, "grant refresh_token") == before + 1
        for tab in tabs:
            live(tab)
        assert not count(provider, "grant-error")
    finally:
        ctx.close()


def test_failed_refresh_signs_out_with_a_page_that_says_so(chromium, pair):
    from playwright.sync_api import expect

    provider, server = pair
    provider.set_person("heidi", email="heidi@example.test", name="Heidi", groups=["everyone"])
    ctx, page = sign_in(chromium, server, "heidi", "/leases/?namespace=shared")
    try:
        live(page)
        provider.remove_person("heidi")                          # gone at the provider: refresh fails
        expect(page.locator("#signed-out-banner")).to_be_visible(timeout=3 * ACCESS_TTL * 1000)
        page.goto(server.http_url + "/leases/?namespace=shared")
        page.wait_for_selector("#signed-out")
        assert page.url == server.http_url + "/accounts/signed-out/"
        assert "your sign-in expired" in page.inner_text("#signed-out")
        page.screenshot(path=str(server.data_dir / "signed-out.png"))
        page.goto(server.http_url + "/leases/")                   # once said, the login page as usual
        assert "/accounts/login/" in page.url
    finally:
        ctx.close()


def test_logout_ends_the_providers_session_too(chromium, pair):
    provider, server = pair
    ctx, page = sign_in(chromium, server, "carol", "/leases/?namespace=shared")
    try:
        live(page)
        page.click("form[action='/accounts/logout/'] button")
        page.wait_for_selector("button[name=logout]")              # the provider's "sign me out?" page
        assert page.url.startswith(provider.issuer + "/session/end")
        page.click("button[name=logout]")
        page.wait_for_url(server.http_url + "/accounts/login/")
        # signed out at the provider too: signing in asks for the login again
        page.click("#oidc-sign-in")
        page.wait_for_selector("input[name=login]")
    finally:
        ctx.close()


def test_backchannel_logout_closes_the_sessions_sockets(chromium, pair):
    from playwright.sync_api import expect

    provider, server = pair
    ctx, page = sign_in(chromium, server, "carol", "/leases/?namespace=shared")
    other_ctx, other = sign_in(chromium, server, "carol", "/leases/?namespace=shared")   # another browser
    try:
        live(page)
        live(other)
        sent = count(provider, "backchannel carol")
        # signing out at the provider itself, not through kubedash
        provider_tab = ctx.new_page()
        provider_tab.goto(provider.issuer + "/session/end?client_id=" + provider.client_id)
        provider_tab.click("button[name=logout]")
        wait_for(lambda: count(provider, "backchannel carol") > sent, "the back-channel logout")
        expect(page.locator("#signed-out-banner")).to_be_visible()
        page.goto(server.http_url + "/leases/")
        assert "/accounts/login/" in page.url
        live(other)        # that sid only: the other browser's sign-in goes on
    finally:
        ctx.close()
        other_ctx.close()


def test_backchannel_logout_refuses_a_bad_token(pair):
    provider, server = pair
    forged = "eyJhbGciOiJub25lIn0.eyJpc3MiOiJ4In0."
    resp = requests.post(server.http_url + "/accounts/oidc/backchannel-logout/", data={"logout_token": forged},
                         timeout=30)
    assert resp.status_code == 400 and resp.json()["error"] == "invalid_request"


def wait_for(check, what: str, timeout: float = 60):
    from conftest import eventually

    return eventually(check, timeout=timeout, what=what)

"""Followed clusters in a real browser: the header's selector switches the page to another
cluster (pointer and keyboard), every link then stays in it, a followed cluster's page is live
and read-only, and when its follower stops confirming the watch the page says so at once (the
stale banner, pushed through the page's websocket) - and axe finds nothing wrong with it.

The followed clusters are rows of follow.models.Cluster with objects written by kube/mirror.py
in the test server (`manage.py shell`), as the follower writes them; removed afterwards, so the
other browser modules on the shared server see no cluster (the `prod` fixture: browser/conftest.py).
"""
from __future__ import annotations


import pytest

from followed import mirror, set_state
from chromium import (
    api, assert_not_reloaded, axe_violations, held_lease, leases_path, open_live, signed_in_page, wait_in_page,
)


@pytest.fixture
def page(chromium, session_state):
    yield from signed_in_page(chromium, session_state, width=1440, bypass_csp=True)   # (axe is injected)


@pytest.mark.slow
def test_selector_links_banner_and_axe(page, kube_server, ns, prod):
    from playwright.sync_api import expect

    base = kube_server.http_url
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "local-lease", "local-holder"))

    # Local: the selector lists local and the followed cluster; choosing one opens the same page there.
    open_live(page, f"{base}/leases/?namespace={ns}")
    select = page.get_by_role("combobox", name="Cluster", exact=True)
    expect(select).to_have_value("local")
    assert select.locator("option").all_inner_texts() == ["local", prod, "All clusters"]   # (issue 40)
    expect(page.locator("#items")).to_contain_text("local-lease")
    select.select_option(prod)
    page.wait_for_url(f"{base}/leases/?namespace={ns}&cluster={prod}")
    expect(page.locator("#items")).to_contain_text("prod-holder")
    expect(page.locator("#items")).not_to_contain_text("local-lease")
    expect(page.locator("#live-status")).to_have_text("Live")
    expect(page.locator(".read-only-note")).to_have_text(f"{prod} is followed read-only: change it in the cluster itself.")
    expect(page.locator("a.new-object")).to_have_count(0)
    expect(page.locator(".cluster-stale")).to_have_count(0)   # current: no banner
    # At 1440 px the header is two rows, neither wrapped: the main menu (the kinds, then the
    # account's and the admin's pages: issue 41, item 11) with the session, then the page's
    # tools with the selector.
    page.screenshot(path="/tmp/kubedash-cluster-1440.png")
    menu = page.get_by_role("navigation", name="Main")
    link = menu.get_by_role("link", name="Overview").bounding_box()["height"]
    assert menu.bounding_box()["height"] < 1.5 * link, "the main menu wrapped"
    rows = {round(page.locator(sel).bounding_box()["y"] // 30) for sel in (
        "header.top nav", "header.top .session", ".site-search", ".cluster-switch", "#live-status")}
    assert len(rows) == 2, "the header is not two rows"
    for name in ("Share links", "Tokens", "Clusters", "People"):
        expect(menu.get_by_role("link", name=name, exact=True)).to_be_visible()

    # Live: an upstream change the follower mirrors arrives without a reload.
    page.evaluate("window.__kdSameDocument = true")
    mirror(kube_server, prod, ns, [["prod-lease", "moved-upstream", 11]])
    expect(page.locator("#items")).to_contain_text("moved-upstream")
    assert_not_reloaded(page)

    # Links keep the cluster: the row to its detail page, then the crumbs, the nav and filters.
    page.get_by_role("link", name="prod-lease").click()
    page.wait_for_url(f"{base}/leases/{ns}/prod-lease/?cluster={prod}")
    expect(page.locator("#edit-toolbar")).to_have_count(0)
    expect(page.locator(".read-only-note")).to_be_visible()
    page.get_by_role("link", name="History").click()
    page.wait_for_url(f"{base}/leases/{ns}/prod-lease/history/?cluster={prod}")
    page.locator(".crumbs").get_by_role("link", name=ns).click()
    page.wait_for_url(f"{base}/leases/?namespace={ns}&cluster={prod}")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Jobs").click()
    page.wait_for_url(f"{base}/jobs/?namespace={ns}&cluster={prod}")   # both follow (issue 41, item 8)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Leases").click()
    page.locator("#f-namespace").select_option(ns)
    page.wait_for_url(f"**/leases/?*namespace={ns}*")
    assert f"cluster={prod}" in page.url, page.url

    # The follower stops confirming its watch: the open page says so at once (pushed), with the
    # time it is as of and the reason; the lease's countdown stops at that time.
    open_live(page, f"{base}/leases/?namespace={ns}&cluster={prod}")
    set_state(kube_server, prod, state="stale", message="watch failed: connection reset")
    banner = page.locator("#cluster-banner .cluster-stale")
    expect(banner).to_contain_text(f"Not live: no word from {prod} since")
    expect(banner).to_contain_text("the watch is down — watch failed: connection reset")
    assert banner.get_attribute("role") == "status"
    assert_not_reloaded(page)
    assert axe_violations(page) == [], "a stale followed cluster's list"
    page.reload()
    expect(banner).to_contain_text("the watch is down")   # and on a fresh load
    page.goto(f"{base}/?cluster={prod}")
    expect(page.locator(f"#cluster-{prod}")).to_contain_text("stale")
    assert axe_violations(page) == [], "the overview with the clusters table"

    # The keyboard: arrows walk the options without leaving the page, Enter switches.
    page.goto(f"{base}/leases/?namespace={ns}&cluster={prod}")
    select = page.get_by_role("combobox", name="Cluster", exact=True)
    select.focus()
    # Every navigation the page starts (held, to be reported), and each change of the selector
    # once live.js has handled it (a listener added after live.js's runs after it, and a
    # navigation starts synchronously with its navigate event).
    page.evaluate("""() => {
        window.__kdNavigations = [];
        window.__kdHold = e => { window.__kdNavigations.push(e.destination.url); e.preventDefault(); };
        navigation.addEventListener('navigate', window.__kdHold);
        window.__kdSwitchChanges = 0;
        document.addEventListener('change', e => {
            if (e.target.matches('[data-cluster-switch]')) window.__kdSwitchChanges++;
        });
    }""")
    page.keyboard.press("ArrowUp")
    wait_in_page(page, "window.__kdSwitchChanges === 1", "the arrow to move the selection")
    assert page.evaluate("window.__kdNavigations") == [], "an arrow key left the page"   # not yet
    assert f"cluster={prod}" in page.url
    page.evaluate("navigation.removeEventListener('navigate', window.__kdHold)")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base}/leases/?namespace={ns}")
    expect(page.locator("#items")).to_contain_text("local-lease")
    expect(page.locator("#cluster-banner")).to_have_count(0)

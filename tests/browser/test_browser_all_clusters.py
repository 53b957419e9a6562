"""Every cluster at once in a real browser (issue 40): the cluster switch's "All clusters" opens the
all-clusters overview, which is live (a change the follower mirrors arrives without a reload) and
whose numbers open the filtered list in that cluster; the menu then lists a kind across every cluster
with a Cluster column. Screenshots for a look, and axe finds nothing wrong with either page.
(The followed cluster: the `prod` fixture, browser/conftest.py.)"""
from __future__ import annotations

import pytest

from chromium import assert_not_reloaded, axe_violations, open_live, signed_in_page
from followed import mirror


@pytest.fixture
def page(chromium, session_state):
    yield from signed_in_page(chromium, session_state, width=1280, bypass_csp=True)   # (axe is injected)


@pytest.mark.slow
def test_all_clusters_overview_and_list(page, kube_server, ns, prod):
    from playwright.sync_api import expect

    base = kube_server.http_url
    open_live(page, f"{base}/")
    page.get_by_role("combobox", name="Cluster", exact=True).select_option("*")
    page.wait_for_url(f"{base}/?cluster=*")
    expect(page.locator("#live-status")).to_have_text("Live")
    expect(page.get_by_role("heading", name="All clusters", level=1)).to_be_visible()
    row = page.locator(f"#all-{prod}")
    unheld = row.locator('[data-count="unheld"] a')
    expect(unheld).to_have_text("0")
    expect(unheld).to_have_accessible_name(f"0 leases without a holder in {prod}")

    # Live: a lease without a holder, mirrored into prod, is counted without a reload.
    page.evaluate("window.__kdSameDocument = true")
    mirror(kube_server, prod, ns, [["prod-free", "", 20]])
    expect(unheld).to_have_text("1")
    expect(unheld).to_have_accessible_name(f"1 lease without a holder in {prod}")
    assert_not_reloaded(page)
    page.screenshot(path="/tmp/kubedash-all-clusters.png", full_page=True)
    assert axe_violations(page) == []

    # The number opens prod's list of exactly those leases.
    unheld.click()
    page.wait_for_url(f"{base}/leases/?state=unheld&cluster={prod}")
    expect(page.locator("#items")).to_contain_text("prod-free")
    expect(page.locator("#items")).not_to_contain_text("prod-lease")

    # Every cluster's leases in one list, with a Cluster column, live.
    open_live(page, f"{base}/leases/?cluster=*&namespace={ns}")
    table = page.locator("#all-list table")
    expect(table.locator("thead th").first).to_have_text("Cluster")
    expect(table.locator(f'tr[data-cluster="{prod}"]')).to_have_count(2)
    mirror(kube_server, prod, ns, [["prod-later", "someone", 21]])
    expect(table.locator(f'tr[data-cluster="{prod}"]')).to_have_count(3)
    assert_not_reloaded(page)
    page.screenshot(path="/tmp/kubedash-all-clusters-list.png", full_page=True)
    assert axe_violations(page) == []
    table.get_by_role("link", name="prod-later").click()
    page.wait_for_url(f"{base}/leases/{ns}/prod-later/?cluster={prod}")

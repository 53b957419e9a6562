"""Browser tests for issue 14's page fixes: forms that report every error at once and move
focus to the summary, secrets with copy buttons, confirmations, honest reconnects, tab
titles, and the states of pages whose object was deleted. Fixtures come from test_browser."""
from __future__ import annotations

import re
import time

import pytest

from manifests import endpoints, job
from test_browser import (  # noqa: F401  (fixtures are used by name)
    api, chromium, dom, endpoints_path, held_lease, jobs_path, leases_path, login_user, ns,
    open_live, page, session_state,
)


def test_form_errors_all_at_once_and_focus_on_summary(page, kube_server, ns):
    from playwright.sync_api import expect

    page.goto(f"{kube_server.http_url}/leases/new/?namespace={ns}")
    page.fill("#id_name", "Bad_Name")
    page.fill("#id_duration", "-5")
    page.fill("#id_renew_time", "yesterday")
    page.click("button.primary")
    summary = page.locator("#form-errors")
    expect(summary).to_be_focused()
    expect(summary).to_have_attribute("role", "alert")
    for field in ("Name", "Lease duration (seconds)", "Renew time"):
        expect(summary.get_by_role("link", name=field)).to_be_visible()
    # Each link focuses its field, which its error describes.
    summary.get_by_role("link", name="Lease duration (seconds)").click()
    expect(page.locator("#id_duration")).to_be_focused()
    assert "id_duration_error" in page.get_attribute("#id_duration", "aria-describedby")
    summary.get_by_role("link", name="Renew time").click()
    expect(page.locator("#id_renew_time")).to_be_focused()


def test_remove_subset_keeps_typed_addresses(page, kube_server, ns):
    from playwright.sync_api import expect

    page.goto(f"{kube_server.http_url}/endpoints/new/?namespace={ns}")
    page.fill("#id_name", "web")
    if page.locator("#id_s0-ready").count() == 0:
        page.click("button[value=add-subset]")
    page.fill("#id_s0-ready", "10.0.0.1")
    page.click("button[value=add-subset]")
    page.fill("#id_s0-ready", "10.0.0.1\n10.0.0.9")
    page.fill("#id_s1-ready", "10.0.0.2")
    page.click("button[value=add-subset]")
    page.fill("#id_s2-ready", "10.0.0.3")
    page.fill("#id_s0-ports", "http 80/TCP")
    page.click("button[value=remove-subset-1]")
    expect(page.locator("#id_s0-ready")).to_have_value("10.0.0.1\n10.0.0.9")
    expect(page.locator("#id_s0-ports")).to_have_value("http 80/TCP")
    expect(page.locator("#id_s1-ready")).to_have_value("10.0.0.3")
    expect(page.locator("#id_name")).to_have_value("web")

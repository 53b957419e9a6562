"""A list's column menu and its Export menu in Chromium (web/columns.py, web/export.py): choose
columns from the menu, add a label column, a live update keeping the chosen columns, the
Export menu's links, axe clean. Uses the shared server and fixtures (tests/chromium.py)."""
from __future__ import annotations

from chromium import api, assert_not_reloaded, axe_violations, dom, held_lease, leases_path, open_live


def test_column_menu_label_column_live_update_and_export_menu(wide_page, kube_server, ns):
    page, base = wide_page, kube_server.http_url
    for name, tier in (("alpha", "fe"), ("beta", "be")):
        obj = held_lease(ns, name, f"{name}-holder")
        obj["metadata"]["labels"] = {"tier": tier}
        api(kube_server, "POST", leases_path(ns), obj)
    page.goto(f"{base}/leases/?namespace={ns}")

    # The menu (a page of its own): untick Renewal and Acquired, add the tier label (offered: it
    # is in the view), apply.
    page.click("a:text('Columns…')")
    page.wait_for_url(lambda url: "/leases/columns/" in url)
    page.uncheck('#columns-form input[name=columns][value=expiry]')
    page.uncheck('#columns-form input[name=columns][value=acquired]')
    assert page.locator('#columns-labels option[value="label:tier"]').count() == 1
    page.fill("#columns-add", "label:tier")
    page.screenshot(path="/tmp/kubedash-columns-menu-1440.png")
    assert axe_violations(page) == []
    page.click("#columns-form button[type=submit]")
    page.wait_for_url(lambda url: "columns=" in url)
    assert "columns=name%2Cstate%2Cholder%2Cduration%2Ctransitions%2Cage%2Clabel%3Atier" in page.url
    headers = page.eval_on_selector_all("thead th[scope=col]", "els => els.slice(1).map(e => e.textContent.trim())")
    assert [h.rstrip("▲▼↕") for h in headers] == ["Lease", "State", "Holder", "Duration", "Transitions", "Age", "tier"]
    open_live(page, page.url)
    row = page.locator(dom("lease", ns, "alpha"))
    assert row.locator("td.meta-col").inner_text() == "fe"

    # A live update: the pushed row keeps the chosen columns (no Renewal cell, the new label value).
    api(kube_server, "PATCH", leases_path(ns, "alpha"),
        {"metadata": {"labels": {"tier": "edge"}}, "spec": {"holderIdentity": "alpha-next"}}, merge=True)
    from playwright.sync_api import expect
    expect(row.locator("td.meta-col")).to_have_text("edge")
    expect(row.locator("td.holder")).to_contain_text("alpha-next")
    assert row.locator("td.renewal").count() == 0 and row.locator("td, th").count() == 8
    assert_not_reloaded(page)

    # The Export menu: the view's own address in each format.
    page.click(".export-menu summary")
    links = page.eval_on_selector_all(".export-menu a", "els => els.map(e => e.getAttribute('href'))")
    assert [link.rsplit("format=", 1)[1] for link in links] == ["csv", "json", "yaml"]
    assert all("label%3Atier" in link and f"namespace={ns}" in link for link in links)
    page.screenshot(path="/tmp/kubedash-columns-1440.png", full_page=True)
    assert axe_violations(page) == []


def test_job_ttl_countdown_and_run_again(wide_page, kube_server, ns):
    from datetime import datetime, timedelta, timezone

    from chromium import jobs_path, wait_in_page
    from manifests import job
    from playwright.sync_api import expect

    page, base = wide_page, kube_server.http_url
    api(kube_server, "POST", jobs_path(ns), job("nightly", ns=ns, ttlSecondsAfterFinished=600))
    ended = (datetime.now(timezone.utc) - timedelta(seconds=410)).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [{"type": t, "status": "True", "lastProbeTime": ended, "lastTransitionTime": ended}
                  for t in ("SuccessCriteriaMet", "Complete")]
    api(kube_server, "PATCH", jobs_path(ns, "nightly") + "/status",
        {"status": {"succeeded": 1, "startTime": ended, "completionTime": ended, "conditions": conditions}}, merge=True)
    open_live(page, f"{base}/jobs/?namespace={ns}")
    ttl = page.locator(dom("job", ns, "nightly") + " [data-ttl-at]")
    expect(ttl).to_have_text(__import__("re").compile(r"deleted in 3m \d+s"))
    first = ttl.inner_text()
    wait_in_page(page, f"document.querySelector('[data-ttl-at]').textContent !== {first!r}", "the countdown moving")
    assert "no TTL controller runs on the local cluster" in page.locator(dom("job", ns, "nightly")).inner_text()
    page.screenshot(path="/tmp/kubedash-jobs-ttl-1440.png")
    assert axe_violations(page) == []

    page.goto(f"{base}/jobs/{ns}/nightly/")
    page.click("a:text('Run again…')")
    expect(page.locator("h1")).to_have_text("Run again job nightly?")
    assert "kubedash.io/rerun-of: nightly" in page.locator("#preview-yaml").inner_text()
    page.screenshot(path="/tmp/kubedash-job-rerun-1440.png", full_page=True)
    assert axe_violations(page) == []
    page.click("button:text('Create nightly-')")
    page.wait_for_url(__import__("re").compile(rf".*/jobs/{ns}/nightly-[a-z0-9]{{5}}/$"))
    expect(page.locator(".messages, [role=status]").first).to_be_visible()

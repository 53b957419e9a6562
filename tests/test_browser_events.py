"""The timeline in Chromium: a Job's History view shows its revisions and its Events in one
list, live (an Event posted through the API appears without a reload; one seen again moves up
with its count), filtered to warnings through a link that is the shared URL; axe finds nothing.
Fixtures come from test_browser."""
from __future__ import annotations

from datetime import datetime, timezone

from manifests import job
from test_browser import (  # noqa: F401  (fixtures are used by name)
    api, assert_not_reloaded, chromium, jobs_path, login_user, ns, open_live, session_state,
)
from test_browser_dash import axe_violations, wide_page  # noqa: F401


def event(ns: str, name: str, reason: str, message: str, type_: str = "Normal", count: int = 1) -> dict:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": name, "namespace": ns},
            "involvedObject": {"kind": "Job", "namespace": ns, "name": "crunch", "apiVersion": "batch/v1"},
            "reason": reason, "message": message, "type": type_, "count": count,
            "source": {"component": "job-controller"}, "firstTimestamp": now, "lastTimestamp": now}


def test_timeline_live_filtered_and_accessible(wide_page, kube_server, ns):
    from playwright.sync_api import expect

    page = wide_page
    events = f"/api/v1/namespaces/{ns}/events"
    api(kube_server, "POST", jobs_path(ns), job(name="crunch", ns=ns, completions=3))
    api(kube_server, "POST", events, event(ns, "crunch.1", "SuccessfulCreate", "Created pod: crunch-7x9k2"))
    open_live(page, f"{kube_server.http_url}/jobs/{ns}/crunch/history/")
    entries = page.locator("#history-entries > li")
    expect(entries.first).to_contain_text("SuccessfulCreate")
    expect(page.locator("#revisions-h")).to_have_text("History and events")
    # Live: a warning posted through the API arrives on top, without a reload.
    api(kube_server, "POST", events, event(ns, "crunch.2", "BackoffLimitExceeded",
                                            "Job has reached the specified backoff limit", "Warning"))
    expect(entries.first).to_contain_text("BackoffLimitExceeded")
    expect(entries.first).to_have_class("rev happening happening-warning")
    # The correlator's PATCH (count + 1) moves the first event up again, with its count.
    api(kube_server, "PATCH", f"{events}/crunch.1", {"count": 2, "lastTimestamp": datetime.now(timezone.utc)
                                                     .strftime("%Y-%m-%dT%H:%M:%SZ")}, merge=True)
    expect(entries.first).to_contain_text("×2")
    expect(page.locator("#history-entries li.happening")).to_have_count(2)
    assert_not_reloaded(page)
    page.screenshot(path="/tmp/kubedash-timeline.png", full_page=True)
    assert axe_violations(page) == []
    # Warnings only: a link, so the filtered view is a URL to share.
    page.get_by_role("link", name="Warnings only").click()
    expect(page).to_have_url(f"{kube_server.http_url}/jobs/{ns}/crunch/history/?show=warnings")
    expect(page.locator("#live-status")).to_have_text("Live")
    expect(page.locator("#history-entries > li")).to_have_count(1)
    expect(page.locator("#history-entries > li").first).to_contain_text("BackoffLimitExceeded")
    assert axe_violations(page) == []
    # The list row says so too.
    page.goto(f"{kube_server.http_url}/jobs/?namespace={ns}")
    expect(page.locator(f"#job-{ns}--crunch .warnings-badge")).to_contain_text("1 warning")
    assert axe_violations(page) == []

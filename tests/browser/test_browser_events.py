"""The timeline in Chromium: a Job's History view shows its revisions and its Events in one
list, live (an Event posted through the API appears without a reload; one seen again moves up
with its count), filtered to warnings through a link that is the shared URL; axe finds nothing.
Fixtures come from test_browser."""
from __future__ import annotations

from datetime import datetime, timezone

from manifests import job
from chromium import api, assert_not_reloaded, axe_violations, jobs_path, log_in, open_live


def event(ns: str, name: str, reason: str, message: str, type_: str = "Normal", count: int = 1,
          about: str = "crunch") -> dict:
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"metadata": {"name": name, "namespace": ns},
            "involvedObject": {"kind": "Job", "namespace": ns, "name": about, "apiVersion": "batch/v1"},
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


def test_warnings_follow_events_live_on_rows_and_the_overview(wide_page, kube_server, ns):
    """An Event alone (no write of the Job) re-renders the Job's row badge and the Overview's
    warnings line on open pages; Normal Events and rows of other Jobs stay as they were."""
    from playwright.sync_api import expect

    page = wide_page
    events = f"/api/v1/namespaces/{ns}/events"
    for name in ("crunch", "other", "third"):
        api(kube_server, "POST", jobs_path(ns), job(name=name, ns=ns, completions=3))
    open_live(page, f"{kube_server.http_url}/jobs/?namespace={ns}")
    badge = page.locator(f"#job-{ns}--crunch .warnings-badge")
    expect(badge).to_have_count(0)
    api(kube_server, "POST", events, event(ns, "crunch.1", "SuccessfulCreate", "Created pod: crunch-7x9k2"))
    api(kube_server, "POST", events, event(ns, "crunch.2", "BackoffLimitExceeded",
                                            "Job has reached the specified backoff limit", "Warning"))
    expect(badge).to_have_text("1 warning about crunch in the last hour")
    # The correlator's PATCH (count 3) of the same warning: the badge counts the repeats.
    api(kube_server, "PATCH", f"{events}/crunch.2", {"count": 3, "lastTimestamp": datetime.now(timezone.utc)
                                                     .strftime("%Y-%m-%dT%H:%M:%SZ")}, merge=True)
    expect(badge).to_contain_text("3 warnings")
    expect(page.locator(f"#job-{ns}--other .warnings-badge")).to_have_count(0)
    assert_not_reloaded(page)
    assert axe_violations(page) == []
    # A warning recorded while the page is away: the page catches up when it reconnects.
    page.evaluate("""() => {
        window.__kdDown = true;
        window.__kdSockets.filter(s => s.url.includes('/ws/live/') && s.readyState === 1).forEach(s => s.close());
    }""")
    expect(page.locator("#live-status")).to_have_text("Reconnecting…")
    api(kube_server, "POST", events, event(ns, "other.0", "BackoffLimitExceeded", "backoff limit", "Warning",
                                            about="other"))
    page.evaluate("window.__kdDown = false")
    expect(page.locator("#live-status")).to_have_text("Live")
    expect(page.locator(f"#job-{ns}--other .warnings-badge")).to_have_text("1 warning about other in the last hour")
    expect(badge).to_contain_text("3 warnings")
    assert_not_reloaded(page)

    # The Overview, filtered to this namespace: its line follows a warning about a third Job.
    open_live(page, f"{kube_server.http_url}/?namespace={ns}")
    line = page.locator("#overview-warnings")
    expect(line).to_contain_text("2 jobs with warnings in the last hour")
    api(kube_server, "POST", events, event(ns, "third.1", "DeadlineExceeded", "Job was active longer than "
                                            "specified deadline", "Warning", about="third"))
    expect(line).to_contain_text("3 jobs with warnings in the last hour")
    assert_not_reloaded(page)
    assert axe_violations(page) == []


def test_overview_warnings_respect_namespace_limits(chromium, kube_server, ns):
    """A viewer limited to one namespace: its Overview line counts that namespace's warnings
    only, live, whatever happens elsewhere."""
    from playwright.sync_api import expect

    elsewhere = ns + "-x"
    kube_server.manage("shell", "-c", (
        "from dashboard.access.tokens import ensure_user\n"
        "from dashboard.access.models import Profile\n"
        "u = ensure_user('ns-watcher', 'viewer')\n"
        "u.set_password('ns-watcher-pass-1')\n"
        "u.save()\n"
        f"Profile.objects.filter(user=u).update(namespaces=[{ns!r}])\n"))
    ctx = chromium.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = ctx.new_page()
        log_in(page, kube_server.http_url, "ns-watcher", "ns-watcher-pass-1")
        for where in (ns, elsewhere):
            api(kube_server, "POST", jobs_path(where), job(name="crunch", ns=where, completions=3))
        open_live(page, f"{kube_server.http_url}/")
        line = page.locator("#overview-warnings")
        expect(line).to_be_hidden()
        api(kube_server, "POST", f"/api/v1/namespaces/{elsewhere}/events",
            event(elsewhere, "crunch.1", "BackoffLimitExceeded", "backoff limit", "Warning"))
        api(kube_server, "POST", f"/api/v1/namespaces/{ns}/events",
            event(ns, "crunch.1", "BackoffLimitExceeded", "backoff limit", "Warning"))
        expect(line).to_contain_text("1 job with warnings in the last hour")
        expect(line).to_be_visible()
        assert_not_reloaded(page)
    finally:
        ctx.close()


def test_the_events_page_live_filtered_and_accessible(wide_page, kube_server, ns):
    """/events/ in Chromium (issue 41, item 9): newest first, a new Event on top without a
    reload, the object linked to its page, the type filter applied from its select; axe finds
    nothing."""
    import re

    from playwright.sync_api import expect

    page = wide_page
    events = f"/api/v1/namespaces/{ns}/events"
    api(kube_server, "POST", jobs_path(ns), job(name="crunch", ns=ns))
    api(kube_server, "POST", events, event(ns, "crunch.1", "SuccessfulCreate", "Created pod: crunch-7x9k2"))
    open_live(page, f"{kube_server.http_url}/events/?namespace={ns}")
    rows = page.locator("#items > tr")
    expect(rows).to_have_count(1)
    api(kube_server, "POST", events, event(ns, "crunch.2", "BackoffLimitExceeded",
                                            "Job has reached the specified backoff limit", "Warning"))
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("BackoffLimitExceeded")
    assert_not_reloaded(page)
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Events")).to_have_attribute(
        "aria-current", "page")
    page.screenshot(path="/tmp/kubedash-events.png", full_page=True)
    assert axe_violations(page) == []
    page.get_by_label("Type").select_option("Warning")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"type=Warning"))
    expect(rows).to_have_count(1)
    rows.first.get_by_role("link", name="Job crunch").click()
    expect(page).to_have_url(f"{kube_server.http_url}/jobs/{ns}/crunch/")

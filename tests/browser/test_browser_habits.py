"""Browser tests for the habits users bring from Headlamp, k9s and Lens (issue 14): ages on
every list with the exact time on hover, a local-time option, copy buttons for names, UIDs
and YAML, filters that apply as they are chosen; and axe-core on the states these add and on
the pages and states the other browser tests do not reach. Fixtures come from test_browser."""
from __future__ import annotations

import re

import pytest
import yaml

from manifests import endpoints, job
from chromium import (
    api, assert_not_reloaded, axe_violations, dom, endpoints_path, held_lease, jobs_path, leases_path,
    open_live, signed_in_page,
)

ACQUIRED = "2026-01-01T00:00:00.000000Z"      # 09:00 in Tokyo (UTC+9, no daylight saving)


@pytest.fixture
def tokyo_page(chromium, session_state):
    """A signed-in page whose browser lives in Tokyo; CSP bypassed to inject axe."""
    yield from signed_in_page(chromium, session_state, width=1440, timezone_id="Asia/Tokyo", bypass_csp=True)


def test_ages_everywhere_and_a_local_time_option(tokyo_page, kube_server, ns):
    from playwright.sync_api import expect

    page = tokyo_page
    base = kube_server.http_url
    obj = held_lease(ns, "lock", "node-a")
    obj["spec"]["acquireTime"] = ACQUIRED
    created = api(kube_server, "POST", leases_path(ns), obj)["metadata"]["creationTimestamp"]
    api(kube_server, "POST", jobs_path(ns), job(name="crunch", ns=ns))
    api(kube_server, "POST", endpoints_path(ns), endpoints(name="web", ns=ns))
    created_utc = created.replace("T", " ").replace("Z", " UTC")

    # Every list shows an Age (kubectl's AGE), sortable, with the exact creation time on hover.
    for path, kind, name in ((f"/jobs/?namespace={ns}", "job", "crunch"),
                             (f"/endpoints/?namespace={ns}", "endpoints", "web"),
                             (f"/leases/?namespace={ns}", "lease", "lock")):
        page.goto(base + path)
        age = page.locator(dom(kind, ns, name) + " [data-age-since]")
        expect(age).to_have_text(re.compile(r"^\d+s$"))
        expect(age).to_have_attribute("title", f"created {created_utc}" if kind == "lease" else re.compile(
            r"^created \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$"))
        if kind != "endpoints":
            expect(page.get_by_role("columnheader", name="Age").get_by_role("link", name="Age")).to_be_visible()
        page.screenshot(path=f"/tmp/kubedash-age-{kind}.png")
    # The age moves on by itself.
    first = int(age.inner_text()[:-1])
    expect(age).not_to_have_text(f"{first}s", timeout=5000)

    # Exact times are UTC until the viewer asks for local time; the choice is kept.
    open_live(page, f"{base}/leases/?namespace={ns}")
    acquired = page.locator(dom("lease", ns, "lock") + " time[data-abs]")
    expect(acquired).to_have_text("2026-01-01 00:00:00 UTC")
    switch = page.get_by_role("checkbox", name="Local time")
    expect(switch).not_to_be_checked()
    switch.check()
    expect(acquired).to_have_text("2026-01-01 09:00:00 GMT+9")
    expect(page.locator(dom("lease", ns, "lock") + " [data-age-since]")).to_have_attribute(
        "title", re.compile(r"^created \d{4}-\d\d-\d\d \d\d:\d\d:\d\d GMT\+9$"))
    expect(page.locator(dom("lease", ns, "lock") + " [data-renewed-at]")).to_have_attribute(
        "title", re.compile(r"GMT\+9$"))
    assert axe_violations(page) == []
    # A row pushed by a write comes in UTC from the server and is shown in local time.
    api(kube_server, "PATCH", leases_path(ns, "lock"), {"spec": {"holderIdentity": "node-b"}}, merge=True)
    expect(page.locator(dom("lease", ns, "lock") + " .holder")).to_have_text("node-b")
    expect(acquired).to_have_text("2026-01-01 09:00:00 GMT+9")
    assert_not_reloaded(page)
    # Another page remembers it: the detail's exact times too.
    page.goto(f"{base}/leases/{ns}/lock/")
    expect(page.get_by_role("checkbox", name="Local time")).to_be_checked()
    expect(page.locator("xpath=//dt[.='Acquired']/following-sibling::dd[1]/time")).to_have_text(
        "2026-01-01 09:00:00 GMT+9")
    local_created = page.locator("xpath=//dt[.='Created']/following-sibling::dd[1]/time[@data-abs]")
    expect(local_created).to_have_text(re.compile(r"GMT\+9$"))
    page.screenshot(path="/tmp/kubedash-local-time.png", full_page=True)
    # And back to UTC.
    page.get_by_role("checkbox", name="Local time").uncheck()
    expect(local_created).to_have_text(created_utc)


def test_copy_buttons_for_name_uid_and_yaml(wide_page, kube_server, ns):
    from playwright.sync_api import expect

    page = wide_page
    made = api(kube_server, "POST", jobs_path(ns), job(name="crunch", ns=ns, completions=3))
    open_live(page, f"{kube_server.http_url}/jobs/{ns}/crunch/")

    page.get_by_role("button", name="Copy name").click()
    expect(page.locator("#object-name-copied")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "crunch"

    page.get_by_role("button", name="Copy UID").click()
    expect(page.locator("#object-uid-copied")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == made["metadata"]["uid"]

    page.get_by_role("button", name="Copy YAML").click()
    expect(page.locator("#object-yaml-copied")).to_have_text("Copied")
    copied = yaml.safe_load(page.evaluate("navigator.clipboard.readText()"))
    assert copied["kind"] == "Job" and copied["metadata"]["name"] == "crunch"
    assert copied["metadata"]["uid"] == made["metadata"]["uid"] and "managedFields" not in copied["metadata"]
    # After a push re-renders the object, the buttons copy what is shown now.
    api(kube_server, "PATCH", jobs_path(ns, "crunch"), {"metadata": {"labels": {"team": "blue"}}}, merge=True)
    expect(page.locator("#object-yaml")).to_contain_text("team: blue")
    page.get_by_role("button", name="Copy YAML").click()
    assert yaml.safe_load(page.evaluate("navigator.clipboard.readText()"))["metadata"]["labels"]["team"] == "blue"
    assert axe_violations(page) == []


def test_filters_apply_as_they_are_chosen(page, kube_server, ns):
    from playwright.sync_api import expect

    base = kube_server.http_url
    other = ns + "-b"
    for name in ("alpha", "alpine", "beta"):
        api(kube_server, "POST", leases_path(ns), held_lease(ns, name, "node-a"))
    api(kube_server, "POST", leases_path(other), held_lease(other, "alpha", "node-a"))
    page.goto(f"{base}/leases/")
    # A menu applies when it changes: no Apply button pressed.
    page.focus("#f-namespace")
    page.select_option("#f-namespace", ns)
    page.wait_for_url(re.compile(rf"namespace={ns}(&|$)"))
    rows = page.locator("#items > tr")
    expect(rows).to_have_count(3)
    expect(page.locator("#f-namespace")).to_be_focused()
    # The name search applies after a pause in typing, and the focus stays in it.
    search = page.get_by_label("Name contains")
    search.click()
    search.fill("")
    page.keyboard.type("alp")
    page.wait_for_url(re.compile(r"q=alp(&|$)"))
    expect(rows).to_have_count(2)
    expect(search).to_be_focused()
    expect(search).to_have_value("alp")
    page.keyboard.type("ha")
    page.wait_for_url(re.compile(r"q=alpha(&|$)"))
    expect(rows).to_have_count(1)
    expect(page.locator(dom("lease", ns, "alpha"))).to_be_visible()
    expect(search).to_be_focused()
    # The page size too; the live socket follows the new view.
    page.select_option("#f-limit", "50")
    page.wait_for_url(re.compile(r"limit=50"))
    expect(page.locator("#live-status")).to_have_text("Live")
    assert "namespace=" + ns in page.url and "q=alpha" in page.url


@pytest.mark.slow
def test_axe_on_the_remaining_pages_and_states(wide_page, chromium, kube_server, ns):
    """axe-core on what the other browser tests do not check: the sign-in page, the share
    links page, every create and edit form, a disconnected (stale) page, a detail page whose
    object was deleted while open, "N new" on a paged list."""
    from playwright.sync_api import expect

    page = wide_page
    base = kube_server.http_url
    for name in ("a1", "a2", "a3"):
        api(kube_server, "POST", leases_path(ns), held_lease(ns, name, "node-a"))
    api(kube_server, "POST", endpoints_path(ns), endpoints(name="web", ns=ns, ips=("10.1.0.1",),
                                                               not_ready=("10.1.0.2",)))
    api(kube_server, "POST", jobs_path(ns), job(name="batch", ns=ns, completions=2))
    for path in ("/share/", f"/jobs/new/?namespace={ns}", f"/endpoints/new/?namespace={ns}",
                 f"/leases/{ns}/a1/edit/", f"/jobs/{ns}/batch/edit/", f"/endpoints/{ns}/web/yaml/", f"/leases/{ns}/a1/delete/",
                 f"/leases/{ns}/a1/history/", f"/jobs/{ns}/batch/fields/"):
        page.goto(base + path)
        assert axe_violations(page) == [], path

    # "N new" on a paged list.
    open_live(page, f"{base}/leases/?namespace={ns}&limit=2")
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "a0", "node-x"))
    expect(page.locator("#items-new")).to_contain_text("1 new object")
    assert axe_violations(page) == [], "N new"
    # Disconnected: the stale note and Retry now.
    page.evaluate("""() => {
        window.__kdDown = true;
        window.__kdSockets.filter(s => s.url.includes('/ws/live/') && s.readyState === 1).forEach(s => s.close());
    }""")
    expect(page.locator("#live-stale")).to_be_visible()
    assert axe_violations(page) == [], "stale"
    page.evaluate("window.__kdDown = false")

    # A detail page whose object was deleted while it was open.
    open_live(page, f"{base}/jobs/{ns}/batch/")
    api(kube_server, "DELETE", jobs_path(ns, "batch"))
    expect(page.locator("#detail")).to_contain_text("deleted")
    assert axe_violations(page) == [], "deleted"

    # The sign-in page, signed out.
    ctx = chromium.new_context(bypass_csp=True)
    try:
        anon = ctx.new_page()
        anon.goto(base + "/accounts/login/")
        assert axe_violations(anon) == [], "sign-in"
    finally:
        ctx.close()


def test_ticking_time_texts_are_boxes_of_their_own(page, kube_server, ns):
    """The texts live.js rewrites every second (renewed, expires, age) are each a relayout root
    (contain: strict, a size of their own): a tick lays out those boxes, not the whole
    1,000-row table (bench/pages.py traces: 8-11 ms -> ~1 ms a second). Their longest texts fit."""
    from playwright.sync_api import expect

    api(kube_server, "POST", leases_path(ns), held_lease(ns, "lock", "node-a"))
    page.goto(f"{kube_server.http_url}/leases/?namespace={ns}")
    row = page.locator(dom("lease", ns, "lock"))
    expect(row.locator("[data-age-since]")).to_be_visible()
    for selector, longest in (("[data-renewed-at]", "renewed 9m59s ago"), ("[data-expires-at]", "expired 9m59s ago"),
                              ("[data-age-since]", "2y364d")):
        box = row.locator(selector)
        style = box.evaluate("el => { const s = getComputedStyle(el); return [s.display, s.contain]; }")
        assert style == ["inline-block", "strict"], (selector, style)
        # The longest text it shows fits its box (paint containment would clip the rest).
        assert box.evaluate("""(el, text) => {
            el.textContent = text; return el.scrollWidth <= el.clientWidth; }""", longest), selector
    # And on a phone, where the rows stack (the Age column, secondary, is on the detail page).
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(row.locator("[data-expires-at]")).to_be_visible()
    for selector in ("[data-renewed-at]", "[data-expires-at]"):
        assert row.locator(selector).evaluate("el => el.scrollWidth <= el.clientWidth && "
                                               "el.getBoundingClientRect().right <= innerWidth"), selector
    page.screenshot(path="/tmp/kubedash-leases-phone.png", full_page=False)

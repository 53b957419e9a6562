"""The time bar (issue 38, templates/web/_timebar.html, static/kubedash/timebar.js) in Chromium:
"[" steps to the previous change, "]" to the next, Esc goes back to now, the slider goes to the
moment it is released at; a page as of a past moment says so, and axe finds nothing on it."""
from __future__ import annotations

import re
import time

from chromium import api, axe_violations, held_lease, leases_path, signed_in_page

import pytest


@pytest.fixture
def axe_page(chromium, session_state):
    yield from signed_in_page(chromium, session_state, width=1440, bypass_csp=True)


def test_time_bar_keys_step_through_changes(axe_page, kube_server, ns, tmp_path):
    from playwright.sync_api import expect

    page, base = axe_page, kube_server.http_url
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "leader", "node-a", duration=30))
    first = int(api(kube_server, "PATCH", leases_path(ns, "leader"), {"spec": {"holderIdentity": "node-b"}},
                    merge=True)["metadata"]["resourceVersion"])
    # The slider moves to the second of the first change: the second change comes in a later
    # second, or that moment would hold both.
    started = int(time.time())
    while int(time.time()) == started:
        time.sleep(0.05)
    second = int(api(kube_server, "PATCH", leases_path(ns, "leader"), {"spec": {"holderIdentity": "node-c"}},
                     merge=True)["metadata"]["resourceVersion"])
    page.goto(f"{base}/leases/?namespace={ns}&at=rv:{first}")
    banner = page.locator("#asof-banner .asof-note")
    expect(banner).to_contain_text("— not live")
    expect(page.locator(f"#lease-{ns}--leader")).to_contain_text("node-b")
    assert page.locator("#live-status").count() == 0   # no live socket
    page.screenshot(path=str(tmp_path / "timebar.png"), full_page=False)
    first_moment = page.locator("#timebar-slider").input_value()   # the slider stands at the page's moment
    assert page.locator("#timebar-marks option").count() >= 1   # the changes of these leases (to the second), marked
    assert axe_violations(page) == []

    # "]": the next change (here: the second holder change, this namespace's newest), in place:
    # the page is not reloaded (a mark left on its window stays), its content is the new moment's.
    page.evaluate("window.__stayed = true")
    page.keyboard.press("]")
    page.wait_for_url(re.compile(r"at=rv%3A\d+"))
    assert int(re.search(r"at=rv%3A(\d+)", page.url).group(1)) > first
    expect(page.locator(f"#lease-{ns}--leader")).to_contain_text("node-c")
    assert page.evaluate("window.__stayed === true"), "moving between past moments reloaded the page"
    # "[": back, to the change before.
    at_now = int(re.search(r"at=rv%3A(\d+)", page.url).group(1))
    page.keyboard.press("[")
    page.wait_for_url(re.compile(rf"at=rv%3A(?!{at_now}\b)\d+"))
    assert int(re.search(r"at=rv%3A(\d+)", page.url).group(1)) < at_now
    expect(page.locator(f"#lease-{ns}--leader")).to_contain_text("node-b")
    assert page.evaluate("window.__stayed === true")
    # Typing in a field is not a key for the bar.
    page.focus("#timebar-at")
    url = page.url
    page.keyboard.press("[")
    assert page.url == url
    page.locator("body").click(position={"x": 5, "y": 300})
    # Esc: back to now, the live page.
    page.keyboard.press("Escape")
    page.wait_for_url(f"{base}/leases/?namespace={ns}")
    expect(page.locator("#live-status")).to_have_text("Live")
    expect(page.locator(f"#lease-{ns}--leader")).to_contain_text("node-c")
    # The slider: released at a moment, the page goes there (here: the second of the first change).
    page.locator("#timebar-slider").fill(first_moment)
    page.wait_for_url(re.compile(r"at=\d{4}-\d\d-\d\dT"))
    expect(page.locator("#asof-banner .asof-note")).to_contain_text("— not live")
    assert "node-c" not in page.locator("#items").inner_text()
    assert second > first


def test_what_changed_page_is_readable(axe_page, kube_server, ns, tmp_path):
    from playwright.sync_api import expect

    page, base = axe_page, kube_server.http_url
    created = int(api(kube_server, "POST", leases_path(ns), held_lease(ns, "leader", "node-a"))["metadata"]
                  ["resourceVersion"])
    api(kube_server, "PATCH", leases_path(ns, "leader"), {"spec": {"holderIdentity": "node-b"}}, merge=True)
    page.goto(f"{base}/changes/?from=rv:{created}&namespace={ns}")
    expect(page.locator(".change-counts")).to_contain_text("1 lease changed holder")
    expect(page.locator(f"#change-lease-{ns}--leader")).to_contain_text("spec.holderIdentity")
    page.screenshot(path=str(tmp_path / "changes.png"), full_page=True)
    assert axe_violations(page) == []
    # An object's History compares two of its revisions on that page.
    page.goto(f"{base}/leases/{ns}/leader/history/")
    page.click(".compare-revisions button[type=submit]")
    page.wait_for_url(re.compile(r"/changes/\?"))
    expect(page.locator(f"#change-lease-{ns}--leader")).to_contain_text("node-b")
    assert axe_violations(page) == []


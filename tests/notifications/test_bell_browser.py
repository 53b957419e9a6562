"""The bell in Chromium: a rule's decision raises the unread count on an open live page without a
reload (the page socket's push), and shows a browser notification when allowed; the notifications
page lists it; both axe clean."""
import pytest

from chromium import WAIT_MS, axe_violations, log_in, open_live, wait_in_page  # noqa: F401 (plugin fixtures)
from conftest import eventually
from manifests import lease, write

from .conftest import notify
from .receivers import query

USER, PASSWORD = "bell-admin", "bell-password-1"


@pytest.fixture(scope="module")
def bell_page(chromium, server):
    server.manage("shell", "-c", "from dashboard.access.tokens import ensure_user\n"
                                 f"u = ensure_user({USER!r}, 'admin')\nu.set_password({PASSWORD!r})\nu.save()\n")
    ctx = chromium.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)   # (to inject axe)
    # The browser's Notification, recorded (as if the user had allowed notifications).
    ctx.add_init_script("window.__kdNotes = []; window.Notification = function (title, options) { "
                        "window.__kdNotes.push(options.body); }; window.Notification.permission = 'granted';")
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(page, server.http_url, USER, PASSWORD)
    yield page
    ctx.close()
    assert not errors, errors


def test_the_bell_counts_a_new_notification_live(server, bell_page):
    from playwright.sync_api import expect

    page = bell_page
    notify(server, f"rule add bell-moves --when lease-holder-changed --namespace bell --owner {USER}")
    write(server, "POST", "Lease", "bell", "leader", lease("leader", ns="bell", holder="a"))
    eventually(lambda: query(server, "SELECT memo FROM notifications_episode WHERE namespace = 'bell'"),
               what="the lease remembered")
    open_live(page, f"{server.http_url}/leases/?namespace=bell")
    bell = page.locator("#notify-bell")
    expect(bell).to_have_accessible_name("Notifications: 0 unread")
    write(server, "PATCH", "Lease", "bell", "leader", {"spec": {"holderIdentity": "b"}})
    wait_in_page(page, "document.querySelector('#notify-bell .count').textContent === '1'", "the bell's push")
    assert page.evaluate("window.__kdSameDocument === true"), "the page was reloaded"
    expect(bell).to_have_accessible_name("Notifications: 1 unread")
    assert page.evaluate("window.__kdNotes") == ["1 new notification"]
    page.screenshot(path="/tmp/kubedash-bell.png")
    assert axe_violations(page) == []
    bell.click()
    page.wait_for_url(f"{server.http_url}/notifications/")
    expect(page.locator("#notify-inbox li.unread")).to_contain_text("holder changed: a → b")
    page.screenshot(path="/tmp/kubedash-notifications.png", full_page=True)
    assert axe_violations(page) == []
    page.get_by_role("button", name="Mark all read").click()
    expect(page.locator("#notify-bell")).to_have_accessible_name("Notifications: 0 unread")

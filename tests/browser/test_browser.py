"""The pages in a real browser: Playwright for Python driving Debian's Chromium.

A user logs in through the form, opens every page, and watches writes made through the API
(as any client makes them) arrive without a reload: a holder change, a new row in its
place, a deleted row, an address turning not ready, a job's progress. A lease flips from
held to expired with no write at all, and a page that lost its websocket says so, then
reconnects and converges on what changed while it was away.

Chromium comes from apt (`.ci/run` installs it): without it these tests fail in CI and
skip elsewhere. Each test works in a namespace of its own on the shared `kube_server`, and
filters its page to that namespace, so other tests' objects never get in the way.
"""
from __future__ import annotations

import itertools
import os
import re
import secrets
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from manifests import endpoints, job, lease

CHROMIUM = os.environ.get("KUBEDASH_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = ["--no-sandbox", "--disable-background-networking", "--disable-gpu"]
PASSWORD = "browser-" + secrets.token_urlsafe(12)
USERNAME = "browser-admin"
# A push is due within 1 s; the slack is for a busy CI machine, not for slow pages.
WAIT_MS = 10_000

# Remembers every WebSocket the page opens (live.js creates them with `new WebSocket`), so a
# test can drop the page's connection the way a network blip does, from the client side; and
# while window.__kdDown is true, the live socket cannot reach the server (as if it were down).
TRACK_SOCKETS = """
(() => {
  const Native = window.WebSocket;
  window.__kdSockets = [];
  window.__kdDown = false;
  window.WebSocket = class extends Native {
    constructor(url, ...rest) {
      // (A path the server refuses: the handshake fails as if no server answered.)
      super(window.__kdDown ? String(url).replace('/ws/live/', '/ws/down/') : url, ...rest);
      window.__kdSockets.push(this);
    }
  };
})();
"""

_names = itertools.count()


def _missing(what: str):
    if os.environ.get("CI"):
        pytest.fail(f"{what}; CI must run the browser tests (.ci/run installs Chromium)", pytrace=False)
    pytest.skip(what)


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium for the module."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("Playwright for Python is not installed (pip install -e .[test])")
    if not Path(CHROMIUM).exists():
        _missing(f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def login_user(kube_server):
    """A page user with a password (an admin: it sees every namespace)."""
    kube_server.manage("shell", "-c", (
        "from dashboard.access.tokens import ensure_user\n"
        f"u = ensure_user({USERNAME!r}, 'admin')\n"
        f"u.set_password({PASSWORD!r})\n"
        "u.save()\n"))
    return USERNAME, PASSWORD


def log_in(page, base: str, username: str, password: str) -> None:
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/")


@pytest.fixture(scope="module")
def session_state(chromium, kube_server, login_user):
    """The logged-in session's cookies, so each test's fresh context starts signed in."""
    ctx = chromium.new_context()
    page = ctx.new_page()
    log_in(page, kube_server.http_url, *login_user)
    state = ctx.storage_state()
    ctx.close()
    return state


def signed_in_page(chromium, session_state, width: int = 1280, **context_options):
    """A signed-in page (sockets tracked); fails the test on any JavaScript error. For fixtures."""
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    ctx = chromium.new_context(storage_state=session_state, viewport={"width": width, "height": 900},
                               **context_options)
    ctx.add_init_script(TRACK_SOCKETS)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    ctx.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def page(chromium, session_state):
    yield from signed_in_page(chromium, session_state)


@pytest.fixture
def ns():
    """A namespace of this test's own."""
    return f"br-{next(_names)}-{secrets.token_hex(3)}"


# ---------------------------------------------------------------------------------------------
# Helpers


def micro(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_micro() -> str:
    return micro(datetime.now(timezone.utc))


def leases_path(ns: str, name: str = "") -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases" + (f"/{name}" if name else "")


def endpoints_path(ns: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{ns}/endpoints" + (f"/{name}" if name else "")


def jobs_path(ns: str, name: str = "") -> str:
    return f"/apis/batch/v1/namespaces/{ns}/jobs" + (f"/{name}" if name else "")


def api(server, method: str, path: str, body=None, merge: bool = False, expect_status=(200, 201)):
    """One write through the HTTP API as the admin token, asserting it worked."""
    ctype = "application/merge-patch+json" if merge else "application/json"
    status, _, parsed = server.request(method, path, body, content_type=ctype)
    assert status in expect_status, f"{method} {path}: {status} {parsed!r}"
    return parsed


def held_lease(ns: str, name: str, holder: str, duration: int = 60) -> dict:
    obj = lease(name=name, holder=holder, duration=duration, ns=ns)
    obj["spec"]["renewTime"] = now_micro()
    return obj


def open_live(page, url: str) -> None:
    """Load a page and wait until its websocket is open; mark the document, so a test can
    tell that what it saw later arrived without a reload."""
    from playwright.sync_api import expect

    page.goto(url)
    expect(page.locator("#live-status")).to_have_text("Live")
    page.evaluate("window.__kdSameDocument = true")


def wait_in_page(page, condition: str, what: str) -> None:
    """Until the JavaScript expression `condition` holds in the page (checked by the page's own
    timers). Not Playwright's wait_for_function: it evaluates its text, which the pages'
    Content-Security-Policy (no 'unsafe-eval') refuses."""
    held = page.evaluate(f"""() => new Promise(resolve => {{
        const deadline = Date.now() + {WAIT_MS};
        const check = () => ({condition}) ? resolve(true)
            : Date.now() > deadline ? resolve(false) : setTimeout(check, 20);
        check();
    }})""")
    assert held, f"timed out waiting for {what} ({condition})"


def assert_not_reloaded(page) -> None:
    assert page.evaluate("window.__kdSameDocument === true"), "the page was reloaded"


def row_ids(page) -> list[str]:
    return page.eval_on_selector_all("#items > *", "els => els.map(e => e.id)")


def dom(kind: str, ns: str, name: str) -> str:
    return f"#{kind}-{ns}--{name}".replace(".", "_")


# ---------------------------------------------------------------------------------------------
# Login and every page


def test_login_form_and_every_page(chromium, kube_server, login_user, ns):
    from playwright.sync_api import expect

    base = kube_server.http_url
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "leader", "node-a"))
    api(kube_server, "POST", endpoints_path(ns), endpoints(name="web", ns=ns, ips=("10.1.0.1",),
                                                               not_ready=("10.1.0.2",)))
    api(kube_server, "POST", jobs_path(ns), job(name="batch", ns=ns, completions=2))

    ctx = chromium.new_context()
    try:
        page = ctx.new_page()
        # Not signed in: every page sends the browser to the login form.
        page.goto(base + "/leases/")
        assert page.url.startswith(base + "/accounts/login/")
        page.fill("#id_username", login_user[0])
        page.fill("#id_password", "wrong password")
        page.click("button[type=submit]")
        expect(page.locator("#login-error")).to_be_visible()
        page.fill("#id_username", login_user[0])
        page.fill("#id_password", login_user[1])
        page.click("button[type=submit]")
        page.wait_for_url(base + "/leases/")     # back where it was going (?next=)
        expect(page.locator(".session .who")).to_contain_text(login_user[0])

        pages = [
            ("/", "Overview", f"#ns-{ns}"),
            (f"/leases/?namespace={ns}", "Leader holders", dom("lease", ns, "leader")),
            (f"/endpoints/?namespace={ns}", "Endpoints readiness", dom("endpoints", ns, "web")),
            (f"/jobs/?namespace={ns}", "Job progress", dom("job", ns, "batch")),
            (f"/leases/{ns}/leader/", "leader", "#history"),
            (f"/endpoints/{ns}/web/", "web", "#detail .matrix"),
            (f"/jobs/{ns}/batch/", "batch", "#detail progress"),
        ]
        for path, heading, selector in pages:
            resp = page.goto(base + path)
            assert resp.status == 200, path
            expect(page.locator("h1")).to_have_text(heading)
            expect(page.locator(selector)).to_be_visible()
            expect(page.locator("#live-status")).to_have_text("Live")

        # The overview links into the pages, filtered to the namespace; the header's links
        # navigate, and mark the current page for assistive technology.
        page.goto(base + "/")
        page.locator(f"#ns-{ns}").get_by_role("link", name="Jobs").click()
        page.wait_for_url(f"{base}/jobs/?namespace={ns}")
        expect(page.locator(dom("job", ns, "batch"))).to_be_visible()
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Leases").click()
        page.wait_for_url(base + "/leases/")
        expect(page.locator('nav a[aria-current="page"]')).to_have_text("Leases")

        # Logging out ends the session: the pages want a login again.
        page.get_by_role("button", name="Log out").click()
        page.wait_for_url(re.compile(r".*/accounts/login/$"))
        page.goto(base + "/")
        assert page.url.startswith(base + "/accounts/login/")
    finally:
        ctx.close()


# ---------------------------------------------------------------------------------------------
# Live updates, no reload


def test_lease_rows_follow_writes(page, kube_server, ns):
    from playwright.sync_api import expect

    for name, holder in (("alpha", "node-a"), ("delta", "node-d"), ("omega", "node-o")):
        api(kube_server, "POST", leases_path(ns), held_lease(ns, name, holder))
    open_live(page, f"{kube_server.http_url}/leases/?namespace={ns}")
    alpha = page.locator(dom("lease", ns, "alpha"))
    expect(alpha.locator(".holder")).to_have_text("node-a")
    assert row_ids(page) == [dom("lease", ns, n)[1:] for n in ("alpha", "delta", "omega")]

    # A takeover: new holder, renewed now.
    api(kube_server, "PATCH", leases_path(ns, "alpha"),
        {"spec": {"holderIdentity": "node-b", "renewTime": now_micro(), "leaseTransitions": 1}}, merge=True)
    expect(alpha.locator(".holder")).to_have_text("node-b")
    expect(alpha.locator("td.num").last).to_have_text("1")

    # A new lease lands in (namespace, name) order, at the start and in the middle.
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "beta", "node-x"))
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "aaa", "node-y"))
    expect(page.locator("#items > tr")).to_have_count(5)
    assert row_ids(page) == [dom("lease", ns, n)[1:] for n in ("aaa", "alpha", "beta", "delta", "omega")]
    expect(page.locator(dom("lease", ns, "beta") + " .holder")).to_have_text("node-x")

    # A deleted lease disappears; the summary counts follow the rows.
    api(kube_server, "DELETE", leases_path(ns, "delta"))
    expect(page.locator(dom("lease", ns, "delta"))).to_have_count(0)
    expect(page.locator("#list-totals dt")).to_have_text("4 leases")
    assert row_ids(page) == [dom("lease", ns, n)[1:] for n in ("aaa", "alpha", "beta", "omega")]

    # Writes elsewhere do not show up on a page filtered to this namespace.
    other = ns + "-other"
    api(kube_server, "POST", leases_path(other), held_lease(other, "stranger", "node-z"))
    api(kube_server, "PATCH", leases_path(ns, "omega"), {"spec": {"holderIdentity": "node-q"}}, merge=True)
    expect(page.locator(dom("lease", ns, "omega") + " .holder")).to_have_text("node-q")
    expect(page.locator("#items > tr")).to_have_count(4)
    assert_not_reloaded(page)


def test_lease_detail_follows_writes(page, kube_server, ns):
    from playwright.sync_api import expect

    api(kube_server, "POST", leases_path(ns), held_lease(ns, "leader", "node-a"))
    open_live(page, f"{kube_server.http_url}/leases/{ns}/leader/")
    facts = page.locator("#detail .facts")
    expect(facts).to_contain_text("node-a")
    api(kube_server, "PATCH", leases_path(ns, "leader"), {"spec": {"holderIdentity": "node-b"}}, merge=True)
    expect(facts).to_contain_text("node-b")
    expect(page.locator("#detail pre, #detail code").first).to_contain_text("holderIdentity: node-b")
    api(kube_server, "DELETE", leases_path(ns, "leader"))
    expect(page.locator("#detail")).to_contain_text("deleted")
    assert_not_reloaded(page)


def test_endpoints_address_flips_not_ready(page, kube_server, ns):
    from playwright.sync_api import expect

    ports = ({"name": "http", "port": 80, "protocol": "TCP"}, {"name": "metrics", "port": 9090, "protocol": "TCP"})
    api(kube_server, "POST", endpoints_path(ns),
        endpoints(name="web", ns=ns, ips=("10.1.0.1", "10.1.0.2"), ports=ports))
    open_live(page, f"{kube_server.http_url}/endpoints/?namespace={ns}")
    card = page.locator(dom("endpoints", ns, "web"))
    second = card.locator(".matrix tbody tr", has_text="10.1.0.2")
    expect(second.locator(".cell")).to_have_text(["ready", "ready"])
    expect(card.locator(".badge")).to_have_text("all ready")

    # 10.1.0.2 fails its readiness probe: both its cells say so, in words and in class.
    api(kube_server, "PATCH", endpoints_path(ns, "web"), {"subsets": [{
        "addresses": [{"ip": "10.1.0.1"}], "notReadyAddresses": [{"ip": "10.1.0.2"}], "ports": list(ports)}]},
        merge=True)
    expect(second.locator(".cell")).to_have_text(["not ready", "not ready"])
    expect(second.locator(".cell.not-ready")).to_have_count(2)
    expect(card.locator(".badge")).to_have_text("1 of 2 ready")
    expect(card.locator(".matrix tfoot")).to_contain_text("1 of 2")

    # And recovers.
    api(kube_server, "PATCH", endpoints_path(ns, "web"), {"subsets": [{
        "addresses": [{"ip": "10.1.0.1"}, {"ip": "10.1.0.2"}], "ports": list(ports)}]}, merge=True)
    expect(second.locator(".cell")).to_have_text(["ready", "ready"])
    assert_not_reloaded(page)


def test_job_progress_moves(page, kube_server, ns):
    from playwright.sync_api import expect

    api(kube_server, "POST", jobs_path(ns), job(name="crunch", ns=ns, completions=4, parallelism=2))
    open_live(page, f"{kube_server.http_url}/jobs/?namespace={ns}")
    row = page.locator(dom("job", ns, "crunch"))
    expect(row.locator(".progress-text")).to_have_text("0/4")

    start = (datetime.now(timezone.utc) - timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    api(kube_server, "PATCH", jobs_path(ns, "crunch") + "/status",
        {"status": {"startTime": start, "active": 2, "ready": 2, "succeeded": 1}}, merge=True)
    expect(row.locator(".progress-text")).to_have_text("1/4")
    expect(row.locator("progress")).to_have_attribute("value", "1")
    expect(row.locator(".pods")).to_contain_text("2 active")
    expect(row.locator(".state .badge")).to_have_text("Running")

    api(kube_server, "PATCH", jobs_path(ns, "crunch") + "/status",
        {"status": {"active": 1, "ready": 1, "succeeded": 3, "failed": 1}}, merge=True)
    expect(row.locator(".progress-text")).to_have_text("3/4")
    expect(row.locator("progress")).to_have_attribute("value", "3")
    expect(row.locator(".failed")).to_contain_text("1 failed")
    assert_not_reloaded(page)


# ---------------------------------------------------------------------------------------------
# Time-based state: no write happens


def test_lease_flips_to_expired_without_a_write(page, kube_server, ns):
    from playwright.sync_api import expect

    api(kube_server, "POST", leases_path(ns), held_lease(ns, "short", "node-a", duration=2))
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "long", "node-b", duration=300))
    open_live(page, f"{kube_server.http_url}/leases/?namespace={ns}")
    rv = page.get_attribute("#live-rv", "data-rv")
    short = page.locator(dom("lease", ns, "short"))
    expect(short.locator("[data-state-label]")).to_have_text("held")
    expect(short).to_have_class(re.compile(r"\bis-held\b"))
    expect(short.locator("[data-expires-at]")).to_contain_text("expires in")

    # renewTime + 2 s passes: the row flips by itself.
    expect(short.locator("[data-state-label]")).to_have_text("expired", timeout=6000)
    expect(short).to_have_class(re.compile(r"\bis-expired\b"))
    expect(short.locator("[data-expires-at]")).to_contain_text("expired")
    expect(short.locator("[data-expires-at]")).to_contain_text("ago")
    expect(short.locator("[data-renewed-at]")).to_contain_text("renewed")
    long = page.locator(dom("lease", ns, "long"))
    expect(long.locator("[data-state-label]")).to_have_text("held")
    # The counts in the summary follow: 1 held, 1 expired.
    expect(page.locator("#list-totals dt")).to_have_text("2 leases")
    expect(page.locator("#list-totals [data-held]")).to_have_text("1")
    expect(page.locator("#list-totals [data-expired]")).to_have_text("1")
    # Nothing was pushed: the page's revision is the one it was rendered at.
    assert page.get_attribute("#live-rv", "data-rv") == rv
    assert_not_reloaded(page)


# ---------------------------------------------------------------------------------------------
# Reconnect


def test_reconnect_shows_state_and_converges(page, kube_server, ns):
    from playwright.sync_api import expect

    for name, holder in (("alpha", "node-a"), ("beta", "node-b")):
        api(kube_server, "POST", leases_path(ns), held_lease(ns, name, holder))
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    open_live(page, f"{kube_server.http_url}/leases/?namespace={ns}")
    status = page.locator("#live-status")

    # A push moves the page's revision forward: a reconnect resumes from there.
    api(kube_server, "PATCH", leases_path(ns, "beta"), {"spec": {"holderIdentity": "node-c"}}, merge=True)
    expect(page.locator(dom("lease", ns, "beta") + " .holder")).to_have_text("node-c")
    seen_rv = page.get_attribute("#live-rv", "data-rv")

    # The connection drops (closed under the page, as a network blip would), and the server
    # stays out of reach until the writes below are done.
    dropped = page.evaluate("""() => {
        window.__kdDown = true;
        const live = window.__kdSockets.filter(s => s.url.includes('/ws/live/') && s.readyState === 1);
        live.forEach(s => s.close());
        return live.length;
    }""")
    assert dropped == 1
    expect(status).to_have_text("Reconnecting…")
    expect(status).to_have_attribute("data-state", "down")

    # While the page is away: a holder change, a delete and a create.
    api(kube_server, "PATCH", leases_path(ns, "alpha"), {"spec": {"holderIdentity": "node-z"}}, merge=True)
    api(kube_server, "DELETE", leases_path(ns, "beta"))
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "gamma", "node-g"))
    assert page.locator(dom("lease", ns, "alpha") + " .holder").inner_text() == "node-a"
    expect(page.locator("#live-stale")).to_contain_text("Not live since")

    # It comes back by itself, says so, and shows exactly the current state.
    page.evaluate("window.__kdDown = false")
    expect(status).to_have_text("Live")
    expect(page.locator("#live-stale")).to_be_hidden()
    expect(page.locator(dom("lease", ns, "alpha") + " .holder")).to_have_text("node-z")
    expect(page.locator(dom("lease", ns, "beta"))).to_have_count(0)
    expect(page.locator(dom("lease", ns, "gamma") + " .holder")).to_have_text("node-g")
    assert row_ids(page) == [dom("lease", ns, n)[1:] for n in ("alpha", "gamma")]
    assert int(page.get_attribute("#live-rv", "data-rv")) > int(seen_rv)
    # The new connection asked to resume from the newest revision the page had seen.
    leases_sockets = [u for u in sockets if "view=leases" in u and "/ws/live/" in u]
    assert len(leases_sockets) == 2
    assert f"rv={seen_rv}" in leases_sockets[-1]

    # And it is live again: a later write arrives as a push.
    api(kube_server, "PATCH", leases_path(ns, "gamma"), {"spec": {"holderIdentity": "node-h"}}, merge=True)
    expect(page.locator(dom("lease", ns, "gamma") + " .holder")).to_have_text("node-h")
    assert_not_reloaded(page)

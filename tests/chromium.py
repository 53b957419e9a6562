"""Chromium for the tests that drive the pages in a real browser (Playwright for Python, Debian's
Chromium): the fixtures (one browser per module, a signed-in session, a fresh page, a namespace of
the test's own) and the helpers those tests share. tests/conftest.py loads it as a plugin, so its
fixtures serve every folder; a test that uses `chromium` is marked `browser` by itself.

Chromium comes from apt (`.ci/run` installs it): without it these tests fail in CI and skip
elsewhere.
"""
from __future__ import annotations

import itertools
import os
import secrets
from datetime import datetime, timezone
from pathlib import Path

import pytest

from manifests import lease, micro


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


def wait_in_page(page, condition: str, what: str, timeout_ms: int = WAIT_MS) -> None:
    """Until the JavaScript expression `condition` holds in the page (checked by the page's own
    timers), at most timeout_ms. Not Playwright's wait_for_function: it evaluates its text, which
    the pages' Content-Security-Policy (no 'unsafe-eval') refuses."""
    held = page.evaluate(f"""() => new Promise(resolve => {{
        const deadline = Date.now() + {timeout_ms};
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


AXE = Path(__file__).parent / "browser" / "vendor" / "axe-core" / "axe.min.js"


def axe_violations(page, rules: list[str] | None = None) -> list[str]:
    """axe-core's violations on the page as it is now ("rule: target" strings)."""
    page.add_script_tag(path=str(AXE))
    options = {"runOnly": {"type": "rule", "values": rules}} if rules else {}
    found = page.evaluate("async (options) => (await axe.run(document, options)).violations", options)
    return [f"{v['id']}: {n['target']}" for v in found for n in v["nodes"]]


@pytest.fixture
def wide_page(chromium, session_state):
    """A signed-in page at 1440 px with the clipboard allowed; CSP bypassed to inject axe."""
    yield from signed_in_page(chromium, session_state, width=1440, bypass_csp=True,
                              permissions=["clipboard-read", "clipboard-write"])

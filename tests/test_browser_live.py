"""Live means live, in a real browser: what a page shows as current is current.

A server process that stops answering without closing the page's socket (SIGSTOP) is shown
as not live within two heartbeats, with every countdown frozen where the server last vouched
for it (a lease nobody can see renewed never turns "expired"), and the page is live again
soon after the process resumes. Uses the fixtures of test_browser.py; the paused server is
this module's own (one process, `--workers 1`), so no other test's server stops.
"""
from __future__ import annotations

import os
import signal
import time

import pytest

from test_browser import (  # noqa: F401  (fixtures are used by name)
    TRACK_SOCKETS, WAIT_MS, api, chromium, dom, held_lease, leases_path, log_in, now_micro, open_live,
)


@pytest.fixture(scope="module")
def lone_server(tmp_path_factory):
    """`manage.py serve --workers 1`: the process that holds every socket is the server."""
    from conftest import served, server_env

    data_dir = tmp_path_factory.mktemp("kubedash-lone")
    server = None
    for server in served(data_dir, server_env(data_dir), "--workers", "1"):
        server.manage("shell", "-c", (
            "from dashboard.access.tokens import ensure_user\n"
            "u = ensure_user('lone-admin', 'admin')\nu.set_password('lone-pass-123')\nu.save()\n"))
        yield server


@pytest.fixture
def lone_page(chromium, lone_server):
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    ctx = chromium.new_context(viewport={"width": 1280, "height": 900})
    ctx.add_init_script(TRACK_SOCKETS)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(page, lone_server.http_url, "lone-admin", "lone-pass-123")
    yield page
    ctx.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def test_a_paused_server_is_shown_not_live_and_countdowns_freeze(lone_page, lone_server):
    from playwright.sync_api import expect

    page, server, ns, duration = lone_page, lone_server, "pause", 20
    api(server, "POST", leases_path(ns), held_lease(ns, "leader", "node-a", duration=duration))
    open_live(page, f"{server.http_url}/leases/?namespace={ns}")
    row = page.locator(dom("lease", ns, "leader"))
    countdown, state = row.locator("[data-expires-at]"), row.locator("[data-state-label]")
    status, stale = page.locator("#live-status"), page.locator("#live-stale")

    # A renewal, seen by the page; then the process holding the socket stops answering.
    api(server, "PATCH", leases_path(ns, "leader"), {"spec": {"holderIdentity": "node-b", "renewTime": now_micro()}},
        merge=True)
    renewed = time.monotonic()
    expect(row.locator(".holder")).to_have_text("node-b")
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        stopped = time.monotonic()
        seen_not_live = None
        texts = set()
        # Until well after the lease's duration has run out (had time kept running on the page).
        while time.monotonic() < renewed + duration + 3:
            texts.add(countdown.inner_text())
            if seen_not_live is None and status.inner_text() != "Live" and stale.is_visible():
                seen_not_live = time.monotonic() - stopped
                assert "Not live since" in stale.inner_text()
                page.screenshot(path="/tmp/kubedash-paused.png")
            time.sleep(0.25)
        assert seen_not_live is not None and seen_not_live < 15, f"still 'Live' {seen_not_live}s after the pause"
        assert not [t for t in texts if t.startswith("expired")], texts
        assert state.inner_text() == "held"
        assert status.get_attribute("data-state") == "down"
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    resumed = time.monotonic()
    expect(status).to_have_text("Live", timeout=15_000)
    print(f"not live {seen_not_live:.1f}s after the pause; live again {time.monotonic() - resumed:.1f}s after resuming")
    expect(stale).to_be_hidden()
    # Live again: time runs, and the lease (not renewed meanwhile) is shown as it is: expired.
    expect(state).to_have_text("expired")
    api(server, "PATCH", leases_path(ns, "leader"), {"spec": {"holderIdentity": "node-c", "renewTime": now_micro()}},
        merge=True)
    expect(row.locator(".holder")).to_have_text("node-c")
    expect(state).to_have_text("held")

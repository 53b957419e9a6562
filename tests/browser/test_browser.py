"""The pages in a real browser: Playwright for Python driving Debian's Chromium.

A user logs in through the form, opens every page, and watches writes made through the API
(as any client makes them) arrive without a reload: a holder change, a new row in its
place, a deleted row, an address turning not ready, a job's progress. A lease flips from
held to expired with no write at all, and a page that lost its websocket says so, then
reconnects and converges on what changed while it was away.

Each test works in a namespace of its own on the shared `kube_server`, and
filters its page to that namespace, so other tests' objects never get in the way.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from chromium import (
    api, assert_not_reloaded, dom, endpoints_path, held_lease, jobs_path, leases_path, now_micro, open_live,
    row_ids,
)
from manifests import endpoints, job

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
        page.wait_for_url(f"{base}/leases/?namespace={ns}")   # the namespace chosen follows (issue 41)
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

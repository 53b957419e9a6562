"""Live means live, in a real browser: what a page shows as current is current.

A server process that stops answering without closing the page's socket (SIGSTOP) is shown
as not live within two heartbeats, with every countdown frozen where the server last vouched
for it (a lease nobody can see renewed never turns "expired"), and the page is live again
soon after the process resumes. Uses the fixtures of test_browser.py; the paused server is
this module's own (one process, `--workers 1`), so no other test's server stops.
"""
from __future__ import annotations

import os
import re
import signal
import time

import pytest

from followed import mirror
from conftest import served
from chromium import (
    TRACK_SOCKETS, WAIT_MS, api, assert_not_reloaded, dom, held_lease, leases_path, log_in, now_micro, open_live,
    signed_in_page, wait_in_page,
)
from manifests import lease


def lease_without_holder(ns: str, name: str) -> dict:
    obj = lease(name=name, ns=ns)
    obj["spec"].pop("holderIdentity", None)
    return obj


@pytest.fixture(scope="module")
def lone_server(tmp_path_factory):
    """`manage.py serve --workers 1`: the process that holds every socket is the server."""
    with served(tmp_path_factory.mktemp("kubedash-lone"), "--workers", "1") as server:
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


@pytest.mark.slow
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
        # Until well after the lease's duration has run out (had time kept running on the page):
        # a wait by design, time is what the paused page must not let run.
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


@pytest.mark.slow
def test_not_live_countdowns_freeze_at_the_stated_moment_and_rows_are_dimmed(lone_page, lone_server):
    """Issue 41: the note says "state as of T; countdowns paused": every countdown shows what it
    said at T (not a few seconds past it), stops there, and its row is greyed until live again."""
    import math
    from datetime import datetime

    from playwright.sync_api import expect

    page, server, ns = lone_page, lone_server, "frozen"
    api(server, "POST", leases_path(ns), held_lease(ns, "leader", "node-a", duration=60))
    open_live(page, f"{server.http_url}/leases/?namespace={ns}")
    row = page.locator(dom("lease", ns, "leader"))
    countdown, stale = row.locator("[data-expires-at]"), page.locator("#live-stale")
    expect(countdown).to_contain_text("expires in")
    assert "grayscale" not in row.evaluate("el => getComputedStyle(el).filter")
    page.evaluate("() => { window.__kdTicks = 0; window.kubedash.onTick(() => { window.__kdTicks++; }); }")
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        expect(stale).to_be_visible(timeout=30_000)
        frozen_at = stale.get_attribute("data-frozen-at")
        stated = datetime.fromisoformat(frozen_at.replace("Z", "+00:00"))
        note = stale.inner_text()
        assert f"Showing the state as of {stated.strftime('%H:%M:%S')} UTC; countdowns paused" in note, note
        expires = datetime.fromisoformat(countdown.get_attribute("data-expires-at").replace("Z", "+00:00"))
        left_ms = round((expires - stated).total_seconds() * 1000)
        expected = f"expires in {math.ceil(left_ms / 1000)}s"
        wait_in_page(page, f"document.querySelector('{dom('lease', ns, 'leader')} [data-expires-at]').textContent"
                           f" === {expected!r}", "the countdown at the stated moment")
        # Three seconds past the stated moment, and two of the page's ticks after that: not moved.
        wait_in_page(page, f"Date.now() > Date.parse({frozen_at!r}) + 3000", "three seconds past the stated moment")
        ticks = page.evaluate("window.__kdTicks")
        wait_in_page(page, f"window.__kdTicks >= {ticks + 2}", "two more ticks of the page's clock")
        assert countdown.inner_text() == expected, "a countdown ran on past the stated moment"
        assert "grayscale" in row.evaluate("el => getComputedStyle(el).filter"), "a frozen row is not dimmed"
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
    expect(page.locator("#live-status")).to_have_text("Live", timeout=15_000)
    expect(stale).to_be_hidden()
    assert "grayscale" not in row.evaluate("el => getComputedStyle(el).filter")


# ---------------------------------------------------------------------------------------------
# Headings, totals and pagers count the whole filtered list, live


def test_totals_and_pager_stay_exact_through_creates_and_deletes(page, kube_server, ns):
    from playwright.sync_api import expect

    for i in range(5):
        api(kube_server, "POST", leases_path(ns), held_lease(ns, f"l{i}", "node-a"))
    api(kube_server, "POST", leases_path(ns), lease_without_holder(ns, "free"))
    open_live(page, f"{kube_server.http_url}/leases/?namespace={ns}&limit=2")
    totals, position = page.locator("#list-totals"), page.locator("#pager-position")
    # The heading counts the list, not the page's two rows.
    expect(totals.locator("dt")).to_have_text("6 leases")
    expect(totals.locator("[data-held]")).to_have_text("5")
    expect(position).to_have_text("Rows 1–2 of 6")

    # A create after this page: announced, and counted.
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "zz", "node-b"))
    expect(totals.locator("dt")).to_have_text("7 leases")
    expect(totals.locator("[data-held]")).to_have_text("6")
    expect(position).to_have_text("Rows 1–2 of 7")
    # A delete on this page: the row goes, the page and the list count one less.
    api(kube_server, "DELETE", leases_path(ns, "l0"))
    expect(page.locator(dom("lease", ns, "l0"))).to_have_count(0)
    expect(totals.locator("dt")).to_have_text("6 leases")
    expect(position).to_have_text("Rows 1–1 of 6")
    # A delete elsewhere in the list, and a lease released (held -> no holder).
    api(kube_server, "DELETE", leases_path(ns, "l4"))
    api(kube_server, "PATCH", leases_path(ns, "l3"), {"spec": {"holderIdentity": None}}, merge=True)
    expect(totals.locator("dt")).to_have_text("5 leases")
    expect(totals.locator("[data-held]")).to_have_text("3")
    expect(position).to_have_text("Rows 1–1 of 5")
    # One left: "1 lease".
    for name in ("l1", "l2", "l3", "zz"):
        api(kube_server, "DELETE", leases_path(ns, name))
    expect(totals.locator("dt")).to_have_text("1 lease")
    assert_not_reloaded(page)


# ---------------------------------------------------------------------------------------------
# Selections are state


def test_selected_rows_stay_selected_through_renewals(page, kube_server, ns):
    from playwright.sync_api import expect

    names = [f"s{i}" for i in range(8)]
    for name in names:
        api(kube_server, "POST", leases_path(ns), held_lease(ns, name, "node-a"))
    open_live(page, f"{kube_server.http_url}/leases/?namespace={ns}")

    def box(name):
        return page.get_by_role("checkbox", name=f"Select {ns}/{name}")

    count = page.locator("[data-bulk-count]")
    box("s1").click()
    box("s4").click(modifiers=["Shift"])     # a range: s1..s4
    box("s6").click()
    expect(count).to_have_text("5 selected:")
    chosen = ["s1", "s2", "s3", "s4", "s6"]

    # Renewals of every lease, several rounds: each row is replaced by a push, and stays selected.
    for round_ in range(3):
        for name in names:
            api(kube_server, "PATCH", leases_path(ns, name),
                {"spec": {"holderIdentity": f"node-{round_}", "renewTime": now_micro()}}, merge=True)
        for name in names:
            expect(page.locator(dom("lease", ns, name) + " .holder")).to_have_text(f"node-{round_}")
        for name in names:
            (expect(box(name)).to_be_checked if name in chosen else expect(box(name)).not_to_be_checked)()
        expect(count).to_have_text("5 selected:")

    # A selected object deleted: it leaves the selection, and the bar says so.
    api(kube_server, "DELETE", leases_path(ns, "s3"))
    expect(page.locator(dom("lease", ns, "s3"))).to_have_count(0)
    expect(count).to_have_text("4 selected:")
    expect(page.locator("[data-bulk-note]")).to_contain_text(f"{ns}/s3")
    # What a bulk action would act on: exactly the four still selected.
    checked = page.eval_on_selector_all("input[data-bulk-row]:checked", "els => els.map(e => e.value)")
    assert checked == [f"{ns}/{n}" for n in ("s1", "s2", "s4", "s6")]
    assert_not_reloaded(page)


def test_a_pushed_row_changes_only_its_changed_cells_in_declared_columns(page, kube_server, ns):
    """1,000-row lists stay smooth under writes (bench/pages.py measures it): a push keeps the
    row element and its unchanged cells (only the changed cells are new, so only they are laid
    out), and the Lease list's rows are grids of the declared column widths, aligned with the
    header, not a table that lays out every row again for one changed row."""
    from playwright.sync_api import expect

    for name in ("a", "b"):
        api(kube_server, "POST", leases_path(ns), held_lease(ns, name, "node-a"))
    open_live(page, f"{kube_server.http_url}/leases/?namespace={ns}")
    row = dom("lease", ns, "a")
    page.evaluate("""(sel) => { const row = document.querySelector(sel); row.__kdMark = 1;
        for (const cell of row.children) cell.__kdMark = 1; }""", row)

    api(kube_server, "PATCH", leases_path(ns, "a"), {"spec": {"holderIdentity": "node-b"}}, merge=True)
    expect(page.locator(row + " .holder")).to_have_text("node-b")
    kept = page.evaluate("""(sel) => { const row = document.querySelector(sel);
        return {row: row.__kdMark === 1, cells: Array.from(row.children, c => c.className + ':' + (c.__kdMark === 1))}; }""", row)
    assert kept["row"], "the push replaced the row element"
    cells = dict(c.rsplit(":", 1) for c in kept["cells"])
    assert cells["holder"] == "false", kept        # the changed cell is the pushed one
    assert cells[""] == "true" and cells["select"] == "true" and cells["state"] == "true", kept   # the others stay

    # The declared columns: every row a grid, each cell under its header, nothing wider than the page.
    geometry = page.evaluate("""() => {
        const table = document.querySelector('table.list');
        const lefts = tr => Array.from(tr.children).filter(c => c.offsetParent !== null)
            .map(c => Math.round(c.getBoundingClientRect().left));
        const rows = Array.from(document.querySelectorAll('#items > tr'));
        return {display: getComputedStyle(rows[0]).display, head: lefts(table.tHead.rows[0]),
                body: rows.map(lefts), overflow: document.documentElement.scrollWidth - innerWidth};
    }""")
    assert geometry["display"] == "grid", geometry
    assert all(lefts == geometry["head"] for lefts in geometry["body"]), geometry
    assert geometry["overflow"] <= 0, geometry
    assert_not_reloaded(page)


@pytest.mark.slow
def test_overview_panels_follow_creates_and_deletes(page, kube_server, ns, prod):
    """The Overview's panels are shown live, so they are pushed: a namespace card's Lease and
    held counts follow creates and deletes, and the clusters panel a followed cluster's copy,
    without a reload."""
    from playwright.sync_api import expect

    api(kube_server, "POST", leases_path(ns), held_lease(ns, "o1", "node-a"))
    open_live(page, f"{kube_server.http_url}/?namespace={ns}")
    card = page.locator("article.ns-card").filter(has=page.get_by_role("heading", name=ns, exact=True))
    leases = card.locator("dt", has_text="Lease").locator(".num")
    held = card.locator("[data-held]")
    expect(leases).to_have_text("1")
    expect(held).to_have_text("1")

    api(kube_server, "POST", leases_path(ns), held_lease(ns, "o2", "node-b"))
    expect(leases).to_have_text("2")
    expect(held).to_have_text("2")
    api(kube_server, "DELETE", leases_path(ns, "o1"))
    expect(leases).to_have_text("1")
    expect(held).to_have_text("1")

    followed = page.locator(f"#cluster-{prod} td[data-label*='Lease'] dt a")
    expect(followed).to_have_text(re.compile(r"^1\b"))
    mirror(kube_server, prod, ns, [["prod-lease", "prod-holder", 10], ["prod-lease-2", "prod-holder", 11]])
    expect(followed).to_have_text(re.compile(r"^2\b"))
    assert_not_reloaded(page)


# ---------------------------------------------------------------------------------------------
# One URL per view


def test_a_share_link_keeps_sort_filter_size_and_page(chromium, page, kube_server, ns):
    from playwright.sync_api import expect

    base = kube_server.http_url
    for i, holder in enumerate(["node-d", "node-b", "node-e", "node-a", "node-c"]):
        api(kube_server, "POST", leases_path(ns), held_lease(ns, f"x{i}", holder))
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "other", "node-z"))
    page.goto(f"{base}/leases/?namespace={ns}&q=x&limit=2")
    # Header clicks replace the order (one sort parameter), twice: descending.
    holder = page.get_by_role("columnheader", name="Holder")
    holder.get_by_role("link", name="Holder").click()
    expect(holder).to_have_attribute("aria-sort", "ascending")
    page.get_by_role("columnheader", name="Holder").get_by_role("link", name="Holder").click()
    expect(page.get_by_role("columnheader", name="Holder")).to_have_attribute("aria-sort", "descending")
    assert page.url == f"{base}/leases/?namespace={ns}&q=x&sort=-holder&limit=2"
    page.get_by_role("link", name="Next page →").click()
    view = f"{base}/leases/?namespace={ns}&q=x&sort=-holder&limit=2&page=2"
    expect(page).to_have_url(view)
    rows = [i.split("--")[-1] for i in page.eval_on_selector_all("#items > *", "els => els.map(e => e.id)")]
    assert rows == ["x4", "x1"]   # node-e, node-d | node-c, node-b | node-a

    page.get_by_role("link", name="Share this view").click()
    page.fill("#id_label", f"view {ns}")
    page.get_by_role("button", name="Create link").click()
    url = page.input_value("#share-url")
    visitor_ctx = chromium.new_context()
    try:
        visitor = visitor_ctx.new_page()
        visitor.goto(url)
        expect(visitor).to_have_url(view)   # the same view: filter, order, size, page
        expect(visitor.get_by_role("columnheader", name="Holder")).to_have_attribute("aria-sort", "descending")
        expect(visitor.locator("#pager-position")).to_have_text("Rows 3–4 of 5")
        shown = [i.split("--")[-1] for i in visitor.eval_on_selector_all("#items > *", "els => els.map(e => e.id)")]
        assert shown == rows
    finally:
        visitor_ctx.close()
    # An unknown order says so.
    page.goto(f"{base}/leases/?namespace={ns}&sort=nonsense")
    expect(page.get_by_role("alert")).to_contain_text("Sort: “nonsense” is not an order of this list")


# ---------------------------------------------------------------------------------------------
# On a phone


@pytest.fixture
def phone(chromium, session_state):
    yield from signed_in_page(chromium, session_state, width=390, is_mobile=True, has_touch=True,
                              device_scale_factor=2)


def test_phone_first_row_in_the_first_screen_and_nothing_scrolls_sideways(phone, kube_server, ns, prod):
    from playwright.sync_api import expect

    page, base = phone, kube_server.http_url
    page.set_viewport_size({"width": 390, "height": 844})
    for i in range(3):
        api(kube_server, "POST", leases_path(ns), held_lease(ns, f"phone-{i}-with-a-rather-long-name", f"node-{i}"))
    for path in (f"/leases/?namespace={ns}", "/", f"/leases/{ns}/phone-0-with-a-rather-long-name/",
                 f"/jobs/?namespace={ns}", f"/search/?q={ns}"):
        page.goto(base + path)
        wide = page.evaluate("document.documentElement.scrollWidth")
        name = path.strip("/").replace("/", "-").split("?")[0][:20] or "overview"
        page.screenshot(path=f"/tmp/kubedash-phone-{name}.png", full_page=True)
        over = page.evaluate("""() => Array.from(document.querySelectorAll('body *')).filter(e => {
            const r = e.getBoundingClientRect(); return r.right > 391 && r.width > 0;
        }).slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))""")
        assert wide <= 390, f"{path}: the page is {wide}px wide at 390px: {over}"
    page.goto(f"{base}/leases/?namespace={ns}")
    first = page.locator("#items > *").first
    expect(first).to_be_visible()
    top = first.bounding_box()["y"]
    assert top < 844 - 60, f"the first row starts {top:.0f}px down"
    # The filters are one tap away, and work.
    filters = page.locator("#list-filters")
    expect(filters).to_be_hidden()
    page.get_by_text("Filters", exact=False).first.click()
    expect(page.get_by_label("Name contains")).to_be_visible()


# Every text #live-status shows, and whether the page still showed an old holder at the moment
# it first said "Live" again (a MutationObserver: it runs once the pushes of that frame are in).
RECORD_STATUS = """() => {
    window.__kdStatus = [];
    window.__kdLiveWhileBehind = null;
    const status = document.getElementById('live-status');
    new MutationObserver(() => {
        const text = status.textContent;
        if (window.__kdStatus[window.__kdStatus.length - 1] !== text) window.__kdStatus.push(text);
        if (text === 'Live' && window.__kdLiveWhileBehind === null && window.__kdDown === false
                && window.__kdStatus.includes('Catching up…')) {
            window.__kdLiveWhileBehind = Array.from(document.querySelectorAll('#items .holder'))
                .some(cell => cell.textContent.trim().startsWith('old-'));
        }
    }).observe(status, {childList: true, characterData: true, subtree: true});
}"""


def test_a_page_that_missed_100_changes_is_live_only_once_caught_up(page, kube_server, ns):
    """Issue 43: a page reconnecting after 100 Leases changed was sent a catch-up too big for its
    socket (1011), reconnected in a loop and showed the old holders under "Live". Now it says
    "Catching up…" until everything it missed is in, then "Live", showing every new holder,
    without reloading."""
    from playwright.sync_api import expect

    names = [f"l{i:03}" for i in range(100)]
    for name in names:
        api(kube_server, "POST", leases_path(ns), held_lease(ns, name, f"old-{name}-" + "o" * 600))
    open_live(page, f"{kube_server.http_url}/leases/?namespace={ns}")
    rows = page.locator("#items .holder")
    expect(rows).to_have_count(100)
    page.evaluate(RECORD_STATUS)
    page.evaluate("""() => {
        window.__kdDown = true;
        window.__kdSockets.filter(s => s.url.includes('/ws/live/') && s.readyState === 1).forEach(s => s.close());
    }""")
    expect(page.locator("#live-status")).to_have_text("Reconnecting…")
    for name in names:
        api(kube_server, "PATCH", leases_path(ns, name),
            {"spec": {"holderIdentity": f"new-{name}-" + "n" * 600, "renewTime": now_micro()}}, merge=True)
    page.evaluate("window.__kdDown = false")
    page.get_by_role("button", name="Retry now").click()
    expect(page.locator("#live-status")).to_have_text("Live")
    assert page.evaluate("window.__kdLiveWhileBehind") is False, page.evaluate("window.__kdStatus")
    statuses = page.evaluate("window.__kdStatus")
    assert statuses.index("Catching up…") < statuses.index("Live"), statuses
    holders = rows.all_text_contents()   # (off-screen rows are not laid out: no inner text)
    assert len(holders) == 100 and all(h.strip().startswith("new-") for h in holders), holders[:3]
    expect(page.locator("#live-stale")).to_be_hidden()
    assert_not_reloaded(page)
    # ... and it stays live: the next change is pushed.
    api(kube_server, "PATCH", leases_path(ns, "l000"), {"spec": {"holderIdentity": "after"}}, merge=True)
    expect(page.locator(dom("lease", ns, "l000")).locator(".holder")).to_have_text("after")
    # No reconnect loop on the way: down once, catching up once, live since.
    assert page.evaluate("window.__kdStatus") == ["Reconnecting…", "Catching up…", "Live"], statuses

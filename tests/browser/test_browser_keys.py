"""Browser tests for issue 41 items 12 and 13: the object keys (e edit, y YAML, d delete with its
confirmation, x select, < > - sort), copy buttons on list rows, the sticky bulk-action bar; and
the layout facts at 1440 x 900 and 390 x 844 (names, condition names, the phone's header, the
History and Field owners pages)."""
from __future__ import annotations

import re

import pytest

from chromium import WAIT_MS, api, axe_violations, dom, endpoints_path, held_lease, jobs_path, leases_path, open_live, signed_in_page
from manifests import endpoints, job


@pytest.fixture
def viewer_page(chromium, kube_server):
    """A signed-in viewer's page (a session made as the login view makes one)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    ctx = chromium.new_context(viewport={"width": 1440, "height": 900})
    ctx.add_cookies([{"name": "sessionid", "value": kube_server.session("keys-viewer", "viewer"),
                      "url": kube_server.http_url}])
    yield ctx.new_page()
    ctx.close()


@pytest.fixture
def clip_page(chromium, session_state):
    """A signed-in admin's page at 1440 px that may read the clipboard."""
    yield from signed_in_page(chromium, session_state, width=1440, bypass_csp=True,
                              permissions=["clipboard-read", "clipboard-write"])


def test_object_keys_on_a_list_row_and_a_detail_page(clip_page, kube_server, ns):
    from playwright.sync_api import expect

    page = clip_page
    base = kube_server.http_url
    for name in ("a1", "a2"):
        api(kube_server, "POST", leases_path(ns), held_lease(ns, name, "node-a"))
    lst = f"{base}/leases/?namespace={ns}"
    open_live(page, lst)
    # With no row focused, the row keys do nothing (and say nothing).
    page.keyboard.press("e")
    # e: the focused row's edit form.
    page.keyboard.press("j")
    expect(page.locator(dom("lease", ns, "a1"))).to_be_focused()
    page.keyboard.press("e")
    page.wait_for_url(f"{base}/leases/{ns}/a1/edit/")
    # y: its YAML editor.
    open_live(page, lst)
    page.keyboard.press("j")
    page.keyboard.press("j")
    page.keyboard.press("y")
    page.wait_for_url(f"{base}/leases/{ns}/a2/yaml/")
    # d: the delete confirmation; Cancel keeps the object.
    open_live(page, lst)
    page.keyboard.press("j")
    page.keyboard.press("d")
    page.wait_for_url(f"{base}/leases/{ns}/a1/delete/")
    expect(page.get_by_role("button", name="Delete lease")).to_be_visible()
    page.get_by_role("link", name="Cancel").click()
    page.wait_for_url(f"{base}/leases/{ns}/a1/")
    status, _, _ = kube_server.request("GET", leases_path(ns, "a1"))
    assert status == 200
    # On a detail page the keys act on the page's object (the toolbar's links name them).
    expect(page.get_by_role("link", name="Edit", exact=True)).to_have_attribute("aria-keyshortcuts", "e")
    page.keyboard.press("y")
    page.wait_for_url(f"{base}/leases/{ns}/a1/yaml/")
    page.go_back()
    page.wait_for_url(f"{base}/leases/{ns}/a1/")
    page.keyboard.press("d")
    page.wait_for_url(f"{base}/leases/{ns}/a1/delete/")
    page.go_back()
    page.keyboard.press("e")
    page.wait_for_url(f"{base}/leases/{ns}/a1/edit/")
    # Typing in a field is text, not keys.
    page.get_by_label("Holder").fill("")
    page.get_by_label("Holder").type("dye")
    expect(page.get_by_label("Holder")).to_have_value("dye")
    assert page.url == f"{base}/leases/{ns}/a1/edit/"
    # The help lists the keys.
    page.goto(lst)
    page.keyboard.press("?")
    help_dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    for text in ("Edit the row", "Edit its YAML", "Delete it (asks first)", "Select the row", "Reverse the sort order"):
        expect(help_dialog).to_contain_text(text)


def test_x_selects_rows_and_the_bulk_bar_stays_on_screen(clip_page, kube_server, ns):
    from playwright.sync_api import expect

    page = clip_page
    names = [f"s{i:02d}" for i in range(30)]
    for name in names:
        api(kube_server, "POST", leases_path(ns), held_lease(ns, name, "node-a"))
    open_live(page, f"{kube_server.http_url}/leases/?namespace={ns}")
    bar = page.locator("[data-bulk-bar]")
    expect(bar).to_be_hidden()
    page.keyboard.press("j")
    page.keyboard.press("x")
    expect(page.locator(dom("lease", ns, "s00") + " input[data-bulk-row]")).to_be_checked()
    expect(bar).to_be_visible()
    expect(bar).to_contain_text("1 selected")
    page.keyboard.press("j")
    page.keyboard.press("x")
    expect(bar).to_contain_text("2 selected")
    page.keyboard.press("x")
    expect(bar).to_contain_text("1 selected")
    # Far down the list the bar is still on screen, at the top.
    for _ in range(25):
        page.keyboard.press("j")
    expect(page.locator(dom("lease", ns, "s26"))).to_be_focused()
    assert page.evaluate("scrollY") > 500
    box = bar.bounding_box()
    assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= 900, box
    # ... and not under the focused row: the row is below the bar.
    row = page.locator(dom("lease", ns, "s26")).bounding_box()
    assert row["y"] >= box["y"] + box["height"] - 1, (row, box)
    page.screenshot(path="/tmp/kubedash-bulk-sticky.png")
    # Back up the list with k: each row comes to rest below the bar, not under it.
    for _ in range(20):
        page.keyboard.press("k")
    expect(page.locator(dom("lease", ns, "s06"))).to_be_focused()
    box = bar.bounding_box()
    row = page.locator(dom("lease", ns, "s06")).bounding_box()
    assert row["y"] >= box["y"] + box["height"] - 1, (row, box)
    # The Endpoints list's cards take the same keys.
    api(kube_server, "POST", endpoints_path(ns), endpoints(name="web", ns=ns))
    open_live(page, f"{kube_server.http_url}/endpoints/?namespace={ns}")
    page.keyboard.press("j")
    page.keyboard.press("x")
    expect(page.locator(dom("endpoints", ns, "web") + " input[data-bulk-row]")).to_be_checked()
    expect(bar).to_contain_text("1 selected")
    page.keyboard.press("e")
    page.wait_for_url(f"{kube_server.http_url}/endpoints/{ns}/web/edit/")


def test_a_viewer_has_y_only(viewer_page, kube_server, ns):
    from playwright.sync_api import expect

    page = viewer_page
    base = kube_server.http_url
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "v1", "node-a"))
    open_live(page, f"{base}/leases/?namespace={ns}")
    page.keyboard.press("?")
    help_dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_dialog).to_contain_text("Show the YAML")
    expect(help_dialog).not_to_contain_text("Edit the row")
    expect(help_dialog).not_to_contain_text("Delete it")
    page.keyboard.press("Escape")
    page.keyboard.press("j")
    for key in ("e", "d", "x"):
        page.keyboard.press(key)
    page.keyboard.press("y")      # the last key: the others, had they acted, would have left first
    page.wait_for_url(f"{base}/leases/{ns}/v1/#object-yaml")
    expect(page.locator("#object-yaml")).to_be_in_viewport()
    # On the detail page: y shows the YAML panel; e and d do nothing.
    page.keyboard.press("e")
    page.keyboard.press("d")
    page.keyboard.press("y")
    expect(page.locator("#object-yaml")).to_be_focused()
    assert page.url == f"{base}/leases/{ns}/v1/#object-yaml"


def test_sort_keys_change_the_address(page, kube_server, ns):
    from playwright.sync_api import expect

    base = kube_server.http_url
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "z", "node-a"))
    page.goto(f"{base}/leases/?namespace={ns}")
    options = page.eval_on_selector_all("#f-sort option", "os => os.map(o => o.value)")
    at, n = page.eval_on_selector("#f-sort", "s => s.selectedIndex"), len(options)

    def sorted_by(index):
        value = options[index % n]
        page.wait_for_url(f"{base}/leases/?namespace={ns}" + (f"&sort={value}" if value else ""))
        expect(page.locator("#f-sort")).to_have_value(value)

    # > the next column, in the same order.
    page.keyboard.press(">")
    sorted_by(at + 2)
    # - the other order.
    page.keyboard.press("-")
    sorted_by((at + 2) ^ 1)
    # > then <: back to that column, same order.
    page.keyboard.press(">")
    sorted_by((at + 4) ^ 1)
    page.keyboard.press("<")
    sorted_by((at + 2) ^ 1)
    # < from the first column wraps to the last.
    page.keyboard.press("-")
    sorted_by(at + 2)
    for column in range((at + 2) // 2 - 1, -1, -1):
        page.keyboard.press("<")
        sorted_by(2 * column)
    page.keyboard.press("<")
    sorted_by(n - 2)
    # The sorted column's header says so.
    expect(page.locator("thead th[aria-sort=ascending]")).to_have_count(1)


def test_copy_buttons_on_list_rows_survive_live_pushes(clip_page, kube_server, ns):
    from playwright.sync_api import expect

    page = clip_page
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "cp", "node-a"))
    api(kube_server, "POST", jobs_path(ns), job(name="crunch", ns=ns))
    open_live(page, f"{kube_server.http_url}/leases/?namespace={ns}")
    row = page.locator(dom("lease", ns, "cp"))
    name_button = row.get_by_role("button", name="Copy name cp")
    # Keyboard reachable: Tab from the row's link reaches them (and shows them), after the row's
    # pin star (dashboard/saved) where JavaScript added one.
    row.get_by_role("link", name="cp").focus()
    page.keyboard.press("Tab")
    if row.locator(".row-pin").count():
        expect(row.locator(".row-pin")).to_be_focused()
        page.keyboard.press("Tab")
    expect(name_button).to_be_focused()
    expect(name_button).to_be_visible()
    assert float(name_button.evaluate("b => getComputedStyle(b.parentNode).opacity")) == 1
    page.keyboard.press("Enter")
    expect(name_button).to_have_text("Copied")
    expect(page.locator("#copy-status")).to_have_text("Copied cp")
    assert page.evaluate("navigator.clipboard.readText()") == "cp"
    expect(name_button).to_have_text("Copy")      # (for a moment)
    assert axe_violations(page) == []             # (the buttons shown: the row has the focus)
    # A live push re-renders the row: its buttons still copy.
    api(kube_server, "PATCH", leases_path(ns, "cp"), {"spec": {"holderIdentity": "node-b"}}, merge=True)
    expect(row.locator(".holder")).to_have_text("node-b")
    row.hover()
    row.get_by_role("button", name=f"Copy ns/name {ns}/cp").click()
    expect(page.locator("#copy-status")).to_have_text(f"Copied {ns}/cp")
    assert page.evaluate("navigator.clipboard.readText()") == f"{ns}/cp"
    # The Jobs and Endpoints lists have them too.
    page.goto(f"{kube_server.http_url}/jobs/?namespace={ns}")
    page.locator(dom("job", ns, "crunch")).hover()
    page.locator(dom("job", ns, "crunch")).get_by_role("button", name="Copy name crunch").click()
    expect(page.locator("#copy-status")).to_have_text("Copied crunch")
    assert page.evaluate("navigator.clipboard.readText()") == "crunch"


# ---------------------------------------------------------------------------------------------
# Layout: 1440 x 900 and 390 x 844

DEMO_NAMES = ["kube-controller-manager", "payments-api-leader", "reindex-search-dbgt4", "settle-invoices-zqjlm"]


def _lines(locator) -> int:
    """How many lines an inline element's text takes (its line boxes)."""
    return locator.evaluate("el => { const r = document.createRange(); r.selectNodeContents(el);"
                            " return new Set(Array.from(r.getClientRects()).map(c => Math.round(c.top))).size; }")


@pytest.fixture
def sized_page(chromium, session_state):
    def make(width, height):
        gen = signed_in_page(chromium, session_state, width=width)
        pg = next(gen)
        pg.set_viewport_size({"width": width, "height": height})
        made.append(gen)
        return pg
    made = []
    yield make
    for gen in made:
        next(gen, None)


def test_lists_use_the_width_at_1440(sized_page, kube_server, ns):
    from playwright.sync_api import expect

    page = sized_page(1440, 900)
    base = kube_server.http_url
    for name in DEMO_NAMES:
        api(kube_server, "POST", leases_path(ns), held_lease(ns, name, "control-plane-1_ef6c00a5"))
        api(kube_server, "POST", jobs_path(ns), job(name=name, ns=ns, completions=12))
    # A failed Job: its condition names (FailureTarget, Failed...) are words, never broken.
    made = api(kube_server, "POST", jobs_path(ns), job(name="broken-importer", ns=ns))
    api(kube_server, "PUT", jobs_path(ns, "broken-importer") + "/status", {
        **made, "status": {"failed": 1, "startTime": "2026-01-01T00:00:00Z", "conditions": [
            {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded",
             "message": "Job has reached the specified backoff limit"},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
             "message": "Job has reached the specified backoff limit"}]}})
    for path, kind in (("leases", "lease"), ("jobs", "job")):
        page.goto(f"{base}/{path}/?namespace={ns}")
        for name in DEMO_NAMES:
            link = page.locator(dom(kind, ns, name)).get_by_role("link", name=name, exact=True)
            assert _lines(link) <= 2, f"{path}: {name} takes {_lines(link)} lines at 1440 px"
        page.screenshot(path=f"/tmp/kubedash-1440-{path}.png", full_page=True)
        assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth")
    # The condition names and reasons are whole words, at 1440 and where the columns are at their
    # least (the list scrolls sideways there).
    for width in (1440, 1024):
        page.set_viewport_size({"width": width, "height": 900})
        conditions = page.locator(dom("job", ns, "broken-importer") + " .conditions li")
        expect(conditions.first).to_contain_text("FailureTarget")
        for i in range(conditions.count()):
            cond = conditions.nth(i)
            assert _word_lines(cond) == 1, f"at {width} px a word of {cond.inner_text()!r} is broken"
            assert cond.evaluate("el => getComputedStyle(el).overflowWrap") == "normal"
            assert cond.evaluate("el => getComputedStyle(el).wordBreak") in ("normal", "keep-all")
        page.screenshot(path=f"/tmp/kubedash-{width}-job-conditions.png")


def _word_lines(locator) -> int:
    """The most lines any one word (outside a .message) of an element takes."""
    return locator.evaluate("""el => {
        let most = 1;
        const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        for (let node = walk.nextNode(); node; node = walk.nextNode()) {
            if (node.parentElement.closest('.message')) continue;
            for (const m of node.data.matchAll(/\\S+/g)) {
                const r = document.createRange();
                r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
                most = Math.max(most, new Set(Array.from(r.getClientRects()).map(c => Math.round(c.top))).size);
            }
        }
        return most;
    }""")


def test_phone_header_and_filters_take_a_fifth(sized_page, kube_server, ns):
    page = sized_page(390, 844)
    base = kube_server.http_url
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "kube-controller-manager", "node-a"))
    for path in ("leases", "jobs", "endpoints"):
        page.goto(f"{base}/{path}/?namespace={ns}")
        header = page.locator("header.top").bounding_box()
        filters = page.locator("#filters-box").bounding_box()
        used = header["height"] + filters["height"]
        page.screenshot(path=f"/tmp/kubedash-390-{path}.png")
        assert used <= 0.2 * 844, f"{path}: header {header['height']} + filters {filters['height']} px"
        assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth"), path


def test_history_and_field_owners_fit(sized_page, kube_server, ns):
    page = sized_page(1440, 900)
    base = kube_server.http_url
    name = "kube-controller-manager"
    api(kube_server, "POST", leases_path(ns), held_lease(ns, name, "control-plane-1_ef6c00a5"))
    for holder in ("control-plane-2_0a6f3c9e81d4b7", "control-plane-3_171db8a8"):
        api(kube_server, "PATCH", leases_path(ns, name), {
            "metadata": {"labels": {"app.kubernetes.io/component": "controller-manager-" + holder},
                         "annotations": {"controller-manager.payments.team.kubedash.example.com/leader-election-"
                                         + holder: "x" * 160}},
            "spec": {"holderIdentity": holder}}, merge=True)
    page.goto(f"{base}/leases/{ns}/{name}/history/")
    rows = page.locator(".diff-table tbody tr")
    assert rows.count() >= 3
    for i in range(rows.count()):
        cells = [rows.nth(i).locator(c).bounding_box() for c in ("th", "td.old", "td.new")]
        for left, right in zip(cells, cells[1:]):
            assert left["x"] + left["width"] <= right["x"] + 0.5, f"row {i}: cells overlap {cells}"
        # ... and what is in a cell stays inside it.
        for c in ("th", "td.old", "td.new"):
            overflow = rows.nth(i).locator(c).evaluate("el => el.scrollWidth - el.clientWidth")
            assert overflow <= 1, f"row {i} {c}: {overflow} px past its cell"
    page.screenshot(path="/tmp/kubedash-1440-history.png", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    for tab in ("history", "fields"):
        page.goto(f"{base}/leases/{ns}/{name}/{tab}/")
        page.screenshot(path=f"/tmp/kubedash-390-{tab}.png", full_page=True)
        assert page.evaluate("document.scrollingElement.scrollWidth <= innerWidth"), \
            f"{tab}: {page.evaluate('document.scrollingElement.scrollWidth')} px wide at 390"
    assert re.search(r"fields/$", page.url)

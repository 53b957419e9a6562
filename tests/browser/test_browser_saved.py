"""Saved views, pins and the command palette in Chromium (issue 40): "Save view" on a list, the
":" palette (suggestions, arrows, Enter, Esc) going to a kind in a namespace and to a saved view,
"s" pinning the focused row and the object on its page, the Overview's Pinned panel following a
write live; axe-core on the palette, the Views page and the Overview with pins."""
from __future__ import annotations

import re

from chromium import api, assert_not_reloaded, axe_violations, dom, held_lease, leases_path, open_live


def test_save_a_view_and_the_command_palette(wide_page, kube_server, ns):
    from playwright.sync_api import expect

    page, base = wide_page, kube_server.http_url
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "lock", "node-a"))
    page.goto(f"{base}/leases/?namespace={ns}")
    page.get_by_text("Save view", exact=True).click()
    page.get_by_label("View name").fill(f"Leases of {ns}")
    page.get_by_role("radio", name="Everyone").check()
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page).to_have_url(re.compile(r"/views/\?saved="))
    expect(page.get_by_role("status").filter(has_text="Saved")).to_be_visible()
    row = page.get_by_role("row").filter(has_text=f"Leases of {ns}")
    expect(row).to_contain_text(f"/leases/?namespace={ns}")
    expect(row).to_contain_text("everyone")
    assert axe_violations(page) == []
    page.screenshot(path="/tmp/kubedash-views.png", full_page=True)
    # The main menu's "Views" opens the list of saved views, this one among them.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Views", exact=True).click()
    expect(page.get_by_role("link", name=f"Leases of {ns}", exact=True)).to_be_visible()

    # ":" opens the palette: a combobox in a dialog, with suggestions.
    page.goto(base + "/")
    page.keyboard.press(":")
    palette = page.get_by_role("dialog", name="Command palette")
    expect(palette).to_be_visible()
    box = palette.get_by_role("combobox", name="Command")
    expect(box).to_be_focused()
    box.fill("lea")
    expect(palette.get_by_role("option").first).to_contain_text(":leases")
    assert axe_violations(page) == []
    page.screenshot(path="/tmp/kubedash-palette.png")
    page.keyboard.press("Escape")
    expect(palette).to_be_hidden()
    # ":leases <namespace>": the kind in that namespace (arrows choose, Enter goes).
    page.keyboard.press(":")
    box.fill(f"leases {ns[:-2]}")
    options = palette.get_by_role("option")
    expect(options.filter(has_text=f":leases {ns}")).to_have_count(1)
    expect(box).to_have_attribute("aria-expanded", "true")
    while box.get_attribute("aria-activedescendant") != options.filter(has_text=f":leases {ns}").get_attribute("id"):
        page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{base}/leases/?namespace={ns}")
    # ":view <name>": the saved view.
    page.keyboard.press(":")
    box.fill(f"view Leases of {ns}")
    expect(options.first).to_contain_text(f":view Leases of {ns}")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{base}/leases/?namespace={ns}")
    # ":views": the saved views page; the help lists the palette and "s".
    page.keyboard.press(":")
    box.fill("views")
    expect(options.first).to_contain_text(":views")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{base}/views/")
    page.keyboard.press("?")
    help_ = page.get_by_role("dialog", name="Keyboard shortcuts")
    expect(help_).to_contain_text("Command palette")
    expect(help_).to_contain_text("Pin or unpin the focused row")


def test_s_pins_and_the_pinned_panel_is_live(wide_page, kube_server, ns):
    from playwright.sync_api import expect

    page, base = wide_page, kube_server.http_url
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "first", "node-a"))
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "second", "node-b"))
    # "s" on a focused row (j moves the row focus).
    open_live(page, f"{base}/leases/?namespace={ns}")
    page.keyboard.press("j")
    expect(page.locator(dom("lease", ns, "first"))).to_be_focused()
    page.keyboard.press("s")
    expect(page.locator("#pin-status")).to_have_text(f"Pinned {ns}/first")
    expect(page.get_by_role("button", name=f"Pin {ns}/first")).to_have_attribute("aria-pressed", "true")
    # Each row has its star (a toggle); it stays on a row a live push re-renders.
    second = page.get_by_role("button", name=f"Pin {ns}/second")
    expect(second).to_have_attribute("aria-pressed", "false")
    second.click()
    expect(second).to_have_attribute("aria-pressed", "true")
    expect(page.locator("#pin-status")).to_have_text(f"Pinned {ns}/second")
    api(kube_server, "PATCH", leases_path(ns, "second"), {"spec": {"holderIdentity": "node-y"}}, merge=True)
    expect(page.locator(dom("lease", ns, "second") + " .holder")).to_have_text("node-y")
    expect(second).to_have_attribute("aria-pressed", "true")
    assert axe_violations(page) == []
    page.screenshot(path="/tmp/kubedash-row-stars.png")
    second.click()
    expect(second).to_have_attribute("aria-pressed", "false")
    assert_not_reloaded(page)
    # "s" on an object's page: its star button, aria-pressed.
    page.goto(f"{base}/leases/{ns}/second/")
    star = page.get_by_role("button", name=f"Pin Lease {ns}/second")
    expect(star).to_have_attribute("aria-pressed", "false")
    page.keyboard.press("s")
    expect(star).to_have_attribute("aria-pressed", "true")
    expect(star).to_contain_text("★")

    # The Overview's Pinned panel: both, with their state, following a write live.
    open_live(page, base + "/")
    panel = page.get_by_role("region", name="Pinned")
    first = panel.get_by_role("listitem").filter(has_text=f"{ns}/first")
    expect(first).to_contain_text("node-a")
    expect(panel.get_by_role("listitem").filter(has_text=f"{ns}/second")).to_contain_text("node-y")
    api(kube_server, "PATCH", leases_path(ns, "first"), {"spec": {"holderIdentity": "node-z"}}, merge=True)
    expect(first).to_contain_text("node-z")
    api(kube_server, "DELETE", leases_path(ns, "second"))
    gone = panel.get_by_role("listitem").filter(has_text=f"{ns}/second")
    expect(gone).to_contain_text(re.compile(r"deleted .* ago"))
    expect(gone).to_contain_text("last state:")
    assert_not_reloaded(page)
    assert axe_violations(page) == []
    panel.screenshot(path="/tmp/kubedash-pinned.png")
    page.screenshot(path="/tmp/kubedash-overview-pins.png", full_page=True)


def test_the_palette_switches_cluster_and_pins_keep_theirs(wide_page, kube_server, ns, prod):
    from playwright.sync_api import expect

    page, base = wide_page, kube_server.http_url
    page.goto(f"{base}/leases/?namespace={ns}")
    page.keyboard.press(":")
    palette = page.get_by_role("dialog", name="Command palette")
    box = palette.get_by_role("combobox", name="Command")
    box.fill(f"cluster {prod}")
    expect(palette.get_by_role("option").first).to_contain_text(f":cluster {prod}")
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{base}/leases/?namespace={ns}&cluster={prod}")
    # A followed cluster's object pinned from its row: the Overview shows it, in its cluster.
    star = page.get_by_role("button", name=f"Pin {ns}/prod-lease")
    star.click()
    expect(star).to_have_attribute("aria-pressed", "true")
    page.goto(base + "/")
    pinned = page.get_by_role("region", name="Pinned").get_by_role("listitem").filter(has_text=f"{ns}/prod-lease")
    expect(pinned).to_contain_text(f"in {prod}")
    expect(pinned).to_contain_text("prod-holder")
    expect(pinned.get_by_role("link")).to_have_attribute("href", f"/leases/{ns}/prod-lease/?cluster={prod}")

"""The namespace choice that follows the viewer, in Chromium (issue 41, item 8): chosen on Leases
with the keyboard, kept through the main menu to Jobs, an object's page and the Overview; and a
create form that asks before it brings a new namespace into use. Fixtures: tests/chromium.py."""
from __future__ import annotations

import re

from chromium import api, axe_violations, dom, held_lease, jobs_path, leases_path
from manifests import job


def test_the_namespace_chosen_on_leases_follows_through_the_menu(wide_page, kube_server, ns):
    from playwright.sync_api import expect

    page, base, other = wide_page, kube_server.http_url, ns + "-other"
    for where in (ns, other):
        api(kube_server, "POST", leases_path(where), held_lease(where, "leader", "node-a"))
        api(kube_server, "POST", jobs_path(where), job(name="crunch", ns=where))
    page.goto(f"{base}/leases/")
    # Every namespace (on a server other tests share, this Lease may be past the first page: the
    # menu offers its namespace instead).
    chooser = page.get_by_label("Namespace", exact=True)
    expect(chooser).to_have_value("")
    expect(chooser.locator(f'option[value="{other}"]')).to_have_count(1)
    # Chosen with the keyboard in the filters' labelled menu (it applies as it changes).
    chooser.focus()
    chooser.select_option(ns)
    page.wait_for_url(f"{base}/leases/?namespace={ns}")
    menu = page.get_by_role("navigation", name="Main")
    # To Jobs through the menu: still that namespace, in the address, the rows and the menu.
    menu.get_by_role("link", name="Jobs").click()
    page.wait_for_url(f"{base}/jobs/?namespace={ns}")
    expect(page.locator(dom("job", ns, "crunch"))).to_be_visible()
    expect(page.locator(dom("job", other, "crunch"))).to_have_count(0)
    expect(page.get_by_label("Namespace", exact=True)).to_have_value(ns)
    expect(page).to_have_title(re.compile(f"namespace {ns}"))
    page.screenshot(path="/tmp/kubedash-namespace-jobs.png")
    assert axe_violations(page) == []
    # An object's page chooses no namespace: its menu keeps the one chosen, not the object's.
    page.goto(f"{base}/jobs/{other}/crunch/")
    menu.get_by_role("link", name="Leases").click()
    page.wait_for_url(f"{base}/leases/?namespace={ns}")
    expect(page.locator(dom("lease", other, "leader"))).to_have_count(0)
    # The Overview counts that namespace only; "All namespaces" there is a choice too.
    menu.get_by_role("link", name="Overview").click()
    page.wait_for_url(f"{base}/?namespace={ns}")
    expect(page.locator(f"#ns-{ns}")).to_be_visible()
    expect(page.locator(f"#ns-{other}")).to_have_count(0)
    page.get_by_role("link", name="All namespaces").click()
    page.wait_for_url(f"{base}/")
    menu.get_by_role("link", name="Jobs").click()
    page.wait_for_url(f"{base}/jobs/")
    expect(page.get_by_label("Namespace", exact=True)).to_have_value("")   # (every namespace: the URL says so)


def test_a_new_namespace_is_confirmed_before_it_is_used(wide_page, kube_server, ns):
    from playwright.sync_api import expect

    page, base = wide_page, kube_server.http_url
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "leader", "node-a"))
    typo = ns[1] + ns[0] + ns[2:]   # "rb-…" for "br-…"
    page.goto(f"{base}/leases/new/")
    page.get_by_label("Name", exact=True).fill("lock")
    page.get_by_label("Namespace", exact=True).fill(typo)
    page.get_by_role("button", name="Create lease").click()
    question = page.get_by_role("alert").filter(has_text=f"Create objects in a new namespace “{typo}”?")
    expect(question).to_be_visible()
    expect(question).to_be_focused()   # said first to a screen reader, the button next on Tab
    page.screenshot(path="/tmp/kubedash-new-namespace.png")
    assert axe_violations(page) == []
    # Nothing was created; the person's values are still in the form.
    assert kube_server.request("GET", leases_path(typo, "lock"))[0] == 404
    expect(page.get_by_label("Name", exact=True)).to_have_value("lock")
    page.keyboard.press("Tab")
    confirm = page.get_by_role("button", name=f"Yes, create in new namespace “{typo}”")
    expect(confirm).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base}/leases/{typo}/lock/")
    assert kube_server.request("GET", leases_path(typo, "lock"))[0] == 200

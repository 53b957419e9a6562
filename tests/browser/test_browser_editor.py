"""The YAML editor (static_src/editor: CodeMirror 6 over the form's textarea) in Chromium:
highlighting, keyboard editing, the review of changes before save, the conflict page, the
page under its real Content-Security-Policy, axe, and the textarea without JavaScript."""
from __future__ import annotations


from chromium import api, axe_violations, held_lease, leases_path


def _holder(kube_server, ns: str) -> str:
    return api(kube_server, "GET", leases_path(ns, "lock"))["spec"]["holderIdentity"]


def _open_editor(page, kube_server, ns: str):
    from playwright.sync_api import expect

    page.goto(f"{kube_server.http_url}/leases/{ns}/lock/yaml/")
    editor = page.locator(".yaml-editor[data-editor=codemirror]")
    expect(editor).to_be_visible()
    return editor


def _replace_holder(page, editor, new: str) -> None:
    """Put the cursor at the end of the holderIdentity line with the keyboard and retype it."""
    line = editor.locator(".cm-line", has_text="holderIdentity:")
    line.click()
    page.keyboard.press("End")
    for _ in range(len("node-a")):
        page.keyboard.press("Backspace")
    page.keyboard.type(new)


def test_edit_review_the_diff_then_save(page, kube_server, ns):
    """Under the page's real CSP (the `page` fixture does not bypass it; a CSP error would
    fail the fixture's no-JavaScript-errors check or leave the textarea showing)."""
    from playwright.sync_api import expect

    api(kube_server, "POST", leases_path(ns), held_lease(ns, "lock", "node-a"))
    editor = _open_editor(page, kube_server, ns)
    expect(page.locator("textarea#id_yaml")).to_be_hidden()
    # YAML is highlighted: keys and values are separate styled tokens.
    assert editor.locator(".cm-line span[class]").count() > 5
    expect(page.locator("#yaml-editor-keys")).to_be_visible()
    _replace_holder(page, editor, "node-b")
    # Tab indents in the editor (it does not leave it).
    page.keyboard.press("Home")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.closest('.yaml-editor') !== null")
    page.keyboard.press("Shift+Tab")
    save = page.get_by_role("button", name="Save", exact=True)
    save.click()
    # The first Save shows the changes and saves nothing.
    review = page.locator("#yaml-review")
    expect(review).to_be_visible()
    expect(page.locator("#yaml-review-h")).to_be_focused()
    expect(review.locator(".cm-deletedChunk, .cm-deletedLine, del").first).to_contain_text("node-a")
    expect(review.locator(".cm-changedLine, .cm-insertedLine").first).to_contain_text("node-b")
    assert _holder(kube_server, ns) == "node-a"
    page.get_by_role("button", name="Save these changes").click()
    page.wait_for_url(f"{kube_server.http_url}/leases/{ns}/lock/")
    assert _holder(kube_server, ns) == "node-b"


def test_review_button_and_no_changes(page, kube_server, ns):
    from playwright.sync_api import expect

    api(kube_server, "POST", leases_path(ns), held_lease(ns, "lock", "node-a"))
    _open_editor(page, kube_server, ns)
    page.get_by_role("button", name="Review changes").click()
    expect(page.locator("#yaml-review .review-note")).to_contain_text("No changes")


def test_a_change_made_meanwhile_still_gets_the_conflict_page(page, kube_server, ns):
    from playwright.sync_api import expect

    api(kube_server, "POST", leases_path(ns), held_lease(ns, "lock", "node-a"))
    editor = _open_editor(page, kube_server, ns)
    _replace_holder(page, editor, "node-b")
    api(kube_server, "PATCH", leases_path(ns, "lock"), {"spec": {"holderIdentity": "node-c"}}, merge=True)
    page.get_by_role("button", name="Save", exact=True).click()
    page.get_by_role("button", name="Save these changes").click()
    expect(page.locator("h1")).to_contain_text("changed")
    assert _holder(kube_server, ns) == "node-c"


def test_editor_and_review_pass_axe(wide_page, kube_server, ns):
    from playwright.sync_api import expect

    page = wide_page
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "lock", "node-a"))
    editor = _open_editor(page, kube_server, ns)
    assert axe_violations(page) == []
    _replace_holder(page, editor, "node-z")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#yaml-review")).to_be_visible()
    page.screenshot(path="/tmp/kubedash-yaml-review.png", full_page=True)
    assert axe_violations(page) == []


def test_without_javascript_the_textarea_saves(chromium, session_state, kube_server, ns):
    from playwright.sync_api import expect

    api(kube_server, "POST", leases_path(ns), held_lease(ns, "lock", "node-a"))
    ctx = chromium.new_context(storage_state=session_state, java_script_enabled=False)
    try:
        page = ctx.new_page()
        page.goto(f"{kube_server.http_url}/leases/{ns}/lock/yaml/")
        area = page.locator("textarea#id_yaml")
        expect(area).to_be_visible()
        expect(page.locator("#yaml-review-button")).to_be_hidden()
        area.fill(area.input_value().replace("holderIdentity: node-a", "holderIdentity: node-n"))
        page.get_by_role("button", name="Save", exact=True).click()
        page.wait_for_url(f"{kube_server.http_url}/leases/{ns}/lock/")
        assert _holder(kube_server, ns) == "node-n"
    finally:
        ctx.close()


def test_an_error_is_marked_on_its_line(page, kube_server, ns):
    """Issue 41: a refused value's message starts with its line, and the editor marks that line."""
    from playwright.sync_api import expect

    api(kube_server, "POST", leases_path(ns), held_lease(ns, "lock", "node-a", duration=60))
    editor = _open_editor(page, kube_server, ns)
    editor.locator(".cm-line", has_text="leaseDurationSeconds:").click()
    page.keyboard.press("End")
    page.keyboard.press("Backspace")
    page.keyboard.press("Backspace")
    page.keyboard.type("0")
    page.get_by_role("button", name="Save", exact=True).click()
    page.get_by_role("button", name="Save these changes").click()
    editor = page.locator(".yaml-editor[data-editor=codemirror]")
    expect(page.locator("#id_yaml_error")).to_contain_text("spec.leaseDurationSeconds: Must be greater than 0")
    marked = editor.locator(".cm-line.cm-error-line")
    expect(marked).to_have_count(1)
    expect(marked).to_have_text("  leaseDurationSeconds: 0")
    line = page.locator("textarea#id_yaml").input_value().splitlines().index("  leaseDurationSeconds: 0") + 1
    expect(page.locator("#id_yaml_error")).to_contain_text(f"Line {line}: spec.leaseDurationSeconds")
    assert api(kube_server, "GET", leases_path(ns, "lock"))["spec"]["leaseDurationSeconds"] == 60

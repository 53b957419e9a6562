"""A share link in a real browser: made through the UI, opened without a login, live, read-only
on every path, and closed at once when its owner revokes it.

An editor opens a leases page, uses "Share this view" and copies the link from the page that
shows it once. A fresh browser context (no cookies, nobody logged in) opens the link: it lands
on the live leases view of that namespace, and a write made through the API arrives without a
reload. Nothing on the page can write, and nothing around it can be reached: other kinds,
other namespaces, the forms, the tokens and share pages, the API and other websockets answer
403/404 or send the visitor back, and a POST to a write route is refused with the lease left
as it was. The editor then revokes the link: the visitor's open page says so at once and stops
being live, and a reload answers 410.

Uses the fixtures of test_browser.py (Chromium from apt; skipped where it is missing).
"""
from __future__ import annotations

import re
import secrets

import pytest

from manifests import endpoints, job
from chromium import (
    TRACK_SOCKETS, WAIT_MS, api, assert_not_reloaded, dom, endpoints_path, held_lease, jobs_path, leases_path,
    log_in, open_live,
)

EDITOR = "share-editor"
EDITOR_PASSWORD = "share-" + secrets.token_urlsafe(12)
# What a refused probe may show: an error page, never the objects behind it.
REFUSED = (403, 404)
# Link texts that would offer a write (or a way out of the shared view's scope).
WRITE_WORDS = re.compile(r"\b(new|edit|delete|release|yaml|share this|log out|tokens)\b", re.I)


@pytest.fixture(scope="module")
def editor_state(chromium, kube_server):
    """An editor (writes, may share; not an admin) signed in once for the module."""
    kube_server.manage("shell", "-c", (
        "from dashboard.access.tokens import ensure_user\n"
        f"u = ensure_user({EDITOR!r}, 'editor')\n"
        f"u.set_password({EDITOR_PASSWORD!r})\n"
        "u.save()\n"))
    ctx = chromium.new_context()
    log_in(ctx.new_page(), kube_server.http_url, EDITOR, EDITOR_PASSWORD)
    state = ctx.storage_state()
    ctx.close()
    return state


def _context(chromium, storage_state=None):
    """(a browser context, the JavaScript errors its pages raise)."""
    ctx = chromium.new_context(storage_state=storage_state, viewport={"width": 1280, "height": 900})
    ctx.add_init_script(TRACK_SOCKETS)
    errors: list[str] = []
    ctx.on("page", lambda pg: pg.on("pageerror", lambda exc: errors.append(str(exc))))
    return ctx, errors


def _ws_opens(page, path: str) -> bool:
    """Whether a websocket to `path`, opened from this page's origin, is accepted and stays open
    (a refused handshake closes it unopened; the browser reports that as 1006)."""
    return page.evaluate("""(path) => new Promise(resolve => {
        const ws = new WebSocket(location.origin.replace(/^http/, 'ws') + path);
        let opened = false;
        ws.onopen = () => { opened = true; };
        ws.onclose = () => resolve(false);
        setTimeout(() => { resolve(opened); ws.close(); }, 1500);
    })""", path)


@pytest.mark.slow
def test_share_link_is_live_read_only_and_revocable(chromium, editor_state, kube_server, ns):
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)
    base = kube_server.http_url
    other = ns + "-other"
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "leader", "node-a"))
    api(kube_server, "POST", leases_path(other), held_lease(other, "stranger", "node-secret"))
    api(kube_server, "POST", jobs_path(ns), job(name="hidden-job", ns=ns))
    api(kube_server, "POST", endpoints_path(ns), endpoints(name="hidden-svc", ns=ns))

    editor_ctx, editor_errors = _context(chromium, editor_state)
    visitor_ctx, visitor_errors = _context(chromium)   # no cookies: nobody is logged in
    try:
        # --- The editor makes a link from the leases page ---------------------------------
        editor = editor_ctx.new_page()
        editor.goto(f"{base}/leases/?namespace={ns}")
        expect(editor.locator(dom("lease", ns, "leader"))).to_be_visible()
        editor.get_by_role("link", name="Share this view").click()
        editor.wait_for_url(re.compile(r".*/share/new/\?"))
        expect(editor.locator("h1")).to_have_text("Share this view")
        expect(editor.locator(".summary")).to_contain_text(f"Leases in namespace {ns}")
        label = f"on-call {ns}"
        editor.fill("#id_label", label)
        editor.get_by_label("1 hour").check()
        editor.get_by_role("button", name="Create link").click()
        expect(editor.locator("h1")).to_have_text("Share link created")
        url = editor.input_value("#share-url")
        match = re.fullmatch(re.escape(base) + r"/s/([A-Za-z0-9_-]+)/", url)
        assert match, url
        token = match.group(1)
        assert len(token) >= 22, "a share token carries at least 128 random bits"
        # Shown once: the list of links names it, with its creator, but never shows it again.
        editor.goto(base + "/share/")
        listed = editor.locator("tbody tr", has_text=label)
        expect(listed).to_contain_text(EDITOR)
        expect(listed.locator(".badge")).to_have_text("active")
        assert token not in editor.content()

        # --- A fresh context opens it: the live view, without a login ---------------------
        visitor = visitor_ctx.new_page()
        visitor.goto(url)
        visitor.wait_for_url(f"{base}/leases/?namespace={ns}")   # the token left the address bar
        expect(visitor.locator("#live-status")).to_have_text("Live")
        visitor.evaluate("window.__kdSameDocument = true")
        expect(visitor.locator(".share-banner")).to_contain_text("Read-only shared view")
        expect(visitor.locator(".share-banner")).to_contain_text(label)
        row = visitor.locator(dom("lease", ns, "leader"))
        expect(row.locator(".holder")).to_have_text("node-a")
        expect(visitor.locator("#items > tr")).to_have_count(1)
        assert "node-secret" not in visitor.content()

        # A write through the API shows up without a reload.
        api(kube_server, "PATCH", leases_path(ns, "leader"), {"spec": {"holderIdentity": "node-b"}}, merge=True)
        expect(row.locator(".holder")).to_have_text("node-b")
        api(kube_server, "POST", leases_path(ns), held_lease(ns, "standby", "node-c"))
        expect(visitor.locator(dom("lease", ns, "standby") + " .holder")).to_have_text("node-c")
        assert_not_reloaded(visitor)

        # --- Nothing on the page writes -------------------------------------------------
        # Three forms: "Leave shared view"; the filters, a GET search of this same page (it
        # only narrows what the link shows: the link's own scope always applies); and the time
        # bar, a GET of this same page as of another moment (issue 38: read-only too).
        forms = visitor.eval_on_selector_all("form", """fs => fs.map(f => ({
            method: f.method, action: f.getAttribute('action'), role: f.getAttribute('role'),
            text: f.innerText.trim(), csrf: !!f.querySelector('[name=csrfmiddlewaretoken]')}))""")
        assert len(forms) == visitor.locator("form").count() == 3, forms
        leave = next(f for f in forms if f["method"] == "post")
        search = next(f for f in forms if f["role"] == "search")
        timebar = next(f for f in forms if f not in (leave, search))
        assert (leave["method"], leave["action"], leave["text"]) == ("post", "/s/leave/", "Leave shared view")
        assert (search["method"], search["action"], search["role"], search["csrf"]) == ("get", None, "search", False)
        assert (timebar["method"], timebar["action"], timebar["csrf"]) == ("get", "/leases/", False)
        assert [f for f in forms if f["method"] != "get"] == [leave]
        # (and the rows' copy buttons, which copy a name to the clipboard: nothing written)
        buttons = [b.strip() for b in visitor.get_by_role("button").all_inner_texts() if b.strip() not in ("Copy", "ns/name")]
        assert sorted(buttons) == ["Apply", "Go", "Leave shared view"], buttons
        # (and the column headers' sort links: this view, in another order)
        sorts = visitor.locator("thead a.sort").evaluate_all("els => els.map(e => e.getAttribute('href'))")
        assert len(sorts) == 8 and all(h.startswith(f"?namespace={ns}&sort=") for h in sorts), sorts   # 7 columns + Age
        links = " | ".join(visitor.get_by_role("link").all_inner_texts())
        assert not WRITE_WORDS.search(links), links
        assert visitor.locator("nav[aria-label=Main]").count() == 0
        assert visitor.locator("a[href*='/new/'], a[href*='/edit/'], a[href*='/delete/'], "
                               "a[href*='/release/'], a[href*='/yaml/']").count() == 0
        csrf = visitor.input_value("form[action='/s/leave/'] input[name=csrfmiddlewaretoken]")

        # --- Nothing around it is reachable (a second tab of the same visitor) ----------
        probe = visitor_ctx.new_page()
        # Inside its scope: the lease's detail page, read-only too.
        resp = probe.goto(f"{base}/leases/{ns}/leader/")
        assert resp.status == 200
        expect(probe.locator("#detail .facts")).to_contain_text("node-b")
        # Leave shared view and the time bar (a GET of this page as of another moment), nothing else
        assert probe.locator("form").count() == 2
        assert probe.locator("form[method=post]").count() == 1 and probe.locator("form[data-timebar]").count() == 1
        # (Download YAML is a read: the YAML the page shows, as a file.)
        assert [t.strip() for t in probe.get_by_role("link", name=re.compile("edit|delete|release|yaml", re.I))
                .all_inner_texts()] == ["Download YAML"]
        assert probe.get_by_role("button", name=re.compile("edit|delete|release", re.I)).count() == 0

        # Without a namespace filter the list is still only the link's namespace.
        resp = probe.goto(f"{base}/leases/")
        assert resp.status == 200
        expect(probe.locator("#items > tr")).to_have_count(2)
        assert "node-secret" not in probe.content()

        secrets_by_path = {
            "/jobs/": "hidden-job",
            f"/jobs/?namespace={ns}": "hidden-job",
            f"/jobs/{ns}/hidden-job/": "hidden-job",
            "/endpoints/": "hidden-svc",
            f"/endpoints/{ns}/hidden-svc/": "hidden-svc",
            f"/leases/?namespace={other}": "node-secret",
            f"/leases/{other}/stranger/": "node-secret",
            "/leases/new/": 'name="holderIdentity"',
            f"/leases/new/?namespace={ns}": 'name="holderIdentity"',
            f"/leases/{ns}/leader/edit/": 'name="holderIdentity"',
            f"/leases/{ns}/leader/yaml/": "holderIdentity",
            f"/leases/{ns}/leader/delete/": "node-b",
            "/tokens/": "kubeconfig",
            "/share/": "Revoke",
            f"/share/new/?kind=Lease&namespace={ns}": "Create link",
            "/admin/": "Django administration",
            leases_path(ns): "node-b",
            leases_path(ns, "leader"): "node-b",
            jobs_path(ns): "hidden-job",
            "/api/v1/namespaces": "items",
        }
        for path, secret in secrets_by_path.items():
            resp = probe.goto(base + path)
            body = probe.content()
            assert secret not in body, f"{path} showed {secret!r} to a share link"
            assert resp.status in REFUSED, f"{path}: {resp.status}"
            assert probe.locator("main form").count() == 0, f"{path} offered a form"
        # The overview is not part of the view: it sends the visitor back to the shared page.
        probe.goto(base + "/")
        assert probe.url == f"{base}/leases/?namespace={ns}"

        # Websockets: the link's own view opens; another namespace, kind or the overview do not.
        assert _ws_opens(probe, f"/ws/live/?view=leases&namespace={ns}")
        for path in (f"/ws/live/?view=leases&namespace={other}", f"/ws/live/?view=jobs&namespace={ns}",
                     f"/ws/live/?view=lease&namespace={other}&name=stranger", "/ws/live/?view=overview"):
            assert not _ws_opens(probe, path), f"a share link opened {path}"
        probe.close()

        # --- Writes from the visitor's session are refused, and change nothing ----------
        before = api(kube_server, "GET", leases_path(ns, "leader"))
        form = {"csrfmiddlewaretoken": csrf, "holderIdentity": "intruder", "leaseDurationSeconds": "60",
                "resourceVersion": before["metadata"]["resourceVersion"], "confirm": "yes"}
        headers = {"X-CSRFToken": csrf, "Referer": f"{base}/leases/?namespace={ns}", "Origin": base}
        for path in (f"/leases/{ns}/leader/release/", f"/leases/{ns}/leader/edit/",
                     f"/leases/{ns}/leader/delete/", f"/leases/{ns}/leader/yaml/", "/leases/new/",
                     "/share/new/", "/tokens/"):
            resp = visitor.request.post(base + path, form=form, headers=headers, max_redirects=0)
            assert resp.status == 403, f"POST {path}: {resp.status}"
            assert "shared view" in resp.text(), f"POST {path} was not refused as a shared view"
        for method in ("PATCH", "PUT", "DELETE", "POST"):
            target = leases_path(ns) if method == "POST" else leases_path(ns, "leader")
            resp = visitor.request.fetch(base + target, method=method, headers={
                **headers, "Content-Type": "application/merge-patch+json" if method == "PATCH" else "application/json"},
                data='{"spec": {"holderIdentity": "intruder"}}')
            assert resp.status == 403, f"{method} {target}: {resp.status}"
        after = api(kube_server, "GET", leases_path(ns, "leader"))
        assert after["spec"]["holderIdentity"] == "node-b"
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        names = [o["metadata"]["name"] for o in api(kube_server, "GET", leases_path(ns))["items"]]
        assert sorted(names) == ["leader", "standby"]
        # The refusals did not end the shared view: it is still live.
        expect(visitor.locator("#live-status")).to_have_text("Live")
        assert_not_reloaded(visitor)

        # --- The editor revokes it: the open page learns at once -------------------------
        editor.goto(base + "/share/")
        editor.get_by_role("button", name=f"Revoke {label}").click()
        editor.wait_for_url(base + "/share/")
        expect(editor.locator(".notice")).to_contain_text("Revoked")
        listed = editor.locator("tbody tr", has_text=label)
        expect(listed.locator(".badge")).to_have_text("revoked")
        expect(listed.locator("td").nth(4)).not_to_contain_text("never")     # its last use is recorded
        assert listed.get_by_role("button").count() == 0                     # nothing left to revoke

        expect(visitor.locator("main h1")).to_have_text("Link no longer valid")
        expect(visitor.locator("main")).to_contain_text("revoked")
        expect(visitor.locator("#live-status")).to_have_attribute("data-state", "off")
        expect(visitor.locator(dom("lease", ns, "leader"))).to_have_count(0)   # its data is gone
        assert_not_reloaded(visitor)
        # Not live any more: its socket is closed, and a later write does not reach it - by the
        # time that write has reached a page still live on the same view (the editor's).
        sockets = visitor.evaluate("window.__kdSockets.map(s => s.readyState)")
        assert sockets and set(sockets) == {3}, f"the shared view's sockets: {sockets}"
        watching = editor_ctx.new_page()
        open_live(watching, f"{base}/leases/?namespace={ns}")
        api(kube_server, "PATCH", leases_path(ns, "leader"), {"spec": {"holderIdentity": "node-late"}}, merge=True)
        expect(watching.locator(dom("lease", ns, "leader") + " .holder")).to_have_text("node-late")
        assert "node-late" not in visitor.content()
        assert visitor.evaluate("window.__kdSockets.map(s => s.readyState)") == sockets   # none opened since

        # A reload answers 410; so does opening the link again.
        resp = visitor.reload()
        assert resp.status == 410
        expect(visitor.locator("main")).to_contain_text("This share link has been revoked.")
        assert "node-b" not in visitor.content() and "node-late" not in visitor.content()
        again = visitor_ctx.new_page()
        resp = again.goto(url)
        assert resp.status == 410
        assert "node-late" not in again.content()
        again.close()
    finally:
        editor_ctx.close()
        visitor_ctx.close()
    assert not editor_errors and not visitor_errors, f"JavaScript errors: {editor_errors + visitor_errors}"

"""Editing a followed cluster in a real browser: a second kubedash is the upstream, the server
under test follows it (its real follower, the maintenance leader's informers) in own-credentials
mode, and a signed-in editor changes a Lease through the form. The page after "Save" shows the
change at once, keeps showing it while the follower's own events arrive (no flicker back), the
upstream has it, and axe finds nothing wrong with the form, the detail page and the Clusters
page. The "Save → mirrored page" latency is printed (bench/follow_writes.py measures it)."""
from __future__ import annotations

import time

import pytest

from conftest import FOLLOWER_ENV, eventually, served, server_env
from chromium import WAIT_MS, axe_violations, log_in

LEASES = "/apis/coordination.k8s.io/v1/namespaces/team/leases"
PASSWORD = "follow-writes-pw-1"


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    up_dir, here_dir = tmp_path_factory.mktemp("upstream"), tmp_path_factory.mktemp("follower")
    with served(up_dir) as up, served(here_dir, env=server_env(here_dir, **FOLLOWER_ENV)) as here:
        # prod, own-credentials; alice (an editor) with her kubeconfig for it
        status, _, body = up.request("POST", LEASES, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                      "metadata": {"name": "web", "namespace": "team"},
                                                      "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})
        assert status == 201, body
        follower = up.kubeconfig(here_dir / "follower.kubeconfig", "follower", "viewer")
        mine = up.kubeconfig(here_dir / "alice.kubeconfig", "alice", "editor")
        here.manage("follow", "add", "prod", "--kubeconfig", str(follower), "--writes", "own-credentials")
        here.manage("shell", "-c", (
            "from pathlib import Path\n"
            "from dashboard.access.tokens import ensure_user\n"
            "from dashboard.follow import following\n"
            "from dashboard.follow.models import Cluster\n"
            f"u = ensure_user('alice', 'editor'); u.set_password({PASSWORD!r}); u.save()\n"
            f"following.save_user_credentials(Cluster.objects.get(name='prod'), u, Path({str(mine)!r}).read_text())\n"))
        eventually(lambda: "live" in here.manage("follow", "list"), 60, "prod to be followed")
        yield up, here


def test_edit_a_followed_lease_in_the_browser(servers, chromium):
    from playwright.sync_api import expect

    up, here = servers
    expect.set_options(timeout=WAIT_MS)
    ctx = chromium.new_context(viewport={"width": 1280, "height": 900}, bypass_csp=True)   # (axe is injected)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    base = here.http_url
    log_in(page, base, "alice", PASSWORD)

    page.goto(f"{base}/leases/team/web/?cluster=prod")
    expect(page.locator("#detail")).to_contain_text("a")
    page.get_by_role("link", name="Edit", exact=True).click()
    page.wait_for_url(f"{base}/leases/team/web/edit/?cluster=prod")
    assert axe_violations(page) == [], "the edit form of a followed lease"
    page.get_by_label("Holder identity").fill("from-the-browser")
    started = time.monotonic()
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_url(f"{base}/leases/team/web/?cluster=prod")
    expect(page.locator("#detail")).to_contain_text("from-the-browser")
    print(f"\nSave -> mirrored page shows the change: {(time.monotonic() - started) * 1000:.0f} ms")
    expect(page.get_by_role("status").filter(has_text="Lease team/web saved.")).to_have_count(1)
    assert axe_violations(page) == [], "a followed lease's page after a save"

    # Upstream has it; the follower's own events for it arrive and the page never goes back: each
    # state it shows, up to a later upstream change's (a label), has the new holder.
    status, _, body = up.request("GET", f"{LEASES}/web")
    assert status == 200 and body["spec"]["holderIdentity"] == "from-the-browser"
    page.evaluate("""() => {
        window.__kdShown = [];
        new MutationObserver(() => {
            const detail = document.querySelector('#detail');
            if (detail) window.__kdShown.push(detail.textContent);
        }).observe(document.body, {subtree: true, childList: true, characterData: true});
    }""")
    status, _, body = up.request("PATCH", f"{LEASES}/web", {"metadata": {"labels": {"later": "seen"}}},
                                 content_type="application/merge-patch+json")
    assert status == 200, body
    expect(page.locator("#detail")).to_contain_text("later: seen")
    shown = page.evaluate("window.__kdShown")
    assert shown and all("from-the-browser" in text for text in shown), shown

    page.goto(f"{base}/clusters/prod/credentials/")
    expect(page.locator("h1")).to_have_text("Your credentials for prod")
    assert axe_violations(page) == [], "a user's credentials page"
    ctx.close()
    assert not errors, f"JavaScript errors on the page: {errors}"

"""Row and bulk actions on the list pages (web/bulk_views.py): confirm, act, undo, permissions."""
from __future__ import annotations

import re

import pytest

from chromium import api, axe_violations, jobs_path
from dashboard.kube.errors import ApiError
from manifests import job
from page_helpers import create_link, visitor


def _jobs():
    from dashboard.kube.registry import by_kind
    return by_kind("Job")


@pytest.fixture
def two_jobs(db):
    from dashboard.kube import store
    for name in ("a", "b"):
        store.create(_jobs(), "default", job(name))


def _suspended(name):
    from dashboard.kube import store
    return bool(store.get(_jobs(), "default", name)["spec"].get("suspend"))


def _messages(client):
    return client.get("/jobs/").content.decode()


def test_list_has_checkboxes_and_bar_for_editors_only(two_jobs, login):
    html = login("admin").get("/jobs/").content.decode()
    assert 'action="/jobs/bulk/"' in html and 'value="default/a"' in html
    assert 'aria-label="Select all jobs on this page"' in html and 'value="suspend">Suspend' in html
    viewer = login("viewer").get("/jobs/").content.decode()
    assert "/jobs/bulk/" not in viewer and "data-bulk-all" not in viewer and "list stack-phone jobs-table bulk" not in viewer


def test_confirm_then_suspend_then_undo(two_jobs, login):
    c = login("admin")
    post = {"action": "suspend", "selected": ["default/a", "default/b"], "next": "/jobs/?sort=name"}
    confirm = c.post("/jobs/bulk/", post)
    assert confirm.status_code == 200
    page = confirm.content.decode()
    assert "Suspend 2 jobs?" in page and "default/a" in page and "default/b" in page
    assert not _suspended("a") and not _suspended("b")          # nothing changes before the confirmation
    done = c.post("/jobs/bulk/", {**post, "confirm": "1"})
    assert done.status_code == 302 and done["Location"] == "/jobs/?sort=name"
    assert _suspended("a") and _suspended("b")
    html = _messages(c)
    assert "2 jobs suspended: default/a, default/b." in html
    undo_id = re.search(r'name="undo" value="([^"]+)"', html).group(1)
    c.post("/jobs/bulk-undo/", {"undo": undo_id})
    assert not _suspended("a") and not _suspended("b")
    html = _messages(c)
    assert "Undone: 2 jobs resumed: default/a, default/b." in html and 'name="undo"' not in html
    # An undo happens once.
    c.post("/jobs/bulk-undo/", {"undo": undo_id})
    assert "Nothing to undo" in _messages(c)


def test_delete_reports_a_vanished_object_and_undo_recreates(two_jobs, login):
    from dashboard.kube import store
    c = login("admin")
    uid = store.get(_jobs(), "default", "a")["metadata"]["uid"]
    confirm = c.post("/jobs/bulk/", {"action": "delete", "selected": ["default/a", "default/gone"]})
    assert "new uid and resourceVersion" in confirm.content.decode()
    done = c.post("/jobs/bulk/", {"action": "delete", "selected": ["default/a", "default/gone"], "confirm": "1"})
    assert done.status_code == 302
    html = _messages(c)
    assert "1 job deleted: default/a." in html and "Not deleted: default/gone: it no longer exists" in html
    with pytest.raises(ApiError):
        store.get(_jobs(), "default", "a")
    undo_id = re.search(r'name="undo" value="([^"]+)"', html).group(1)
    c.post("/jobs/bulk-undo/", {"undo": undo_id})
    again = store.get(_jobs(), "default", "a")
    assert again["metadata"]["uid"] != uid
    assert again["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"] == again["metadata"]["uid"]
    assert "created again (new uid and resourceVersion): default/a" in _messages(c)


def test_release_has_no_undo_and_says_so(db, login):
    from dashboard.kube import store
    from dashboard.kube.registry import by_kind
    from manifests import lease
    store.create(by_kind("Lease"), "default", lease("l1", holder="pod-1", duration=3600))
    c = login("admin")
    confirm = c.post("/leases/bulk/", {"action": "release", "selected": ["default/l1"]}).content.decode()
    assert "cannot be undone" in confirm and "You can undo" not in confirm
    c.post("/leases/bulk/", {"action": "release", "selected": ["default/l1"], "confirm": "1"})
    assert not store.get(by_kind("Lease"), "default", "l1")["spec"].get("holderIdentity")
    html = c.get("/leases/").content.decode()
    assert "1 lease released: default/l1." in html and 'name="undo"' not in html


def test_viewers_and_other_namespaces_get_403(two_jobs, login):
    post = {"action": "delete", "selected": ["default/a"], "confirm": "1"}
    viewer = login("viewer")
    assert viewer.post("/jobs/bulk/", post).status_code == 403
    assert viewer.post("/jobs/bulk/", {}).status_code == 403            # refused before anything is read
    assert viewer.post("/jobs/bulk-undo/", {"undo": "x"}).status_code == 403
    limited = login("editor", namespaces=["other"], username="limited")
    denied = limited.post("/jobs/bulk/", post)
    assert denied.status_code == 403 and "“default”" in denied.content.decode()
    from dashboard.kube import store
    assert store.get(_jobs(), "default", "a")


def test_share_link_visitors_see_no_checkboxes_and_get_403(db, login):
    from dashboard.kube import store
    from dashboard.kube.registry import by_kind
    from manifests import lease
    store.create(by_kind("Lease"), "team-a", lease("web-1", ns="team-a", labels={"app": "web"}))
    _, token = create_link(login("editor", username="sharer"))
    guest = visitor(token)
    page = guest.get("/leases/?namespace=team-a")
    assert page.status_code == 200 and "web-1" in page.content.decode()
    assert "/leases/bulk/" not in page.content.decode()
    refused = guest.post("/leases/bulk/", {"action": "delete", "selected": ["team-a/web-1"], "confirm": "1"})
    assert refused.status_code == 403
    assert store.get(by_kind("Lease"), "team-a", "web-1")


def test_endpoints_cards_have_checkboxes_for_editors_delete_and_undo(db, login):
    from dashboard.kube import store
    from dashboard.kube.registry import by_kind
    from manifests import endpoints
    eps = by_kind("Endpoints")
    for name in ("web", "api"):
        store.create(eps, "default", endpoints(name, ips=("10.0.0.1", "10.0.0.2"), not_ready=("10.0.0.3",)))
    c = login("admin")
    html = c.get("/endpoints/").content.decode()
    assert 'action="/endpoints/bulk/"' in html and 'aria-label="Select default/web"' in html
    assert "data-bulk-all" in html and 'class="cards bulk"' in html
    viewer = login("viewer").get("/endpoints/").content.decode()
    assert "/endpoints/bulk/" not in viewer and "data-bulk-all" not in viewer and 'class="cards bulk"' not in viewer
    post = {"action": "delete", "selected": ["default/web", "default/api"]}
    assert "Delete 2 Endpoints" in c.post("/endpoints/bulk/", post).content.decode()
    assert c.post("/endpoints/bulk/", {**post, "confirm": "1"}).status_code == 302
    for name in ("web", "api"):
        with pytest.raises(ApiError):
            store.get(eps, "default", name)
    html = c.get("/endpoints/").content.decode()
    assert "2 Endpoints objects deleted: default/web, default/api." in html or "2 Endpoints objects deleted: default/api, default/web." in html
    undo_id = re.search(r'name="undo" value="([^"]+)"', html).group(1)
    c.post("/endpoints/bulk-undo/", {"undo": undo_id})
    again = store.get(eps, "default", "web")
    assert [a["ip"] for a in again["subsets"][0]["addresses"]] == ["10.0.0.1", "10.0.0.2"]
    assert [a["ip"] for a in again["subsets"][0]["notReadyAddresses"]] == ["10.0.0.3"]


def test_bad_posts_are_explained_not_500(two_jobs, login):
    c = login("admin")
    assert c.post("/jobs/bulk/", {"action": "explode", "selected": ["default/a"]}).status_code == 302
    assert "Choose an action" in _messages(c)
    assert c.post("/jobs/bulk/", {"action": "suspend"}).status_code == 302
    assert "Select the jobs to suspend first" in _messages(c)
    # Release is a Lease action, not a Job one.
    c.post("/jobs/bulk/", {"action": "release", "selected": ["default/a"], "confirm": "1"})
    assert "Choose an action" in _messages(c)


# ---------------------------------------------------------------------------------------------
# In a browser: select two Jobs, suspend, undo; axe finds nothing on the list or the confirmation.


def test_browser_select_two_jobs_suspend_and_undo(wide_page, kube_server, ns):
    from playwright.sync_api import expect

    page = wide_page
    for name in ("one", "two", "three"):
        api(kube_server, "POST", jobs_path(ns), job(name=name, ns=ns))

    def suspended(name):
        return bool(kube_server.request("GET", jobs_path(ns, name))[2]["spec"].get("suspend"))

    page.goto(f"{kube_server.http_url}/jobs/?namespace={ns}&sort=name")
    bar = page.locator("[data-bulk-bar]")
    expect(bar).to_be_hidden()
    page.get_by_role("checkbox", name=f"Select {ns}/one").check()
    page.get_by_role("checkbox", name=f"Select {ns}/two").check()
    expect(bar).to_be_visible()
    expect(page.locator("[data-bulk-count]")).to_have_text("2 selected:")
    assert axe_violations(page) == []
    bar.get_by_role("button", name="Suspend…").click()
    expect(page.get_by_role("heading", name="Suspend 2 jobs?")).to_be_visible()
    assert axe_violations(page) == []
    page.get_by_role("button", name="Suspend 2 jobs").click()
    expect(page.locator(".flash-success")).to_contain_text(f"2 jobs suspended: {ns}/one, {ns}/two.")
    assert suspended("one") and suspended("two") and not suspended("three")
    page.get_by_role("button", name=re.compile("Undo the last suspend")).click()
    expect(page.locator(".flash-success")).to_contain_text(f"Undone: 2 jobs resumed: {ns}/one, {ns}/two.")
    assert not suspended("one") and not suspended("two")
    assert axe_violations(page) == []


def test_browser_select_endpoints_cards_and_delete(wide_page, kube_server, ns):
    from playwright.sync_api import expect

    from manifests import endpoints
    page = wide_page
    for name in ("alpha", "beta", "gamma"):
        api(kube_server, "POST", f"/api/v1/namespaces/{ns}/endpoints", endpoints(name, ns=ns))
    page.goto(f"{kube_server.http_url}/endpoints/?namespace={ns}")
    bar = page.locator("[data-bulk-bar]")
    expect(bar).to_be_hidden()
    page.get_by_role("checkbox", name=f"Select {ns}/alpha").check()
    page.get_by_role("checkbox", name=f"Select {ns}/gamma").check()
    expect(page.locator("[data-bulk-count]")).to_have_text("2 selected:")
    assert axe_violations(page) == []
    page.get_by_role("checkbox", name="Select all Endpoints objects on this page").check()
    expect(page.locator("[data-bulk-count]")).to_have_text("3 selected:")
    page.get_by_role("checkbox", name=f"Select {ns}/beta").uncheck()
    bar.get_by_role("button", name="Delete…").click()
    expect(page.get_by_role("heading", name=re.compile("Delete 2 Endpoints"))).to_be_visible()
    page.get_by_role("button", name=re.compile("^Delete 2")).click()
    expect(page.locator(".flash-success")).to_contain_text("2 Endpoints objects deleted")
    names = lambda: {o["metadata"]["name"] for o in kube_server.request(  # noqa: E731
        "GET", f"/api/v1/namespaces/{ns}/endpoints")[2]["items"]}
    assert names() == {"beta"}
    assert axe_violations(page) == []
    page.get_by_role("button", name=re.compile("Undo the last delete")).click()
    expect(page.locator(".flash-success")).to_contain_text("created again")
    assert names() == {"alpha", "beta", "gamma"}


def test_a_detail_pages_delete_can_be_undone_from_the_list(two_jobs, login):
    """Delete on an object's own page keeps the object for the list page's Undo, as a bulk
    Delete does: one click creates it again (new uid)."""
    from dashboard.kube import store
    c = login("admin")
    uid = store.get(_jobs(), "default", "a")["metadata"]["uid"]
    page = c.get("/jobs/default/a/delete/").content.decode()
    assert "offers an undo" in page and "cannot be undone" not in page
    done = c.post("/jobs/default/a/delete/", {"uid": uid})
    assert done.status_code == 302 and done["Location"] == "/jobs/?namespace=default"
    with pytest.raises(ApiError):
        store.get(_jobs(), "default", "a")
    html = c.get(done["Location"]).content.decode()
    assert "Job default/a deleted. Undo below creates it again." in html
    assert "Undo the last delete (1 job)" in html
    undo_id = re.search(r'name="undo" value="([^"]+)"', html).group(1)
    c.post("/jobs/bulk-undo/", {"undo": undo_id})
    again = store.get(_jobs(), "default", "a")
    assert again["metadata"]["uid"] != uid
    assert "created again (new uid and resourceVersion): default/a" in _messages(c)


def test_a_finished_job_is_not_offered_suspend(login):
    """A failed (or complete) Job has nothing to suspend: its page offers no Suspend, a bulk
    Suspend says why it left it alone, and the action refuses it (409)."""
    from dashboard.batch.actions import do_suspend_job
    from dashboard.kube import store
    from dashboard.kube.errors import ApiError

    jobs = _jobs()
    store.create(jobs, "default", job("broken"))
    store.create(jobs, "default", job("busy"))

    def failed(obj):
        obj["status"] = {"failed": 1, "startTime": "2026-01-01T00:00:00Z", "conditions": [
            {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded",
             "lastTransitionTime": "2026-01-01T00:01:00Z"},
            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
             "lastTransitionTime": "2026-01-01T00:01:00Z"}]}
        return obj
    store.update(jobs, "default", "broken", failed, subresource="status")
    c = login("admin")
    page = c.get("/jobs/default/broken/").content.decode()
    assert "Failed" in page and ">Suspend</button>" not in page
    assert ">Suspend</button>" in c.get("/jobs/default/busy/").content.decode()
    with pytest.raises(ApiError) as err:
        do_suspend_job("default", "broken", suspend=True)
    assert err.value.code == 409 and "has finished (Failed)" in err.value.message
    c.post("/jobs/bulk/", {"action": "suspend", "selected": ["default/broken", "default/busy"], "next": "/jobs/",
                           "confirm": "1"})
    done = _messages(c)
    assert "1 job suspended: default/busy." in done
    assert "Not suspended: default/broken" in done and "has finished (Failed)" in done

"""Issue 14's page defects, through the Django test client: share links keep the name search,
the kubeconfig download points at the real HTTPS port, one-time secrets come with a Copy
button, suspended jobs, tab titles, the 404 page's header."""
from __future__ import annotations

import re
from html import unescape

from django.test import Client

from dashboard.kube import store
from dashboard.kube.registry import by_kind
from manifests import job, lease


def text(resp) -> str:
    return resp.content.decode()


def title(resp) -> str:
    return unescape(re.search(r"<title>(.*?)</title>", text(resp), re.S).group(1))


def test_share_this_view_keeps_the_name_search(login):
    store.create(by_kind("Lease"), "team-a", lease("web-1", ns="team-a"))
    editor = login("editor")
    page = text(editor.get("/leases/?namespace=team-a&q=web"))
    assert 'href="/share/new/?kind=Lease&amp;namespace=team-a&amp;q=web"' in page
    form = editor.get("/share/new/?kind=Lease&namespace=team-a&q=web")
    assert 'name="q" value="web"' in text(form) and "names containing “web”" in text(form)
    r = editor.post("/share/new/", {"kind": "Lease", "namespace": "team-a", "labelSelector": "", "q": "web",
                                    "label": "web leases", "expiry": "1d"})
    assert r.status_code == 200
    url = re.search(r'value="(http://[^"]+/s/[^"]+)"', text(r)).group(1)
    path = unescape(url).split("testserver", 1)[1]
    assert path.endswith("/?q=web")
    opened = Client().get(path)
    assert opened.status_code == 302 and opened["Location"] == "/leases/?namespace=team-a&q=web"


def test_one_time_secrets_have_a_copy_button(login):
    r = login("editor").post("/tokens/", {"name": "ci"})
    html = text(r)
    assert re.search(r'<input id="token-value"[^>]*readonly[^>]*class="mono"', html)
    assert '<button type="button" class="primary" data-copy="token-value">Copy</button>' in html
    assert 'id="token-value-copied" role="status"' in html


def test_kubeconfig_points_at_the_tls_port_serve_listens_on(login, monkeypatch):
    client = login("viewer")
    monkeypatch.setenv("KUBEDASH_TLS_PORT", "9555")
    page = text(client.get("/tokens/", HTTP_HOST="localhost:8000"))
    assert 'value="https://localhost:9555"' in page
    monkeypatch.delenv("KUBEDASH_TLS_PORT")
    assert 'value="https://localhost:8443"' in text(client.get("/tokens/", HTTP_HOST="localhost:8000"))


def test_404_page_keeps_the_header_user(login):
    r = login("editor", username="dash-ed").get("/leases/default/nope/")
    assert r.status_code == 404
    assert "<strong>dash-ed</strong>" in text(r) and "Log out" in text(r)
    assert title(r) == "Not found — kubedash"
    anonymous = Client().get("/no/such/page/")
    assert anonymous.status_code == 404 and "Log out" not in text(anonymous)


def test_tab_titles_include_the_filter(login):
    c = login("viewer")
    assert title(c.get("/leases/?namespace=demo")) == "Leases · namespace demo — kubedash"
    assert title(c.get("/jobs/?namespace=demo&labelSelector=app%3Dweb&q=x")) == \
        "Jobs · namespace demo · app=web · names containing “x” — kubedash"
    assert title(c.get("/endpoints/")) == "Endpoints — kubedash"
    assert title(c.get("/?namespace=demo")) == "Overview · namespace demo — kubedash"


def test_suspended_jobs_show_and_count_as_suspended(login):
    jobs = by_kind("Job")
    store.create(jobs, "demo", {**job("paused", ns="demo"), "spec": {**job("paused", ns="demo")["spec"],
                                                                     "suspend": True}})
    store.create(jobs, "demo", job("busy", ns="demo"))
    c = login("viewer")
    page = text(c.get("/jobs/?namespace=demo"))
    row = re.search(r'<tr id="job-demo--paused"[^>]*>.*?</tr>', page, re.S).group(0)
    assert 'class="idle"' in row and '<span class="badge">Suspended</span>' in row
    totals = re.search(r'<dl id="list-totals".*?</dl>', page, re.S).group(0)
    assert "<strong>2 jobs</strong>" in totals and "1&nbsp;running" in totals and "1&nbsp;suspended" in totals
    overview = text(c.get("/?namespace=demo"))
    assert "1&nbsp;running" in overview and "1&nbsp;suspended" in overview
    detail = text(c.get("/jobs/demo/paused/"))
    assert '<span class="badge">Suspended</span>' in detail


def test_actions_of_a_deleted_object_are_disabled(login):
    leases = by_kind("Lease")
    store.create(leases, "default", lease("gone"))
    c = login("editor")
    live = text(c.get("/leases/default/gone/actions/?part=toolbar"))
    assert 'href="/leases/default/gone/edit/"' in live and "disabled" not in live
    store.delete(leases, "default", "gone")
    # What the toolbar re-fetches after the live push that said "deleted".
    r = c.get("/leases/default/gone/actions/?part=toolbar")
    assert r.status_code == 200
    html = text(r)
    assert "<fieldset disabled" in html and 'href="/leases/default/gone/edit/"' not in html
    assert "Deleted: nothing left to change." in html and "Release" not in html


def test_release_and_suspend_ask_first(login):
    store.create(by_kind("Lease"), "default", lease("held", holder="node-a"))
    store.create(by_kind("Job"), "default", job("j"))
    c = login("editor")
    assert 'data-confirm="Release lease held?' in text(c.get("/leases/default/held/"))
    assert 'data-confirm="Suspend job j?' in text(c.get("/jobs/default/j/"))


def test_pages_say_where_they_are_and_go_back(login):
    leases = by_kind("Lease")
    for i in range(7):
        store.create(leases, "pg", lease(f"l{i}", ns="pg"))
    c = login("viewer")

    def links(html):
        return {rel: unescape(href) for href, rel in re.findall(r'<a class="button" href="([^"]+)" rel="(\w+)"', html)}

    first = text(c.get("/leases/?namespace=pg&limit=3"))
    assert re.search(r"Rows <strong>1–3</strong> of <strong>7</strong>", first)
    assert "prev" not in links(first)
    second = text(c.get("/leases/" + links(first)["next"]))
    assert re.search(r"Rows <strong>4–6</strong> of <strong>7</strong>", second)
    third = text(c.get("/leases/" + links(second)["next"]))
    assert re.search(r"Rows <strong>7–7</strong> of <strong>7</strong>", third) and "next" not in links(third)
    back = text(c.get("/leases/" + links(third)["prev"]))
    assert re.findall(r'<tr id="lease-pg--(l\d)"', back) == ["l3", "l4", "l5"]
    assert re.findall(r'<tr id="lease-pg--(l\d)"', text(c.get("/leases/" + links(back)["prev"]))) == ["l0", "l1", "l2"]
    # With a label selector and a name search, the count is of what the view matches.
    sel = text(c.get("/leases/?namespace=pg&limit=2&q=l&labelSelector=app%21%3Dnone"))
    assert re.search(r"Rows <strong>1–2</strong> of <strong>7</strong>", sel)
    # The page size is a control of the filters form.
    assert re.search(r'<select id="f-limit" name="limit" data-default="100">.*<option value="50">50</option>', first, re.S)
    assert '<option value="3" selected>3</option>' in first


def test_the_search_links_to_every_match_of_a_kind(login):
    leases = by_kind("Lease")
    for i in range(60):
        store.create(leases, "srch", lease(f"match-{i:02d}", ns="srch"))
    store.create(by_kind("Job"), "srch", job("match-job", ns="srch"))
    c = login("viewer")
    page = unescape(text(c.get("/search/?q=match")))
    assert "(60, the first 50 shown)" in page
    link = re.search(r'<a href="([^"]+)">Show all 60 leases matching “match”</a>', page).group(1)
    assert link == "/search/?q=match&kind=Lease"
    assert "Show all 1 job" not in page   # every match of that kind is shown already
    everything = unescape(text(c.get(link)))
    assert len(re.findall(r'<a href="/leases/srch/match-\d\d/">', everything)) == 60
    assert "match-job" not in everything and "Show all" not in everything
    assert '<a href="/search/?q=match">Search all kinds</a>' in everything


def test_a_deleted_objects_page_says_when_shows_its_yaml_and_creates_it_again(login):
    leases = by_kind("Lease")
    store.create(leases, "gone", lease("old-leader", holder="node-q", ns="gone"))
    uid = store.get(leases, "gone", "old-leader")["metadata"]["uid"]
    store.delete(leases, "gone", "old-leader")
    viewer = login("viewer", "del-viewer")
    r = viewer.get("/leases/gone/old-leader/")
    page = unescape(text(r))
    assert r.status_code == 404
    assert "This lease was deleted" in page and "data-ago-since" in page
    assert "holderIdentity: node-q" in page and "Last known YAML" in page
    assert "Create it again" not in page                           # a viewer may not
    assert viewer.get("/leases/gone/never-was/").status_code == 404
    assert "was deleted" not in text(viewer.get("/leases/gone/never-was/"))
    editor = login("editor", "del-editor")
    page = text(editor.get("/leases/gone/old-leader/"))
    assert 'action="/leases/gone/old-leader/restore/"' in page and "Create it again" in page
    assert viewer.post("/leases/gone/old-leader/restore/").status_code == 403
    done = editor.post("/leases/gone/old-leader/restore/")
    assert done.status_code == 302 and done["Location"] == "/leases/gone/old-leader/"
    again = store.get(leases, "gone", "old-leader")
    assert again["spec"]["holderIdentity"] == "node-q" and again["metadata"]["uid"] != uid
    page = text(editor.get("/leases/gone/old-leader/"))
    assert "created again" in page and "was deleted" not in page

"""List pages at scale, through the Django test client: the default page size, column sorting
(server-side, in the URL, composing with filters and paging), accessible sort headers."""
from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client

from dashboard.kube import store
from dashboard.kube.registry import by_kind
from dashboard.web import views
from manifests import endpoints, job, lease


@pytest.fixture
def viewer(login):
    return login("editor", "dash-lists")


def names(resp) -> list[str]:
    """The objects of a list page, in page order (their rows' ids end in --name)."""
    return re.findall(r'<(?:tr|article) id="[a-z]+-[^"]*--([^"]+)"', resp.content.decode())


def plain(resp) -> str:
    """The page's text, tags dropped ("Rows 1–3 of 7")."""
    return unescape(re.sub(r"<[^>]+>", "", resp.content.decode()))


def th(resp, label: str) -> str:
    html = resp.content.decode()
    return re.search(r'<th scope="col"[^>]*>(?:(?!</th>).)*>' + label + r'<span', html, re.S).group(0)


def add_leases(ns: str, specs: dict[str, tuple[str, int]]) -> None:
    for name, (holder, duration) in specs.items():
        store.create(by_kind("Lease"), ns, lease(name, holder=holder, duration=duration, ns=ns))


def test_default_page_size_renders_fast_and_more_is_offered(viewer):
    assert views.PAGE_SIZE == 100
    for i in range(105):
        store.create(by_kind("Lease"), "big", lease(f"l{i:03d}", ns="big"))
    r = viewer.get("/leases/?namespace=big")
    assert len(names(r)) == 100
    html = unescape(r.content.decode())
    assert "Rows 1–100 of 105" in plain(r)
    for size in (50, 100, 500, 1000):
        assert f'<option value="{size}"' in html
    assert len(names(viewer.get("/leases/?namespace=big&limit=1000"))) == 105


def test_sort_by_holder_both_ways_with_aria_sort(viewer):
    add_leases("s1", {"a": ("node-c", 10), "b": ("node-a", 30), "c": ("", 20), "d": ("node-b", 40)})
    r = viewer.get("/leases/?namespace=s1&sort=holder")
    assert names(r) == ["b", "d", "a", "c"]       # no holder sorts last
    assert 'aria-sort="ascending"' in th(r, "Holder")
    assert '?namespace=s1&amp;sort=-holder"' in th(r, "Holder")    # the link asks for the other way
    assert "aria-sort" not in th(r, "Lease") and '?namespace=s1&amp;sort=name"' in th(r, "Lease")
    r = viewer.get("/leases/?namespace=s1&sort=-holder")
    assert names(r) == ["a", "d", "b", "c"]       # ... in either direction
    assert 'aria-sort="descending"' in th(r, "Holder")
    assert '?namespace=s1&amp;sort=holder"' in th(r, "Holder")
    # The default order is (namespace, name), which no single column is: no header claims it.
    r = viewer.get("/leases/?namespace=s1")
    assert names(r) == ["a", "b", "c", "d"]
    assert "aria-sort" not in r.content.decode()
    r = viewer.get("/leases/?namespace=s1&sort=duration")
    assert names(r) == ["a", "c", "b", "d"]
    r = viewer.get("/leases/?namespace=s1&sort=-name")
    assert names(r) == ["d", "c", "b", "a"]


def test_one_address_per_view(viewer):
    """Each setting is one parameter: an address that repeats one (the last wins), leaves one
    empty or spells out a default is sent to the view's one address."""
    add_leases("s2", {"a": ("node-c", 10), "b": ("node-a", 30)})
    for given, canonical in (("namespace=s2&sort=duration&sort=holder", "namespace=s2&sort=holder"),
                             ("sort=&sort=expiry&namespace=s2", "namespace=s2&sort=expiry"),
                             ("namespace=s2&labelSelector=&q=&limit=100&sort=namespace", "namespace=s2"),
                             ("q=%20a%20&namespace=s2&page=1&sort=-age", "namespace=s2&q=a&sort=-age"),
                             ("namespace=s2&continue=&page=2", "namespace=s2")):
        r = viewer.get("/leases/?" + given)
        assert r.status_code == 302 and r["Location"] == "/leases/?" + canonical, (given, r.get("Location"))
    r = viewer.get("/leases/?namespace=s2&sort=holder")
    assert r.status_code == 200 and names(r) == ["b", "a"]
    assert 'aria-sort="ascending"' in th(r, "Holder")
    # The header links are canonical too: the filters, one sort, the first page.
    r = viewer.get("/leases/?namespace=s2&sort=holder&limit=1&page=2")
    assert '?namespace=s2&amp;sort=-holder&amp;limit=1"' in th(r, "Holder")
    assert '?namespace=s2&amp;sort=expiry&amp;limit=1"' in th(r, "Renewal")


def test_sorted_pages_compose_with_paging_and_filters(viewer):
    for i in range(7):
        store.create(by_kind("Lease"), "s3", lease(f"x{i}", holder=f"h{6 - i}", duration=10 + i, ns="s3",
                                                   labels={"team": "red" if i % 2 else "blue"}))
    store.create(by_kind("Lease"), "s3", lease("other", holder="h9", ns="s3"))
    base = "/leases/?namespace=s3&q=x&sort=-duration&limit=3"
    r = viewer.get(base)
    assert names(r) == ["x6", "x5", "x4"]
    html = unescape(r.content.decode())
    assert "Rows 1–3 of 7" in plain(r)
    nxt = re.search(r'href="\?([^"]+)" rel="next"', html).group(1)
    assert "sort=-duration" in nxt and "page=2" in nxt and "q=x" in nxt
    r = viewer.get("/leases/?" + nxt)
    assert names(r) == ["x3", "x2", "x1"]
    html = unescape(r.content.decode())
    assert "Rows 4–6 of 7" in plain(r) and 'rel="prev"' in html
    r = viewer.get(base + "&page=3")
    assert names(r) == ["x0"]
    # A label selector narrows the sorted view too.
    r = viewer.get("/leases/?namespace=s3&labelSelector=team%3Dred&sort=holder")
    assert names(r) == ["x5", "x3", "x1"]
    # The live socket knows the order and the page (its rows are the page's own).
    ws = unescape(re.search(r'ws-connect="([^"]+)"', r.content.decode()).group(1))
    assert "sort=holder" in ws and "page=1" in ws


def test_an_unknown_view_setting_says_so(viewer):
    add_leases("s4", {"b": ("x", 1), "a": ("y", 2)})
    for query, says in (("sort=nonsense", "Sort: “nonsense” is not an order of this list"),
                        ("limit=lots", "Per page: “lots” is not a number"),
                        ("sort=holder&page=0", "Page: “0” is not a number")):
        r = viewer.get(f"/leases/?namespace=s4&{query}")
        assert r.status_code == 400, query
        assert says in unescape(r.content.decode()) and 'role="alert"' in r.content.decode()
        assert names(r) == []
    r = viewer.get("/leases/?namespace=s4&sort=namespace")
    assert r.status_code == 302 and r["Location"] == "/leases/?namespace=s4"


def test_jobs_sort_by_progress_and_status(viewer):
    for name, completions, succeeded in (("j1", 4, 1), ("j2", 2, 2), ("j3", 10, 0)):
        store.create(by_kind("Job"), "s5", job(name, ns="s5", completions=completions))
        store.update(by_kind("Job"), "s5", name, lambda o, s=succeeded: {**o, "status": {"succeeded": s}},
                     subresource="status")
    r = viewer.get("/jobs/?namespace=s5&sort=-progress")
    assert names(r) == ["j2", "j1", "j3"]
    assert 'aria-sort="descending"' in th(r, "Succeeded")
    store.create(by_kind("Job"), "s5", job("j0", ns="s5", suspend=True))
    r = viewer.get("/jobs/?namespace=s5&sort=status")
    assert names(r) == ["j1", "j2", "j3", "j0"]   # Running (ties by name), then Suspended
    assert names(viewer.get("/jobs/?namespace=s5&sort=-status")) == ["j0", "j1", "j2", "j3"]


def test_endpoints_cards_sort_from_the_menu(viewer):
    store.create(by_kind("Endpoints"), "s6", endpoints("one", ns="s6", ips=("10.0.0.1",), not_ready=("10.0.0.2",)))
    store.create(by_kind("Endpoints"), "s6", endpoints("two", ns="s6", ips=("10.0.0.1",),
                                                       not_ready=("10.0.0.2", "10.0.0.3", "10.0.0.4")))
    store.create(by_kind("Endpoints"), "s6", endpoints("zero", ns="s6", ips=("10.0.0.1",)))
    r = viewer.get("/endpoints/?namespace=s6&sort=-not_ready")
    assert names(r) == ["two", "one", "zero"]
    assert '<option value="-not_ready" selected>' in r.content.decode()


# ---------------------------------------------------------------------------------------------
# Search across kinds


def sections(resp) -> dict[str, list[str]]:
    """Search results: kind title -> the names found."""
    html = resp.content.decode()
    out = {}
    for title, body in re.findall(r'<h2 id="search-[a-z]+-h">(\w+) .*?</h2>(.*?)</section>', html, re.S):
        out[title] = re.findall(r'<th scope="row"><a href="[^"]+">([^<]+)</a>', body)
    return out


@pytest.fixture
def cluster(db):
    store.create(by_kind("Lease"), "shop", lease("checkout-leader", holder="pod-web-7", ns="shop"))
    store.create(by_kind("Lease"), "ops", lease("web-lock", holder="node-a", ns="ops"))
    store.create(by_kind("Endpoints"), "shop", endpoints("cart", ns="shop", labels={"app": "web"}))
    store.create(by_kind("Job"), "web-batch", job("nightly", ns="web-batch"))
    store.create(by_kind("Job"), "ops", job("backup", ns="ops"))


def test_search_across_kinds_names_namespaces_labels_holders(viewer, cluster):
    r = viewer.get("/search/?q=web")
    assert r.status_code == 200
    assert sections(r) == {"Leases": ["web-lock", "checkout-leader"], "Endpoints": ["cart"], "Jobs": ["nightly"]}
    html = r.content.decode()
    assert "holder pod-web-7" in html and "label app=web" in html and "namespace" in html
    assert "4 objects match" in unescape(re.sub(r"<[^>]+>", "", html))
    assert sections(viewer.get("/search/?q=app%3Dweb")) == {"Leases": [], "Endpoints": ["cart"], "Jobs": []}
    assert sections(viewer.get("/search/?q=BACKUP"))["Jobs"] == ["backup"]
    assert sections(viewer.get("/search/?q=zzz-nothing")) == {"Leases": [], "Endpoints": [], "Jobs": []}


def test_search_respects_the_viewers_namespaces(login, cluster):
    c = login("viewer", "shop-only", namespaces=["shop"])
    assert sections(c.get("/search/?q=web")) == {"Leases": ["checkout-leader"], "Endpoints": ["cart"], "Jobs": []}


def test_the_header_search_box_is_on_every_page(viewer, cluster):
    for path in ("/", "/leases/", "/jobs/shop/nightly/".replace("shop", "web-batch")):
        html = viewer.get(path).content.decode()
        assert 'action="/search/"' in html and 'id="site-q"' in html, path


def test_a_shared_view_cannot_search_beyond_its_page(login, cluster):
    editor = login("editor", "dash-sharer")
    r = editor.post("/share/new/", {"kind": "Lease", "namespace": "shop", "labelSelector": "", "q": "",
                                    "label": "shop leases", "expiry": "1d"})
    url = re.search(r'value="(http://[^"]+/s/[^"]+)"', r.content.decode()).group(1)
    visitor = Client()
    assert visitor.get(unescape(url).split("testserver", 1)[1]).status_code == 302
    page = visitor.get("/leases/?namespace=shop").content.decode()
    assert 'id="site-q"' not in page                      # no search box in a shared view
    refused = visitor.get("/search/?q=web")
    assert refused.status_code == 403 and "checkout-leader" not in refused.content.decode()

"""One namespace choice that follows the viewer (issue 41, item 8), through Django's test client:
the menu's links (Overview, each kind, Events), the header's search and cluster switch carry the
namespace chosen on a list, the Overview or search, also from pages that choose none (an object's
page), and an address without `?namespace=` still shows every namespace; the Overview counts the
chosen namespace only; search within a namespace; a namespace-limited user offered only theirs;
and a create form offering the namespaces that exist and asking before it brings a new one into
use ("Create objects in a new namespace 'pyaments'?"), with the form and with YAML."""
from __future__ import annotations

import re
from html import unescape

import pytest

from dashboard.kube import store
from dashboard.kube.registry import by_kind
from manifests import endpoints, job, lease
from page_helpers import field_errors, form_fields, text

pytestmark = pytest.mark.portable

MENU = ("Overview", "Leases", "Endpoints", "Jobs", "Events")


def put(kind: str, obj: dict) -> dict:
    return store.create(by_kind(kind), obj["metadata"]["namespace"], obj).object


@pytest.fixture
def two_namespaces(db):
    """A lease, endpoints and a job in "nav-a"; two leases in "nav-b"."""
    put("Lease", lease("lock", ns="nav-a"))
    put("Endpoints", endpoints("web", ns="nav-a", ips=("10.0.0.1",)))
    put("Job", job("crunch", ns="nav-a"))
    put("Lease", lease("lock", ns="nav-b"))
    put("Lease", lease("other", ns="nav-b"))


def menu(resp) -> dict[str, str]:
    """The main menu's links: {title: href}."""
    nav = re.search(r'<nav aria-label="Main">(.*?)</nav>', text(resp), re.S)
    assert nav, "no main menu"
    return {title: unescape(href) for href, title in re.findall(r'<a href="([^"]*)"[^>]*>([^<]+)</a>', nav.group(1))}


def hidden_namespace(resp, form_class: str) -> str | None:
    """The hidden namespace input of the header's form of that class (None: none)."""
    form = re.search(rf'<form [^>]*class="{form_class}"[^>]*>(.*?)</form>', text(resp), re.S)
    assert form, form_class
    found = re.search(r'<input type="hidden" name="namespace" value="([^"]*)">', form.group(1))
    return found.group(1) if found else None


def options(resp, select_id: str) -> list[str]:
    select = re.search(rf'<select[^>]* id="{select_id}"[^>]*>(.*?)</select>', text(resp), re.S)
    assert select, select_id
    return [unescape(v) for v in re.findall(r'<option value="([^"]*)"', select.group(1))]


def expect_menu(resp, namespace: str, cluster: str = "") -> None:
    links = menu(resp)
    assert set(MENU) <= set(links), links
    paths = {"Overview": "/", "Leases": "/leases/", "Endpoints": "/endpoints/", "Jobs": "/jobs/", "Events": "/events/"}
    for title in MENU:
        query = "&".join(p for p in (f"namespace={namespace}" if namespace else "",
                                     f"cluster={cluster}" if cluster else "") if p)
        assert links[title] == paths[title] + (f"?{query}" if query else ""), (title, links[title])


# ---------------------------------------------------------------------------------------------
# The choice follows the viewer


def test_menu_links_keep_the_namespace_chosen_on_each_page(login, two_namespaces):
    admin = login("admin")
    assert menu(admin.get("/leases/"))["Jobs"] == "/jobs/"   # nothing chosen yet: all namespaces
    # Chosen on every page that chooses: the menu, the header's search and the page's own links.
    for chooser in ("/leases/?namespace=nav-a", "/endpoints/?namespace=nav-a", "/jobs/?namespace=nav-a",
                    "/events/?namespace=nav-a", "/?namespace=nav-a", "/search/?q=lock&namespace=nav-a"):
        admin.get("/jobs/")   # (all namespaces: forget it first)
        page = admin.get(chooser)
        assert page.status_code == 200, chooser
        expect_menu(page, "nav-a")
        assert hidden_namespace(page, "site-search") == "nav-a", chooser
        # From a page that chooses none (an object's page, a form), the menu still keeps it.
        expect_menu(admin.get("/leases/nav-b/other/"), "nav-a")
        expect_menu(admin.get("/jobs/new/"), "nav-a")
    # The Overview's cards link each kind's list in their namespace.
    overview = text(admin.get("/?namespace=nav-a"))
    assert 'href="/leases/?namespace=nav-a"' in overview and 'href="/jobs/?namespace=nav-a"' in overview
    # "All namespaces" is a choice too: the address without a namespace shows (and keeps) all.
    page = admin.get("/endpoints/")
    assert 'id="endpoints-nav-a--web"' in text(page)
    expect_menu(page, "")
    assert hidden_namespace(page, "site-search") is None
    expect_menu(admin.get("/leases/nav-a/lock/"), "")
    # The URL wins: a remembered namespace never narrows an address that names none.
    admin.get("/leases/?namespace=nav-b")
    assert {'id="lease-nav-a--lock"', 'id="lease-nav-b--lock"'} <= set(re.findall(r'id="lease-[^"]+"', text(admin.get("/leases/"))))


def test_a_namespace_that_is_refused_is_not_followed(login, two_namespaces):
    limited = login("viewer", namespaces=["nav-a"])
    expect_menu(limited.get("/leases/?namespace=nav-a"), "nav-a")
    assert limited.get("/leases/?namespace=nav-b").status_code == 403
    assert limited.get("/search/?q=lock&namespace=nav-b").status_code == 403
    assert limited.get("/?namespace=nav-b").status_code == 403
    expect_menu(limited.get("/leases/nav-a/lock/"), "nav-a")   # still the one they may see


def test_overview_counts_the_chosen_namespace_only(login, two_namespaces):
    admin = login("admin")
    everything = text(admin.get("/"))
    assert 'id="ns-nav-a"' in everything and 'id="ns-nav-b"' in everything
    page = text(admin.get("/?namespace=nav-b"))
    assert 'id="ns-nav-b"' in page and 'id="ns-nav-a"' not in page
    totals = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.split('id="overview-totals"')[1].split("</ul>")[0]))
    assert "1 namespaces 2 leases 0 Endpoints objects 0 jobs" in totals, totals
    assert options(admin.get("/?namespace=nav-b"), "f-namespace")[:1] == [""]   # "All namespaces" first
    assert "<title>Overview · namespace nav-b — kubedash</title>" in page


def test_search_within_the_chosen_namespace(login, two_namespaces):
    admin = login("admin")
    everywhere = text(admin.get("/search/?q=lock"))
    assert "/leases/nav-a/lock/" in everywhere and "/leases/nav-b/lock/" in everywhere
    page = admin.get("/search/?q=lock&namespace=nav-b")
    html = text(page)
    assert "/leases/nav-b/lock/" in html and "/leases/nav-a/lock/" not in html
    assert "in namespace <strong>nav-b</strong>" in html and 'href="/search/?q=lock">search all namespaces' in html
    assert options(page, "search-namespace") == ["", "nav-a", "nav-b"]
    assert re.search(r'<option value="nav-b" selected>', html)


def test_the_cluster_and_the_namespace_follow_together(login, transactional_db):
    from dashboard.kube import mirror as kmirror
    from django.utils import timezone

    from dashboard.follow.models import Cluster

    Cluster.objects.create(name="prod", server="https://prod.example:6443", credentials=b"x", state=Cluster.LIVE,
                           heartbeat_at=timezone.now(), last_event_at=timezone.now())
    for rv, (name, namespace) in enumerate((("prod-lease", "pay"), ("elsewhere", "ops")), start=5):
        obj = lease(name, ns=namespace)
        obj["metadata"].update(uid=f"u-{rv}", resourceVersion=str(rv), creationTimestamp="2026-01-02T03:04:05Z")
        kmirror.mirror("prod", [kmirror.Mirrored(by_kind("Lease"), namespace, name, obj)])
    put("Lease", lease("local-lease", ns="pay"))
    admin = login("admin")
    # The Overview's clusters table counts the chosen namespace in every cluster, and links into it.
    prod_row = text(admin.get("/?namespace=pay")).split('id="cluster-prod"')[1].split("</tr>")[0]
    assert 'href="/?namespace=pay&amp;cluster=prod"' in prod_row
    assert 'href="/leases/?namespace=pay&amp;cluster=prod">1<' in prod_row
    assert 'href="/leases/?cluster=prod">2<' in text(admin.get("/")).split('id="cluster-prod"')[1]
    page = admin.get("/leases/?namespace=pay&cluster=prod")
    assert page.status_code == 200 and 'id="lease-pay--prod-lease"' in text(page)
    expect_menu(page, "pay", cluster="prod")
    # Switching cluster keeps the namespace (the switch form posts it along).
    assert hidden_namespace(page, "cluster-switch") == "pay"
    expect_menu(admin.get("/leases/pay/prod-lease/?cluster=prod"), "pay", cluster="prod")


# ---------------------------------------------------------------------------------------------
# Namespace-limited users


def test_a_limited_user_is_offered_only_their_namespaces(login, two_namespaces):
    put("Lease", lease("theirs", ns="nav-c"))
    viewer = login("viewer", namespaces=["nav-a", "nav-b"])
    for url, select in (("/leases/", "f-namespace"), ("/events/", "f-namespace"), ("/", "f-namespace"),
                        ("/search/?q=lock", "search-namespace")):
        assert options(viewer.get(url), select) == ["", "nav-a", "nav-b"], url
    editor = login("editor", namespaces=["nav-a", "team-new"])
    form = editor.get("/leases/new/")
    assert options(form, "id_namespace") == ["nav-a", "team-new"]
    assert "nav-b" not in text(form) and "nav-c" not in text(form)
    unlimited = login("editor")
    form = text(unlimited.get("/leases/new/"))
    offered = re.findall(r'<option value="([^"]*)">', form.split('<datalist id="known-namespaces">')[1].split("</datalist>")[0])
    assert offered == ["default", "kube-node-lease", "kube-public", "kube-system", "nav-a", "nav-b", "nav-c"]


# ---------------------------------------------------------------------------------------------
# A new namespace is confirmed before it is used

LEASE_FORM = {"name": "lock", "holder": "node-a", "duration": "15", "action": "save"}


def test_a_create_in_a_new_namespace_asks_first_and_creates_once_confirmed(login, db):
    put("Lease", lease("ledger", ns="payments"))
    editor = login("editor")
    asked = editor.post("/leases/new/", {**LEASE_FORM, "namespace": "pyaments"})
    assert asked.status_code == 200
    html = unescape(re.sub(r"\s+", " ", text(asked)))
    assert "Create objects in a new namespace “pyaments”?" in html
    assert "did you mean “payments”?" in html and "Nothing was created." in html
    assert '<button type="submit" name="new_namespace" value="pyaments"' in text(asked)
    assert not by_kind("Lease").model.objects.filter(namespace="pyaments").exists()
    # Confirmed for another namespace than the one posted: asked again.
    data = form_fields(text(asked))
    again = editor.post("/leases/new/", {**data, "namespace": "pyaments-2", "new_namespace": "pyaments", "action": "save"})
    assert again.status_code == 200 and "new namespace “pyaments-2”?" in unescape(text(again))
    # The question's button: the same form, confirmed.
    made = editor.post("/leases/new/", {**data, "new_namespace": "pyaments"})
    assert made.status_code == 302 and made["Location"] == "/leases/pyaments/lock/"
    assert by_kind("Lease").model.objects.filter(namespace="pyaments", name="lock").exists()
    # A name no namespace can have is not asked about: the API's refusal says why.
    invalid = editor.post("/leases/new/", {**LEASE_FORM, "namespace": "Pay_ments"})
    assert invalid.status_code == 422 and "new namespace" not in text(invalid)
    assert "RFC 1123" in field_errors(invalid, "namespace")
    # Namespaces that exist (in use, or in every cluster) are never asked about.
    for namespace in ("payments", "pyaments", "default", "kube-system"):
        resp = editor.post("/leases/new/", {**LEASE_FORM, "name": "another", "namespace": namespace})
        assert resp.status_code == 302, (namespace, text(resp)[-1500:])


def test_the_question_comes_with_the_forms_errors_and_stays_confirmed(login, db):
    editor = login("editor")
    refused = editor.post("/leases/new/", {**LEASE_FORM, "name": "Bad_Name", "namespace": "fresh"})
    assert refused.status_code == 422
    assert field_errors(refused, "name") and "new namespace “fresh”?" in unescape(text(refused))
    # Confirmed, still refused for the name: the page keeps the confirmation while it is shown.
    data = {**form_fields(text(refused)), "new_namespace": "fresh", "action": "save"}
    refused = editor.post("/leases/new/", data)
    assert refused.status_code == 422 and "new namespace" not in text(refused)
    assert '<input type="hidden" name="new_namespace" value="fresh">' in text(refused)
    data = {**form_fields(text(refused)), "name": "good", "action": "save"}
    made = editor.post("/leases/new/", data)
    assert made.status_code == 302 and made["Location"] == "/leases/fresh/good/"


def test_yaml_create_in_a_new_namespace_asks_first(login, db):
    editor = login("editor")
    manifest = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: nightly\n  namespace: pyaments\n" \
               "spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n" \
               "      - name: main\n        image: busybox\n"
    asked = editor.post("/jobs/new/?as=yaml", {"yaml": manifest})
    assert asked.status_code == 200 and "new namespace “pyaments”?" in unescape(text(asked))
    assert not by_kind("Job").model.objects.filter(namespace="pyaments").exists()
    # A refusal besides the question is said in the same round (a dry run).
    broken = editor.post("/jobs/new/?as=yaml", {"yaml": manifest.replace("busybox", "''")})
    assert broken.status_code == 422 and "new namespace “pyaments”?" in unescape(text(broken))
    assert "image" in field_errors(broken, "yaml")
    made = editor.post("/jobs/new/?as=yaml", {"yaml": manifest, "new_namespace": "pyaments"})
    assert made.status_code == 302 and made["Location"] == "/jobs/pyaments/nightly/"

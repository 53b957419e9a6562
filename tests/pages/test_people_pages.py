"""People and access from the dashboard (issue 41, items 10 and 11): the /people/ pages for admins
without limits, and the main menu per role.

The revocation side (a change made here closes or narrows the user's open pages and watches) is
in tests/access/test_people_access.py, against a served kubedash."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from manifests import lease

pytestmark = pytest.mark.portable

PASSWORD = "people-Pass-9317"


def put_lease(ns: str, name: str, cluster: str = "local") -> None:
    """A Lease in kubedash's own store, or in a followed cluster's copy as its follower writes it."""
    from dashboard.kube import mirror, registry, store

    obj = lease(name, ns=ns)
    if cluster == "local":
        store.create(registry.by_kind("Lease"), ns, obj)
        return
    obj["metadata"].update(uid=f"u-{name}", creationTimestamp="2026-01-02T03:04:05Z", resourceVersion="7")
    mirror.mirror(cluster, [mirror.Mirrored(registry.by_kind("Lease"), ns, name, obj)])


def grant_of(username: str) -> tuple:
    user = get_user_model().objects.select_related("kube_profile").get(username=username)
    p = user.kube_profile
    return p.role, sorted(p.namespaces), sorted(p.clusters), user.is_active, user.is_staff


def main_menu(client) -> str:
    html = client.get("/").content.decode()
    return re.search(r'<nav aria-label="Main">(.*?)</nav>', html, re.S).group(1)


def person(username: str, role: str = "viewer", namespaces=(), clusters=()):
    """A user with PASSWORD and this grant, made as every writer of it does (a model save)."""
    from dashboard.access.models import Profile
    from dashboard.access.tokens import ensure_user

    user = ensure_user(username, role)
    user.set_password(PASSWORD)
    user.save()
    profile = Profile.objects.get(user=user)
    profile.namespaces, profile.clusters = list(namespaces), list(clusters)
    profile.save()
    return user


# ---------------------------------------------------------------------------------------------
# The main menu (item 11)


@pytest.mark.parametrize("role,limits,shown,hidden", [
    ("viewer", {}, ["Tokens"], ["Share links", "Clusters", "People"]),
    ("editor", {"namespaces": ["team-a"]}, ["Share links", "Tokens"], ["Clusters", "People"]),
    ("admin", {"namespaces": ["team-a"]}, ["Share links", "Tokens"], ["Clusters", "People"]),
    ("admin", {}, ["Share links", "Tokens", "Clusters", "People"], []),
])
def test_main_menu_offers_each_role_its_pages(db, login, role, limits, shown, hidden):
    menu = main_menu(login(role, **limits))
    for name in shown:
        assert re.search(rf'<a href="/[a-z]+/"[^>]*>{name}</a>', menu), name
    for name in hidden:
        assert f">{name}</a>" not in menu, name
    assert "details" not in menu   # no dropdown to open first


def test_the_menu_marks_the_current_account_page(db, login):
    html = login("admin").get("/people/").content.decode()
    assert '<a href="/people/" aria-current="page">People</a>' in html
    assert '<a href="/people/" aria-current="page">Users</a>' in html    # the people pages' own tabs


def test_viewers_are_not_told_to_create_what_they_cannot(db, login):
    assert "through the API" not in login("viewer").get("/").content.decode()
    assert "through the API" in login("editor").get("/").content.decode()
    shares = login("viewer").get("/share/").content.decode()
    assert "Share this view" not in shares and "may not make share links" in shares
    r = login("viewer").get("/share/new/")
    assert r.status_code == 403 and "Share this view" not in r.content.decode()
    assert "Share this view" in login("editor").get("/share/new/").content.decode()   # (404: where to find it)


# ---------------------------------------------------------------------------------------------
# Who may open the people pages


@pytest.mark.parametrize("role,limits", [
    ("viewer", {}), ("editor", {}), ("admin", {"namespaces": ["team-a"]}), ("admin", {"clusters": ["local"]}),
])
def test_only_an_admin_without_limits_manages_people(db, login, role, limits):
    from dashboard.access.models import ApiToken
    from dashboard.access.tokens import create_token

    target = person("target", "viewer", namespaces=["team-a"])
    create_token(target, "targets-token")
    token = ApiToken.objects.get(user=target)
    asker = login(role, **limits)
    me = get_user_model().objects.get(pk=int(asker.session["_auth_user_id"]))
    before, mine = grant_of("target"), grant_of(me.username)
    for path in ("/people/", "/people/target/"):
        r = asker.get(path)
        assert r.status_code == 403, path
        assert "target" not in r.content.decode().replace("Not allowed", "")
    # No way round it: every write is refused, the asker's own grant included (a limited admin
    # widening itself, or making a second account without limits).
    posts = [("/people/target/", {"role": "admin"}), (f"/people/{me.username}/", {"role": "admin"}),
             ("/people/", {"username": "sidekick", "password": PASSWORD, "role": "admin"}),
             ("/people/target/active/", {}), ("/people/target/sign-out/", {}),
             (f"/people/target/tokens/{token.pk}/revoke/", {})]
    for path, data in posts:
        assert asker.post(path, data).status_code == 403, path
    assert grant_of("target") == before and grant_of(me.username) == mine
    assert not get_user_model().objects.filter(username="sidekick").exists()
    assert not ApiToken.objects.get(pk=token.pk).revoked


def test_signed_out_visitors_are_sent_to_log_in(db):
    r = Client().get("/people/")
    assert r.status_code == 302 and r["Location"].startswith("/accounts/login/")


def test_forms_need_csrf(db, login):
    person("target")
    admin = login("admin", enforce_csrf_checks=True)
    assert admin.post("/people/target/", {"role": "admin"}).status_code == 403
    assert grant_of("target")[0] == "viewer"


# ---------------------------------------------------------------------------------------------
# What an admin does there


def test_list_shows_role_limits_tokens_and_state(db, login):
    from dashboard.access.models import ApiToken
    from dashboard.access.tokens import create_token

    ann = person("ann", "editor", namespaces=["team-a", "team-b"], clusters=["local"])
    create_token(ann, "one")
    create_token(ann, "two")
    create_token(ann, "expired")
    create_token(ann, "revoked")
    ApiToken.objects.filter(name="expired").update(expires=timezone.now() - timedelta(minutes=1))
    ApiToken.objects.filter(name="revoked").update(revoked=True)
    assert Client().login(username="ann", password=PASSWORD)   # (last seen: this login)
    gone = person("gone")
    gone.is_active = False
    gone.save()
    html = login("admin").get("/people/").content.decode()
    row = re.search(r'<tr id="person-%d".*?</tr>' % ann.pk, html, re.S).group(0)
    assert 'href="/people/ann/"' in row and "editor" in row and "team-a, team-b" in row and "local" in row
    cells = re.findall(r"<td>(.*?)</td>", row, re.S)
    assert cells[3].startswith("<time") and cells[4] == "2"   # last seen (the login), active tokens
    assert "active" in row
    tokens = login("admin").get("/people/ann/").content.decode()
    assert ">one<" in tokens and ">two<" in tokens and ">expired<" not in tokens and ">revoked<" not in tokens
    assert "deactivated" in re.search(r'<tr id="person-\d+" class="bad">.*?</tr>', html, re.S).group(0)


def test_add_a_person_who_can_then_sign_in(db, login):
    put_lease("team-a", "x")
    admin = login("admin")
    form = admin.get("/people/").content.decode()
    assert 'value="team-a"' in form                          # namespaces that exist are offered
    assert 'name="clusters" value="local"' in form
    r = admin.post("/people/", {"username": "newbie", "password": PASSWORD, "role": "editor",
                                "namespaces": ["team-a"], "other_namespaces": "team-new"})
    assert r.status_code == 302 and r["Location"] == "/people/newbie/"
    assert grant_of("newbie") == ("editor", ["team-a", "team-new"], [], True, False)
    assert Client().login(username="newbie", password=PASSWORD)
    # Refused, each on its own field, nothing made.
    r = admin.post("/people/", {"username": "newbie", "password": "x", "role": "boss", "other_namespaces": "Bad_NS"})
    html = r.content.decode()
    assert r.status_code == 400 and "already exists" in html and "not a namespace name" in html
    assert 'id="form-errors"' in html and get_user_model().objects.filter(username="newbie").count() == 1


def test_edit_role_and_limits_from_namespaces_and_clusters_that_exist(db, login):
    from dashboard.access.models import AccessChange
    from access.test_admin_rights import follow

    follow("prod")
    put_lease("team-a", "x")
    put_lease("prod-only", "y", cluster="prod")           # a namespace of a followed cluster
    target = person("target")
    admin = login("admin")
    page = admin.get("/people/target/").content.decode()
    assert 'value="prod-only"' in page and 'value="team-a"' in page and 'name="clusters" value="prod"' in page
    assert '<legend>Namespaces</legend>' in page
    seen = AccessChange.objects.filter(subject=f"user:{target.pk}").count()
    r = admin.post("/people/target/", {"role": "admin", "namespaces": ["prod-only"], "clusters": ["prod"]})
    assert r.status_code == 302
    assert grant_of("target") == ("admin", ["prod-only"], ["prod"], True, False)   # limited: no staff flags
    # The change is announced, as any other writer's: open pages and watches re-check.
    assert AccessChange.objects.filter(subject=f"user:{target.pk}").count() > seen
    assert "is now admin in prod-only on prod" in admin.get("/people/target/").content.decode()
    admin.post("/people/target/", {"role": "admin"})
    assert grant_of("target") == ("admin", [], [], True, True)   # without limits: Django's flags follow
    r = admin.post("/people/target/", {"role": "editor", "clusters": ["nowhere"]})
    assert r.status_code == 400 and "nowhere is not one of the available choices" in r.content.decode()


def test_an_admin_does_not_demote_or_deactivate_themselves(db, login):
    admin = login("admin", "only-admin")
    r = admin.post("/people/only-admin/", {"role": "viewer"})
    assert r.status_code == 400 and "ask another admin" in r.content.decode()
    admin.post("/people/only-admin/active/")
    assert grant_of("only-admin") == ("admin", [], [], True, True)
    assert "Deactivate</button>" not in admin.get("/people/only-admin/").content.decode()


def test_tokens_deactivation_and_sign_out_everywhere(db, login):
    from dashboard.access.models import ApiToken
    from dashboard.access.tokens import create_token, token_works

    target = person("target", "editor")
    secret = create_token(target, "ci")
    row = ApiToken.objects.get(user=target)
    elsewhere = Client()
    assert elsewhere.login(username="target", password=PASSWORD)
    assert elsewhere.get("/leases/").status_code == 200
    admin = login("admin")
    page = admin.get("/people/target/").content.decode()
    assert f'action="/people/target/tokens/{row.pk}/revoke/"' in page and ">ci<" in page

    assert admin.post("/people/target/sign-out/").status_code == 302
    assert elsewhere.get("/leases/")["Location"].startswith("/accounts/login/")   # that session ended
    assert token_works(secret, "target", "editor")                                # tokens are apart

    assert admin.post(f"/people/target/tokens/{row.pk}/revoke/").status_code == 302
    assert not token_works(secret, "target", "editor")
    assert "No active tokens." in admin.get("/people/target/").content.decode()

    assert admin.post("/people/target/active/").status_code == 302
    assert grant_of("target")[3] is False
    assert not Client().login(username="target", password=PASSWORD)
    admin.post("/people/target/active/", {"active": "1"})
    assert Client().login(username="target", password=PASSWORD)


# ---------------------------------------------------------------------------------------------
# In Chromium: the page as a person sees it


@pytest.mark.browser
def test_people_page_in_chromium(wide_page, kube_server):
    from playwright.sync_api import expect

    from chromium import axe_violations

    kube_server.manage("shell", "-c",
        "from dashboard.access.tokens import ensure_user, create_token\n"
        "from dashboard.access.models import Profile\n"
        "u = ensure_user('pat-people', 'editor')\n"
        "Profile.objects.filter(user=u).update(namespaces=['team-a', 'team-b'])\n"
        "create_token(u, 'deploy bot')")
    page = wide_page
    page.goto(kube_server.http_url + "/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="People").click()
    page.wait_for_url("**/people/")
    expect(page.locator("#people")).to_contain_text("pat-people")
    assert axe_violations(page) == [], "people list"
    page.screenshot(path="/tmp/kubedash-people-list.png", full_page=True)
    page.get_by_role("link", name="pat-people").click()
    expect(page.get_by_role("heading", name="pat-people")).to_be_visible()
    expect(page.get_by_label("team-b")).to_be_checked()
    page.get_by_label("viewer — read only").check()
    page.get_by_label("team-b").uncheck()
    page.get_by_role("button", name="Save role and limits").click()
    expect(page.locator(".notice")).to_contain_text("is now viewer in team-a")
    assert axe_violations(page) == [], "person page"
    page.screenshot(path="/tmp/kubedash-people-person.png", full_page=True)

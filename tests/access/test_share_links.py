"""Share links: who may create them, what they show (one live view, without a login) and
what they never give (other views, the API, forms, writes); revoking and expiry stop them at
once, including open websockets."""
from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from django.utils import timezone

from manifests import endpoints, job, lease
from page_helpers import create_link, open_socket, pushed_until, visitor

from .test_security import web_routes

# CI runs this module again on PostgreSQL (.ci/run selects it by the marker).
pytestmark = pytest.mark.portable

# ---------------------------------------------------------------------------------------------
# Fixtures and helpers


def put(kind: str, obj: dict) -> dict:
    from dashboard.kube import registry, store

    return store.create(registry.by_kind(kind), obj["metadata"]["namespace"], obj).object


def current_rv() -> int:
    from dashboard.kube import store

    return store.current_revision()


@pytest.fixture
def cluster(transactional_db):
    """Objects inside the shared scope (team-a leases labelled app=web) and outside it."""
    from dashboard.web import live

    # Pushed rows are cached per revision, and each test's database numbers its revisions
    # from 1 again: a row of an earlier test must not stand in for this one's.
    live._rendered.clear()
    put("Lease", lease("web-1", ns="team-a", labels={"app": "web"}))
    put("Lease", lease("db-1", holder="hidden-db-holder", ns="team-a", labels={"app": "db"}))
    put("Lease", lease("web-b", holder="hidden-b-holder", ns="team-b", labels={"app": "web"}))
    put("Job", job("j1", ns="team-a", image="hidden-image"))
    put("Endpoints", endpoints("svc", ns="team-a", ips=("10.9.9.9",)))


HIDDEN = ("hidden-db-holder", "hidden-b-holder", "hidden-image", "10.9.9.9")


def link_row(token: str):
    from dashboard.access.models import ShareLink

    return ShareLink.objects.get(token_hash=hashlib.sha256(token.encode()).hexdigest())


# ---------------------------------------------------------------------------------------------
# Creating, listing, revoking


def test_editor_creates_a_link_viewer_cannot(cluster, login):
    from dashboard.access.models import ShareLink

    editor = login("editor")
    page = editor.get("/leases/?namespace=team-a&labelSelector=app%3Dweb")
    assert "Share this view" in page.content.decode()
    assert 'href="/share/new/?kind=Lease&amp;namespace=team-a&amp;labelSelector=app%3Dweb"' in page.content.decode()
    form = editor.get("/share/new/?kind=Lease&namespace=team-a&labelSelector=app%3Dweb")
    assert form.status_code == 200 and "1 hour" in form.content.decode() and "30 days" in form.content.decode()
    r, token = create_link(editor)
    assert r.status_code == 200 and token
    assert r["Cache-Control"] == "no-store"
    assert "shown only this once" in r.content.decode()
    row = link_row(token)
    assert (row.kind, row.namespace, row.label_selector) == ("Lease", "team-a", "app=web")
    assert timedelta(hours=23) < row.expires - timezone.now() <= timedelta(days=1)

    viewer = login("viewer")
    assert "Share this view" not in viewer.get("/leases/?namespace=team-a").content.decode()
    assert viewer.get("/share/new/?kind=Lease&namespace=team-a").status_code == 403
    r, token = create_link(viewer)
    assert r.status_code == 403 and token is None
    assert ShareLink.objects.count() == 1


@pytest.mark.parametrize("expiry,lifetime", [("1h", timedelta(hours=1)), ("7d", timedelta(days=7)),
                                             ("30d", timedelta(days=30))])
def test_expiry_choices(cluster, login, expiry, lifetime):
    r, token = create_link(login("admin"), expiry=expiry)
    assert r.status_code == 200
    left = link_row(token).expires - timezone.now()
    assert lifetime - timedelta(minutes=1) < left <= lifetime
    assert create_link(login("admin"), expiry="forever")[0].status_code == 400


def test_link_scope_never_exceeds_the_creator(cluster, login):
    limited = login("editor", username="team-a-editor", namespaces=["team-a"])
    r, token = create_link(limited, namespace="")   # "All namespaces": theirs (issue 41, item 11)
    assert r.status_code == 200 and link_row(token).scope_namespaces() == ("team-a",)
    assert create_link(limited, namespace="team-b")[0].status_code == 403
    assert create_link(limited, namespace="team-a")[0].status_code == 200
    assert create_link(login("admin"), labelSelector="app in (")[0].status_code == 400
    assert create_link(login("admin"), kind="Secret")[0].status_code in (400, 403)


def test_list_and_revoke(cluster, login):
    from dashboard.access.models import ShareLink

    alice = login("editor", username="alice")
    bob = login("editor", username="bob")
    admin = login("admin")
    _, a_token = create_link(alice, label="alice's link")
    _, b_token = create_link(bob, label="bob's link")
    a_row, b_row = link_row(a_token), link_row(b_token)

    alice_page = alice.get("/share/").content.decode()
    assert "alice&#x27;s link" in alice_page and "bob&#x27;s link" not in alice_page
    admin_page = admin.get("/share/").content.decode()
    assert "alice&#x27;s link" in admin_page and "bob&#x27;s link" in admin_page
    assert ">alice<" in admin_page and ">bob<" in admin_page and "never" in admin_page  # creator, last use
    for token in (a_token, b_token):
        assert token not in alice_page and token not in admin_page

    # Someone else's link: not even confirmed to exist.
    assert alice.post(f"/share/{b_row.pk}/revoke/").status_code == 404
    assert alice.get(f"/share/{a_row.pk}/revoke/").status_code == 405
    r = alice.post(f"/share/{a_row.pk}/revoke/")
    assert r.status_code == 302 and r["Location"] == "/share/"
    assert admin.post(f"/share/{b_row.pk}/revoke/").status_code == 302
    assert ShareLink.objects.filter(revoked_at__isnull=True).count() == 0
    assert "revoked" in alice.get("/share/").content.decode()


# ---------------------------------------------------------------------------------------------
# What a link shows, and nothing else


def test_link_shows_its_live_view_without_login(cluster, login):
    _, token = create_link(login("editor"))
    c = visitor(token)
    page = c.get("/leases/?namespace=team-a")
    html = page.content.decode()
    assert page.status_code == 200
    assert "web-1" in html and "db-1" not in html and "web-b" not in html  # the selector applies
    assert 'ws-connect="/ws/live/?view=leases&amp;namespace=team-a' in html
    assert "Read-only shared view" in html and "for the on-call team" in html
    assert "Share this view" not in html and "/tokens/" not in html and "/share/" not in html
    assert "Log out" not in html and "Leave shared view" in html
    # The visitor can narrow the view, never widen it.
    assert "web-1" in c.get("/leases/?labelSelector=app%21%3Ddb").content.decode()
    assert "db-1" not in c.get("/leases/?labelSelector=app%3Ddb").content.decode()
    assert "db-1" not in c.get("/leases/").content.decode()
    detail = c.get("/leases/team-a/web-1/")
    assert detail.status_code == 200 and "web-1" in detail.content.decode()
    # No way to write is even offered: the only POST form is "Leave shared view".
    for body in (html, detail.content.decode()):
        assert re.findall(r'<form[^>]*method="post"[^>]*>', body, re.I) == ['<form method="post" action="/s/leave/">']
        assert not re.search(r"hx-(post|put|patch|delete)=", body)
        assert "/edit/" not in body and "/delete/" not in body and "/yaml/" not in body
    assert c.get("/").status_code == 302 and c.get("/")["Location"] == "/leases/?namespace=team-a"


@pytest.mark.parametrize("path,statuses", [
    ("/leases/?namespace=team-b", {403}),
    ("/leases/team-b/web-b/", {403, 404}),
    ("/leases/team-a/db-1/", {404}),                # same namespace, outside the selector
    ("/jobs/", {403}),
    ("/jobs/?namespace=team-a", {403}),
    ("/jobs/team-a/j1/", {403, 404}),
    ("/endpoints/?namespace=team-a", {403}),
    ("/endpoints/team-a/svc/", {403, 404}),
    ("/tokens/", {403}),
    ("/share/", {403}),
    ("/share/new/?kind=Lease&namespace=team-a", {403}),
    ("/admin/", {403}),
    ("/admin/auth/user/", {403}),
    ("/no-such-page/", {403, 404}),
])
def test_link_shows_nothing_else(cluster, login, path, statuses):
    _, token = create_link(login("editor"))
    c = visitor(token)
    r = c.get(path)
    assert r.status_code in statuses, (path, r.status_code)
    body = r.content.decode()
    assert not [h for h in HIDDEN if h in body]


API_READS = ["/apis/coordination.k8s.io/v1/namespaces/team-a/leases",
             "/apis/coordination.k8s.io/v1/namespaces/team-a/leases/web-1",
             "/apis/coordination.k8s.io/v1/leases",
             "/apis/coordination.k8s.io/v1/namespaces/team-a/leases?watch=1&timeoutSeconds=1",
             "/apis/coordination.k8s.io/v1/watch/namespaces/team-a/leases?timeoutSeconds=1",
             "/apis/batch/v1/namespaces/team-a/jobs",
             "/api/v1/namespaces/team-a/endpoints"]


def test_the_api_refuses_a_share_session(cluster, login):
    _, token = create_link(login("editor"))
    c = visitor(token)
    before = current_rv()
    for path in API_READS:
        r = c.get(path)
        assert r.status_code in (401, 403), path
        assert b"web-1" not in b"".join(r) if r.streaming else b"web-1" not in r.content
    leases = "/apis/coordination.k8s.io/v1/namespaces/team-a/leases"
    writes = [c.post(leases, lease("new", ns="team-a"), content_type="application/json"),
              c.put(f"{leases}/web-1", lease("web-1", ns="team-a"), content_type="application/json"),
              c.patch(f"{leases}/web-1", {"spec": {"holderIdentity": "me"}},
                      content_type="application/merge-patch+json"),
              c.delete(f"{leases}/web-1"), c.delete(leases)]
    assert all(r.status_code in (401, 403) for r in writes), [r.status_code for r in writes]
    assert current_rv() == before
    # The link is no API token either.
    assert Client().get(leases, HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401


def test_forms_refuse_a_share_session(cluster, login):
    """Every page route that is not the shared view's own (edit forms included, whatever
    they are) answers 403 to a share session, for GET and POST, and nothing changes."""
    from dashboard.web.share import SHARE_ROUTES

    _, token = create_link(login("editor"))
    c = visitor(token)
    before = current_rv()
    checked = []
    for route, path in web_routes({"namespace": "team-a", "name": "web-1"}):
        if route in SHARE_ROUTES:
            continue
        for method in ("get", "post"):
            r = getattr(c, method)(path, {"name": "x", "namespace": "team-a"})
            redirected = route == "overview" and r.status_code == 302   # to the shared view
            assert r.status_code == 403 or redirected, (route, method, r.status_code)
        checked.append(route)
    assert {"share_new", "share_revoke", "tokens", "token_revoke", "token_kubeconfig", "overview",
            "admin:login"} <= set(checked)
    assert current_rv() == before


# ---------------------------------------------------------------------------------------------
# Expiry and revocation stop a link at once


def test_expired_link_stops_at_once(cluster, login):
    _, token = create_link(login("editor"))
    c = visitor(token)
    assert c.get("/leases/").status_code == 200
    row = link_row(token)
    row.expires = timezone.now() - timedelta(seconds=1)
    row.save()
    r = c.get("/leases/")
    assert r.status_code == 410 and "expired" in r.content.decode() and "web-1" not in r.content.decode()
    # The session is ordinary again: the login page, not the shared view.
    assert c.get("/leases/").status_code == 302
    assert Client().get(f"/s/{token}/").status_code == 410


def test_revoked_link_stops_at_once(cluster, login):
    editor = login("editor")
    _, token = create_link(editor)
    c = visitor(token)
    assert editor.post(f"/share/{link_row(token).pk}/revoke/").status_code == 302
    r = c.get("/leases/team-a/web-1/")
    assert r.status_code == 410 and "revoked" in r.content.decode()
    assert Client().get(f"/s/{token}/").status_code == 410
    assert Client().get("/s/not-a-real-token-but-long-enough-to-look-like-one/").status_code == 404


def test_link_dies_with_its_creators_access(cluster, login):
    from django.contrib.auth import get_user_model

    _, token = create_link(login("editor", username="leaver"))
    c = visitor(token)
    get_user_model().objects.filter(username="leaver").update(is_active=False)
    assert c.get("/leases/").status_code == 410


def test_token_is_stored_hashed(cluster, login):
    from django.db import connection

    _, token = create_link(login("editor"))
    assert link_row(token).token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert len(token) >= 43   # 32 random bytes: 256 bits
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM access_sharelink")
        rows = cursor.fetchall()
        cursor.execute("SELECT * FROM django_session")
        rows += cursor.fetchall()
    assert rows and all(token not in str(value) for row in rows for value in row)


def test_last_used_is_written_at_most_once_a_minute(cluster, login):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _, token = create_link(login("editor"))
    assert link_row(token).last_used is None
    c = visitor(token)
    first = link_row(token).last_used
    assert first is not None
    with CaptureQueriesContext(connection) as queries:
        c.get("/leases/")
    assert link_row(token).last_used == first
    assert not [q for q in queries.captured_queries if q["sql"].startswith("UPDATE") and "access_sharelink" in q["sql"]]
    link_row(token).__class__.objects.update(last_used=timezone.now() - timedelta(minutes=2))
    c.get("/leases/")
    assert link_row(token).last_used > first


def test_logging_in_leaves_the_shared_view(cluster, login):
    from django.contrib.auth import get_user_model

    _, token = create_link(login("editor"))
    get_user_model().objects.create_user("carol", password="a-long-pass-phrase")
    c = visitor(token)
    assert c.post("/accounts/login/", {"username": "carol", "password": "a-long-pass-phrase"}).status_code == 302
    html = c.get("/").content.decode()
    assert "Read-only shared view" not in html and "carol" in html
    # And leaving by hand.
    c2 = visitor(token)
    assert c2.post("/s/leave/").status_code == 302
    assert c2.get("/leases/").status_code == 302   # to the login page


def test_logged_in_user_opening_a_link_sees_what_recipients_see(cluster, login):
    admin = login("admin")
    _, token = create_link(admin)
    assert admin.get(f"/s/{token}/").status_code == 302
    html = admin.get("/leases/").content.decode()
    assert "Read-only shared view" in html and "db-1" not in html
    assert admin.get("/tokens/").status_code == 403
    assert admin.post("/s/leave/").status_code == 302
    assert "db-1" in admin.get("/leases/").content.decode()


# ---------------------------------------------------------------------------------------------
# Websockets


async def _close_code(comm, timeout=5) -> int:
    """Read until the server closes; the close code."""
    while True:
        out = await comm.receive_output(timeout=timeout)
        if out["type"] == "websocket.close":
            return out.get("code")


@pytest.fixture
def async_link(cluster, login):
    editor = login("editor")
    _, token = create_link(editor)
    return editor, token, visitor(token)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_websocket_inside_scope_accepted_outside_refused(async_link):
    _, _, c = async_link
    rv = await sync_to_async(current_rv)()
    comm, ok, _ = await open_socket(c, f"view=leases&namespace=team-a&rv={rv}")
    assert ok
    # Pushes honour the link's selector: db-1 (app=db) never shows up, web-1 does.
    await sync_to_async(patch_holder)("db-1", "hidden-holder")
    await sync_to_async(patch_holder)("web-1", "shown-holder")
    html = await comm.receive_from(timeout=5)
    assert "shown-holder" in html and "hidden-holder" not in html and "db-1" not in html
    await comm.disconnect()
    for query in ("view=leases&namespace=team-b", "view=jobs&namespace=team-a", "view=jobs",
                  "view=endpoints&namespace=team-a", "view=overview", "view=overview&namespace=team-a",
                  "view=job&namespace=team-a&name=j1"):
        comm, ok, code = await open_socket(c, query)
        assert not ok and code == 4403, query


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_websocket_on_all_namespaces_stays_in_the_link_namespace(async_link):
    _, _, c = async_link
    rv = await sync_to_async(current_rv)()
    comm, ok, _ = await open_socket(c, f"view=leases&rv={rv}")
    assert ok
    await sync_to_async(patch_holder)("web-b", "other-ns", ns="team-b")
    await sync_to_async(patch_holder)("web-1", "in-scope")   # a later write the page does get
    html = await comm.receive_from(timeout=5)   # (a push of the earlier write would come first)
    assert "in-scope" in html and "other-ns" not in html and "web-b" not in html, html
    await comm.disconnect()


def patch_holder(name, holder, ns="team-a"):
    from dashboard.kube import registry, store

    def change(obj):
        obj["spec"]["holderIdentity"] = holder
        return obj
    store.update(registry.by_kind("Lease"), ns, name, change, is_patch=True)


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_revoke_closes_open_websockets(async_link):
    editor, token, c = async_link
    comm, ok, _ = await open_socket(c, "view=leases&namespace=team-a")
    assert ok
    detail, ok, _ = await open_socket(c, "view=lease&namespace=team-a&name=web-1")
    assert ok
    link_id = await sync_to_async(lambda: link_row(token).pk)()
    r = await sync_to_async(editor.post)(f"/share/{link_id}/revoke/")
    assert r.status_code == 302
    for sock in (comm, detail):
        # The page's content is replaced by a notice, then the socket closes for good.
        sent = []
        while True:
            out = await sock.receive_output(timeout=5)
            if out["type"] == "websocket.close":
                break
            sent.append(out["text"])
        assert out.get("code") == 4403
        assert 'id="main" hx-swap-oob="innerHTML"' in sent[-1] and "revoked" in sent[-1]
    comm, ok, code = await open_socket(c, "view=leases&namespace=team-a")
    assert not ok and code == 4403


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_websocket_closes_when_the_link_expires(async_link):
    _, token, c = async_link

    def expire_soon():
        row = link_row(token)
        row.expires = timezone.now() + timedelta(seconds=1)
        row.save()
    await sync_to_async(expire_soon)()
    comm, ok, _ = await open_socket(c, "view=leases&namespace=team-a")
    assert ok
    assert await _close_code(comm, timeout=5) == 4403


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_websocket_messages_write_nothing(async_link):
    _, _, c = async_link
    before = await sync_to_async(current_rv)()
    comm, ok, _ = await open_socket(c, f"view=leases&namespace=team-a&rv={before}")
    assert ok
    await comm.send_to(text_data='{"op": "delete", "namespace": "team-a", "name": "web-1"}')
    await comm.send_to(text_data="<form hx-post='/apis/coordination.k8s.io/v1/namespaces/team-a/leases'>")
    # A page sends nothing but its heartbeat's PONG (issue 29): the first such frame closes the
    # socket, and nothing was written.
    assert await _close_code(comm, timeout=5) == 4008
    assert await sync_to_async(current_rv)() == before


# ---------------------------------------------------------------------------------------------
# A namespace-limited editor sharing "All namespaces" shares their namespaces (issue 41, item 11)


@pytest.fixture
def two_ns_link(cluster, login):
    """A link made by an editor limited to team-a and team-b on the all-namespaces Leases list
    (no selector), with a lease in team-c that neither may see."""
    put("Lease", lease("web-c", holder="hidden-c-holder", ns="team-c"))
    editor = login("editor", username="ab-editor", namespaces=["team-a", "team-b"])
    page = editor.get("/leases/").content.decode()
    assert 'href="/share/new/?kind=Lease"' in page     # "Share this view" on All namespaces
    form = editor.get("/share/new/?kind=Lease").content.decode()
    assert "Leases in namespaces team-a, team-b" in form
    r, token = create_link(editor, namespace="", labelSelector="", label="a and b")
    assert r.status_code == 200 and token
    row = link_row(token)
    assert (row.namespace, row.namespaces, row.scope_namespaces()) == ("", ["team-a", "team-b"], ("team-a", "team-b"))
    c = Client()
    assert c.get(f"/s/{token}/")["Location"] == "/leases/"
    return editor, token, c


def test_limited_editors_all_namespaces_link_shows_only_their_namespaces(two_ns_link, login):
    editor, token, c = two_ns_link
    html = c.get("/leases/").content.decode()
    assert "web-1" in html and "db-1" in html and "web-b" in html
    assert "web-c" not in html and "hidden-c-holder" not in html
    assert c.get("/leases/?namespace=team-b").status_code == 200
    assert c.get("/leases/?namespace=team-c").status_code == 403
    assert c.get("/leases/team-b/web-b/").status_code == 200
    assert c.get("/leases/team-c/web-c/").status_code in (403, 404)
    assert c.get("/jobs/").status_code == 403   # still the one kind
    # The list of links says what it shares.
    assert "Leases in namespaces team-a, team-b" in editor.get("/share/").content.decode()
    # The creator loses team-b: the link never shows more than its creator may see, so it stops.
    from dashboard.access.models import Profile
    profile = Profile.objects.get(user__username="ab-editor")
    profile.namespaces = ["team-a"]
    profile.save()
    assert c.get("/leases/").status_code == 410


def test_a_viewer_is_not_offered_share_nor_told_to_use_it(cluster, login):
    viewer = login("viewer")
    assert "Share this view" not in viewer.get("/leases/").content.decode()
    assert "Share this view" not in viewer.get("/share/").content.decode()
    limited = login("viewer", username="a-viewer", namespaces=["team-a"])
    assert "Share this view" not in limited.get("/leases/").content.decode()
    assert create_link(limited, namespace="")[0].status_code == 403


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_limited_editors_all_namespaces_link_pushes_only_their_namespaces(two_ns_link):
    _, _, c = two_ns_link
    rv = await sync_to_async(current_rv)()
    comm, ok, _ = await open_socket(c, f"view=leases&rv={rv}")
    assert ok
    await sync_to_async(patch_holder)("web-c", "pushed-c", ns="team-c")
    await sync_to_async(patch_holder)("web-b", "pushed-b", ns="team-b")   # later: pushed after any c push
    html = "".join(await pushed_until(comm, "pushed-b"))
    assert "pushed-c" not in html and "web-c" not in html
    await comm.disconnect()
    for query in ("view=leases&namespace=team-c", "view=lease&namespace=team-c&name=web-c"):
        comm, ok, code = await open_socket(c, query)
        assert not ok and code == 4403, query

"""Saved views, default views and pins (issue 40), through Django's test client and the live
consumer: a view shared with a group is seen by its members and by no one else; opening a
shared view never widens access; the default view opens a list's bare address and says so;
`manage.py views export|import` round-trips; pins show their objects' state on the Overview,
live, and a deleted pinned object says so with its last state."""
from __future__ import annotations

import re
from html import unescape

import pytest
import yaml
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group
from django.core.management import call_command

from dashboard.kube import store
from dashboard.kube.registry import by_kind
from dashboard.saved.models import DefaultView, Pin, SavedView
from manifests import lease
from page_helpers import connect, receive_until, text

pytestmark = pytest.mark.portable


def put(obj: dict) -> dict:
    return store.create(by_kind("Lease"), obj["metadata"]["namespace"], obj).object


@pytest.fixture
def leases(db):
    put(lease("lock", ns="sv-a", holder="node-a"))
    put(lease("other", ns="sv-a", holder="node-b"))
    put(lease("lock", ns="sv-b", holder="node-c"))


def in_group(client, group: str):
    user = client.session["_auth_user_id"]
    Group.objects.get_or_create(name=group)[0].user_set.add(user)


def save(client, url: str, name: str, shared: str = "personal", groups=()) -> SavedView:
    resp = client.post("/views/save/", {"url": url, "name": name, "shared": shared, "groups": list(groups)})
    assert resp.status_code == 302 and "saved=" in resp["Location"], resp.get("Location")
    return SavedView.objects.get(slug=resp["Location"].split("saved=")[1])


def menu_views(client) -> list[str]:
    """The names of the saved views a person is offered: the main menu's "Views" opens /views/,
    which lists theirs, their groups' and everyone's."""
    assert '<a href="/views/">Views</a>' in text(client.get("/leases/")), "no Views in the main menu"
    return [unescape(n).strip() for n in re.findall(r'<th scope="row"><a href="/views/[^"]+/">([^<]+)', text(client.get("/views/")))]


# ---------------------------------------------------------------------------------------------
# Saving, sharing, opening


def test_save_keeps_the_canonical_address_whatever_its_parameters(login, leases):
    admin = login("admin")
    view = save(admin, "/leases/?namespace=sv-a&sort=-holder&limit=50&at=123&columns=name,holder&continue=abc",
                "Team A by holder")
    # Every parameter kept as given (those added by other features too), the snapshot token dropped.
    assert view.path == "/leases/" and view.query == "namespace=sv-a&sort=-holder&limit=50&at=123&columns=name%2Cholder"
    assert view.slug == "team-a-by-holder"
    assert save(admin, "/leases/", "Team A by holder").slug == "team-a-by-holder-2"
    # Not a list: refused, and said why.
    resp = admin.post("/views/save/", {"url": "/leases/sv-a/lock/", "name": "x", "shared": "personal"})
    assert resp.status_code == 302 and "error=" in resp["Location"]
    assert "Only a list or the Overview" in text(admin.get(resp["Location"]))


def test_a_view_shared_with_a_group_is_seen_by_its_members_only(login, leases):
    owner, member, other = login("editor", "sv-owner"), login("viewer", "sv-member"), login("viewer", "sv-other")
    in_group(owner, "team-a")
    in_group(member, "team-a")
    in_group(other, "team-b")
    view = save(owner, "/leases/?namespace=sv-a", "Team A leases", shared="groups", groups=["team-a"])
    mine = save(owner, "/jobs/", "My jobs")
    assert view.groups == ["team-a"]

    page = member.get("/views/")
    assert "Team A leases" in text(page) and "My jobs" not in text(page)
    assert menu_views(member) == ["Team A leases"]
    resp = member.get(f"/views/{view.slug}/")
    assert resp.status_code == 302 and resp["Location"] == "/leases/?namespace=sv-a"
    assert member.get(f"/views/{mine.slug}/").status_code == 404

    assert "Team A leases" not in text(other.get("/views/"))
    assert menu_views(other) == []
    assert other.get(f"/views/{view.slug}/").status_code == 404
    # Only the owner (or an admin) renames or deletes it.
    assert member.post(f"/views/{view.slug}/delete/").status_code == 404
    assert owner.post(f"/views/{view.slug}/change/", {"name": "Team A"}).status_code == 302
    assert SavedView.objects.get(pk=view.pk).name == "Team A"
    assert login("admin").post(f"/views/{view.slug}/delete/").status_code == 302
    assert not SavedView.objects.filter(pk=view.pk).exists()


def test_a_view_shared_with_a_group_reaches_the_identity_providers_members(login, leases):
    from dashboard.access.models import GroupBinding, Profile

    owner, member = login("editor", "sv-idp-owner"), login("viewer", "sv-idp-member")
    # Their groups come from the identity provider (kept on the profile at sign-in and refresh).
    GroupBinding.objects.create(group="idp-team", role="viewer")
    Profile.objects.filter(user__username__in=["sv-idp-owner", "sv-idp-member"]).update(groups=["idp-team"])
    view = save(owner, "/leases/?namespace=sv-a", "IdP team leases", shared="groups", groups=["idp-team"])
    assert menu_views(member) == [view.name]
    assert menu_views(login("viewer", "sv-idp-other")) == []


def test_a_shared_view_never_widens_access(login, leases):
    admin = login("admin")
    other_ns = save(admin, "/leases/?namespace=sv-b", "B leases", shared="everyone")
    every_ns = save(admin, "/leases/", "All leases", shared="everyone")
    limited = login("viewer", "sv-limited", namespaces=["sv-a"])
    # A view of a namespace the viewer may not see: refused, and said why.
    resp = limited.get(f"/views/{other_ns.slug}/")
    assert resp.status_code == 403 and "shows namespace “sv-b”, which you may not see" in text(resp)
    assert limited.get("/leases/?namespace=sv-b").status_code == 403   # (the address itself too)
    # A view of every namespace: opened, and the list shows the viewer's namespaces only.
    resp = limited.get(f"/views/{every_ns.slug}/", follow=True)
    assert resp.status_code == 200
    body = text(resp)
    assert 'id="lease-sv-a--lock"' in body and 'id="lease-sv-b--lock"' not in body


def test_a_share_link_is_made_from_a_saved_list_view_by_who_may_share_it(login, leases):
    editor = login("editor", "sv-sharer")
    view = save(editor, "/leases/?namespace=sv-a&state=held", "Held in A", shared="everyone")
    overview = save(editor, "/", "Home", shared="everyone")
    page = text(editor.get("/views/"))
    assert 'href="/share/new/?kind=Lease&amp;namespace=sv-a&amp;state=held"' in page
    assert "Make a share link<span class=\"vh\"> of Home" not in page   # (the Overview is no one kind's view)
    form = editor.get("/share/new/?kind=Lease&namespace=sv-a&state=held")
    assert form.status_code == 200 and 'value="sv-a"' in text(form)
    # A viewer (who may not share) and a limited editor (not for namespace sv-a) are not offered it.
    assert "Make a share link" not in text(login("viewer", "sv-looker").get("/views/"))
    elsewhere = text(login("editor", "sv-elsewhere", namespaces=["sv-b"]).get("/views/"))
    assert view.name in elsewhere and overview.name in elsewhere and "Make a share link" not in elsewhere


def test_the_default_view_opens_the_bare_list_and_says_so(login, leases):
    viewer = login("viewer", "sv-default")
    view = save(viewer, "/leases/?namespace=sv-a", "Mine")
    assert viewer.post(f"/views/{view.slug}/default/").status_code == 302
    resp = viewer.get("/leases/")
    assert resp.status_code == 302 and resp["Location"] == "/leases/?namespace=sv-a"
    body = text(viewer.get(resp["Location"]))
    note = re.search(r'<p class="default-view-note"[^>]*>(.*?)</p>', body, re.S)
    assert note and re.sub(r"<[^>]+>", "", note.group(1)).strip() == "Default view: Mine · show all"
    assert 'href="/leases/?default=off"' in note.group(1)
    # "show all": the bare list once, saying which default it is not showing.
    resp = viewer.get("/leases/?default=off")
    assert resp.status_code == 302 and resp["Location"] == "/leases/"
    resp = viewer.get("/leases/")
    assert resp.status_code == 200 and 'id="lease-sv-b--lock"' in text(resp)
    assert "Showing all. Your default view:" in text(resp)
    # Clearing the filters on the list itself stays on the bare list; another list has no default.
    assert viewer.get("/leases/", HTTP_REFERER="http://testserver/leases/?namespace=sv-a").status_code == 200
    assert viewer.get("/endpoints/").status_code == 200
    assert viewer.get("/leases/").status_code == 302   # arriving again: the default
    assert viewer.post(f"/views/{view.slug}/default/", {"off": "1"}).status_code == 302
    assert viewer.get("/leases/").status_code == 200


def test_views_export_and_import_round_trip(login, leases, tmp_path):
    owner = login("editor", "sv-exporter")
    in_group(owner, "team-a")
    a = save(owner, "/leases/?namespace=sv-a&sort=-holder", "A", shared="groups", groups=["team-a"])
    save(owner, "/", "Overview of B", shared="everyone")
    owner.post(f"/views/{a.slug}/default/")
    save(login("admin"), "/jobs/", "Someone else's")
    out = tmp_path / "views.yaml"
    call_command("views", "export", "--user", "sv-exporter", "--output", str(out))
    exported = yaml.safe_load(out.read_text())
    assert [v["name"] for v in exported] == ["A", "Overview of B"]
    assert exported[0] == {"name": "A", "slug": "a", "owner": "sv-exporter", "url": "/leases/?namespace=sv-a&sort=-holder",
                           "shared": "groups", "groups": ["team-a"], "default": True}
    SavedView.objects.filter(owner__username="sv-exporter").delete()
    assert not DefaultView.objects.exists()
    call_command("views", "import", str(out))
    call_command("views", "export", "--user", "sv-exporter", "--output", str(tmp_path / "again.yaml"))
    assert yaml.safe_load((tmp_path / "again.yaml").read_text()) == exported
    assert owner.get("/leases/")["Location"] == "/leases/?namespace=sv-a&sort=-holder"
    bad = tmp_path / "bad.yaml"
    bad.write_text("- {name: x, owner: nobody, url: /leases/}\n")
    with pytest.raises(Exception, match="no user 'nobody'"):
        call_command("views", "import", str(bad))


# ---------------------------------------------------------------------------------------------
# Pins


def pinned_panel(resp) -> str:
    found = re.search(r'<section class="panel pinned-panel" id="pinned-panel".*?</section>', text(resp), re.S)
    assert found, "no Pinned panel"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", unescape(found.group(0))))


def test_pins_on_the_overview_and_a_deleted_pin(login, leases):
    viewer = login("viewer", "sv-pinner")
    detail = viewer.get("/leases/sv-a/lock/")
    assert 'class="pin-star" aria-pressed="false"' in text(detail)
    assert viewer.post("/pins/", {"url": "/leases/sv-a/lock/"}, HTTP_ACCEPT="application/json").json() == {"pinned": True}
    assert 'class="pin-star" aria-pressed="true"' in text(viewer.get("/leases/sv-a/lock/"))
    view = save(viewer, "/leases/?namespace=sv-b", "B")
    assert viewer.post("/pins/", {"url": f"/views/{view.slug}/", "next": "/views/"})["Location"] == "/views/"
    panel = pinned_panel(viewer.get("/"))
    assert "Lease sv-a/lock" in panel and "node-a" in panel and "View B saved view" in panel
    store.delete(by_kind("Lease"), "sv-a", "lock")
    panel = pinned_panel(viewer.get("/"))
    assert re.search(r"Lease sv-a/lock deleted \S+ ago last state: \w+ · node-a", panel), panel
    # Unpinned: gone from the panel; not a pinnable address: refused.
    assert viewer.post("/pins/", {"url": "/leases/sv-a/lock/"}, HTTP_ACCEPT="application/json").json() == {"pinned": False}
    assert "sv-a/lock" not in pinned_panel(viewer.get("/"))
    assert viewer.post("/pins/", {"url": "/leases/"}).status_code == 400
    # A pin the viewer may no longer see is left out.
    Pin.objects.create(user_id=viewer.session["_auth_user_id"], kind="Lease", namespace="sv-b", name="lock")
    limited = login("viewer", "sv-pinner", namespaces=["sv-a"])
    assert "sv-b/lock" not in pinned_panel(limited.get("/"))


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_the_pinned_panel_is_live_on_the_overview(transactional_db):
    from dashboard.access.tokens import ensure_user

    user = await sync_to_async(ensure_user)("sv-live", "viewer")
    await sync_to_async(put)(lease("watched", ns="sv-live", holder="node-a"))
    await sync_to_async(Pin.objects.create)(user=user, kind="Lease", namespace="sv-live", name="watched")
    rv = await sync_to_async(store.current_revision)()
    comm, ok, _ = await connect(user, f"view=overview&rv={rv}")
    assert ok

    def renew(holder):
        def change(obj):
            obj["spec"]["holderIdentity"] = holder
            return obj
        store.update(by_kind("Lease"), "sv-live", "watched", change, is_patch=True)

    await sync_to_async(renew)("node-z")
    html = await receive_until(comm, 'id="pinned-panel"')
    panel = re.search(r'<section class="panel pinned-panel" id="pinned-panel" [^>]*hx-swap-oob="true">.*?</section>', html, re.S)
    assert panel and "node-z" in panel.group(0)
    await sync_to_async(store.delete)(by_kind("Lease"), "sv-live", "watched")
    html = await receive_until(comm, "deleted")
    panel = re.search(r'id="pinned-panel".*?</section>', html, re.S).group(0)
    assert "sv-live/watched" in panel and "last state:" in panel and "node-z" in panel
    await comm.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_the_pinned_panel_is_pushed_only_when_what_it_shows_changed(transactional_db, settings):
    """A write to an object nobody pinned pushes the Overview without the Pinned panel; a
    heartbeat sends it once, then again only when a pin comes or a pinned object changes."""
    from dashboard.access.tokens import ensure_user
    from dashboard.web.consumers import BEAT, PONG

    settings.KUBEDASH_LIVE_HEARTBEAT_SECONDS = 0.2
    user = await sync_to_async(ensure_user)("sv-only", "viewer")
    await sync_to_async(put)(lease("watched", ns="sv-only", holder="node-a"))
    await sync_to_async(put)(lease("other", ns="sv-only", holder="node-a"))
    await sync_to_async(put)(lease("later", ns="sv-only", holder="node-a"))
    await sync_to_async(Pin.objects.create)(user=user, kind="Lease", namespace="sv-only", name="watched")
    rv = await sync_to_async(store.current_revision)()
    comm, ok, _ = await connect(user, f"view=overview&rv={rv}")
    assert ok

    async def panels(beats: int) -> list[str]:
        """The Pinned panels sent within that many beats (each answered)."""
        found = []
        while beats:
            message = await comm.receive_from(timeout=5)
            if message == BEAT:
                await comm.send_to(text_data=PONG)
                beats -= 1
            elif 'id="pinned-panel"' in message:
                found.append(message)
        return found

    def holder(name, value):
        def change(obj):
            obj["spec"]["holderIdentity"] = value
            return obj
        store.update(by_kind("Lease"), "sv-only", name, change, is_patch=True)

    assert len(await panels(3)) == 1   # the first beat's, then none: nothing changed
    await sync_to_async(holder)("other", "node-b")
    pushed = await receive_until(comm, 'id="live-rv"')
    assert 'id="ns-sv-only"' in pushed and 'id="pinned-panel"' not in pushed
    assert await panels(3) == []
    await sync_to_async(holder)("watched", "node-z")
    assert "node-z" in await receive_until(comm, 'id="pinned-panel"')
    await sync_to_async(Pin.objects.create)(user=user, kind="Lease", namespace="sv-only", name="later")
    sent = await panels(3)
    assert len(sent) == 1 and "sv-only/later" in sent[0]
    await comm.disconnect()


def test_save_view_is_offered_on_lists_and_the_overview_only(login, leases):
    viewer = login("viewer", "sv-offer", namespaces=["sv-a"])
    for path in ("/leases/?namespace=sv-a", "/", "/jobs/", "/events/"):
        assert 'action="/views/save/"' in text(viewer.get(path)), path
    for path in ("/leases/?namespace=sv-b", "/leases/?sort=nope", "/leases/sv-a/lock/", "/search/?q=lock"):
        assert 'action="/views/save/"' not in text(viewer.get(path)), path


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_pin_outside_the_overviews_namespace_follows_at_the_heartbeat(transactional_db, settings):
    """The Overview of one namespace does not watch the others; a pinned object there still
    shows its new state, with the next heartbeat."""
    from dashboard.access.tokens import ensure_user
    from dashboard.web.consumers import BEAT, PONG

    settings.KUBEDASH_LIVE_HEARTBEAT_SECONDS = 0.2
    user = await sync_to_async(ensure_user)("sv-beat", "viewer")
    await sync_to_async(put)(lease("elsewhere", ns="sv-far", holder="node-a"))
    await sync_to_async(put)(lease("here", ns="sv-near", holder="node-a"))
    await sync_to_async(Pin.objects.create)(user=user, kind="Lease", namespace="sv-far", name="elsewhere")
    rv = await sync_to_async(store.current_revision)()
    comm, ok, _ = await connect(user, f"view=overview&namespace=sv-near&rv={rv}")
    assert ok

    def renew(obj):
        obj["spec"]["holderIdentity"] = "node-far"
        return obj

    await sync_to_async(store.update)(by_kind("Lease"), "sv-far", "elsewhere", renew, is_patch=True)
    while True:   # beats (answered), until the panel comes with the new holder
        message = await comm.receive_from(timeout=5)
        if message == BEAT:
            await comm.send_to(text_data=PONG)
            continue
        if 'id="pinned-panel"' in message and "node-far" in message:   # (a beat's panel before the write: node-a)
            assert "sv-far/elsewhere" in message
            break
    await comm.disconnect()


def test_the_palette_suggests_what_the_viewer_may_see(login, leases):
    admin = login("admin")
    save(admin, "/leases/?namespace=sv-b", "B for everyone", shared="everyone")
    save(admin, "/jobs/", "Admin's own")
    limited = login("viewer", "sv-palette", namespaces=["sv-a"])
    data = limited.get("/views/palette/").json()
    assert data["namespaces"] == ["sv-a"]
    assert [v["name"] for v in data["views"]] == ["B for everyone"]   # (opening it is refused: test above)
    assert {k["name"] for k in data["kinds"]} >= {"leases", "endpoints", "jobs", "events"}
    assert data["clusters"] == ["local"]
    assert limited.post("/views/palette/").status_code == 405

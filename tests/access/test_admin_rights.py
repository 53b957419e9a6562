"""Issue 43, access 1-2: a limited or demoted admin cannot give itself more rights, and every admin
page serves only admins without limits (or shows only the asker's own objects).

Django's admin (/admin/) is for admins without namespace or cluster limits (web/admin_site.py);
is_staff and is_superuser follow the kubedash grant whenever it changes (access/signals.py); the
Clusters page, every user's tokens and share links, /metrics and impersonation ask for the same
unlimited admin (Principal.is_full_admin)."""
from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from conftest import Api

ALL_LEASES = "/apis/coordination.k8s.io/v1/leases"
TEAM_A_LEASES = "/apis/coordination.k8s.io/v1/namespaces/team-a/leases"
pytestmark = pytest.mark.django_db(transaction=True)


def grant(username: str, role: str, namespaces=(), clusters=()):
    """Change a user's grant as every writer of it does (a model save, so its signals run)."""
    from dashboard.access.models import Profile
    from dashboard.access.tokens import ensure_user

    user = ensure_user(username, role)
    profile = Profile.objects.get(user=user)
    profile.namespaces, profile.clusters = list(namespaces), list(clusters)
    profile.save()
    user.refresh_from_db()
    return user


def flags(username: str) -> tuple[bool, bool]:
    user = get_user_model().objects.get(username=username)
    return user.is_staff, user.is_superuser


def enters_admin(client: Client) -> bool:
    response = client.get("/admin/auth/user/")
    return response.status_code == 200


def admin_change_form(client: Client, user) -> dict:
    """The user's change form in Django's admin, as a browser would post it back."""
    page = client.get(f"/admin/auth/user/{user.pk}/change/").content.decode()
    data = {"csrfmiddlewaretoken": re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)}
    for name, value in re.findall(r'<input type="(?:text|hidden|email)" name="([^"]+)" value="([^"]*)"', page):
        data.setdefault(name, value)
    data.update({"username": user.username, "is_active": "on", "kube_profile-0-user": str(user.pk)})
    return data


def test_issue_token_roles_set_and_clear_the_staff_flags(db):
    from dashboard.access.tokens import issue_token

    issue_token("flip", "admin")
    assert flags("flip") == (True, True)
    issue_token("flip", "viewer")   # re-issued as viewer: no longer a superuser
    assert flags("flip") == (False, False)
    grant("flip", "admin", namespaces=["team-a"])   # an admin with limits is no superuser either
    assert flags("flip") == (False, False)
    grant("flip", "admin")
    assert flags("flip") == (True, True)
    # A save of the user that sets the flags by hand does not make them a second source of rights.
    grant("flip", "editor")
    user = get_user_model().objects.get(username="flip")
    user.is_staff = user.is_superuser = True
    user.save()
    assert flags("flip") == (False, False)


def test_a_superuser_made_by_createsuperuser_is_an_admin(db):
    from dashboard.access.models import Profile

    get_user_model().objects.create_superuser("root", password="a-long-pass-phrase")
    assert Profile.objects.get(user__username="root").role == "admin"
    assert flags("root") == (True, True)
    get_user_model().objects.create_user("plain", password="a-long-pass-phrase")
    assert Profile.objects.get(user__username="plain").role == "viewer"
    assert flags("plain") == (False, False)


@pytest.mark.parametrize("limit", [{"namespaces": ["team-a"]}, {"clusters": ["local"]}])
def test_a_limited_admin_cannot_enter_djangos_admin_nor_lift_its_limits(db, limit, login):
    from dashboard.access.models import Profile
    from dashboard.access.tokens import create_token

    user = grant("boxed", "admin", **limit)
    boxed = Client()
    boxed.force_login(user)
    assert not enters_admin(boxed)
    # Straight at the change form, clearing its own limits: refused, nothing changed.
    full = login("admin", "full-admin")
    form = admin_change_form(full, user)
    form.update({"kube_profile-0-role": "admin", "kube_profile-0-namespaces": "", "kube_profile-0-clusters": ""})
    response = boxed.post(f"/admin/auth/user/{user.pk}/change/", form)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    profile = Profile.objects.get(user=user)
    assert (profile.namespaces, profile.clusters) == (limit.get("namespaces", []), limit.get("clusters", []))
    # So its token still cannot impersonate nor list every namespace.
    api = Api(Client(), create_token(user))
    everywhere = api.get(ALL_LEASES)
    if "namespaces" in limit:
        assert everywhere.status_code == 403
    impersonating = api.get(TEAM_A_LEASES, headers={"Impersonate-User": "full-admin"})
    assert impersonating.status_code == 403 and "cannot impersonate" in impersonating.json()["message"]


def test_a_demoted_admin_cannot_set_its_role_back(db):
    from dashboard.access.models import Profile

    user = grant("demoted", "admin")
    demoted = Client()
    demoted.force_login(user)
    assert enters_admin(demoted)
    form = admin_change_form(demoted, user)   # (read while still an admin)
    grant("demoted", "viewer")
    assert flags("demoted") == (False, False)
    assert not enters_admin(demoted)
    form.update({"kube_profile-0-role": "admin"})
    demoted.post(f"/admin/auth/user/{user.pk}/change/", form)
    assert Profile.objects.get(user=user).role == "viewer"


def test_an_unlimited_admin_edits_roles_in_djangos_admin_and_the_flags_follow(db, login):
    from dashboard.access.models import Profile

    full = login("admin", "full-admin")
    assert enters_admin(full)
    user = grant("someone", "viewer")
    form = admin_change_form(full, user)
    # The flags are shown, not offered: posting them changes nothing.
    form.update({"kube_profile-0-role": "admin", "kube_profile-0-namespaces": "team-a",
                 "kube_profile-0-clusters": "", "is_superuser": "on", "is_staff": "on"})
    response = full.post(f"/admin/auth/user/{user.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    profile = Profile.objects.get(user=user)
    assert (profile.role, profile.namespaces) == ("admin", ["team-a"])
    assert flags("someone") == (False, False)
    form["kube_profile-0-namespaces"] = ""
    form["kube_profile-0-id"] = str(profile.pk)
    assert full.post(f"/admin/auth/user/{user.pk}/change/", form).status_code == 302
    assert flags("someone") == (True, True)


# ---------------------------------------------------------------------------------------------
# The admin pages: clusters, tokens, share links, /metrics


def follow(name: str):
    from dashboard.follow.models import Cluster

    return Cluster.objects.create(name=name, server=f"https://{name}.example:6443", credentials=b"x",
                                  state=Cluster.LIVE, heartbeat_at=timezone.now(), last_event_at=timezone.now())


@pytest.mark.parametrize("limit", [{"namespaces": ["team-a"]}, {"clusters": ["local"]}])
def test_a_limited_admin_does_not_manage_followed_clusters(db, limit, login):
    follow("prodro")
    boxed = login("admin", "boxed", **limit)
    page = boxed.get("/clusters/")
    assert page.status_code == 403 and "prodro.example" not in page.content.decode()
    assert boxed.post("/clusters/prodro/writes/", {"writes": "as-user"}).status_code == 403
    assert boxed.post("/clusters/prodro/remove/").status_code == 403
    from dashboard.follow.models import Cluster
    assert Cluster.objects.get(name="prodro").writes == "read-only"
    assert 'href="/clusters/"' not in boxed.get("/").content.decode()   # not offered in the menu
    full = login("admin", "full-admin")
    assert "prodro.example" in full.get("/clusters/").content.decode()
    assert 'href="/clusters/"' in full.get("/").content.decode()


def test_a_namespace_limited_admin_sees_and_revokes_only_its_own_tokens_and_links(db, login):
    from dashboard.access.models import ApiToken, ShareLink
    from dashboard.access.tokens import token_works

    full = login("admin", "full-admin")
    full.post("/tokens/", {"name": "full-admins-token"})
    full_token = re.search(r'id="token-value" type="text" readonly value="([A-Za-z0-9_-]{40,})"',
                           full.post("/tokens/", {"name": "kept-token"}).content.decode()).group(1)
    full.post("/share/new/", {"kind": "Lease", "namespace": "team-b", "label": "team-b-link", "expiry": "1h"})
    boxed = login("admin", "boxed", namespaces=["team-a"])
    boxed.post("/tokens/", {"name": "boxed-token"})
    boxed.post("/share/new/", {"kind": "Lease", "namespace": "team-a", "label": "team-a-link", "expiry": "1h"})

    tokens = boxed.get("/tokens/").content.decode()
    assert "boxed-token" in tokens and "full-admins-token" not in tokens and "kept-token" not in tokens
    kept = ApiToken.objects.get(name="kept-token")
    assert boxed.post(f"/tokens/{kept.pk}/revoke/").status_code == 404
    assert token_works(full_token, "full-admin", "admin")
    links = boxed.get("/share/").content.decode()
    assert "team-a-link" in links and "team-b-link" not in links
    other = ShareLink.objects.get(label="team-b-link")
    assert boxed.post(f"/share/{other.pk}/revoke/").status_code == 404
    assert ShareLink.objects.get(pk=other.pk).revoked_at is None

    everything = full.get("/tokens/").content.decode()
    assert "boxed-token" in everything and "kept-token" in everything
    assert "team-a-link" in full.get("/share/").content.decode()


@pytest.mark.parametrize("limit", [{"namespaces": ["team-a"]}, {"clusters": ["local"]}])
def test_metrics_are_for_admins_without_limits(db, limit):
    from dashboard.access.tokens import create_token

    follow("prodro")
    user = grant("boxed", "admin", **limit)
    refused = Api(Client(), create_token(user)).get("/metrics")
    assert refused.status_code == 403 and "prodro" not in refused.content.decode()
    assert refused.json()["message"] == 'forbidden: User "boxed" cannot get path "/metrics"'
    full = grant("full-admin", "admin")
    assert Api(Client(), create_token(full)).get("/metrics").status_code == 200

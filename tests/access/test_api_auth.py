"""Authentication and roles on the API: 401 without credentials, 403 for what a role may not do."""
import pytest

from conftest import Api
from manifests import LEASES, lease

# CI runs this module again on PostgreSQL (.ci/run selects it by the marker).
pytestmark = [pytest.mark.django_db, pytest.mark.portable]


def test_no_credentials_is_401(client, db):
    r = Api(client, None).get(LEASES)
    assert r.status_code == 401
    assert r.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def test_bad_token_is_401(client, db):
    assert Api(client, "not-a-token").get(LEASES).status_code == 401


def test_revoked_token_is_401(make_api):
    from dashboard.access.models import ApiToken

    api = make_api("admin")
    assert api.get(LEASES).status_code == 200
    ApiToken.objects.update(revoked=True)
    assert api.get(LEASES).status_code == 401


def test_viewer_reads_but_cannot_write(make_api):
    admin = make_api("admin")
    admin.post(LEASES, lease())
    viewer = make_api("viewer")
    assert viewer.get(LEASES).status_code == 200
    assert viewer.get(f"{LEASES}/l1").status_code == 200
    for r in (viewer.post(LEASES, lease("l2")), viewer.patch(f"{LEASES}/l1", {"spec": {}}),
              viewer.put(f"{LEASES}/l1", lease()), viewer.delete(f"{LEASES}/l1"), viewer.delete(LEASES)):
        assert r.status_code == 403
        s = r.json()
        assert s["reason"] == "Forbidden" and 'User "viewer-user" cannot' in s["message"]
    assert admin.get(f"{LEASES}/l1").status_code == 200


def test_editor_writes(make_api):
    editor = make_api("editor")
    assert editor.post(LEASES, lease()).status_code == 201
    assert editor.delete(f"{LEASES}/l1").status_code == 200


def test_namespace_limited_user(make_api):
    make_api("admin").post("/apis/coordination.k8s.io/v1/namespaces/team-a/leases", lease(ns="team-a"))
    limited = make_api("editor", username="team-a-dev", namespaces=["team-a"])
    assert limited.get("/apis/coordination.k8s.io/v1/namespaces/team-a/leases").status_code == 200
    assert limited.get(LEASES).status_code == 403
    assert limited.get("/apis/coordination.k8s.io/v1/leases").status_code == 403
    assert limited.post(LEASES, lease()).status_code == 403


def test_discovery_is_public(client, db):
    assert client.get("/version").status_code == 200
    assert client.get("/apis").status_code == 200

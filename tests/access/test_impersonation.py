"""Impersonation in kubedash's own API (dashboard/access/impersonation.py), as kube-apiserver
does it: Impersonate-User / -Group / -Uid / -Extra-* from admins and tokens issued with
--impersonate; the impersonated identity's role and limits apply everywhere (REST, watches,
the reviews); 403 in kube's words otherwise; the request log names both identities. Through
the full Django stack (bearer tokens), then against a live server with kubectl, the Python
client and raw watches."""
from __future__ import annotations

import os
import subprocess
import time

import orjson
import pytest

from conftest import eventually, require_kubectl

LEASES = "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
ALL_LEASES = "/apis/coordination.k8s.io/v1/leases"
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
SSR = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def lease(name: str, holder: str = "a") -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": holder}}


def as_(user: str, *groups: str, **extra) -> dict:
    """Impersonation headers (the test client joins a repeated header with commas, as Django does)."""
    headers = {"Impersonate-User": user}
    if groups:
        headers["Impersonate-Group"] = ",".join(groups)
    headers.update(extra)
    return headers


def whoami(api, headers) -> dict:
    r = api.post(SSR, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, headers=headers)
    assert r.status_code == 201, r.content
    return r.json()["status"]["userInfo"]


@pytest.fixture
def alice(make_api):
    """A kubedash editor limited to namespace team-a (her token is not used: she is impersonated)."""
    make_api("editor", "alice", namespaces=["team-a"])
    return "alice"


def test_admin_acts_as_a_kubedash_user_with_her_role_and_limits(make_api, alice):
    admin = make_api("admin", "root")
    headers = as_(alice)
    assert admin.post(LEASES.format(ns="team-a"), lease("l1"), headers=headers).status_code == 201
    r = admin.post(LEASES.format(ns="team-b"), lease("l1"), headers=headers)
    assert r.status_code == 403
    assert r.json()["message"] == (
        'leases.coordination.k8s.io is forbidden: User "alice" cannot create resource "leases" in API group '
        '"coordination.k8s.io" in the namespace "team-b"')
    assert admin.get(ALL_LEASES, headers=headers).status_code == 403         # no cluster-wide reads
    assert admin.get(ALL_LEASES).status_code == 200                          # the admin herself may
    assert whoami(admin, headers) == {"username": "alice", "groups": ["system:authenticated"]}
    status = admin.post(SSAR, {"spec": {"resourceAttributes": {"namespace": "team-b", "verb": "get", "group":
                                        "coordination.k8s.io", "resource": "leases"}}}, headers=headers).json()["status"]
    assert status["allowed"] is False and 'namespace "team-b" is not among' in status["reason"]


@pytest.mark.parametrize("role", ["viewer", "editor"])
def test_others_are_refused_in_kubes_words(make_api, alice, role):
    api = make_api(role, f"bob-{role}")
    r = api.get(LEASES.format(ns="team-a"), headers=as_(alice))
    assert r.status_code == 403
    body = r.json()
    assert body["reason"] == "Forbidden" and body["details"] == {"name": "alice", "kind": "users"}
    assert body["message"].startswith(
        f'users "alice" is forbidden: User "bob-{role}" cannot impersonate resource "users" in API group "" '
        'at the cluster scope: only admins')
    # Without the headers the same token is served as itself.
    assert api.get(LEASES.format(ns="team-a")).status_code == 200


def test_an_admin_limited_to_namespaces_may_not_impersonate(make_api, alice):
    api = make_api("admin", "ns-admin", namespaces=["team-a"])
    assert api.get(LEASES.format(ns="team-a"), headers=as_(alice)).status_code == 403


def test_a_token_issued_with_impersonate_acts_beyond_its_own_role(db, client, alice):
    from conftest import Api
    from dashboard.access.tokens import issue_token

    service = Api(client, issue_token("writer-svc", "viewer", impersonate=True))
    assert service.post(LEASES.format(ns="team-a"), lease("svc")).status_code == 403   # itself: a viewer
    assert service.post(LEASES.format(ns="team-a"), lease("svc"), headers=as_(alice)).status_code == 201
    plain = Api(client, issue_token("writer-svc", "viewer"))                            # same user, no flag
    assert plain.get(LEASES.format(ns="team-a"), headers=as_(alice)).status_code == 403


def test_groups_decide_for_an_identity_kubedash_does_not_know(make_api):
    """The contract part B relies on: kubedash:role:<role> (the highest), limited to the
    kubedash:namespace:<ns> groups; no role group: nothing but discovery and the self reviews."""
    admin = make_api("admin", "root")
    editor_in_a = as_("carol", "kubedash:role:viewer", "kubedash:role:editor", "kubedash:namespace:team-a")
    assert admin.post(LEASES.format(ns="team-a"), lease("c"), headers=editor_in_a).status_code == 201
    assert admin.post(LEASES.format(ns="team-b"), lease("c"), headers=editor_in_a).status_code == 403
    assert admin.get(ALL_LEASES, headers=editor_in_a).status_code == 403
    viewer = as_("carol", "kubedash:role:viewer")
    assert admin.get(ALL_LEASES, headers=viewer).status_code == 200          # no namespace group: everywhere
    r = admin.post(LEASES.format(ns="team-b"), lease("c"), headers=viewer)
    assert r.status_code == 403 and 'User "carol" cannot create' in r.json()["message"]
    assert admin.post(LEASES.format(ns="team-b"), lease("c"), headers=as_("carol", "kubedash:role:admin")).status_code == 201
    nobody = as_("carol", "devs")
    r = admin.get(LEASES.format(ns="team-a"), headers=nobody)
    assert r.status_code == 403 and 'User "carol" cannot list' in r.json()["message"]
    assert admin.get("/apis/coordination.k8s.io/v1", headers=nobody).status_code == 200   # discovery
    assert whoami(admin, nobody) == {"username": "carol", "groups": ["devs", "system:authenticated"]}
    status = admin.post(SSAR, {"spec": {"resourceAttributes": {"verb": "get", "resource": "leases", "group":
                                        "coordination.k8s.io", "namespace": "x"}}}, headers=nobody).json()["status"]
    assert status == {"allowed": False, "reason": "kubedash: this identity has no kubedash role: impersonate a "
                      "kubedash user, or add a group kubedash:role:viewer, kubedash:role:editor or kubedash:role:admin"}
    rules = admin.post("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", {"spec": {"namespace": "team-a"}},
                       headers=editor_in_a).json()["status"]["resourceRules"]
    leases = next(r for r in rules if r["apiGroups"] == ["coordination.k8s.io"])
    assert "create" in leases["verbs"]


@pytest.mark.parametrize("role, namespaces", [("viewer", ()), ("editor", ("team-a", "team-b")), ("admin", ("x",))])
def test_groups_for_round_trips_a_role_and_its_limits(db, role, namespaces):
    """What part B sends upstream (groups_for) is read back as the same role and limits."""
    from dashboard.access.impersonation import Wanted, acting_as, groups_for
    from dashboard.access.principals import Principal

    groups = groups_for(Principal("someone", role, namespaces))
    assert groups == (f"kubedash:role:{role}", *(f"kubedash:namespace:{ns}" for ns in namespaces))
    back = acting_as(Wanted("someone-upstream-does-not-know", groups=groups))
    assert (back.role, back.namespaces) == (role, namespaces)


def test_a_kubedash_users_own_role_wins_over_groups(make_api, alice):
    admin = make_api("admin", "root")
    headers = as_(alice, "kubedash:role:admin")
    assert admin.post(LEASES.format(ns="team-b"), lease("x"), headers=headers).status_code == 403
    assert whoami(admin, headers)["groups"] == ["kubedash:role:admin", "system:authenticated"]


def test_a_deactivated_user_has_no_permissions(make_api, alice):
    from django.contrib.auth import get_user_model

    get_user_model().objects.filter(username=alice).update(is_active=False)
    admin = make_api("admin", "root")
    headers = as_(alice, "kubedash:role:admin")
    assert admin.get(LEASES.format(ns="team-a"), headers=headers).status_code == 403
    status = admin.post(SSAR, {"spec": {"resourceAttributes": {"verb": "get", "resource": "leases", "group":
                                        "coordination.k8s.io", "namespace": "team-a"}}}, headers=headers).json()["status"]
    assert status["allowed"] is False and "has no kubedash role" in status["reason"]


def test_uid_and_extra_are_shown_by_whoami(make_api):
    admin = make_api("admin", "root")
    info = whoami(admin, as_("dave", "kubedash:role:viewer", "system:authenticated", **{"Impersonate-Uid": "u-42",
                                                                 "Impersonate-Extra-Scopes": "view,edit",
                                                                 "Impersonate-Extra-Example.com%2fteam": "blue"}))
    assert info == {"username": "dave", "uid": "u-42", "groups": ["kubedash:role:viewer", "system:authenticated"],
                    "extra": {"example.com/team": ["blue"], "scopes": ["view", "edit"]}}


@pytest.mark.parametrize("headers, named", [
    ({"Impersonate-Group": "kubedash:role:admin"}, "groups kubedash:role:admin"),
    ({"Impersonate-Uid": "u-1"}, "uid u-1"),
    ({"Impersonate-Extra-Scopes": "x"}, "extra scopes"),
])
def test_groups_uid_or_extra_without_a_user_is_a_bad_request(make_api, headers, named):
    r = make_api("admin", "root").get(ALL_LEASES, headers=headers)
    assert r.status_code == 400
    body = r.json()
    assert body["reason"] == "BadRequest"
    assert body["message"] == (f"requested {named} without impersonating a user: send Impersonate-User too "
                               "(kubectl: --as)")


def test_one_user_at_a_time(make_api, alice):
    """Issue 43: two Impersonate-User headers (joined with a comma on their way in) were served as
    one user "a,b"; kube answers 400. The same for two Impersonate-Uid."""
    admin = make_api("admin")
    for headers in ({"Impersonate-User": "alice,bob"}, {"Impersonate-User": "alice", "Impersonate-Uid": "1,2"}):
        r = admin.get(LEASES.format(ns="team-a"), headers=headers)
        assert r.status_code == 400, r.content
        body = r.json()
        assert body["reason"] == "BadRequest" and "may be sent only once" in body["message"], body


def test_a_share_link_session_cannot_impersonate(make_api):
    """Only the API's callers: a principal from a share link is never an impersonator."""
    from dashboard.access.impersonation import may_impersonate
    from dashboard.access.principals import SHARE, Principal

    assert not may_impersonate(Principal("link", SHARE, kinds=("Lease",)), True)
    assert may_impersonate(Principal("root", "admin"), False)
    assert not may_impersonate(Principal("root", "admin", clusters=("prod",)), False)


def test_an_admins_browser_session_may_impersonate_too(db, login, make_api, alice):
    """The dashboard's own fetches (a session) go through the same step; /metrics too."""
    client = login("admin", "session-admin")
    headers = {"HTTP_IMPERSONATE_USER": alice}
    assert client.get(LEASES.format(ns="team-a"), **headers).status_code == 200
    r = client.get(LEASES.format(ns="team-b"), **headers)
    assert r.status_code == 403 and 'User "alice" cannot list' in r.json()["message"]
    admin = make_api("admin", "root")
    assert admin.get("/metrics").status_code == 200
    r = admin.get("/metrics", headers=as_(alice))
    assert r.status_code == 403 and r.json()["message"] == 'forbidden: User "alice" cannot get path "/metrics"'


def test_the_tokens_page_marks_tokens_that_may_impersonate(db, login):
    """An admin sees which tokens can act as anyone (they are issued from the command line only)."""
    from dashboard.access.tokens import issue_token

    issue_token("svc-writer", "viewer", name="writes-as-users", impersonate=True)
    issue_token("svc-reader", "viewer", name="reads-only")
    page = login("admin").get("/tokens/").content.decode()
    row = page[page.index('writes-as-users'):]
    assert "may impersonate" in row[:row.index("</tr>")]
    row = page[page.index('reads-only'):]
    assert "may impersonate" not in row[:row.index("</tr>")]


# ---------------------------------------------------------------------------------------------
# A live server: kubectl --as, the Python client, watches, the request log


@pytest.fixture(scope="module")
def live(kube_server):
    kube_server.manage("shell", "-c", (
        "from dashboard.access.tokens import ensure_user\n"
        "from dashboard.access.models import Profile\n"
        "ensure_user('imp-alice', 'editor')\n"
        "Profile.objects.filter(user__username='imp-alice').update(namespaces=['imp-a'])\n"))
    return kube_server


def _log_lines(server) -> list[dict]:
    out = []
    for raw in (server.data_dir / "server.log").read_text(errors="replace").splitlines():
        if raw.startswith("{"):
            try:
                out.append(orjson.loads(raw))
            except orjson.JSONDecodeError:
                pass
    return out


def test_kubectl_as_and_as_group(live, tmp_path):
    kubectl = require_kubectl()
    config = live.kubeconfig(tmp_path / "kubeconfig", username="imp-root", role="admin")
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(config)}

    def run(*args, stdin=None):
        return subprocess.run([kubectl, "--cache-dir", str(tmp_path / "cache"), *args], text=True, input=stdin,
                              capture_output=True, env=env, timeout=120)

    manifest = "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: by-alice}\nspec: {holderIdentity: a}\n"
    out = run("--as=imp-alice", "create", "-n", "imp-a", "-f", "-", stdin=manifest)
    assert out.returncode == 0, out.stderr
    out = run("--as=imp-alice", "get", "leases", "-n", "imp-b")
    assert out.returncode != 0
    assert ('leases.coordination.k8s.io is forbidden: User "imp-alice" cannot list resource "leases" in API group '
            '"coordination.k8s.io" in the namespace "imp-b"') in out.stderr
    out = run("--as=imp-alice", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert out.returncode == 0 and out.stdout == "imp-alice", out.stderr
    # An identity kubedash does not know, given a role and a namespace by groups.
    grouped = ["--as=ext-erin", "--as-group=kubedash:role:editor", "--as-group=kubedash:namespace:imp-b"]
    out = run(*grouped, "create", "-n", "imp-b", "-f", "-", stdin=manifest.replace("by-alice", "by-erin"))
    assert out.returncode == 0, out.stderr
    out = run(*grouped, "auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}")
    assert out.stdout == '["kubedash:role:editor","kubedash:namespace:imp-b","system:authenticated"]', (out.stdout,
                                                                                                   out.stderr)
    out = run(*grouped, "get", "leases", "-n", "imp-a")
    assert out.returncode != 0 and 'User "ext-erin" cannot list' in out.stderr
    # A viewer may not impersonate at all.
    viewer = live.kubeconfig(tmp_path / "viewer", username="imp-viewer", role="viewer")
    out = run("--kubeconfig", str(viewer), "--as=imp-alice", "get", "leases", "-n", "imp-a")
    assert out.returncode != 0
    assert ('users "imp-alice" is forbidden: User "imp-viewer" cannot impersonate resource "users" in API group "" '
            'at the cluster scope') in out.stderr


KUBECTL_131 = "/usr/lib/google-cloud-sdk/bin/kubectl.1.31"


@pytest.mark.skipif(not os.path.exists(KUBECTL_131), reason="needs the dispatcher's kubectl 1.31")
def test_kubectl_auth_can_i_as(live, tmp_path):
    """`kubectl auth can-i --as` answers for the impersonated user (1.31: the review as JSON)."""
    config = live.kubeconfig(tmp_path / "kubeconfig", username="imp-root-2", role="admin")
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(config)}
    for namespace, answer in (("imp-a", "yes"), ("imp-b", "no")):
        out = subprocess.run([KUBECTL_131, "--cache-dir", str(tmp_path / "cache"), "auth", "can-i", "create", "leases",
                              "-n", namespace, "--as=imp-alice"], text=True, capture_output=True, env=env, timeout=120)
        assert out.stdout.split(" - ")[0].strip() == answer, (namespace, out.stdout, out.stderr)


def test_python_client_with_impersonation_headers(live):
    from kubernetes import client as k8s
    from kubernetes.client.rest import ApiException

    config = k8s.Configuration()
    config.host = live.https_url
    config.ssl_ca_cert = live.ca_file
    config.api_key = {"authorization": "Bearer " + live.token("imp-py", "admin")}
    with k8s.ApiClient(config, header_name="Impersonate-User", header_value="imp-alice") as c:
        api = k8s.CoordinationV1Api(c)
        body = k8s.V1Lease(metadata=k8s.V1ObjectMeta(name="py"), spec=k8s.V1LeaseSpec(holder_identity="py"))
        created = api.create_namespaced_lease("imp-a", body, field_manager="imp-alice-tool")
        # managedFields names the manager the client chose, as kube records it (the user is in the log).
        assert [m.manager for m in created.metadata.managed_fields] == ["imp-alice-tool"]
        with pytest.raises(ApiException) as refused:
            api.list_namespaced_lease("imp-b")
        assert refused.value.status == 403
        assert 'User "imp-alice" cannot list' in orjson.loads(refused.value.body)["message"]


def test_the_request_log_names_both_identities(live):
    token = live.token("imp-auditor", "admin")
    status, headers, _ = live.request("GET", LEASES.format(ns="imp-a"), token=token,
                                      headers={"Impersonate-User": "imp-alice"})
    assert status == 200
    audit = headers["Audit-Id"]
    line = eventually(lambda: next((l for l in _log_lines(live) if l.get("auditID") == audit), None),
                      what="the request's log line")
    assert line["user"] == "imp-auditor" and line["impersonatedUser"] == "imp-alice"
    assert line["impersonatedGroups"] == [] and line["code"] == 200
    # A refused attempt is logged too, with its 403.
    viewer = live.token("imp-viewer-2", "viewer")
    status, headers, _ = live.request("GET", LEASES.format(ns="imp-a"), token=viewer,
                                      headers={"Impersonate-User": "imp-alice", "Impersonate-Group": "kubedash:role:admin"})
    assert status == 403
    audit = headers["Audit-Id"]
    line = eventually(lambda: next((l for l in _log_lines(live) if l.get("auditID") == audit), None),
                      what="the refused request's log line")
    assert (line["user"], line["impersonatedUser"], line["impersonatedGroups"], line["code"]) == (
        "imp-viewer-2", "imp-alice", ["kubedash:role:admin"], 403)
    # Requests that impersonate no one carry no such fields.
    status, headers, _ = live.request("GET", LEASES.format(ns="imp-a"), token=token)
    audit = headers["Audit-Id"]
    line = eventually(lambda: next((l for l in _log_lines(live) if l.get("auditID") == audit), None),
                      what="a plain request's log line")
    assert "impersonatedUser" not in line


@pytest.mark.slow
def test_a_watch_runs_as_the_impersonated_user_and_ends_with_the_impersonators_token(live):
    token = live.manage("issue_token", "imp-watcher", "--role", "viewer", "--impersonate").strip().splitlines()[-1]
    refused = live.watch(ALL_LEASES + "?watch=true", token=token, headers={"Impersonate-User": "imp-alice"})
    assert refused.status == 403   # alice is limited to imp-a: no cluster-wide watch
    refused.close()
    with live.watch(LEASES.format(ns="imp-a") + "?watch=true&resourceVersion=0", token=token,
                    headers={"Impersonate-User": "imp-alice"}) as stream:
        assert stream.status == 200
        assert live.request("POST", LEASES.format(ns="imp-a"), lease("watched"))[0] == 201
        seen = []
        while not any(e["object"]["metadata"]["name"] == "watched" for e in seen):
            event = stream.next(timeout=15)
            assert event is not None, seen
            seen.append(event)
        live.manage("shell", "-c", (
            "from dashboard.access.models import ApiToken\n"
            "for t in ApiToken.objects.filter(user__username='imp-watcher'):\n"
            "    t.revoked = True\n    t.save()\n"))
        while True:
            event = stream.next(timeout=30)
            assert event is not None, "the stream ended without an ERROR event"
            if event["type"] == "ERROR":
                break
        assert event["object"]["code"] == 401
    # The watch's log line (written when it ends) names both identities too.
    eventually(lambda: any(l.get("verb") == "WATCH" and l.get("user") == "imp-watcher" and l.get("code") == 200
                           and l.get("impersonatedUser") == "imp-alice" for l in _log_lines(live)),
               what="the watch's log line")


@pytest.mark.slow
def test_a_watch_ends_when_the_impersonated_users_limits_change(live):
    token = live.token("imp-watch-admin", "admin")
    live.manage("shell", "-c", (
        "from dashboard.access.tokens import ensure_user\n"
        "from dashboard.access.models import Profile\n"
        "ensure_user('imp-moved', 'viewer')\n"
        "Profile.objects.filter(user__username='imp-moved').update(namespaces=['imp-c'])\n"))
    with live.watch(LEASES.format(ns="imp-c") + "?watch=true&allowWatchBookmarks=true", token=token,
                    headers={"Impersonate-User": "imp-moved"}) as stream:
        assert stream.status == 200
        assert stream.next(timeout=15) is not None   # a bookmark: the stream is open
        live.manage("shell", "-c", (
            "from dashboard.access.models import Profile\n"
            "p = Profile.objects.get(user__username='imp-moved')\np.namespaces = ['imp-d']\np.save()\n"))
        deadline = time.monotonic() + 20   # (bookmarks arrive every second meanwhile)
        while True:
            event = stream.next(timeout=30)
            assert event is not None, "the stream ended without an ERROR event"
            if event["type"] == "ERROR":
                break
            assert time.monotonic() < deadline, "the stream outlived the impersonated user's access"
        assert event["object"]["code"] == 403 and 'User "imp-moved" cannot watch' in event["object"]["message"]


def test_two_impersonate_user_headers_on_the_wire_are_a_bad_request(live):
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", live.http_port, timeout=30)
    conn.putrequest("GET", LEASES.format(ns="imp-a"))
    conn.putheader("Authorization", f"Bearer {live.admin_token}")
    conn.putheader("Impersonate-User", "imp-alice")
    conn.putheader("Impersonate-User", "live-admin")
    conn.endheaders()
    resp = conn.getresponse()
    body = orjson.loads(resp.read())
    conn.close()
    assert resp.status == 400 and body["reason"] == "BadRequest", body


def test_a_watch_as_a_name_that_becomes_a_limited_user_ends(live):
    """Issue 43: a watch impersonating a name that is no user (its groups decide) kept those rights
    after the name became a user limited to another namespace. The user's creation now re-checks
    it (access-change notices by name), and its grant applies: 403."""
    token = live.token("imp-watch-admin-2", "admin")
    with live.watch(ALL_LEASES + "?watch=true&allowWatchBookmarks=true", token=token,
                    headers={"Impersonate-User": "imp-future", "Impersonate-Group": "kubedash:role:viewer"}) as stream:
        assert stream.status == 200
        assert stream.next(timeout=15) is not None   # a bookmark: the stream is open
        live.manage("shell", "-c", (
            "from dashboard.access.tokens import ensure_user\n"
            "from dashboard.access.models import Profile\n"
            "user = ensure_user('imp-future', 'viewer')\n"
            "p = Profile.objects.get(user=user)\np.namespaces = ['imp-z']\np.save()\n"))
        deadline = time.monotonic() + 20   # (bookmarks arrive every second meanwhile)
        while True:
            event = stream.next(timeout=30)
            assert event is not None, "the stream ended without an ERROR event"
            if event["type"] == "ERROR":
                break
            assert time.monotonic() < deadline, "the stream outlived the name becoming a limited user"
        assert event["object"]["code"] == 403 and 'User "imp-future" cannot watch' in event["object"]["message"]

"""Access reviews (dashboard/kube/reviews.py): SelfSubjectAccessReview, SelfSubjectRulesReview
and SelfSubjectReview answered from kubedash's roles, namespace limits and clusters, through the
full Django stack (bearer tokens), then with kubectl against a live server."""
from __future__ import annotations

import os
import subprocess

import pytest

from conftest import require_kubectl

SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
SSRR = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
SSR = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def ask(api, verb, resource, group="", namespace="default", subresource=""):
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "group": group,
                                            "resource": resource, "subresource": subresource}}}
    r = api.post(SSAR, body)
    assert r.status_code == 201, r.content
    out = r.json()
    assert out["kind"] == "SelfSubjectAccessReview" and out["spec"] == body["spec"]
    return out["status"]


@pytest.mark.parametrize("role, writes", [("admin", True), ("editor", True), ("viewer", False)])
def test_access_review_follows_the_role(make_api, role, writes):
    api = make_api(role)
    for verb in ("get", "list", "watch"):
        assert ask(api, verb, "leases", "coordination.k8s.io")["allowed"] is True
    for verb in ("create", "update", "patch", "delete", "deletecollection"):
        status = ask(api, verb, "jobs", "batch")
        assert status["allowed"] is writes, (verb, status)
        if not writes:
            assert status["reason"] == 'kubedash: role "viewer" may only read (get, list, watch)'
    assert ask(api, "update", "jobs", "batch", subresource="status")["allowed"] is writes
    assert ask(api, "*", "*", "*")["allowed"] is writes
    assert ask(api, "list", "endpoints", namespace="")["allowed"] is True     # cluster-wide read
    status = ask(api, "get", "pods")
    assert status == {"allowed": False, "reason": 'kubedash: kubedash serves no resource "pods" in API group ""'}
    assert ask(api, "get", "leases", "coordination.k8s.io", subresource="status")["allowed"] is False
    assert ask(api, "create", "selfsubjectaccessreviews", "authorization.k8s.io")["allowed"] is True


def test_access_review_namespace_limits_and_the_api_agree(make_api):
    """The review's answer is what the API then does: allowed where a write succeeds, refused
    where it is 403."""
    api = make_api("editor", "limited", namespaces=["team-a"])
    assert ask(api, "create", "leases", "coordination.k8s.io", namespace="team-a")["allowed"] is True
    status = ask(api, "create", "leases", "coordination.k8s.io", namespace="team-b")
    assert status["allowed"] is False and 'namespace "team-b" is not among' in status["reason"]
    assert ask(api, "list", "leases", "coordination.k8s.io", namespace="")["allowed"] is False
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
             "spec": {"holderIdentity": "a"}}
    assert api.post("/apis/coordination.k8s.io/v1/namespaces/team-a/leases", lease).status_code == 201
    assert api.post("/apis/coordination.k8s.io/v1/namespaces/team-b/leases", lease).status_code == 403
    assert api.get("/apis/coordination.k8s.io/v1/leases").status_code == 403


def test_non_resource_access(make_api):
    viewer, admin = make_api("viewer"), make_api("admin")

    def may(api, path):
        body = {"spec": {"nonResourceAttributes": {"verb": "get", "path": path}}}
        return api.post(SSAR, body).json()["status"]["allowed"]

    assert may(viewer, "/apis/batch/v1") and may(viewer, "/version") and may(viewer, "/healthz")
    assert not may(viewer, "/metrics") and may(admin, "/metrics")
    assert not may(viewer, "/logs")


def test_access_review_needs_exactly_one_attribute_set(api):
    r = api.post(SSAR, {"spec": {}})
    assert r.status_code == 422
    assert r.json()["message"] == ('.authorization.k8s.io "" is invalid: spec.resourceAttributes: '
                                   'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes '
                                   'must be specified')


def test_rules_review(make_api):
    viewer = make_api("viewer")
    r = viewer.post(SSRR, {"spec": {"namespace": "default"}})
    assert r.status_code == 201
    status = r.json()["status"]
    assert status["incomplete"] is False
    jobs = next(rule for rule in status["resourceRules"] if rule["apiGroups"] == ["batch"])
    assert jobs == {"verbs": ["get", "list", "watch"], "apiGroups": ["batch"], "resources": ["jobs", "jobs/status"]}
    editor = make_api("editor", "ed", namespaces=["team-a"])
    rules = editor.post(SSRR, {"spec": {"namespace": "team-a"}}).json()["status"]["resourceRules"]
    leases = next(rule for rule in rules if rule["apiGroups"] == ["coordination.k8s.io"])
    assert leases["verbs"] == ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
    rules = editor.post(SSRR, {"spec": {"namespace": "team-b"}}).json()["status"]["resourceRules"]
    assert [rule["apiGroups"] for rule in rules] == [["authentication.k8s.io"], ["authorization.k8s.io"]]


def test_self_subject_review(make_api):
    api = make_api("editor", "erin", namespaces=["team-a"])
    r = api.post(SSR, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert r.status_code == 201
    info = r.json()["status"]["userInfo"]
    assert info["username"] == "erin" and info["groups"] == ["kubedash:editor", "system:authenticated"]
    assert info["extra"] == {"kubedash.io/namespaces": ["team-a"]}
    # kubectl 1.32 sends kube's protobuf envelope around an empty SelfSubjectReview.
    envelope = b"k8s\x00\n-\n\x18authentication.k8s.io/v1\x12\x11SelfSubjectReview\x12\x00"
    r = api.post(SSR, envelope, content_type="application/vnd.kubernetes.protobuf")
    assert r.status_code == 201 and r.json()["status"]["userInfo"]["username"] == "erin"
    r = api.post(SSAR, envelope, content_type="application/vnd.kubernetes.protobuf")
    assert r.status_code == 415 and "send it as JSON" in r.json()["message"]


def test_reviews_need_credentials(client, db):
    assert client.post(SSAR, data=b"{}", content_type="application/json").status_code == 401


def test_discovery_lists_the_reviews(api):
    agg = api.get("/apis", headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"}).json()
    groups = {g["metadata"]["name"]: g for g in agg["items"]}
    authz = groups["authorization.k8s.io"]["versions"][0]["resources"]
    assert [(r["resource"], r["scope"], r["verbs"]) for r in authz] == [
        ("selfsubjectaccessreviews", "Cluster", ["create"]), ("selfsubjectrulesreviews", "Cluster", ["create"])]
    assert groups["authentication.k8s.io"]["versions"][0]["resources"][0]["responseKind"] == {
        "group": "authentication.k8s.io", "version": "v1", "kind": "SelfSubjectReview"}
    legacy = api.get("/apis/authorization.k8s.io/v1").json()
    assert [r["name"] for r in legacy["resources"]] == ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]
    assert api.get("/apis/authentication.k8s.io").json()["preferredVersion"]["version"] == "v1"


# ---------------------------------------------------------------------------------------------
# kubectl against a live server


KUBECTL_131 = "/usr/lib/google-cloud-sdk/bin/kubectl.1.31"


@pytest.fixture(scope="module")
def kubectl_as(kube_server, tmp_path_factory):
    """kubectl(role, *args, binary=...) as a user with that role (a kubeconfig each)."""
    default = require_kubectl()
    made = {}

    def run(user, *args, binary=None, stdin=None):
        if user not in made:
            home = tmp_path_factory.mktemp(f"kubectl-{user}")
            role = {"limited": "editor"}.get(user, user)
            made[user] = (home, kube_server.kubeconfig(home / "kubeconfig", username=f"can-i-{user}", role=role))
            if user == "limited":
                kube_server.manage("shell", "-c", "from dashboard.access.models import Profile; "
                                   "Profile.objects.filter(user__username='can-i-limited').update(namespaces=['team-a'])")
        home, config = made[user]
        env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(config)}
        return subprocess.run([binary or default, "--cache-dir", str(home / "cache"), *args], text=True,
                              input=stdin, capture_output=True, env=env, timeout=120)

    return run


CAN_I = [  # (user, args, answer)
    ("admin", ["create", "leases"], "yes"),
    ("admin", ["delete", "jobs", "-A"], "yes"),
    ("editor", ["patch", "jobs/status"], "yes"),
    ("editor", ["get", "endpoints", "-n", "other"], "yes"),
    ("viewer", ["list", "jobs", "-A"], "yes"),
    ("viewer", ["create", "jobs"], "no"),
    ("viewer", ["delete", "lease/x"], "no"),
    ("limited", ["create", "leases", "-n", "team-a"], "yes"),
    ("limited", ["create", "leases", "-n", "team-b"], "no"),
    ("limited", ["list", "leases", "-A"], "no"),
]


@pytest.mark.skipif(not os.path.exists(KUBECTL_131), reason="needs the dispatcher's kubectl 1.31")
@pytest.mark.parametrize("user, args, answer", CAN_I)
def test_kubectl_auth_can_i(kubectl_as, user, args, answer):
    """`kubectl auth can-i` prints yes / no and exits 0 / 1. kubectl 1.31: 1.32 sends the review
    as protobuf, which is not decoded here (docs/COMPATIBILITY.md)."""
    proc = kubectl_as(user, "auth", "can-i", *args, binary=KUBECTL_131)
    assert proc.stdout.split(" - ")[0].strip() == answer, (proc.stdout, proc.stderr)
    assert proc.returncode == (0 if answer == "yes" else 1)


@pytest.mark.skipif(not os.path.exists(KUBECTL_131), reason="needs the dispatcher's kubectl 1.31")
def test_kubectl_auth_can_i_list(kubectl_as):
    out = kubectl_as("viewer", "auth", "can-i", "--list", binary=KUBECTL_131)
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line[line.rindex("["):].strip() for line in out.stdout.splitlines()[1:] if "[" in line}
    assert lines["leases.coordination.k8s.io"] == "[get list watch]"
    assert lines["selfsubjectaccessreviews.authorization.k8s.io"] == "[create]"


def test_kubectl_auth_whoami(kubectl_as):
    """kubectl 1.32 (protobuf request, JSON answer)."""
    out = kubectl_as("limited", "auth", "whoami")
    assert out.returncode == 0, out.stderr
    assert "can-i-limited" in out.stdout and "kubedash:editor" in out.stdout
    out = kubectl_as("viewer", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
    assert out.stdout == "can-i-viewer"


def test_kubectl_132_auth_can_i_is_refused_clearly(kubectl_as):
    """kubectl 1.32 sends the SelfSubjectAccessReview as protobuf: refused with 415 naming JSON."""
    out = kubectl_as("admin", "auth", "can-i", "create", "leases")
    assert out.returncode != 0 and "not read from protobuf" in out.stderr


def test_reviews_under_a_cluster_path(kube_server):
    """/clusters/<name>/...: the review is answered there (its POST writes nothing), and writes
    are not allowed, as the API under that prefix serves reads only."""
    token = kube_server.token("cluster-path-editor", "editor")
    for verb, allowed in (("get", True), ("list", True), ("create", False), ("delete", False)):
        body = {"spec": {"resourceAttributes": {"namespace": "default", "verb": verb,
                                                "group": "coordination.k8s.io", "resource": "leases"}}}
        status, _, out = kube_server.request("POST", f"/clusters/local{SSAR}", body, token=token)
        assert status == 201 and out["status"]["allowed"] is allowed, (verb, out)
    assert "read-only" in out["status"]["reason"]
    status, _, rules = kube_server.request("POST", f"/clusters/local{SSRR}", {"spec": {"namespace": "default"}},
                                           token=token)
    leases = next(r for r in rules["status"]["resourceRules"] if r["apiGroups"] == ["coordination.k8s.io"])
    assert leases["verbs"] == ["get", "list", "watch"]
    status, _, _ = kube_server.request("POST", f"/clusters/local{SSAR}", body, token=token)
    assert status == 201
    # Other writes there are still refused before the body.
    status, _, _ = kube_server.request("POST", "/clusters/local/apis/coordination.k8s.io/v1/namespaces/default/leases",
                                       {"metadata": {"name": "x"}}, token=token)
    assert status == 405


SSAR_YAML = """\
apiVersion: authorization.k8s.io/v1
kind: SelfSubjectAccessReview
spec:
  resourceAttributes: {namespace: default, verb: %s, group: batch, resource: jobs}
"""


@pytest.mark.parametrize("user, verb, allowed", [("viewer", "get", "true"), ("viewer", "delete", "false"),
                                                 ("editor", "delete", "true")])
def test_kubectl_132_creates_an_access_review_from_a_manifest(kubectl_as, user, verb, allowed):
    """kubectl 1.32's `create -f` sends the review as JSON (its dynamic client): the answer comes
    back in status. (--validate=false: with no PATCH operation to carry fieldValidation, kubectl
    would validate client-side from /openapi/v2 in protobuf, as for kube-apiserver's reviews.)"""
    out = kubectl_as(user, "create", "--validate=false", "-f", "-", "-o", "jsonpath={.status.allowed}",
                     stdin=SSAR_YAML % verb)
    assert out.returncode == 0, out.stderr
    assert out.stdout == allowed


def test_kubectl_explains_the_reviews(kubectl_as):
    """The reviews are in discovery and /openapi/v3 (components.schemas): `kubectl explain`."""
    out = kubectl_as("viewer", "explain", "selfsubjectaccessreviews.spec.resourceAttributes")
    assert out.returncode == 0, out.stderr
    assert "KIND:       SelfSubjectAccessReview" in out.stdout and "verb" in out.stdout


@pytest.mark.parametrize("role", ["admin", "editor", "viewer"])
def test_pages_show_the_buttons_the_review_allows(make_api, login, role):
    """The detail page's Edit / Delete toolbar and the list's New button appear exactly when
    `kubectl auth can-i update / create` would say yes for that user (one function answers)."""
    admin = make_api("admin")
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "btn"},
             "spec": {"holderIdentity": "a"}}
    assert admin.post("/apis/coordination.k8s.io/v1/namespaces/default/leases", lease).status_code == 201
    page_user = login(role, f"pages-{role}")
    api = make_api(role, f"pages-{role}")
    may_update = ask(api, "update", "leases", "coordination.k8s.io")["allowed"]
    may_create = ask(api, "create", "leases", "coordination.k8s.io")["allowed"]
    detail = page_user.get("/leases/default/btn/").content.decode()
    listing = page_user.get("/leases/?namespace=default").content.decode()
    assert ('id="edit-toolbar"' in detail) is may_update is (role != "viewer")
    assert ("new-object" in listing) is may_create is (role != "viewer")

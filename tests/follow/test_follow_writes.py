"""Editing a followed cluster through the dashboard (follow/writes.py): a second kubedash server
is the upstream; the pages (Django's test client, in this process) write through to it, in
own-credentials mode (each user's kubeconfig for the upstream) and as-user mode (the cluster's
admin credentials, impersonating the user). The copy is seeded as the follower would (a list,
mirrored); what a write returns is mirrored at once (read-your-writes)."""
from __future__ import annotations

import json
import logging
import re
from html import unescape

import pytest

from conftest import served
from manifests import endpoints, job, lease
from page_helpers import form_fields

pytestmark = pytest.mark.django_db(transaction=True)

LEASES = "/apis/coordination.k8s.io/v1/namespaces/team/leases"
JOBS = "/apis/batch/v1/namespaces/team/jobs"
ENDPOINTS = "/api/v1/namespaces/team/endpoints"
PATHS = {"Lease": LEASES, "Job": JOBS, "Endpoints": ENDPOINTS}


@pytest.fixture(scope="module")
def up(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("upstream")
    with served(data_dir) as server:
        kubeconfigs = {}
        for user, role in (("alice", "editor"), ("bob", "viewer"), ("follower", "admin")):
            kubeconfigs[user] = server.kubeconfig(data_dir / f"{user}.kubeconfig", user, role).read_text()
        server.kubeconfigs = kubeconfigs
        yield server


@pytest.fixture
def objects(up):
    """Fresh upstream objects for each test (names from a counter: the upstream is shared)."""
    objects.n = getattr(objects, "n", 0) + 1
    n = objects.n
    names = {"lease": f"l{n}", "job": f"j{n}", "eps": f"e{n}"}
    for path, body in ((LEASES, lease(names["lease"], holder="a", ns="team")),
                       (JOBS, job(names["job"], ns="team")),
                       (ENDPOINTS, endpoints(names["eps"], ns="team", ips=("10.1.0.1",)))):
        status, _, answer = up.request("POST", path, body)
        assert status == 201, answer
    return names


def upstream_get(up, kind: str, name: str):
    status, _, body = up.request("GET", f"{PATHS[kind]}/{name}")
    return body if status == 200 else None


def follow(up, mode: str):
    """prod, in `mode`, its copy seeded from a list of the upstream (what the follower does)."""
    from dashboard.follow import admit, following
    from dashboard.kube import mirror, registry

    cluster = following.add("prod", up.kubeconfigs["follower"], writes=mode)
    for kind, path in PATHS.items():
        status, _, body = up.request("GET", path)
        assert status == 200
        res = registry.by_kind(kind)
        mirror.mirror("prod", [mirror.Mirrored(res, "team", o["metadata"]["name"], admit.admit(res, o))
                               for o in body["items"]])
    return cluster


@pytest.fixture
def user(login):
    """user(name, role, kubeconfig=None, cluster=None) -> a signed-in Client; with a kubeconfig,
    the user's own credentials for the cluster (own-credentials mode)."""
    from dashboard.access.tokens import ensure_user
    from dashboard.follow import following

    def sign_in(name: str, role: str, kubeconfig: str | None = None, cluster=None):
        client = login(role, name)
        if kubeconfig is not None:
            following.save_user_credentials(cluster, ensure_user(name, role), kubeconfig)
        return client

    return sign_in


def copy_of(kind: str, name: str):
    from dashboard.access import clusters
    from dashboard.kube import registry, store
    from dashboard.kube.errors import ApiError

    with clusters.within("prod"):
        try:
            return store.get(registry.by_kind(kind), "team", name)
        except ApiError:
            return None


def text(resp) -> str:
    return resp.content.decode()


def messages(client) -> str:
    return text(client.get("/leases/?cluster=prod"))


def managers(obj) -> set:
    return {f.get("manager") for f in obj["metadata"].get("managedFields") or []}


# ---------------------------------------------------------------------------------------------


def test_form_edit_lands_upstream_and_shows_at_once(up, objects, caplog, user):
    cluster = follow(up, "own-credentials")
    alice = user("alice", "editor", up.kubeconfigs["alice"], cluster)
    name = objects["lease"]
    url = f"/leases/team/{name}/edit/?cluster=prod"
    form = alice.get(url)
    assert form.status_code == 200, text(form)
    data = form_fields(text(form))
    data["holder"] = "from-the-form"
    with caplog.at_level(logging.INFO, logger="kubedash.audit"):
        saved = alice.post(url, data)
    assert saved.status_code == 302, (data, re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text(saved)))[:3000])
    assert saved["Location"] == f"/leases/team/{name}/?cluster=prod"
    there = upstream_get(up, "Lease", name)
    assert there["spec"]["holderIdentity"] == "from-the-form"
    assert "kubedash" in managers(there)                       # the upstream records who wrote it
    # Read-your-writes: the copy already holds the upstream's answer, before any follower.
    assert copy_of("Lease", name)["spec"]["holderIdentity"] == "from-the-form"
    assert "from-the-form" in text(alice.get(f"/leases/team/{name}/?cluster=prod"))
    # History attributes the change to the manager upstream recorded.
    history = text(alice.get(f"/leases/team/{name}/history/?cluster=prod"))
    assert "kubedash" in history and "from-the-form" in history
    line = json.loads([r.getMessage() for r in caplog.records if r.name == "kubedash.audit"][-1])
    assert line["user"] == "alice" and line["verb"] == "update" and line["upstreamStatus"] == 200
    assert line["cluster"] == "prod" and line["name"] == name and "own credentials" in line["upstreamIdentity"]


def test_yaml_edit_and_actions(up, objects, user):
    cluster = follow(up, "own-credentials")
    alice = user("alice", "editor", up.kubeconfigs["alice"], cluster)
    lname, jname, ename = objects["lease"], objects["job"], objects["eps"]
    url = f"/leases/team/{lname}/yaml/?cluster=prod"
    data = form_fields(text(alice.get(url)))
    data["yaml"] = data["yaml"].replace("holderIdentity: a", "holderIdentity: from-yaml")
    assert alice.post(url, data).status_code == 302
    assert upstream_get(up, "Lease", lname)["spec"]["holderIdentity"] == "from-yaml"
    # What upstream refuses as invalid (422) is shown by its causes, and nothing changes.
    data = form_fields(text(alice.get(url)))
    data["yaml"] = re.sub(r"leaseDurationSeconds: \d+", "leaseDurationSeconds: -5", data["yaml"])
    invalid = alice.post(url, data)
    assert invalid.status_code == 422, text(invalid)[:2000]
    shown = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", unescape(text(invalid))))
    assert "spec.leaseDurationSeconds: Must be greater than 0" in shown, shown[:3000]   # upstream's cause
    assert upstream_get(up, "Lease", lname)["spec"]["leaseDurationSeconds"] == 15
    # Release
    done = alice.post(f"/leases/team/{lname}/release/?cluster=prod", {"holder": "from-yaml"})
    assert done.status_code == 302
    assert not upstream_get(up, "Lease", lname)["spec"].get("holderIdentity")
    assert not copy_of("Lease", lname)["spec"].get("holderIdentity")
    # Mark not ready
    alice.post(f"/endpoints/team/{ename}/readiness/?cluster=prod", {"ip": "10.1.0.1", "ready": "false"})
    subset = upstream_get(up, "Endpoints", ename)["subsets"][0]
    assert [a["ip"] for a in subset.get("notReadyAddresses", [])] == ["10.1.0.1"]
    # Suspend, resume
    alice.post(f"/jobs/team/{jname}/suspend/?cluster=prod", {"suspend": "true"})
    assert upstream_get(up, "Job", jname)["spec"]["suspend"] is True
    alice.post(f"/jobs/team/{jname}/suspend/?cluster=prod", {"suspend": "false"})
    assert upstream_get(up, "Job", jname)["spec"]["suspend"] is False
    assert copy_of("Job", jname)["spec"]["suspend"] is False


def test_bulk_suspend_and_delete_with_undo(up, objects, user):
    cluster = follow(up, "own-credentials")
    alice = user("alice", "editor", up.kubeconfigs["alice"], cluster)
    jname = objects["job"]
    post = {"action": "suspend", "selected": [f"team/{jname}"], "next": "/jobs/?cluster=prod", "confirm": "1"}
    done = alice.post("/jobs/bulk/?cluster=prod", post)
    assert done.status_code == 302 and done["Location"] == "/jobs/?cluster=prod"
    assert upstream_get(up, "Job", jname)["spec"]["suspend"] is True
    # Delete, then undo: created again upstream (a new uid), and here at once.
    uid = upstream_get(up, "Job", jname)["metadata"]["uid"]
    post = {"action": "delete", "selected": [f"team/{jname}"], "next": "/jobs/?cluster=prod", "confirm": "1"}
    assert alice.post("/jobs/bulk/?cluster=prod", post).status_code == 302
    assert upstream_get(up, "Job", jname) is None and copy_of("Job", jname) is None
    html = text(alice.get("/jobs/?cluster=prod"))
    undo_id = re.search(r'name="undo" value="([^"]+)"', html).group(1)
    assert alice.post("/jobs/bulk-undo/?cluster=prod", {"undo": undo_id, "next": "/jobs/?cluster=prod"}).status_code == 302
    again = upstream_get(up, "Job", jname)
    assert again is not None and again["metadata"]["uid"] != uid
    assert copy_of("Job", jname)["metadata"]["uid"] == again["metadata"]["uid"]


def test_detail_delete_goes_upstream(up, objects, user):
    cluster = follow(up, "own-credentials")
    alice = user("alice", "editor", up.kubeconfigs["alice"], cluster)
    lname = objects["lease"]
    page = text(alice.get(f"/leases/team/{lname}/delete/?cluster=prod"))
    uid = re.search(r'name="uid" value="([^"]+)"', page).group(1)
    done = alice.post(f"/leases/team/{lname}/delete/?cluster=prod", {"uid": uid})
    assert done.status_code == 302 and "cluster=prod" in done["Location"]
    assert upstream_get(up, "Lease", lname) is None and copy_of("Lease", lname) is None


def test_upstream_refusal_is_shown_and_nothing_changes(up, objects, user):
    cluster = follow(up, "own-credentials")
    bob = user("bob", "editor", up.kubeconfigs["bob"], cluster)      # an editor here, a viewer upstream
    name = objects["lease"]
    url = f"/leases/team/{name}/edit/?cluster=prod"
    detail = text(bob.get(f"/leases/team/{name}/?cluster=prod"))
    # Buttons follow permission: the upstream's access review says no, so they are disabled, with why.
    assert "the cluster refuses: bob may not update leases" in detail and f'href="/leases/team/{name}/edit/' not in detail
    listing = unescape(text(bob.get("/leases/?cluster=prod&namespace=team")))
    assert "the cluster refuses: bob may not create leases" in listing and "bulk-form" not in listing
    data = form_fields(text(bob.get(url)))
    data["holder"] = "bob-was-here"
    refused = bob.post(url, data)
    assert refused.status_code == 403
    assert "the cluster refused: " in unescape(text(refused)) and "cannot update" in unescape(text(refused))
    assert upstream_get(up, "Lease", name)["spec"]["holderIdentity"] == "a"
    assert copy_of("Lease", name)["spec"]["holderIdentity"] == "a"


def test_concurrent_upstream_write_gives_the_conflict_page(up, objects, user):
    cluster = follow(up, "own-credentials")
    alice = user("alice", "editor", up.kubeconfigs["alice"], cluster)
    name = objects["lease"]
    url = f"/leases/team/{name}/edit/?cluster=prod"
    data = form_fields(text(alice.get(url)))
    status, _, _ = up.request("PATCH", f"{LEASES}/{name}", {"spec": {"holderIdentity": "someone-else"}},
                              content_type="application/merge-patch+json")
    assert status == 200
    data["holder"] = "mine"
    page = alice.post(url, data)
    assert page.status_code == 409, text(page)
    # The conflict page compares with what the cluster holds now (fetched and mirrored on the 409).
    assert "someone-else" in text(page) and copy_of("Lease", name)["spec"]["holderIdentity"] == "someone-else"
    assert upstream_get(up, "Lease", name)["spec"]["holderIdentity"] == "someone-else"


def test_viewer_share_link_and_missing_credentials_cannot_write(up, objects, user):
    from dashboard.follow.models import UserCredentials

    cluster = follow(up, "own-credentials")
    user("alice", "editor", up.kubeconfigs["alice"], cluster)
    name = objects["lease"]
    viewer = user("vic", "viewer")
    assert viewer.post(f"/leases/team/{name}/release/?cluster=prod", {"holder": "a"}).status_code == 403
    # carol is an editor here but stored no credentials for prod: never alice's.
    carol = user("carol", "editor")
    refused = carol.post(f"/leases/team/{name}/release/?cluster=prod", {"holder": "a"})
    assert refused.status_code == 403 and "store your kubeconfig for prod" in unescape(text(refused))
    detail = unescape(text(carol.get(f"/leases/team/{name}/?cluster=prod")))
    assert "store your kubeconfig for prod" in detail and 'href="/clusters/prod/credentials/"' in detail
    assert upstream_get(up, "Lease", name)["spec"]["holderIdentity"] == "a"
    assert UserCredentials.objects.filter(user__username="carol").count() == 0


def test_read_only_mode_stays_read_only(up, objects, user):
    follow(up, "read-only")
    alice = user("alice", "editor")
    name = objects["lease"]
    assert alice.post(f"/leases/team/{name}/release/?cluster=prod", {"holder": "a"}).status_code == 405
    assert upstream_get(up, "Lease", name)["spec"]["holderIdentity"] == "a"


def test_as_user_impersonates_the_signed_in_user(up, objects, caplog, user):
    cluster = follow(up, "as-user")
    # alice is an editor upstream: her own upstream role applies to the impersonated request.
    alice = user("alice", "editor")
    name = objects["lease"]
    with caplog.at_level(logging.INFO, logger="kubedash.audit"):
        done = alice.post(f"/leases/team/{name}/release/?cluster=prod", {"holder": "a"})
    assert done.status_code == 302
    assert not upstream_get(up, "Lease", name)["spec"].get("holderIdentity")
    line = json.loads([r.getMessage() for r in caplog.records if r.name == "kubedash.audit"][-1])
    assert line["mode"] == "as-user" and "impersonated" in line["upstreamIdentity"]
    # bob is a viewer upstream: impersonating him, the cluster refuses, whatever kubedash's role.
    bob = user("bob", "editor")
    refused = bob.post(f"/leases/team/{name}/release/?cluster=prod", {"holder": ""})
    assert refused.status_code == 302
    assert "the cluster refused" in unescape(text(bob.get(f"/leases/team/{name}/?cluster=prod")))
    assert cluster.writes == "as-user"


def test_user_credentials_must_name_the_clusters_server(up):
    from dashboard.access.tokens import ensure_user
    from dashboard.follow import following
    from dashboard.follow.upstream_kubeconfig import KubeconfigError

    cluster = follow(up, "own-credentials")
    other = up.kubeconfigs["alice"].replace("https://127.0.0.1:", "https://localhost:")
    with pytest.raises(KubeconfigError, match="server is not prod's"):
        following.save_user_credentials(cluster, ensure_user("alice", "editor"), other)


def test_clusters_page_sets_the_mode_and_stores_a_users_credentials(up, objects, user):
    from django.core.management import call_command

    from dashboard.follow.models import Cluster, UserCredentials

    follow(up, "read-only")
    admin = user("root", "admin")
    page = text(admin.get("/clusters/"))
    assert "Impersonate-User: root; Impersonate-Group: kubedash:role:admin" in page
    assert admin.post("/clusters/prod/writes/", {"writes": "own-credentials"}).status_code == 302
    assert Cluster.objects.get(name="prod").writes == "own-credentials"
    alice = user("alice", "editor")
    assert alice.post("/clusters/prod/writes/", {"writes": "as-user"}).status_code == 403
    saved = alice.post("/clusters/prod/credentials/", {"kubeconfig": up.kubeconfigs["alice"]})
    assert saved.status_code == 302
    token = re.search(r"token: (\S+)", up.kubeconfigs["alice"]).group(1)
    shown = text(alice.get("/clusters/prod/credentials/"))
    assert "You stored credentials" in shown and token not in shown
    assert UserCredentials.objects.filter(user__username="alice", cluster__name="prod").count() == 1
    # ... and they work: alice's release lands upstream.
    name = objects["lease"]
    assert alice.post(f"/leases/team/{name}/release/?cluster=prod", {"holder": "a"}).status_code == 302
    assert not upstream_get(up, "Lease", name)["spec"].get("holderIdentity")
    refused = alice.post("/clusters/prod/credentials/", {"kubeconfig": "apiVersion: v1\nkind: Config\n"})
    assert refused.status_code == 400
    call_command("follow", "set", "prod", "--writes", "as-user")
    assert Cluster.objects.get(name="prod").writes == "as-user"


def test_as_user_sends_the_role_and_namespace_groups(up, objects, login):
    """A user the upstream does not know gets what the groups carry (part A's contract): an
    editor limited to namespace team may change team's objects upstream."""
    follow(up, "as-user")
    nina = login("editor", "nina-only-here", namespaces=["team"])
    name = objects["lease"]
    assert nina.post(f"/leases/team/{name}/release/?cluster=prod", {"holder": "a"}).status_code == 302
    there = upstream_get(up, "Lease", name)
    assert not there["spec"].get("holderIdentity")
    vic = login("editor", "vic-only-here", namespaces=["elsewhere"])
    assert vic.post(f"/leases/team/{name}/release/?cluster=prod", {"holder": ""}).status_code == 403   # kubedash's own limit first


def test_a_share_link_of_a_writable_cluster_never_writes(up, objects, user):
    from django.test import Client

    cluster = follow(up, "as-user")
    alice = user("alice", "editor", up.kubeconfigs["alice"], cluster)
    name = objects["lease"]
    made = alice.post("/share/new/?cluster=prod", {"kind": "Lease", "namespace": "team", "label": "on-call",
                                                    "expiry": "1d"})
    token = re.search(r"/s/([A-Za-z0-9_-]{40,})/", text(made)).group(1)
    visitor = Client()
    assert visitor.get(f"/s/{token}/").status_code == 302
    page = text(visitor.get(f"/leases/team/{name}/?cluster=prod"))
    assert f"/leases/team/{name}/edit/" not in page and "release/" not in page
    for url, body in ((f"/leases/team/{name}/release/?cluster=prod", {"holder": "a"}),
                      (f"/leases/team/{name}/delete/?cluster=prod", {}),
                      ("/leases/bulk/?cluster=prod", {"action": "delete", "selected": [f"team/{name}"], "confirm": "1"})):
        assert visitor.post(url, body).status_code in (403, 404), url
    there = upstream_get(up, "Lease", name)
    assert there is not None and there["spec"]["holderIdentity"] == "a"


def test_upstream_words_are_bounded_and_only_a_status_message():
    """Only a kube Status's message (and its causes) is shown, printable and bounded; any other
    body (an internal page, a secret) never is."""
    from types import SimpleNamespace

    from dashboard.follow.writes import MAX_SHOWN, Writer
    from dashboard.kube.registry import by_kind

    writer = Writer(SimpleNamespace(name="prod", writes="as-user"), SimpleNamespace(username="alice"))
    res = by_kind("Lease")
    html = writer._error(403, {"error": "SECRET-TOKEN abc", "kind": "NotAStatus"}, res, "l1")
    assert html.code == 403 and html.message == "the cluster refused: forbidden" and "SECRET" not in str(html.status())
    long = writer._error(403, {"kind": "Status", "message": "no\r\nSet-Cookie: x" + "y" * 5000}, res, "l1")
    assert "\n" not in long.message and "\r" not in long.message and len(long.message) <= MAX_SHOWN + 40
    internal = writer._error(500, {"kind": "Status", "message": "stack trace SECRET"}, res, "l1")
    assert internal.code == 502 and "SECRET" not in internal.message and "HTTP 500" in internal.message


def test_create_from_yaml_and_create_again_after_a_delete(up, objects, user):
    cluster = follow(up, "own-credentials")
    alice = user("alice", "editor", up.kubeconfigs["alice"], cluster)
    name = f"{objects['lease']}-new"
    url = "/leases/new/?as=yaml&namespace=team&cluster=prod"
    data = form_fields(text(alice.get(url)))
    data["yaml"] = (f"apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: {name}\n  namespace: team\n"
                    "spec:\n  holderIdentity: made-here\n")
    made = alice.post(url, data)
    assert made.status_code == 302 and made["Location"] == f"/leases/team/{name}/?cluster=prod"
    assert upstream_get(up, "Lease", name)["spec"]["holderIdentity"] == "made-here"
    assert copy_of("Lease", name)["spec"]["holderIdentity"] == "made-here"
    # Deleted upstream by someone else: the deleted page offers "Create it again", which goes upstream.
    status, _, _ = up.request("DELETE", f"{LEASES}/{name}")
    assert status == 200
    from dashboard.kube import mirror, registry
    mirror.mirror("prod", [mirror.Mirrored(registry.by_kind("Lease"), "team", name, None)])   # (the follower's part)
    gone = alice.get(f"/leases/team/{name}/?cluster=prod")
    assert gone.status_code == 404 and f'action="/leases/team/{name}/restore/?cluster=prod"' in text(gone)
    again = alice.post(f"/leases/team/{name}/restore/?cluster=prod")
    assert again.status_code == 302 and again["Location"] == f"/leases/team/{name}/?cluster=prod"
    assert upstream_get(up, "Lease", name)["spec"]["holderIdentity"] == "made-here"


def test_the_followers_older_events_never_undo_a_mirrored_write():
    """Read-your-writes: once a write's answer is mirrored (upstream rv 12), the follower's
    events for older versions (11, still in its queue) are not applied; newer ones are."""
    from dashboard.kube import mirror, registry

    res = registry.by_kind("Lease")

    def at(rv: int, holder: str) -> dict:
        obj = lease("rw", holder=holder, ns="team")
        obj["metadata"].update(uid="u-rw", resourceVersion=str(rv), creationTimestamp="2026-01-02T03:04:05Z")
        return obj

    def put(obj, **kw):
        return mirror.mirror("prod", [mirror.Mirrored(res, "team", "rw", obj, **kw)])

    put(at(10, "old"))
    put(at(12, "written"))                                  # the dashboard's write, mirrored at once
    assert put(at(11, "in-between"), newer_only=True) == 0  # the follower's queued event: older
    assert put(None, newer_only=True, upstream_rv="11") == 0
    assert copy_of("Lease", "rw")["spec"]["holderIdentity"] == "written"
    assert put(at(13, "later"), newer_only=True) == 1
    assert put(None, newer_only=True, upstream_rv="14") == 1 and copy_of("Lease", "rw") is None


def test_run_again_goes_upstream(up, objects, user):
    """A finished Job's "Run again" on a followed cluster: the copy is created upstream, as the
    user, and mirrored here at once (batch/actions.py do_rerun_job through the writer)."""
    jname = objects["job"]
    at = "2026-11-29T00:00:00Z"
    done = {"succeeded": 1, "startTime": at, "completionTime": at, "conditions": [
        {"type": kind, "status": "True", "lastProbeTime": at, "lastTransitionTime": at}
        for kind in ("SuccessCriteriaMet", "Complete")]}
    status, _, answer = up.request("PATCH", f"{JOBS}/{jname}/status", {"status": done},
                                   content_type="application/merge-patch+json")
    assert status == 200, answer
    cluster = follow(up, "own-credentials")
    alice = user("alice", "editor", up.kubeconfigs["alice"], cluster)
    confirm = text(alice.get(f"/jobs/team/{jname}/rerun/?cluster=prod"))
    suffix = re.search(r'name="suffix" value="([a-z0-9]{5})"', confirm).group(1)
    r = alice.post(f"/jobs/team/{jname}/rerun/?cluster=prod", {"suffix": suffix})
    assert r.status_code == 302 and r["Location"] == f"/jobs/team/{jname}-{suffix}/?cluster=prod"
    made = upstream_get(up, "Job", f"{jname}-{suffix}")
    assert made["metadata"]["annotations"]["kubedash.io/rerun-of"] == jname
    assert made["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"] == made["metadata"]["uid"]
    assert copy_of("Job", f"{jname}-{suffix}")["metadata"]["uid"] == made["metadata"]["uid"]


def test_as_user_carries_an_oidc_users_groups(up, objects):
    """A person signed in through the identity provider (issue 37), editor in two namespaces by
    two group bindings: as-user sends their highest grant alone as the kubedash: groups, and
    their provider's groups beside (docs/FOLLOWING.md), which the upstream matches against its own
    group bindings: a write in the namespace the kubedash: groups do not carry lands upstream only
    once the upstream binds the provider's group."""
    from django.test import Client

    from dashboard.access import bindings, oidc
    from dashboard.access.principals import principal_for
    from dashboard.follow import admit
    from dashboard.follow.writes import impersonation
    from dashboard.kube import mirror, registry

    follow(up, "as-user")
    for group, ns in (("oidc-team", "team"), ("oidc-team2", "team2")):
        bindings.bind(group, "editor", namespaces=[ns])
    person = oidc.sign_in_user("olive@example.test", ("oidc-team", "oidc-team2"), "https://idp.test#olive")
    sent = impersonation(principal_for(person))
    groups = [v for k, v in sent if k == "Impersonate-Group"]
    assert ("Impersonate-User", "olive@example.test") in sent
    assert "kubedash:role:editor" in groups and {"oidc-team", "oidc-team2"} <= set(groups)
    # the namespace the one grant sent as kubedash: groups does not carry
    carried = {g.split(":", 2)[2] for g in groups if g.startswith("kubedash:namespace:")}
    assert len(carried) == 1 and carried <= {"team", "team2"}
    ns = ({"team", "team2"} - carried).pop()
    group = "oidc-team" if ns == "team" else "oidc-team2"

    name = f"oidc-{objects['lease']}"
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    status, _, body = up.request("POST", path, lease(name, holder="a", ns=ns))
    assert status == 201, body
    res = registry.by_kind("Lease")
    mirror.mirror("prod", [mirror.Mirrored(res, ns, name, admit.admit(res, body))])

    olive = Client()
    olive.force_login(person)
    release = f"/leases/{ns}/{name}/release/?cluster=prod"
    # the upstream has no binding of her groups: the kubedash: groups alone do not reach ns
    assert olive.post(release, {"holder": "a"}).status_code == 302
    assert "the cluster refused" in unescape(text(olive.get(f"/leases/{ns}/{name}/?cluster=prod")))
    assert up.request("GET", f"{path}/{name}")[2]["spec"]["holderIdentity"] == "a"
    # bound there too: the provider's group, carried by the write-through, lets her
    up.manage("group", "bind", group, "--role", "editor", "--namespace", ns)
    try:
        assert olive.post(release, {"holder": "a"}).status_code == 302
        assert not up.request("GET", f"{path}/{name}")[2]["spec"].get("holderIdentity")
    finally:
        up.manage("group", "unbind", group)

"""A detail page's History and Field owners views (dashboard/web/history.py, history_views.py):
revisions written through the API with their diffs, deletion, the compaction horizon, access,
the live push over the page's websocket, field-owner annotation of kube-documented
managedFields, and apply conflicts in words (forms/api_errors.py)."""
from __future__ import annotations

import copy
import re
from html import unescape

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.template.loader import render_to_string
from django.test import Client

from chromium import api, axe_violations, held_lease, leases_path, open_live
from dashboard.web import history as h
from manifests import LEASES, job, lease
from page_helpers import connect, receive_until

# ---------------------------------------------------------------------------------------------
# Objects with managedFields as kube-apiserver records them


# From the Kubernetes documentation, "Server-Side Apply" > "Field management"
# (kubernetes.io/docs/reference/using-api/server-side-apply/#field-management): its ConfigMap
# example, whose entry is the kubectl Apply owning one label and data.key; here on a Lease,
# with a second manager (a controller's Update owning spec.holderIdentity, as in the page's
# "Conflicts" example where another manager owns a field).
DOC_LEASE = {
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {
        "name": "test-cm", "namespace": "default", "labels": {"test-label": "test"},
        "resourceVersion": "7", "uid": "0b7e6a2e-5b9f-4f1f-9a3a-111111111111",
        "managedFields": [
            {"manager": "kubectl", "operation": "Apply", "apiVersion": "coordination.k8s.io/v1",
             "time": "2010-10-10T00:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {"f:test-label": {}}},
                          "f:spec": {"f:leaseDurationSeconds": {}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "coordination.k8s.io/v1",
             "time": "2010-10-10T00:05:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:spec": {"f:holderIdentity": {}, "f:renewTime": {}}}},
        ]},
    "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 15, "renewTime": "2010-10-10T00:05:00.000000Z"},
}

# A Job as `kubectl create -f` then the job controller leave it (`kubectl get job -o yaml
# --show-managed-fields` on a 1.32 cluster, the shape of the docs' example for Deployments):
# containers are a map list keyed by name (k:{"name":...}, with "." for the item itself), and
# the controller's status entry (subresource status) owns status.conditions whole (atomic).
DOC_JOB = job("pi", image="perl:5.34")
DOC_JOB["metadata"]["managedFields"] = [
    {"manager": "kubectl-create", "operation": "Update", "apiVersion": "batch/v1", "time": "2024-05-01T10:00:00Z",
     "fieldsType": "FieldsV1",
     "fieldsV1": {"f:spec": {"f:template": {"f:spec": {
         "f:containers": {'k:{"name":"main"}': {".": {}, "f:command": {}, "f:image": {}, "f:name": {}}},
         "f:restartPolicy": {}}}}}},
    {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status", "apiVersion": "batch/v1",
     "time": "2024-05-01T10:01:00Z", "fieldsType": "FieldsV1",
     "fieldsV1": {"f:status": {"f:conditions": {}, "f:succeeded": {}}}},
]
DOC_JOB["status"] = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}


def owners_of(view: dict, text: str) -> list[str]:
    """The managers of the first YAML line that is exactly `text`."""
    for line in view["lines"]:
        if line["text"] == text:
            return [b["manager"] for b in line["badges"]]
    raise AssertionError(f"no line {text!r} in {[line['text'] for line in view['lines']]}")


def test_field_owners_of_the_documented_example():
    view = h.field_owners(DOC_LEASE, "Lease")
    assert [(m["manager"], m["operation"], m["fields"]) for m in view["managers"]] == [
        ("kubectl", "Apply", 2), ("kube-controller-manager", "Update", 2)]
    assert owners_of(view, "    test-label: test") == ["kubectl"]
    assert owners_of(view, "  leaseDurationSeconds: 15") == ["kubectl"]
    assert owners_of(view, "  holderIdentity: node-a") == ["kube-controller-manager"]
    assert owners_of(view, "  renewTime: \"2010-10-10T00:05:00.000000Z\"") == ["kube-controller-manager"]
    # Server-set identity fields are nobody's; the map lines above owned fields are not owned.
    assert owners_of(view, "  name: test-cm") == [] and owners_of(view, "spec:") == []
    assert owners_of(view, "  labels:") == []
    # The lines are the YAML panel's (keys sorted, managedFields left out).
    from dashboard.web.present import object_yaml
    assert [line["text"] for line in view["lines"]] == object_yaml(DOC_LEASE).rstrip("\n").split("\n")
    assert view["managers"][1]["time"] == "2010-10-10 00:05:00 UTC"


def test_field_owners_of_map_lists_and_atomic_fields():
    view = h.field_owners(DOC_JOB, "Job")
    from dashboard.web.present import object_yaml
    assert [line["text"] for line in view["lines"]] == object_yaml(DOC_JOB).rstrip("\n").split("\n")
    # The container item (k:{"name":"main"}) and its fields; "- command:" carries the item's owner.
    assert owners_of(view, "      - command:") == ["kubectl-create"]
    assert owners_of(view, '        - "true"') == ["kubectl-create"]   # command is atomic: owned whole
    assert owners_of(view, "        image: perl:5.34") == ["kubectl-create"]
    assert owners_of(view, "      restartPolicy: Never") == ["kubectl-create"]
    # status.conditions is owned whole: every line below it too, marked as inherited.
    lines = {line["text"]: line for line in view["lines"]}
    assert owners_of(view, "  conditions:") == ["kube-controller-manager"]
    assert [b["manager"] for b in lines["    type: Complete"]["badges"]] == ["kube-controller-manager"]
    assert lines["    type: Complete"]["via"] == [1] and lines["  conditions:"]["via"] == []
    assert view["managers"][1]["subresource"] == "status"


def test_field_owners_follow_the_schema_for_what_is_owned_whole():
    # FieldsV1 writes a member with no children as {} whatever its type (structured-merge-diff's
    # set encoding): a granular map owned itself (a label map a manager emptied) owns no label,
    # while an atomic struct (LabelSelector, x-kubernetes-map-type: atomic) owns all below it.
    obj = copy.deepcopy(DOC_JOB)
    obj["metadata"]["labels"] = {"team": "core"}
    obj["spec"]["selector"] = {"matchLabels": {"job": "pi"}}
    obj["metadata"]["managedFields"] = [
        {"manager": "m", "operation": "Update", "apiVersion": "batch/v1", "time": "2024-05-01T10:00:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {}}, "f:spec": {"f:selector": {}}}}]
    view = h.field_owners(obj, "Job")
    assert owners_of(view, "  labels:") == ["m"] and owners_of(view, "    team: core") == []
    assert owners_of(view, "  selector:") == ["m"] and owners_of(view, "      job: pi") == ["m"]


def test_field_owners_without_managed_fields_says_so():
    view = h.field_owners(lease("plain"))
    assert not view["recorded"] and view["managers"] == [] and all(not line["owners"] for line in view["lines"])
    html = render_to_string("web/_field_owners.html#owners", {"owners": view})
    assert "No field manager recorded" in html
    assert 'class="who"' not in html   # no empty "Owned by" column


def test_field_owners_markup_is_text_and_colour():
    html = render_to_string("web/_field_owners.html#owners", {"owners": h.field_owners(DOC_JOB, "Job")})
    # Each owned line says its manager in text (colour is only a second cue), the table has
    # headers and a caption, and the scrolling region is reachable by keyboard.
    assert re.search(r'<td class="who"><span class="owner" style="--hue: \d+" title="kubectl-create \(Update\)">'
                     r'kubectl-create</span></td>\s*<td class="code">        image: perl:5.34</td>', html)
    assert '<span class="vh"> (owns the whole enclosing list or map)</span>' in html
    assert '<caption class="vh">' in html and 'tabindex="0"' in html
    assert "<span class=\"vh\">no manager</span>" in html


def test_writer_is_the_entry_whose_time_moved():
    before = copy.deepcopy(DOC_LEASE)
    after = copy.deepcopy(DOC_LEASE)
    after["metadata"]["managedFields"][1]["time"] = "2010-10-10T00:06:00Z"   # the controller renewed
    assert h.writer(before, after)["manager"] == "kube-controller-manager"
    # A new entry (the docs' "kubectl apply --server-side" by another manager) is the writer,
    # even though an existing entry lost a field to it (its time stays).
    later = copy.deepcopy(after)
    later["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"] = {}
    later["metadata"]["managedFields"].append(
        {"manager": "ops-tool", "operation": "Apply", "apiVersion": "coordination.k8s.io/v1",
         "time": "2010-10-10T00:07:00Z", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:spec": {"f:leaseDurationSeconds": {}}}})
    who = h.writer(after, later)
    assert (who["manager"], who["operation"]) == ("ops-tool", "Apply")
    assert h.writer(after, after) is None
    assert h.writer(lease("a"), lease("b")) is None   # nothing recorded: unknown


def test_entry_names_its_writer_in_the_page():
    from datetime import datetime, timezone

    before = copy.deepcopy(DOC_LEASE)
    after = copy.deepcopy(DOC_LEASE)
    after["spec"]["holderIdentity"] = "node-b"
    after["metadata"]["managedFields"][1]["time"] = "2010-10-10T00:06:00Z"
    when = datetime(2010, 10, 10, 0, 6, tzinfo=timezone.utc)
    e = h.entry(9, "MODIFIED", after, when, before, False)
    html = re.sub(r"\s+", " ", render_to_string("web/_history.html#entries", {"entries": [e]}))
    assert re.search(r'<span class="owner" style="--hue: \d+">kube-controller-manager</span> '
                     r'<span class="op">Update</span>', html)
    assert "spec.holderIdentity" in html and "2010-10-10 00:06:00 UTC" in html
    # The same manager twice within one second (its time does not move): the entry stamped
    # with the revision's second is the writer, when only one is.
    again = copy.deepcopy(after)
    again["spec"]["holderIdentity"] = "node-c"
    e = h.entry(10, "MODIFIED", again, when, after, False)
    assert e["writer"]["manager"] == "kube-controller-manager"
    much_later = datetime(2011, 1, 1, tzinfo=timezone.utc)
    assert h.entry(10, "MODIFIED", again, much_later, after, False)["writer"] is None
    # Its predecessor compacted away: no diff, and the writer is the entry written last.
    alone = h.entry(9, "MODIFIED", after, when, None, True)
    assert alone["changes"] == [] and alone["writer"]["manager"] == "kube-controller-manager"
    assert "Earlier revisions were compacted" in alone["note"]


def test_diff_hides_noise_and_shows_added_removed_changed():
    before = lease("x", labels={"app": "web", "tier": "1"})
    before["metadata"].update(resourceVersion="5", uid="u", generation=1)
    after = copy.deepcopy(before)
    after["metadata"].update(resourceVersion="6", generation=2, managedFields=[{"manager": "m"}])
    after["metadata"]["labels"] = {"app": "api", "zone": "a"}
    after["spec"]["holderIdentity"] = "node-b"
    rows = {r["path"]: r for r in h.diff(before, after)}
    assert rows["metadata.labels.app"] == {"path": "metadata.labels.app", "change": "changed", "old": "web", "new": "api"}
    assert rows["metadata.labels.zone"]["change"] == "added" and rows["metadata.labels.tier"]["change"] == "removed"
    assert rows["spec.holderIdentity"]["new"] == "node-b"
    # A status that goes from {} to filled in shows its fields, not "status removed".
    filled = h.diff({"status": {}}, {"status": {"active": 1}})
    assert filled == [{"path": "status.active", "change": "added", "new": "1"}]
    assert h.diff({"status": {"active": 1}}, {"status": {}}) == [
        {"path": "status.active", "change": "removed", "old": "1"}]
    # Keyed list items pair by their key: a condition added before another reads as one addition.
    cond = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    more = {"status": {"conditions": [{"type": "SuccessCriteriaMet", "status": "True"},
                                      {"type": "Complete", "status": "True"}]}}
    assert h.diff(cond, more) == [
        {"path": "status.conditions[type=SuccessCriteriaMet].type", "change": "added", "new": "SuccessCriteriaMet"},
        {"path": "status.conditions[type=SuccessCriteriaMet].status", "change": "added", "new": "True"}]
    assert not any(p.startswith(("metadata.resourceVersion", "metadata.managedFields", "metadata.generation"))
                   for p in rows)


# ---------------------------------------------------------------------------------------------
# The pages, over objects written through the API


def entries(html: str) -> list[str]:
    """Each revision's text, newest first (tags dropped, spaces squeezed)."""
    items = re.findall(r'<li class="rev[^"]*" id="rev-\d+">(.*?)</li>', html, re.S)
    return [re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", item))).strip() for item in items]


def written(api) -> list[int]:
    """A lease created by "alice", changed by "bob" and "carol" (fieldManager), then an update
    with no fieldManager and no User-Agent (kube records an unnamed manager); the revisions."""
    rvs = []
    r = api.post(LEASES + "?fieldManager=alice", lease("hist", holder="node-a", labels={"app": "web"}))
    assert r.status_code == 201
    rvs.append(int(r.json()["metadata"]["resourceVersion"]))
    for who, patch in (("bob", {"spec": {"holderIdentity": "node-b"}}), ("carol", {"metadata": {"labels": {"tier": "gold"}}}),
                       ("", {"metadata": {"labels": {"app": None}}, "spec": {"leaseDurationSeconds": 30}})):
        r = api.patch(f"{LEASES}/hist" + (f"?fieldManager={who}" if who else ""), patch)
        assert r.status_code == 200, r.content
        rvs.append(int(r.json()["metadata"]["resourceVersion"]))
    return rvs


def test_history_of_an_object_written_through_the_api(api, login):
    rvs = written(api)
    c = login("admin")
    resp = c.get("/leases/default/hist/history/")
    assert resp.status_code == 200
    html = resp.content.decode()
    got = entries(html)
    assert [int(re.search(r"revision (\d+)", e).group(1)) for e in got] == rvs[::-1]
    assert "spec.holderIdentity changed node-a node-b" in got[2]
    assert "metadata.labels.tier added (not set) gold" in got[1]
    assert "metadata.labels.app removed web (removed)" in got[0]
    assert "spec.leaseDurationSeconds changed 15 30" in got[0]
    assert got[3].startswith("created") and "spec.holderIdentity added (not set) node-a" in got[3]
    # The writers, from the managedFields entries the server recorded for each write.
    assert [re.search(r"UTC written by (.*?) Update", e).group(1) for e in got] == ["(unnamed manager)", "carol", "bob", "alice"]
    # Noise stays out of the diffs; the page says what it leaves out.
    diffs = "".join(re.findall(r'<table class="diff-table">.*?</table>', html, re.S))
    assert "resourceVersion" not in diffs and "creationTimestamp" not in diffs and "uid" not in diffs
    assert '<span id="history-count">4 revisions</span> kept' in html and "whole history is here" in html
    # The tabs: each view has its own URL, the current one marked.
    assert '<a href="/leases/default/hist/history/" aria-current="page">History</a>' in html
    assert 'ws-connect="/ws/live/?view=lease&amp;namespace=default&amp;name=hist&amp;tab=history' in html
    detail = c.get("/leases/default/hist/").content.decode()
    assert '<a href="/leases/default/hist/" aria-current="page">Details</a>' in detail
    assert '<a href="/leases/default/hist/fields/">Field owners</a>' in detail


def test_field_owners_of_an_object_written_through_the_api(api, login):
    written(api)
    html = login("admin").get("/leases/default/hist/fields/").content.decode()

    def owners(line: str) -> list[str]:
        m = re.search(r'<td class="who">((?:(?!</tr>).)*?)</td>\s*<td class="code">' + re.escape(line) + "</td>",
                      html, re.S)
        assert m, line
        return re.findall(r'<span class="owner"[^>]*>([^<]*)</span>', m.group(1))

    assert owners("  holderIdentity: node-b") == ["bob"]
    assert owners("    tier: gold") == ["carol"]
    assert owners("  leaseDurationSeconds: 30") == ["(unnamed manager)"]
    managers = re.findall(r'<th scope="row"><span class="owner"[^>]*>([^<]*)</span></th>', html)
    assert sorted(managers) == ["(unnamed manager)", "alice", "bob", "carol"]


def test_deletion_is_a_revision(api, login):
    written(api)
    assert api.delete(f"{LEASES}/hist").status_code == 200
    c = login("admin")
    html = c.get("/leases/default/hist/history/").content.decode()
    got = entries(html)
    assert len(got) == 5 and got[0].startswith("deleted") and "does not record who deletes" in got[0]
    assert "has been deleted" in html
    fields = c.get("/leases/default/hist/fields/")
    assert fields.status_code == 200 and "has been deleted" in fields.content.decode()
    assert c.get("/leases/default/never/history/").status_code == 404
    # Re-created under the same name: a fresh "created", not a diff against the deleted one.
    assert api.post(LEASES, lease("hist", holder="node-z")).status_code == 201
    got = entries(c.get("/leases/default/hist/history/").content.decode())
    assert got[0].startswith("created") and "spec.holderIdentity added (not set) node-z" in got[0]
    assert got[1].startswith("deleted")


def test_compaction_horizon_is_shown(api, login):
    rvs = written(api)
    call_command("compact", "--keep", "0", "--keep-seconds", "0", "--history-seconds", "0")   # (issue 38)
    html = login("admin").get("/leases/default/hist/history/").content.decode()
    got = entries(html)
    assert len(got) == 1 and f"revision {rvs[-1]}" in got[0] and "Earlier revisions were compacted" in got[0]
    m = re.search(r"History before revision (\d+) was compacted on (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC)", html)
    assert m and int(m.group(1)) >= rvs[-1]
    assert "whole history is here" not in html


def test_history_is_paged(api, login, monkeypatch):
    monkeypatch.setattr(h, "PAGE", 3)
    rvs = written(api)
    c = login("admin")
    html = c.get("/leases/default/hist/history/").content.decode()
    assert [f"revision {rv}" in e for e, rv in zip(entries(html), rvs[::-1][:3])] == [True] * 3
    older = re.search(r'<a href="\?before=(\d+)">Older revisions</a>', html)
    assert older and int(older.group(1)) == rvs[1]
    page2 = c.get(f"/leases/default/hist/history/?before={older.group(1)}").content.decode()
    got = entries(page2)
    assert len(got) == 1 and got[0].startswith("created")
    assert "ws-connect" not in page2 and "Newest revisions" in page2   # an older page stays still


def test_access_follows_the_detail_page(api, login):
    written(api)
    api.post(LEASES.replace("/default/", "/team-a/"), lease("mine", ns="team-a"))
    limited = login("viewer", namespaces=["team-a"], username="limited")
    for path in ("/leases/default/hist/history/", "/leases/default/hist/fields/"):
        assert limited.get(path).status_code == 403
    assert limited.get("/leases/team-a/mine/history/").status_code == 200
    assert Client().get("/leases/default/hist/history/").status_code == 302   # to the login page


@pytest.fixture
def share_visitor(api, login):
    """A share link on team-a leases labelled app=web, opened by a fresh browser."""
    team = LEASES.replace("/default/", "/team-a/")
    assert api.post(team, lease("web-1", ns="team-a", labels={"app": "web"})).status_code == 201
    assert api.post(team, lease("db-1", holder="hidden-holder", ns="team-a", labels={"app": "db"})).status_code == 201
    # One that was outside the link's scope, then moved into it: its early revisions stay hidden.
    assert api.post(team, lease("moved", holder="secret-holder", ns="team-a", labels={"app": "db"})).status_code == 201
    assert api.patch(f"{team}/moved", {"metadata": {"labels": {"app": "web"}},
                                        "spec": {"holderIdentity": "public"}}).status_code == 200
    editor = login("editor")
    r = editor.post("/share/new/", {"kind": "Lease", "namespace": "team-a", "labelSelector": "app=web",
                                    "label": "on-call", "expiry": "1d"})
    token = re.search(r"/s/([A-Za-z0-9_\-]+)/", r.content.decode()).group(1)
    visitor = Client()
    assert visitor.get(f"/s/{token}/").status_code == 302
    return visitor


def test_share_link_sees_only_its_objects_history(share_visitor):
    assert share_visitor.get("/leases/team-a/web-1/history/").status_code == 200
    assert share_visitor.get("/leases/team-a/web-1/fields/").status_code == 200
    for path in ("/leases/team-a/db-1/history/", "/leases/team-a/db-1/fields/"):
        resp = share_visitor.get(path)
        assert resp.status_code == 404 and b"hidden-holder" not in resp.content
    html = share_visitor.get("/leases/team-a/moved/history/").content.decode()
    got = entries(html)
    assert "outside this shared view" in got[1] and "outside this shared view" in got[0]
    assert "secret-holder" not in html and "public" not in got[0]   # no diff against the hidden revision


# ---------------------------------------------------------------------------------------------
# Live: the History and Field owners pages are pushed new revisions over their websocket


def _lease_ops():
    from dashboard.coordination.resource import LEASES as RES
    from dashboard.kube import store

    def create():
        return int(store.create(RES, "default", lease("live", holder="node-a")).object["metadata"]["resourceVersion"])

    def set_holder(holder):
        def change(obj):
            obj["spec"]["holderIdentity"] = holder
            return obj
        return int(store.update(RES, "default", "live", change, is_patch=True).object["metadata"]["resourceVersion"])

    return create, set_holder


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_history_page_gets_new_revisions_live():
    from dashboard.access.tokens import ensure_user

    user = await sync_to_async(ensure_user)("live-viewer", "viewer")
    create, set_holder = _lease_ops()
    rv = await sync_to_async(create)()
    comm, connected, _ = await connect(user, f"view=lease&namespace=default&name=live&tab=history&rv={rv}")
    assert connected
    try:
        new_rv = await sync_to_async(set_holder)("node-b")
        html = await receive_until(comm, f'id="rev-{new_rv}"')
        assert 'hx-swap-oob="afterbegin:#history-entries"' in html
        assert '<span id="history-count" hx-swap-oob="true">2 revisions</span>' in html
        text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))
        assert "spec.holderIdentity changed node-a node-b" in text
        assert f'id="rev-{rv}"' not in html   # only what the page does not have yet
        newer = await sync_to_async(set_holder)("node-c")
        html = await receive_until(comm, f'id="rev-{newer}"')
        assert f'id="rev-{new_rv}"' not in html and "node-b node-c" in re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
    finally:
        await comm.disconnect()
    # A page that reconnects from an older revision is sent what it missed, once.
    comm, connected, _ = await connect(user, f"view=lease&namespace=default&name=live&tab=history&rv={rv}")
    assert connected
    try:
        html = await receive_until(comm, f'id="rev-{newer}"')
        assert f'id="rev-{new_rv}"' in html and f'id="rev-{rv}"' not in html
    finally:
        await comm.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_live_history_stays_one_page_long(monkeypatch):
    from dashboard.access.tokens import ensure_user

    monkeypatch.setattr(h, "PAGE", 2)
    user = await sync_to_async(ensure_user)("live-viewer", "viewer")
    create, set_holder = _lease_ops()
    rv1 = await sync_to_async(create)()
    comm, connected, _ = await connect(user, f"view=lease&namespace=default&name=live&tab=history&rv={rv1}")
    assert connected
    try:
        rv2 = await sync_to_async(set_holder)("node-b")
        html = await receive_until(comm, f'id="rev-{rv2}"')
        assert "hx-swap-oob=\"delete\"" not in html and "history-pager" not in html   # still one page
        rv3 = await sync_to_async(set_holder)("node-c")
        html = await receive_until(comm, f'id="rev-{rv3}"')
        # The oldest of the page goes, and "Older revisions" now starts below the last one kept.
        assert f'<li id="rev-{rv1}" hx-swap-oob="delete"></li>' in html
        assert f'<a href="?before={rv2}">Older revisions</a>' in html
    finally:
        await comm.disconnect()


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_field_owners_page_is_refreshed_live():
    from dashboard.access.tokens import ensure_user

    user = await sync_to_async(ensure_user)("live-viewer", "viewer")
    create, set_holder = _lease_ops()
    rv = await sync_to_async(create)()
    comm, connected, _ = await connect(user, f"view=lease&namespace=default&name=live&tab=fields&rv={rv}")
    assert connected
    try:
        await sync_to_async(set_holder)("node-z")
        html = await receive_until(comm, "holderIdentity: node-z")
        assert '<section id="field-owners" class="panel" aria-labelledby="owners-h" hx-swap-oob="true">' in html
    finally:
        await comm.disconnect()


# ---------------------------------------------------------------------------------------------
# Apply conflicts in words


def test_field_manager_conflicts_in_words():
    from dashboard.kube.errors import ApiError
    from dashboard.web.forms.api_errors import field_manager_conflicts

    # The Status kube-apiserver answers (apimachinery managedfields/internal/conflict.go:
    # NewConflictError, printManager): one cause per field, reason FieldManagerConflict.
    err = ApiError(409, "Conflict", 'Apply failed with 2 conflicts: conflict with "kubectl" using apps/v1: '
                   '.spec.replicas\nconflict with "controller" with subresource "status": .status.ready',
                   details={"causes": [
                       {"reason": "FieldManagerConflict", "message": 'conflict with "kubectl" using apps/v1 at '
                        "2024-05-01T10:00:00Z", "field": ".spec.replicas"},
                       {"reason": "FieldManagerConflict", "message": 'conflict with "controller" with subresource '
                        '"status"', "field": ".status.ready"}]})
    words = field_manager_conflicts(err)
    assert words[0] == ("Field spec.replicas is managed by “kubectl”, which last wrote it with an update "
                        "(apps/v1, at 2024-05-01T10:00:00Z). Keep its value, leave it out of your change, "
                        "or take it over by applying with force.")
    assert words[1].startswith("Field status.ready is managed by “controller” (through /status), which applied it.")
    assert field_manager_conflicts(ApiError(409, "Conflict", "the object has been modified")) == []

    # A form and the YAML editor put them where the user reads errors.
    from dashboard.web.forms.editor import YamlForm
    form = YamlForm({"yaml": "a: 1"})
    assert form.is_valid()
    form.add_api_error(err)
    assert form.errors["yaml"][0].startswith("Field spec.replicas is managed by “kubectl”")


# ---------------------------------------------------------------------------------------------
# In the browser: History shows the diff and follows new writes; Field owners; accessibility


def test_browser_history_and_field_owners(wide_page, kube_server, ns):
    from playwright.sync_api import expect

    page = wide_page
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "leader", "node-a"))
    api(kube_server, "PATCH", leases_path(ns, "leader"), {"spec": {"holderIdentity": "node-b"},
                                                          "metadata": {"labels": {"team": "core"}}}, merge=True)
    open_live(page, f"{kube_server.http_url}/leases/{ns}/leader/")
    page.get_by_role("link", name="History").click()
    expect(page).to_have_url(f"{kube_server.http_url}/leases/{ns}/leader/history/")
    expect(page.locator("#live-status")).to_have_text("Live")
    page.evaluate("window.__kdSameDocument = true")
    newest = page.locator("#history-entries > li").first
    changed = newest.locator("tr.d-changed", has_text="spec.holderIdentity")
    expect(changed.locator("del")).to_have_text("node-a")
    expect(changed.locator("ins")).to_have_text("node-b")
    expect(newest.locator("tr.d-added", has_text="metadata.labels.team").locator("ins")).to_have_text("core")
    expect(page.locator("#history-entries > li")).to_have_count(2)
    assert axe_violations(page) == []
    # A new revision arrives over the websocket, on top, without a reload.
    api(kube_server, "PATCH", leases_path(ns, "leader"), {"spec": {"holderIdentity": "node-c"}}, merge=True)
    expect(page.locator("#history-entries > li")).to_have_count(3)
    expect(page.locator("#history-entries > li").first.locator("tr.d-changed ins")).to_have_text("node-c")
    assert page.evaluate("window.__kdSameDocument === true")
    expect(page.locator("#history-count")).to_have_text("3 revisions")
    page.screenshot(path="/tmp/kubedash-history.png", full_page=True)
    page.get_by_role("link", name="Field owners").click()
    expect(page.get_by_role("heading", name="Field owners")).to_be_visible()
    expect(page.locator(".owned td.code", has_text="holderIdentity: node-c")).to_be_visible()
    page.screenshot(path="/tmp/kubedash-field-owners.png", full_page=True)
    assert axe_violations(page) == []


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_share_link_live_history_hides_what_leaves_its_scope(share_visitor):
    from channels.testing import WebsocketCommunicator

    from dashboard.server.asgi import application

    def relabel():
        from dashboard.kube import registry, store

        def change(obj):
            obj["metadata"]["labels"] = {"app": "db"}
            obj["spec"]["holderIdentity"] = "leaked-holder"
            return obj
        return int(store.update(registry.by_kind("Lease"), "team-a", "moved", change, is_patch=True)
                   .object["metadata"]["resourceVersion"])

    from dashboard.kube import store
    rv = await sync_to_async(store.current_revision)()
    cookie = f"sessionid={share_visitor.cookies['sessionid'].value}".encode()
    comm = WebsocketCommunicator(application, f"/ws/live/?view=lease&namespace=team-a&name=moved&tab=history&rv={rv}",
                                 headers=[(b"origin", b"http://localhost"), (b"host", b"localhost"), (b"cookie", cookie)])
    connected, _ = await comm.connect(timeout=10)
    assert connected
    try:
        new_rv = await sync_to_async(relabel)()
        html = await receive_until(comm, f'id="rev-{new_rv}"')
        assert "outside this shared view" in html and "leaked-holder" not in html
    finally:
        await comm.disconnect()


def test_browser_form_edit_and_kubectl_apply_show_both_managers(wide_page, kube_server, ns, tmp_path):
    """The issue's proof: edit a Job in a form, apply a change with kubectl, then History and
    Field owners name both managers (kubedash-web, Update; kubectl, Apply) with the diff."""
    import os
    import subprocess

    import yaml
    from conftest import require_kubectl
    from playwright.sync_api import expect

    from manifests import job
    page = wide_page
    base = f"{kube_server.http_url}/jobs/{ns}/crunch/"
    api(kube_server, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job(name="crunch", ns=ns, parallelism=1))

    page.goto(base + "edit/")
    page.get_by_label("Parallelism").fill("2")
    page.locator("button.primary[name=action][value=save]").click()
    expect(page).to_have_url(base)

    applied = job(name="crunch", ns=ns, parallelism=2, activeDeadlineSeconds=600)
    applied["metadata"]["labels"] = {"team": "core"}
    config = kube_server.kubeconfig(tmp_path / "kubeconfig")
    proc = subprocess.run([require_kubectl(), "apply", "--server-side", "-f", "-"], input=yaml.safe_dump(applied),
                          text=True, capture_output=True, timeout=120,
                          env={**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(config)})
    assert proc.returncode == 0, proc.stderr

    page.goto(base + "history/")
    entries = page.locator("#history-entries > li")
    expect(entries).to_have_count(3)
    newest, edited = entries.nth(0), entries.nth(1)
    expect(newest.locator(".by .owner")).to_have_text("kubectl")
    expect(newest.locator(".by .op")).to_have_text("Apply")
    expect(newest.locator("tr.d-added", has_text="metadata.labels.team").locator("ins")).to_have_text("core")
    expect(newest.locator("tr.d-added", has_text="spec.activeDeadlineSeconds").locator("ins")).to_have_text("600")
    expect(edited.locator(".by .owner")).to_have_text("kubedash-web")
    expect(edited.locator(".by .op")).to_have_text("Update")
    changed = edited.locator("tr.d-changed", has_text="spec.parallelism")
    expect(changed.locator("del")).to_have_text("1")
    expect(changed.locator("ins")).to_have_text("2")
    assert axe_violations(page) == []

    page.get_by_role("link", name="Field owners").click()
    managers = page.locator("table.managers th .owner")
    expect(managers.filter(has_text="kubectl")).to_have_count(1)
    expect(managers.filter(has_text="kubedash-web")).to_have_count(1)
    expect(page.locator("tr", has_text="activeDeadlineSeconds: 600").locator(".who .owner")).to_have_text("kubectl")
    # parallelism: set by the form, then applied with the same value by kubectl: shared ownership
    # (badges in managedFields order: kube sorts Apply entries before Update entries).
    expect(page.locator("tr", has_text="parallelism: 2").locator(".who .owner")).to_have_text(["kubectl", "kubedash-web"])
    assert axe_violations(page) == []

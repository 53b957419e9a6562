"""The write pages: create / edit / delete forms, the YAML editor, one-click actions, conflicts,
permissions and CSRF. Everything through the Django test client as signed-in users."""
from __future__ import annotations

import re
import threading
from datetime import datetime, timezone
from html import unescape

import pytest
from django.test import Client

from chromium import api, dom, held_lease, leases_path, now_micro, open_live
from conftest import eventually
from dashboard.batch.actions import do_suspend_job
from dashboard.core.actions import do_set_address_readiness
from dashboard.kube import store
from dashboard.kube.errors import ApiError
from dashboard.kube.registry import by_kind
from dashboard.web import forms as f
from manifests import endpoints, job
from page_helpers import field_errors, form_data, fresh_lease, text

# CI runs this module again on PostgreSQL (.ci/run selects it by the marker).
pytestmark = pytest.mark.portable

LEASE, EP, JOB = by_kind("Lease"), by_kind("Endpoints"), by_kind("Job")


# ---------------------------------------------------------------------------------------------
# Helpers


@pytest.fixture
def editor(login):
    return login("editor")


def get(res, name, ns="default") -> dict:
    return store.get(res, ns, name)


def rv_of(resp) -> str:
    m = re.search(r'name="resourceVersion" value="(\d+)"', text(resp))
    assert m, "no resourceVersion in the form"
    return m.group(1)


def describedby(resp, field: str) -> str:
    m = re.search(rf'<(?:input|textarea|select)[^>]*id="id_{re.escape(field)}"[^>]*>', text(resp))
    assert m, f"no input {field}"
    tag = m.group(0)
    d = re.search(r'aria-describedby="([^"]*)"', tag)
    return (d.group(1) if d else "") + (" invalid" if 'aria-invalid="true"' in tag else "")


# ---------------------------------------------------------------------------------------------
# Pure helpers


def test_parse_time_text():
    assert f.parse_time_text("") is None
    assert f.parse_time_text("2025-01-02T03:04:05Z") == "2025-01-02T03:04:05.000000Z"
    assert f.parse_time_text("2025-01-02 03:04") == "2025-01-02T03:04:00.000000Z"          # datetime-local: UTC
    assert f.parse_time_text("2025-01-02T05:04:05.5+02:00") == "2025-01-02T03:04:05.500000Z"
    assert f.parse_time_text("2025-01-02T03:04:05.123456789Z") == "2025-01-02T03:04:05.123456Z"
    moment = datetime(2030, 1, 1, tzinfo=timezone.utc)
    assert f.parse_time_text("now", now=moment) == "2030-01-01T00:00:00.000000Z"
    with pytest.raises(f.ValidationError):
        f.parse_time_text("yesterday")


def test_address_and_port_lines_round_trip():
    assert f.parse_address_line("10.0.0.1") == {"ip": "10.0.0.1"}
    assert f.parse_address_line("10.0.0.1 - node-a") == {"ip": "10.0.0.1", "nodeName": "node-a"}
    assert f.parse_address_line("10.0.0.1 web-0 node-a") == {"ip": "10.0.0.1", "hostname": "web-0", "nodeName": "node-a"}
    for a in ({"ip": "1.2.3.4"}, {"ip": "1.2.3.4", "nodeName": "n"}, {"ip": "1.2.3.4", "hostname": "h", "nodeName": "n"}):
        assert f.parse_address_line(f.format_address(a)) == a
    assert f.parse_port_line("80") == {"port": 80}
    assert f.parse_port_line("80 UDP") == {"port": 80, "protocol": "UDP"}
    assert f.parse_port_line("http 80") == {"name": "http", "port": 80}
    assert f.parse_port_line("http 80 TCP") == {"name": "http", "port": 80, "protocol": "TCP"}
    for bad in ("http", "a b c d", "http TCP 80"):
        with pytest.raises(ValueError):
            f.parse_port_line(bad)


def test_plain_messages():
    assert f.plain("Invalid value: 0: must be greater than 0") == "Must be greater than 0"
    assert f.plain('Invalid value: "a: b": bad thing') == "Bad thing"
    assert f.plain("Required value") == "This is required."
    assert f.plain('Unsupported value: "tcp": supported values: "SCTP", "TCP", "UDP"') == \
        '"tcp" is not supported; use one of "SCTP", "TCP", "UDP"'
    assert f.plain("Forbidden: may only be specified if `strategy` is defined") == \
        "May only be specified if `strategy` is defined"


def test_merge_diff_reapplies_only_your_changes():
    base = {"metadata": {"resourceVersion": "1"}, "spec": {"a": 1, "b": 2, "c": [1]}}
    yours = {"metadata": {"resourceVersion": "1"}, "spec": {"a": 5, "b": 2, "c": [1]}}
    current = {"metadata": {"resourceVersion": "3"}, "spec": {"a": 1, "b": 7, "c": [1, 2]}}
    assert f.merge_diff(base, yours) == {"spec": {"a": 5}}
    assert f.reapply_yaml(yours, base, current) == {"metadata": {"resourceVersion": "3"},
                                                    "spec": {"a": 5, "b": 7, "c": [1, 2]}}


# ---------------------------------------------------------------------------------------------
# Lease


def test_lease_create_edit_delete(editor):
    resp = editor.get("/leases/new/?namespace=team-a")
    assert resp.status_code == 200
    assert 'name="namespace"' in text(resp) and 'value="team-a"' in text(resp)
    resp = editor.post("/leases/new/", {"name": "lock", "namespace": "team-a", "labels": "app=web\ntier=fe",
                                        "holder": "node-a", "duration": "20", "acquire_time": "2025-01-02T03:04:05Z",
                                        "renew_time": "2025-01-02 03:04:06", "transitions": "0", "action": "save",
                                        "new_namespace": "team-a"})   # (confirmed: no object is in team-a yet)
    assert resp.status_code == 302 and resp["Location"] == "/leases/team-a/lock/"
    obj = get(LEASE, "lock", "team-a")
    assert obj["metadata"]["labels"] == {"app": "web", "tier": "fe"}
    assert obj["spec"] == {"holderIdentity": "node-a", "leaseDurationSeconds": 20, "leaseTransitions": 0,
                           "acquireTime": "2025-01-02T03:04:05.000000Z", "renewTime": "2025-01-02T03:04:06.000000Z"}
    page = editor.get(resp["Location"])
    assert "Lease team-a/lock created." in text(page)

    form = editor.get("/leases/team-a/lock/edit/")
    assert form.status_code == 200
    data = form_data(form)
    assert data["resourceVersion"] == obj["metadata"]["resourceVersion"]
    assert data["holder"] == "node-a" and data["renew_time"] == "2025-01-02T03:04:06.000000Z"
    assert "name" not in data and "namespace" not in data          # the name is not editable
    data.update(holder="node-b", duration="30")
    resp = editor.post("/leases/team-a/lock/edit/", data)
    assert resp.status_code == 302 and resp["Location"] == "/leases/team-a/lock/"
    obj = get(LEASE, "lock", "team-a")
    assert obj["spec"]["holderIdentity"] == "node-b" and obj["spec"]["leaseDurationSeconds"] == 30
    assert obj["spec"]["renewTime"] == "2025-01-02T03:04:06.000000Z"   # untouched: unchanged
    assert "saved" in text(editor.get("/leases/team-a/lock/"))

    # Saving the unchanged form is a no-op (no new revision).
    form = editor.get("/leases/team-a/lock/edit/")
    resp = editor.post("/leases/team-a/lock/edit/", form_data(form))
    assert resp.status_code == 302
    assert get(LEASE, "lock", "team-a")["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]

    confirm = editor.get("/leases/team-a/lock/delete/")
    assert confirm.status_code == 200 and "offers an undo" in text(confirm)   # (test_bulk_actions: the undo)
    resp = editor.post("/leases/team-a/lock/delete/", form_data(confirm))
    assert resp.status_code == 302 and resp["Location"] == "/leases/?namespace=team-a"
    with pytest.raises(ApiError):
        get(LEASE, "lock", "team-a")
    assert "deleted" in text(editor.get(resp["Location"]))


def test_lease_validation_errors_next_to_fields(editor):
    fresh_lease()
    form = editor.get("/leases/default/l1/edit/")
    data = form_data(form)
    data.update(duration="0", transitions="-1")
    resp = editor.post("/leases/default/l1/edit/", data)
    assert resp.status_code == 400
    assert "Must be from 1 to 2147483647." in field_errors(resp, "duration")
    assert "Must be from 0 to 2147483647." in field_errors(resp, "transitions")
    assert field_errors(resp, "holder") == ""
    # The input points at its message and says it is invalid; the summary links to it.
    assert describedby(resp, "duration") == "id_duration_helptext id_duration_error invalid"
    assert 'href="#id_duration"' in text(resp)
    # The user's values are kept, the version too, and nothing was written.
    assert 'value="0"' in text(resp) and rv_of(resp) == data["resourceVersion"]
    assert get(LEASE, "l1")["spec"]["leaseDurationSeconds"] == 15


def test_lease_form_parsing_errors(editor):
    resp = editor.post("/leases/new/", {"name": "x", "namespace": "default", "renew_time": "yesterday",
                                        "duration": "ten", "labels": "novalue", "action": "save"})
    assert resp.status_code == 400
    assert "RFC 3339" in field_errors(resp, "renew_time")
    assert "whole number" in field_errors(resp, "duration")
    assert "key=value" in field_errors(resp, "labels")
    # Out of int32 range: said at the field, with the range.
    resp = editor.post("/leases/new/", {"name": "x", "namespace": "default", "duration": "99999999999",
                                        "action": "save"})
    assert resp.status_code == 400 and "2147483647" in field_errors(resp, "duration")


def test_lease_create_api_errors(editor):
    fresh_lease("taken")
    resp = editor.post("/leases/new/", {"name": "taken", "namespace": "default", "action": "save"})
    assert resp.status_code == 409 and "already exists" in field_errors(resp, "name")
    resp = editor.post("/leases/new/", {"name": "Bad_Name", "namespace": "default", "labels": "a b=c",
                                        "action": "save"})
    assert resp.status_code == 422
    assert "lowercase RFC 1123 subdomain" in field_errors(resp, "name")
    assert "\"a b\": Name part must consist" in field_errors(resp, "labels")
    resp = editor.post("/leases/new/", {"name": "", "namespace": "default", "action": "save"})
    assert resp.status_code == 422 and "Required" in field_errors(resp, "name")


def renew(name="l1", ns="default", **spec) -> str:
    """What the holder's client does every few seconds (a PUT of the whole Lease): renewTime now."""
    current = get(LEASE, name, ns)
    current["spec"].update(renewTime=f.parse_time_text("now"), **spec)
    return store.update(LEASE, ns, name, current).object["spec"]["renewTime"]


def conflict_rows(resp) -> dict:
    page = unescape(text(resp))
    rows = re.findall(r'<tr[^>]*>\s*<th scope="row">(.*?)</th>\s*<td[^>]*><span class="val yours">(.*?)</span></td>\s*'
                      r'<td[^>]*><span class="val current">(.*?)</span></td>\s*<td[^>]*>(.*?)</td>', page, re.S)
    return {r[0]: r[1:] for r in rows}


def test_lease_form_saves_what_changed_while_it_is_renewed(editor):
    """The holder renews while the form is open: saving labels sends the labels alone and keeps
    the renewals (issue 41: "Not saved: it changed while you were editing" was the answer)."""
    fresh_lease(renewTime="2026-11-22T03:00:00.000000Z")
    data = form_data(editor.get("/leases/default/l1/edit/"))
    renew()
    renewed = renew(holderIdentity="node-b")       # someone else's change to a field we leave alone
    data["labels"] = "app=web"
    resp = editor.post("/leases/default/l1/edit/", data)
    assert resp.status_code == 302
    obj = get(LEASE, "l1")
    assert obj["metadata"]["labels"] == {"app": "web"}
    assert obj["spec"]["renewTime"] == renewed and obj["spec"]["holderIdentity"] == "node-b"
    assert obj["spec"]["leaseDurationSeconds"] == 15 and obj["spec"]["acquireTime"] == "2026-11-22T02:00:00.000000Z"
    # Our other field and their renewal: both kept.
    data = form_data(editor.get("/leases/default/l1/edit/"))
    renewed = renew()
    data["duration"] = "30"
    assert editor.post("/leases/default/l1/edit/", data).status_code == 302
    spec = get(LEASE, "l1")["spec"]
    assert spec["leaseDurationSeconds"] == 30 and spec["renewTime"] == renewed
    # Nothing changed in the form: nothing is written, whatever happened meanwhile.
    data = form_data(editor.get("/leases/default/l1/edit/"))
    renewed = renew()
    rv = get(LEASE, "l1")["metadata"]["resourceVersion"]
    resp = editor.post("/leases/default/l1/edit/", data, follow=True)
    assert "No changes" in text(resp) and get(LEASE, "l1")["metadata"]["resourceVersion"] == rv


def test_conflict_when_both_changed_the_same_field(editor):
    fresh_lease()
    form = editor.get("/leases/default/l1/edit/")
    data = form_data(form)
    loaded = data["resourceVersion"]
    renew(holderIdentity="node-b")
    data.update(holder="node-c", duration="30")
    resp = editor.post("/leases/default/l1/edit/", data)
    assert resp.status_code == 409
    page = unescape(text(resp))
    assert "Not saved" in page and f"you loaded version {loaded}" in page
    # The fields we changed that differ now; their renewal (a field we left alone) is no row.
    assert conflict_rows(resp) == {
        "Holder identity": ("node-c", "node-b", "changed by you and by someone else: reapplying saves yours"),
        "Lease duration (seconds)": ("30", "15", "your change: reapplying saves it")}
    spec = get(LEASE, "l1")["spec"]
    assert spec["holderIdentity"] == "node-b" and spec["leaseDurationSeconds"] == 15     # nothing was written
    again = form_data(resp)
    assert again["resourceVersion"] == get(LEASE, "l1")["metadata"]["resourceVersion"]
    renewed = renew()                                    # renewed again before "Reapply": kept
    resp = editor.post("/leases/default/l1/edit/", again)   # reapply: the user's values win now
    assert resp.status_code == 302
    spec = get(LEASE, "l1")["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["renewTime"]) == ("node-c", 30, renewed)


def test_a_form_without_its_loaded_values_saves_at_its_version(editor):
    """A post that does not say what it loaded (an old page) falls back to the revision it names."""
    fresh_lease()
    data = form_data(editor.get("/leases/default/l1/edit/"))
    del data["loaded"]
    renew()
    data["duration"] = "30"
    assert editor.post("/leases/default/l1/edit/", data).status_code == 302   # the revision log has its version
    assert get(LEASE, "l1")["spec"]["leaseDurationSeconds"] == 30


def test_edit_of_a_deleted_object(editor):
    fresh_lease()
    data = form_data(editor.get("/leases/default/l1/edit/"))
    store.delete(LEASE, "default", "l1")
    assert editor.post("/leases/default/l1/edit/", data).status_code == 404
    assert editor.get("/leases/default/l1/edit/").status_code == 404


def test_release_action(editor):
    fresh_lease(renewTime="2026-11-22T03:00:00.000000Z")
    detail = text(editor.get("/leases/default/l1/"))
    assert 'action="/leases/default/l1/release/"' in detail and 'name="holder" value="node-a"' in detail
    resp = editor.post("/leases/default/l1/release/", {"holder": "node-a"})
    assert resp.status_code == 302 and resp["Location"] == "/leases/default/l1/"
    spec = get(LEASE, "l1")["spec"]
    assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1 and spec["leaseTransitions"] == 2
    assert spec["renewTime"] == spec["acquireTime"] != "2026-11-22T03:00:00.000000Z"
    page = text(editor.get("/leases/default/l1/"))
    assert "released" in page and 'action="/leases/default/l1/release/"' not in page   # nobody to release


def test_release_refuses_a_new_holder(editor):
    fresh_lease()
    current = get(LEASE, "l1")
    current["spec"]["holderIdentity"] = "node-b"
    store.update(LEASE, "default", "l1", current)
    resp = editor.post("/leases/default/l1/release/", {"holder": "node-a"}, follow=True)
    assert "Not changed" in unescape(text(resp)) and "node-b" in unescape(text(resp))
    assert get(LEASE, "l1")["spec"]["holderIdentity"] == "node-b"


# ---------------------------------------------------------------------------------------------
# Endpoints


def test_endpoints_create_edit_delete(editor):
    resp = editor.get("/endpoints/new/")
    assert resp.status_code == 200 and 'name="s0-ready"' in text(resp)
    data = {"name": "web", "namespace": "default", "labels": "", "subsets": "2", "action": "save",
            "s0-ready": "10.0.0.1 web-0 node-a\n\n10.0.0.2", "s0-not_ready": "10.0.0.3 - node-b",
            "s0-ports": "http 80 TCP\nmetrics 9090", "s1-ready": "10.1.0.1", "s1-not_ready": "", "s1-ports": "53 UDP"}
    resp = editor.post("/endpoints/new/", data)
    assert resp.status_code == 302 and resp["Location"] == "/endpoints/default/web/"
    obj = get(EP, "web")
    ips = {a["ip"]: a for s in obj["subsets"] for a in s.get("addresses", [])}
    assert ips["10.0.0.1"] == {"ip": "10.0.0.1", "hostname": "web-0", "nodeName": "node-a"}
    assert {a["ip"] for s in obj["subsets"] for a in s.get("notReadyAddresses", [])} == {"10.0.0.3"}
    assert {(p.get("name"), p["port"], p["protocol"]) for s in obj["subsets"] for p in s.get("ports", [])} == \
        {("http", 80, "TCP"), ("metrics", 9090, "TCP"), (None, 53, "UDP")}

    form = editor.get("/endpoints/default/web/edit/")
    data = form_data(form)
    first = next(k for k, v in data.items() if k.endswith("-ready") and "10.0.0.1" in v)
    data[first] += "\n10.0.0.9"
    resp = editor.post("/endpoints/default/web/edit/", data)
    assert resp.status_code == 302
    assert "10.0.0.9" in {a["ip"] for s in get(EP, "web")["subsets"] for a in s.get("addresses", [])}

    resp = editor.post("/endpoints/default/web/delete/", form_data(editor.get("/endpoints/default/web/delete/")))
    assert resp.status_code == 302
    assert not EP.model.objects.filter(name="web").exists()


def test_endpoints_errors_point_at_lines(editor):
    data = {"name": "web", "namespace": "default", "subsets": "2", "action": "save",
            "s0-ready": "", "s0-not_ready": "", "s0-ports": "",          # unused subset: skipped
            "s1-ready": "10.0.0.1\n\n999.1.1.1 Bad_Host", "s1-not_ready": "", "s1-ports": "http 80 TCP\nx 70000 tcp"}
    resp = editor.post("/endpoints/new/", data)
    assert resp.status_code == 422
    ready = field_errors(resp, "s1-ready")
    assert "Line 3 (ip):" in ready and "Line 3 (hostname):" in ready
    ports = field_errors(resp, "s1-ports")
    assert "Line 2 (port):" in ports and 'Line 2 (protocol): "tcp" is not supported' in ports
    assert field_errors(resp, "s0-ready") == ""
    # A port line the form cannot read at all: said before anything is sent.
    data["s1-ports"] = "http"
    resp = editor.post("/endpoints/new/", data)
    assert resp.status_code == 400 and "Line 1" in field_errors(resp, "s1-ports")
    # Ports without any address: the API requires addresses; shown on the subset.
    resp = editor.post("/endpoints/new/", {"name": "web", "namespace": "default", "subsets": "1",
                                           "s0-ports": "80", "action": "save"})
    assert resp.status_code == 422 and "addresses" in field_errors(resp, "s0-ready")


def test_endpoints_add_and_remove_subsets_without_saving(editor):
    base = {"name": "web", "namespace": "default", "subsets": "2", "s0-ready": "10.0.0.1", "s0-ports": "80",
            "s1-ready": "10.0.0.2", "s1-ports": "81"}
    resp = editor.post("/endpoints/new/", {**base, "action": "add-subset"})
    assert resp.status_code == 200 and 'name="s2-ready"' in text(resp) and "10.0.0.2" in text(resp)
    assert 'id="form-errors"' not in text(resp)
    resp = editor.post("/endpoints/new/", {**base, "action": "remove-subset-0"})
    data = form_data(resp)
    assert data["subsets"] == "1" and data["s0-ready"] == "10.0.0.2" and "s1-ready" not in data
    assert not EP.model.objects.exists()
    assert editor.post("/endpoints/new/", data).status_code == 302
    assert [a["ip"] for a in get(EP, "web")["subsets"][0]["addresses"]] == ["10.0.0.2"]


def test_endpoints_edit_keeps_what_the_form_does_not_show(editor):
    obj = endpoints("svc", ips=("10.0.0.1", "10.0.0.2"), ports=({"name": "h", "port": 80, "appProtocol": "http"},))
    obj["subsets"][0]["addresses"][0]["targetRef"] = {"kind": "Pod", "name": "pod-1", "namespace": "default"}
    store.create(EP, "default", obj)
    data = form_data(editor.get("/endpoints/default/svc/edit/"))
    data["s0-ready"] = "10.0.0.1\n10.0.0.5"
    assert editor.post("/endpoints/default/svc/edit/", data).status_code == 302
    subset = get(EP, "svc")["subsets"][0]
    assert subset["addresses"][0] == {"ip": "10.0.0.1", "targetRef": {"kind": "Pod", "name": "pod-1",
                                                                       "namespace": "default"}}
    assert subset["ports"][0]["appProtocol"] == "http"


def test_endpoints_form_saves_only_what_changed(editor):
    """Readiness flips meanwhile (the endpoints controller's writes) survive a labels edit; a
    subsets edit over someone else's subsets change is a conflict, shown and reapplied."""
    store.create(EP, "default", endpoints("svc", ips=("10.0.0.1", "10.0.0.2")))
    data = form_data(editor.get("/endpoints/default/svc/edit/"))
    do_set_address_readiness("default", "svc", ip="10.0.0.2", ready=False)
    data["labels"] = "app=web"
    assert editor.post("/endpoints/default/svc/edit/", data).status_code == 302
    obj = get(EP, "svc")
    assert obj["metadata"]["labels"] == {"app": "web"}
    assert {a["ip"] for s in obj["subsets"] for a in s.get("notReadyAddresses", [])} == {"10.0.0.2"}
    # Both change the subsets: a conflict, nothing written; reapplying saves ours.
    data = form_data(editor.get("/endpoints/default/svc/edit/"))
    do_set_address_readiness("default", "svc", ip="10.0.0.1", ready=False)
    ready = next(k for k, v in data.items() if k.endswith("-ready") and "10.0.0.1" in v)
    data[ready] += "\n10.0.0.9"
    resp = editor.post("/endpoints/default/svc/edit/", data)
    assert resp.status_code == 409 and list(conflict_rows(resp)) == ["Subsets"]
    assert "10.0.0.9" not in str(get(EP, "svc")["subsets"])
    assert editor.post("/endpoints/default/svc/edit/", form_data(resp)).status_code == 302
    assert {a["ip"] for s in get(EP, "svc")["subsets"] for a in s.get("addresses", [])} == {"10.0.0.1", "10.0.0.9"}


def test_endpoints_address_both_ready_and_not_ready_is_said(editor):
    """kube's repacking keeps such an address not ready without a word; the form asks instead,
    at the ready line, naming the address (and the port, across subsets)."""
    data = {"name": "web", "namespace": "default", "subsets": "2", "action": "save",
            "s0-ready": "10.0.0.1\n10.0.0.2", "s0-not_ready": "10.0.0.2", "s0-ports": "http 80",
            "s1-ready": "10.0.0.3", "s1-not_ready": "10.0.0.1", "s1-ports": "80/TCP\n53 UDP"}
    resp = editor.post("/endpoints/new/", data)
    assert resp.status_code == 400 and not EP.model.objects.filter(name="web").exists()
    ready = field_errors(resp, "s0-ready")
    assert "Line 2: 10.0.0.2 is also listed under Not-ready addresses. " in ready
    assert "10.0.0.1 is also listed under Not-ready addresses of subset 2 for port http 80/TCP" not in ready
    data["s1-ports"] = "http 80 TCP\n53 UDP"                  # now the same port as subset 1's
    ready = field_errors(editor.post("/endpoints/new/", data), "s0-ready")
    assert "Line 1: 10.0.0.1 is also listed under Not-ready addresses of subset 2 for port http 80/TCP" in ready
    assert "remove one of the two lines" in ready and field_errors(resp, "s1-not_ready") == ""
    # Different ports: ready on one, not ready on another is what subsets are for.
    data.update({"s0-not_ready": "", "s1-ports": "53 UDP"})
    assert editor.post("/endpoints/new/", data).status_code == 302


def test_mark_ready_and_not_ready(editor):
    store.create(EP, "default", endpoints("svc", ips=("10.0.0.1",), not_ready=("10.0.0.2",)))
    page = text(editor.get("/endpoints/default/svc/"))
    assert 'aria-label="Mark ready: 10.0.0.2"' in page and 'aria-label="Mark not ready: 10.0.0.1"' in page
    resp = editor.post("/endpoints/default/svc/readiness/", {"ip": "10.0.0.2", "ready": "true"})
    assert resp.status_code == 302 and resp["Location"] == "/endpoints/default/svc/"
    subsets = get(EP, "svc")["subsets"]
    assert {a["ip"] for s in subsets for a in s.get("addresses", [])} == {"10.0.0.1", "10.0.0.2"}
    editor.post("/endpoints/default/svc/readiness/", {"ip": "10.0.0.1", "ready": "false"})
    subsets = get(EP, "svc")["subsets"]
    assert {a["ip"] for s in subsets for a in s.get("notReadyAddresses", [])} == {"10.0.0.1"}
    resp = editor.post("/endpoints/default/svc/readiness/", {"ip": "10.9.9.9", "ready": "true"}, follow=True)
    assert "no address 10.9.9.9" in text(resp)


def test_action_panel_refresh(editor, login):
    store.create(EP, "default", endpoints("svc", ips=("10.0.0.1",)))
    resp = editor.get("/endpoints/default/svc/actions/?part=readiness")
    assert resp.status_code == 200 and "Mark not ready: 10.0.0.1" in text(resp) and "csrfmiddlewaretoken" in text(resp)
    assert 'hx-trigger="htmx:oobAfterSwap from:body delay:300ms"' in text(resp)
    assert login("viewer").get("/endpoints/default/svc/actions/?part=toolbar").status_code == 403


# ---------------------------------------------------------------------------------------------
# Job


JOB_CREATE = {"name": "pi", "namespace": "default", "labels": "team=a", "completions": "3", "parallelism": "2",
              "completion_mode": "Indexed", "backoff_limit": "4", "active_deadline_seconds": "600",
              "ttl_seconds_after_finished": "60", "suspend": "on", "container_name": "main",
              "image": "busybox:1.36", "command": "sh\n-c\necho hello world", "env": "GREETING=hi\nEMPTY=",
              "restart_policy": "OnFailure", "action": "save"}


def test_job_create_edit_delete(editor):
    assert editor.get("/jobs/new/").status_code == 200
    resp = editor.post("/jobs/new/", JOB_CREATE)
    assert resp.status_code == 302 and resp["Location"] == "/jobs/default/pi/"
    obj = get(JOB, "pi")
    spec = obj["spec"]
    assert obj["metadata"]["labels"] == {"team": "a"}
    assert (spec["completions"], spec["parallelism"], spec["completionMode"], spec["backoffLimit"],
            spec["activeDeadlineSeconds"], spec["ttlSecondsAfterFinished"], spec["suspend"]) == \
        (3, 2, "Indexed", 4, 600, 60, True)
    container = spec["template"]["spec"]["containers"][0]
    assert container["name"] == "main" and container["image"] == "busybox:1.36"
    assert container["command"] == ["sh", "-c", "echo hello world"]
    assert container["env"] == [{"name": "GREETING", "value": "hi"}, {"name": "EMPTY", "value": ""}]
    assert spec["template"]["spec"]["restartPolicy"] == "OnFailure"

    form = editor.get("/jobs/default/pi/edit/")
    html = text(form)
    # The template and the completion mode are shown, not offered.
    for field in ("image", "command", "env", "container_name", "completion_mode", "restart_policy", "name"):
        assert f'name="{field}"' not in html
    assert "Pod template (read-only)" in html and "busybox:1.36" in html and "Indexed" in html
    data = form_data(form)
    assert data["suspend"] == "on"
    data.update(parallelism="3", completions="3", backoff_limit="5")
    del data["suspend"]                                      # unticked
    resp = editor.post("/jobs/default/pi/edit/", data)
    assert resp.status_code == 302
    spec = get(JOB, "pi")["spec"]
    assert spec["parallelism"] == 3 and spec["backoffLimit"] == 5 and spec["suspend"] is False
    assert spec["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"

    resp = editor.post("/jobs/default/pi/delete/", form_data(editor.get("/jobs/default/pi/delete/")))
    assert resp.status_code == 302 and not JOB.model.objects.filter(name="pi").exists()


def test_job_validation(editor):
    resp = editor.post("/jobs/new/", {**JOB_CREATE, "image": "", "env": "OK=1\n\n=x", "parallelism": "-1"})
    assert resp.status_code == 400                       # the form's range check, with the API's in one round
    assert "This is required." in field_errors(resp, "image")
    assert "Line 3 (name): This is required." in field_errors(resp, "env")
    assert "Must be from 0 to 2147483647." in field_errors(resp, "parallelism")
    # completions of a NonIndexed job cannot change: the API says so, next to the field.
    store.create(JOB, "default", job("j1", completions=1))
    data = form_data(editor.get("/jobs/default/j1/edit/"))
    data["completions"] = "5"
    resp = editor.post("/jobs/default/j1/edit/", data)
    assert resp.status_code == 422 and "immutable" in field_errors(resp, "completions")


def test_job_form_saves_only_what_changed(editor):
    """The Job is suspended (and its status written) while the form is open: saving the backoff
    limit keeps both; both changing parallelism is a conflict."""
    store.create(JOB, "default", job("j1", parallelism=1))
    data = form_data(editor.get("/jobs/default/j1/edit/"))
    do_suspend_job("default", "j1", suspend=True)
    data["backoff_limit"] = "2"
    assert editor.post("/jobs/default/j1/edit/", data).status_code == 302
    spec = get(JOB, "j1")["spec"]
    assert spec["backoffLimit"] == 2 and spec["suspend"] is True
    data = form_data(editor.get("/jobs/default/j1/edit/"))
    current = get(JOB, "j1")
    current["spec"]["parallelism"] = 3
    store.update(JOB, "default", "j1", current)
    data["parallelism"] = "2"
    resp = editor.post("/jobs/default/j1/edit/", data)
    assert resp.status_code == 409
    assert conflict_rows(resp) == {"Parallelism": ("2", "3", "changed by you and by someone else: reapplying saves yours")}
    assert get(JOB, "j1")["spec"]["parallelism"] == 3


def test_suspend_and_resume(editor):
    store.create(JOB, "default", job("j1"))
    assert 'name="suspend" value="true"' in text(editor.get("/jobs/default/j1/"))
    resp = editor.post("/jobs/default/j1/suspend/", {"suspend": "true"})
    assert resp.status_code == 302 and get(JOB, "j1")["spec"]["suspend"] is True
    page = text(editor.get("/jobs/default/j1/"))
    assert "suspended" in page and 'name="suspend" value="false"' in page     # now offers Resume
    editor.post("/jobs/default/j1/suspend/", {"suspend": "false"})
    assert get(JOB, "j1")["spec"]["suspend"] is False


# ---------------------------------------------------------------------------------------------
# The YAML editor


def test_yaml_editor_accepts_a_valid_change(editor):
    fresh_lease()
    resp = editor.get("/leases/default/l1/yaml/")
    assert resp.status_code == 200
    data = form_data(resp)
    assert "holderIdentity: node-a" in data["yaml"]
    data["yaml"] = data["yaml"].replace("holderIdentity: node-a", "holderIdentity: node-z")
    resp = editor.post("/leases/default/l1/yaml/", data)
    assert resp.status_code == 302 and get(LEASE, "l1")["spec"]["holderIdentity"] == "node-z"


def test_yaml_editor_rejects_unknown_fields_and_invalid_values(editor):
    fresh_lease()
    data = form_data(editor.get("/leases/default/l1/yaml/"))
    original = data["yaml"]
    data["yaml"] = original.replace("holderIdentity: node-a", "holderIdentity: node-a\n  holderIdentiy: typo")
    resp = editor.post("/leases/default/l1/yaml/", data)
    assert resp.status_code == 400
    assert "spec.holderIdentiy: unknown field" in field_errors(resp, "yaml")
    assert describedby(resp, "yaml").endswith("id_yaml_error invalid")
    assert get(LEASE, "l1")["spec"]["holderIdentity"] == "node-a"
    data["yaml"] = original.replace("leaseDurationSeconds: 15", "leaseDurationSeconds: 0")
    resp = editor.post("/leases/default/l1/yaml/", data)
    assert resp.status_code == 422 and "spec.leaseDurationSeconds: Must be greater than 0" in field_errors(resp, "yaml")
    data["yaml"] = "spec: [unclosed"
    resp = editor.post("/leases/default/l1/yaml/", data)
    assert resp.status_code == 400 and "not valid YAML" in field_errors(resp, "yaml")
    data["yaml"] = original.replace("kind: Lease", "kind: Job")
    resp = editor.post("/leases/default/l1/yaml/", data)
    assert resp.status_code == 400 and "does not match" in field_errors(resp, "yaml")


def test_yaml_editor_unquoted_time_stays_a_string(editor):
    fresh_lease()
    data = form_data(editor.get("/leases/default/l1/yaml/"))
    data["yaml"] = re.sub(r'renewTime: "[^"]+"', "renewTime: 2027-01-01T00:00:00.000000Z", data["yaml"])
    assert editor.post("/leases/default/l1/yaml/", data).status_code == 302
    assert get(LEASE, "l1")["spec"]["renewTime"] == "2027-01-01T00:00:00.000000Z"


def test_yaml_editor_saves_what_changed_while_it_is_renewed(editor):
    """The editor sends the difference between the text it loaded and the text saved: renewals
    meanwhile are kept, whatever resourceVersion the text names."""
    fresh_lease()
    data = form_data(editor.get("/leases/default/l1/yaml/"))
    renewed = renew()
    data["yaml"] = data["yaml"].replace("  name: l1\n", "  labels:\n    app: web\n  name: l1\n")
    data["yaml"] = re.sub(r"\n  resourceVersion: .*", "", data["yaml"])
    assert editor.post("/leases/default/l1/yaml/", data).status_code == 302
    obj = get(LEASE, "l1")
    assert obj["metadata"]["labels"] == {"app": "web"} and obj["spec"]["renewTime"] == renewed


def test_yaml_editor_conflict_and_reapply(editor):
    fresh_lease()
    data = form_data(editor.get("/leases/default/l1/yaml/"))
    renew(holderIdentity="node-b")
    data["yaml"] = data["yaml"].replace("leaseDurationSeconds: 15", "leaseDurationSeconds: 40") \
                               .replace("holderIdentity: node-a", "holderIdentity: node-c")
    resp = editor.post("/leases/default/l1/yaml/", data)
    assert resp.status_code == 409
    page = unescape(text(resp))
    rows = conflict_rows(resp)
    assert rows["spec.holderIdentity"] == ("node-c", "node-b", "changed by you and by someone else: reapplying saves yours")
    assert rows["spec.leaseDurationSeconds"] == ("40", "15", "your change: reapplying saves it")
    assert "spec.renewTime" not in rows and "Someone else changed the same fields" in page
    assert get(LEASE, "l1")["spec"]["leaseDurationSeconds"] == 15
    renewed = renew()
    resp = editor.post("/leases/default/l1/yaml/", form_data(resp))
    assert resp.status_code == 302
    spec = get(LEASE, "l1")["spec"]
    assert (spec["leaseDurationSeconds"], spec["holderIdentity"], spec["renewTime"]) == (40, "node-c", renewed)


def test_yaml_editor_without_its_original_diffs_against_its_version(editor):
    """A post without the loaded text (an old page): the revision it names is what it loaded."""
    fresh_lease()
    data = form_data(editor.get("/leases/default/l1/yaml/"))
    del data["original"]
    renew(holderIdentity="node-b")
    data["yaml"] = data["yaml"].replace("leaseDurationSeconds: 15", "leaseDurationSeconds: 40")
    assert editor.post("/leases/default/l1/yaml/", data).status_code == 302
    spec = get(LEASE, "l1")["spec"]
    assert (spec["leaseDurationSeconds"], spec["holderIdentity"]) == (40, "node-b")


def test_create_from_yaml(editor):
    resp = editor.get("/jobs/new/?as=yaml")
    assert resp.status_code == 200 and "kind: Job" in text(resp)
    data = form_data(resp)
    data["yaml"] = data["yaml"].replace('name: ""', "name: from-yaml")
    resp = editor.post("/jobs/new/?as=yaml", data)
    assert resp.status_code == 302 and resp["Location"] == "/jobs/default/from-yaml/"
    data["yaml"] = data["yaml"].replace("name: from-yaml", "name: other").replace("restartPolicy", "restartPolicyy")
    resp = editor.post("/jobs/new/?as=yaml", data)
    assert resp.status_code == 400 and "restartPolicyy: unknown field" in field_errors(resp, "yaml")


# ---------------------------------------------------------------------------------------------
# Permissions


def _all_forms():
    fresh_lease()
    store.create(EP, "default", endpoints("svc"))
    store.create(JOB, "default", job("j1"))
    pages = ["/leases/new/", "/endpoints/new/", "/jobs/new/", "/leases/new/?as=yaml"]
    for plural, name in (("leases", "l1"), ("endpoints", "svc"), ("jobs", "j1")):
        pages += [f"/{plural}/default/{name}/{what}/" for what in ("edit", "yaml", "delete")]
    actions = ["/leases/default/l1/release/", "/endpoints/default/svc/readiness/", "/jobs/default/j1/suspend/"]
    return pages, actions


def test_viewer_gets_403_everywhere_and_sees_no_buttons(login):
    pages, actions = _all_forms()
    viewer = login("viewer")
    for url in pages:
        assert viewer.get(url).status_code == 403, url
        assert viewer.post(url, {"name": "x", "namespace": "default", "action": "save", "yaml": "{}"}).status_code == 403, url
    for url in actions:
        assert viewer.post(url, {"holder": "node-a", "ip": "10.0.0.1", "ready": "false", "suspend": "true"}).status_code == 403
    assert viewer.get("/leases/default/l1/actions/").status_code == 403
    assert get(LEASE, "l1")["spec"]["holderIdentity"] == "node-a" and get(JOB, "j1")["spec"]["suspend"] is False
    for url in ("/leases/default/l1/", "/endpoints/default/svc/", "/jobs/default/j1/", "/leases/", "/jobs/",
                "/endpoints/"):
        html = text(viewer.get(url))
        assert "edit-toolbar" not in html and "/edit/" not in html and "/new/" not in html and "Mark " not in html
    assert "Not allowed" in text(viewer.get("/leases/new/"))


def test_editor_sees_buttons(editor):
    _all_forms()
    assert 'href="/leases/default/l1/edit/"' in text(editor.get("/leases/default/l1/"))
    assert 'href="/jobs/default/j1/delete/"' in text(editor.get("/jobs/default/j1/"))
    assert 'href="/jobs/new/"' in text(editor.get("/jobs/"))
    assert 'href="/endpoints/new/?namespace=default"' in text(editor.get("/endpoints/?namespace=default"))


def test_namespace_limited_editor(login):
    fresh_lease("mine", ns="team-a")
    fresh_lease("theirs", ns="team-b")
    limited = login("editor", namespaces=["team-a"])
    assert limited.get("/leases/team-a/mine/edit/").status_code == 200
    data = form_data(limited.get("/leases/team-a/mine/edit/"))
    data["holder"] = "me"
    assert limited.post("/leases/team-a/mine/edit/", data).status_code == 302
    for url in ("/leases/team-b/theirs/edit/", "/leases/team-b/theirs/yaml/", "/leases/team-b/theirs/delete/"):
        assert limited.get(url).status_code == 403
        assert limited.post(url, data).status_code == 403
    assert limited.post("/leases/team-b/theirs/release/", {"holder": "node-a"}).status_code == 403
    assert get(LEASE, "theirs", "team-b")["spec"]["holderIdentity"] == "node-a"
    # Create: only their namespaces are offered; another one is refused.
    form = text(limited.get("/leases/new/"))
    assert '<option value="team-a"' in form and "team-b" not in form
    assert limited.get("/leases/new/?namespace=team-b").status_code == 403
    resp = limited.post("/leases/new/", {"name": "x", "namespace": "team-b", "action": "save"})
    assert resp.status_code in (400, 403) and not LEASE.model.objects.filter(name="x").exists()
    resp = limited.post("/leases/new/?as=yaml", {"yaml": "apiVersion: coordination.k8s.io/v1\nkind: Lease\n"
                                                         "metadata: {name: x, namespace: team-b}\n"})
    assert resp.status_code == 403 and "team-b" in field_errors(resp, "yaml")
    assert 'href="/leases/team-b/theirs/edit/"' not in text(limited.get("/leases/team-b/theirs/"))


def test_signed_out_visitors(db):
    _all_forms()
    anonymous = Client()
    resp = anonymous.get("/leases/default/l1/edit/")
    assert resp.status_code == 302 and resp["Location"].startswith("/accounts/login/")
    assert anonymous.post("/leases/default/l1/edit/", {"holder": "x"}).status_code == 403
    assert anonymous.post("/leases/default/l1/release/", {"holder": "node-a"}).status_code == 403
    assert get(LEASE, "l1")["spec"]["holderIdentity"] == "node-a"


# ---------------------------------------------------------------------------------------------
# CSRF


def test_csrf_is_enforced_on_every_form(login):
    pages, actions = _all_forms()
    client = login("admin", enforce_csrf_checks=True)
    for url in pages + actions:
        resp = client.post(url, {"name": "x", "namespace": "default", "holder": "node-a", "action": "save",
                                 "ip": "10.0.0.1", "ready": "false", "suspend": "true", "yaml": "{}"})
        assert resp.status_code == 403, url
    assert get(LEASE, "l1")["spec"]["holderIdentity"] == "node-a"
    assert JOB.model.objects.filter(name="j1").exists() and not LEASE.model.objects.filter(name="x").exists()
    # With the page's token the same client can save.
    page = client.get("/leases/default/l1/edit/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', text(page)).group(1)
    data = form_data(page)
    data.update(csrfmiddlewaretoken=token, holder="node-q")
    assert client.post("/leases/default/l1/edit/", data).status_code == 302
    assert get(LEASE, "l1")["spec"]["holderIdentity"] == "node-q"


def test_object_data_is_escaped_in_forms(editor):
    fresh_lease("x", holder='<script>alert(1)</script>"')
    for url in ("/leases/default/x/edit/", "/leases/default/x/yaml/", "/leases/default/x/"):
        html = text(editor.get(url))
        assert "<script>alert(1)" not in html


def test_an_invalid_job_name_is_reported_once_at_the_name(editor):
    """kube also rejects the job-name label generated from the name; the form says it once,
    at the name, not at the labels the user left empty."""
    resp = editor.post("/jobs/new/", {**JOB_CREATE, "name": "Nightly!", "labels": ""})
    assert resp.status_code == 422
    assert "RFC 1123 subdomain" in field_errors(resp, "name")
    assert field_errors(resp, "labels") == ""
    summary = text(resp).split('id="form-errors"')[1].split("</div>")[0]
    assert "labels" not in summary.lower() and "Fix the 1 problem below" in summary


def test_a_job_name_too_long_for_its_labels_is_an_error_on_name(editor):
    """Issue 41: a 77-character name is a valid name but not a label value (the pods' job-name
    label): said once, at Name, in plain words, not at Labels as spec.template.labels."""
    name = "nightly-" + "x" * 69
    for labels in ("", "team=a"):
        resp = editor.post("/jobs/new/", {**JOB_CREATE, "name": name, "labels": labels, "completion_mode": "NonIndexed"})
        assert resp.status_code == 422
        errors = field_errors(resp, "name")
        assert "Must be no more than 63 characters: the name is also the value of a label made from it." in errors
        assert errors.count("63 characters") == 1 and "spec.template" not in text(resp)
        assert field_errors(resp, "labels") == "" and "Fix the 1 problem below" in text(resp)
    # Indexed: kube names the pods' hostnames after it too, and says so on metadata.name: that alone.
    resp = editor.post("/jobs/new/", {**JOB_CREATE, "name": name})
    assert resp.status_code == 422 and "invalid DNS label" in field_errors(resp, "name")
    assert "63 characters" not in text(resp) and field_errors(resp, "labels") == ""


def test_integer_fields_state_their_range(editor):
    html = text(editor.get("/leases/new/"))
    assert re.search(r'<input type="number" name="duration"[^>]* min="1" max="2147483647"', html)
    assert "From 1 to 2147483647." in html and "From 0 to 2147483647." in html
    store.create(JOB, "default", job("j1"))
    html = text(editor.get("/jobs/default/j1/edit/"))
    assert re.search(r'name="active_deadline_seconds"[^>]* min="0" max="9223372036854775807"', html)
    assert re.search(r'name="parallelism"[^>]* min="0" max="2147483647"', html)
    assert "[name] port (1 to 65535) [protocol]" in text(editor.get("/endpoints/new/"))   # ports: one per line
    # Beyond it: an error on the field in the same round as the API's others.
    resp = editor.post("/jobs/new/", {**JOB_CREATE, "parallelism": "2147483648", "image": ""})
    assert resp.status_code == 400
    assert field_errors(resp, "parallelism").strip() == "Must be from 0 to 2147483647."
    assert "This is required." in field_errors(resp, "image")


def test_yaml_errors_point_at_their_lines(editor):
    fresh_lease()
    data = form_data(editor.get("/leases/default/l1/yaml/"))
    lines = data["yaml"].splitlines()
    data["yaml"] = data["yaml"].replace("leaseDurationSeconds: 15", "leaseDurationSeconds: 0") \
                               .replace("holderIdentity: node-a", "holderIdentiy: node-a")
    resp = editor.post("/leases/default/l1/yaml/", data)
    at = lines.index("  holderIdentity: node-a") + 1
    assert resp.status_code == 400 and f"Line {at}: spec.holderIdentiy: unknown field" in field_errors(resp, "yaml")
    assert f'data-error-lines="{at}"' in text(resp)
    data["yaml"] = data["yaml"].replace("holderIdentiy: node-a", "holderIdentity: node-a")
    resp = editor.post("/leases/default/l1/yaml/", data)
    at = lines.index("  leaseDurationSeconds: 15") + 1
    assert resp.status_code == 422
    assert f"Line {at}: spec.leaseDurationSeconds: Must be greater than 0" in field_errors(resp, "yaml")
    assert f'data-error-lines="{at}"' in text(resp)
    data["yaml"] = "metadata:\n  name: l1\nspec: [unclosed\n"
    resp = editor.post("/leases/default/l1/yaml/", data)
    assert resp.status_code == 400 and "Line 4, column 1: this is not valid YAML" in field_errors(resp, "yaml")
    assert 'data-error-lines="4"' in text(resp)


def test_not_found_and_not_allowed_pages_say_it_plainly(login):
    viewer = login("viewer")
    resp = viewer.get("/no/such/page/at/all/")
    assert resp.status_code == 404
    assert "There is nothing at this address." in text(resp) and "Resolver404" not in text(resp)
    for url in ("/leases/new/", "/jobs/new/?as=yaml"):
        resp = viewer.get(url)
        assert resp.status_code == 403 and "Your role (viewer) may not create" in text(resp)
        assert "“any”" not in text(resp)


# ---------------------------------------------------------------------------------------------
# In a real browser (Chromium, a live server): the fixtures of tests/chromium.py


def test_browser_job_created_in_one_browser_appears_in_another(page, chromium, session_state, kube_server, ns):
    from playwright.sync_api import expect

    base = kube_server.http_url
    open_live(page, f"{base}/jobs/?namespace={ns}")                  # the watcher
    other = chromium.new_context(storage_state=session_state)
    try:
        form = other.new_page()
        form.goto(f"{base}/jobs/new/?namespace={ns}")
        form.fill("#id_name", "from-form")
        form.fill("#id_image", "busybox:1.36")
        form.fill("#id_command", "sh\n-c\necho hi")
        form.fill("#id_completions", "2")
        form.click("button.primary")
        form.click("#new-namespace button")   # no object is in the fresh namespace yet: confirmed
        form.wait_for_url(f"{base}/jobs/{ns}/from-form/")
        expect(form.locator(".flash")).to_contain_text(f"Job {ns}/from-form created.")
    finally:
        other.close()
    expect(page.locator(dom("job", ns, "from-form"))).to_be_visible()
    assert page.evaluate("window.__kdSameDocument === true"), "the jobs page was reloaded"


class Renewer(threading.Thread):
    """A holder's client renewing a Lease every second over HTTP, as client-go does (GET, then
    PUT with renewTime now; a PUT that lost a race waits for the next second)."""

    def __init__(self, server, ns: str, name: str):
        super().__init__(daemon=True)
        self.server, self.path, self.done, self.renewals = server, leases_path(ns, name), threading.Event(), 0

    def run(self):
        while not self.done.wait(1.0):
            status, _, lease = self.server.request("GET", self.path)
            if status != 200:
                continue
            lease["spec"]["renewTime"] = now_micro()
            if self.server.request("PUT", self.path, lease)[0] == 200:
                self.renewals += 1

    def renew_time(self) -> str:
        return api(self.server, "GET", self.path)["spec"]["renewTime"]


def test_browser_lease_form_saves_while_it_is_renewed(page, kube_server, ns):
    """Issue 41: kube-scheduler's Lease, renewed every second, edited from the form: its labels
    are saved and the renewals go on; another client changing the same label is a conflict."""
    from playwright.sync_api import expect

    base = kube_server.http_url
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "kube-scheduler", "node-a", duration=15))
    renewer = Renewer(kube_server, ns, "kube-scheduler")
    renewer.start()
    try:
        page.goto(f"{base}/leases/{ns}/kube-scheduler/edit/")
        loaded = page.input_value("#id_renew_time")
        eventually(lambda: renewer.renewals >= 2 and renewer.renew_time() != loaded, what="renewals after loading")
        page.fill("#id_labels", "tier=control-plane")
        page.click("button.primary")
        page.wait_for_url(f"{base}/leases/{ns}/kube-scheduler/")
        expect(page.locator(".flash")).to_contain_text(f"Lease {ns}/kube-scheduler saved.")
        lease = api(kube_server, "GET", leases_path(ns, "kube-scheduler"))
        assert lease["metadata"]["labels"] == {"tier": "control-plane"}
        assert lease["spec"]["renewTime"] > loaded and lease["spec"]["holderIdentity"] == "node-a"
        saved = lease["spec"]["renewTime"]
        eventually(lambda: renewer.renew_time() > saved, what="renewals going on after the save")

        # Someone else changes the same label while the form is open: a conflict, shown.
        page.goto(f"{base}/leases/{ns}/kube-scheduler/edit/")
        api(kube_server, "PATCH", leases_path(ns, "kube-scheduler"), {"metadata": {"labels": {"tier": "infra"}}},
            merge=True)
        page.fill("#id_labels", "tier=scheduling")
        page.click("button.primary")
        expect(page.locator("h1")).to_have_text("Not saved: it changed while you were editing")
        row = page.locator("table.diff tr", has_text="Labels")
        expect(row.locator(".val.yours")).to_have_text("tier=scheduling")
        expect(row.locator(".val.current")).to_have_text("tier=infra")
        assert api(kube_server, "GET", leases_path(ns, "kube-scheduler"))["metadata"]["labels"] == {"tier": "infra"}
        page.click("text=Reapply my changes")
        page.wait_for_url(f"{base}/leases/{ns}/kube-scheduler/")
        expect(page.locator(".flash")).to_contain_text("saved")
        lease = api(kube_server, "GET", leases_path(ns, "kube-scheduler"))
        assert lease["metadata"]["labels"] == {"tier": "scheduling"} and lease["spec"]["holderIdentity"] == "node-a"
    finally:
        renewer.done.set()
        renewer.join()


def test_browser_action_buttons_follow_live_updates(page, kube_server, ns):
    from playwright.sync_api import expect

    base = kube_server.http_url
    api(kube_server, "POST", leases_path(ns), held_lease(ns, "lock", "node-a"))
    open_live(page, f"{base}/leases/{ns}/lock/")
    holder = page.locator("#edit-toolbar input[name=holder]")
    expect(holder).to_have_value("node-a")
    api(kube_server, "PATCH", leases_path(ns, "lock"), {"spec": {"holderIdentity": "node-b"}}, merge=True)
    expect(holder).to_have_value("node-b")            # Release now names the new holder
    page.click("#edit-toolbar button:text('Release')")
    # It asks first (a modal dialog); Cancel is the default.
    dialog = page.locator("dialog.confirm")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("“node-b” will no longer hold it")
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()
    dialog.get_by_role("button", name="Release").click()
    page.wait_for_url(f"{base}/leases/{ns}/lock/")
    expect(page.locator(".flash")).to_contain_text("released")
    assert api(kube_server, "GET", leases_path(ns, "lock"))["spec"]["holderIdentity"] == ""


# ---------------------------------------------------------------------------------------------
# Every error in one submit; the notations the pages display


def test_one_submit_reports_every_error(editor):
    """The form's own checks (a time it cannot read) and the API's (a bad name, a negative
    duration) are reported together: the API sees what did parse, as a dry run."""
    resp = editor.post("/leases/new/", {"name": "Bad_Name", "namespace": "default", "duration": "-5",
                                        "renew_time": "yesterday", "action": "save"})
    assert resp.status_code == 400
    assert "RFC 3339" in field_errors(resp, "renew_time")
    assert "lowercase RFC 1123 subdomain" in field_errors(resp, "name")
    assert "Must be from 1 to 2147483647." in field_errors(resp, "duration")
    assert "Fix the 3 problems" in text(resp)
    # The summary is focusable and links every field.
    assert 'id="form-errors" tabindex="-1"' in text(resp)
    for field in ("name", "duration", "renew_time"):
        assert f'href="#id_{field}" data-focus-field' in text(resp)
    assert not LEASE.model.objects.exists()
    # An edit as well (a dry run of the update): nothing is written.
    fresh_lease()
    data = form_data(editor.get("/leases/default/l1/edit/"))
    data.update(duration="-1", acquire_time="tomorrow")
    resp = editor.post("/leases/default/l1/edit/", data)
    assert resp.status_code == 400
    assert "RFC 3339" in field_errors(resp, "acquire_time")
    assert "Must be from 1 to 2147483647." in field_errors(resp, "duration")
    assert get(LEASE, "l1")["spec"]["leaseDurationSeconds"] == 15


def test_ports_accept_the_matrix_notation(editor):
    """The readiness matrix writes a port as "http 80/TCP": the form reads it back."""
    resp = editor.post("/endpoints/new/", {"name": "web", "namespace": "default", "subsets": "1",
                                           "s0-ready": "10.0.0.1", "s0-ports": "http 80/TCP\nmetrics 9090/UDP",
                                           "action": "save"})
    assert resp.status_code == 302, field_errors(resp, "s0-ports")
    assert [(p.get("name"), p["port"], p["protocol"]) for p in get(EP, "web")["subsets"][0]["ports"]] == \
        [("http", 80, "TCP"), ("metrics", 9090, "UDP")]

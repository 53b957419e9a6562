"""The server-rendered pages: content, filters, permissions, escaping, pagination, partials."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from html import unescape

import pytest
from django.template.loader import render_to_string
from django.test import Client

from dashboard.web import present as p
from manifests import ENDPOINTS, JOBS, LEASES, endpoints, job, lease, micro

# CI runs this module again on PostgreSQL (.ci/run selects it by the marker).
pytestmark = pytest.mark.portable

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def fresh_lease(name, holder="node-a", duration=60, ns="default", **meta):
    obj = lease(name=name, holder=holder, duration=duration, ns=ns, **meta)
    obj["spec"]["renewTime"] = micro(datetime.now(timezone.utc))
    obj["spec"]["acquireTime"] = micro(datetime.now(timezone.utc) - timedelta(minutes=5))
    obj["spec"]["leaseTransitions"] = 3
    return obj


def stale_lease(name, holder="node-b", ns="default"):
    obj = lease(name=name, holder=holder, duration=15, ns=ns)
    obj["spec"]["renewTime"] = "2020-01-01T00:00:00.000000Z"
    return obj


def ns_path(path: str, ns: str) -> str:
    return path.replace("/namespaces/default/", f"/namespaces/{ns}/")


@pytest.fixture
def admin(login):
    """An admin's signed-in Client (sees every namespace)."""
    return login("admin")


def text(resp) -> str:
    return resp.content.decode()


def row(html: str, dom_id: str) -> str:
    """The markup of one row/card (from its id to the end of its root element)."""
    m = re.search(rf'<(tr|article) id="{re.escape(dom_id)}".*?</\1>', html, re.S)
    assert m, f"no element with id {dom_id}"
    return m.group(0)


# ---------------------------------------------------------------------------------------------
# Login


@pytest.mark.parametrize("path", ["/", "/leases/", "/endpoints/", "/jobs/", "/leases/default/x/",
                                  "/endpoints/default/x/", "/jobs/default/x/"])
def test_pages_need_login(db, path):
    resp = Client().get(path)
    assert resp.status_code == 302
    assert resp["Location"] == "/accounts/login/?next=" + path


def test_login_and_logout(db):
    from django.contrib.auth import get_user_model
    get_user_model().objects.create_user("alice", password="s3cret-pass")
    c = Client()
    page = c.get("/accounts/login/?next=/leases/")
    assert page.status_code == 200
    assert 'for="id_username"' in text(page) and 'for="id_password"' in text(page)
    bad = c.post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert bad.status_code == 200 and "didn’t match" in text(bad)
    ok = c.post("/accounts/login/", {"username": "alice", "password": "s3cret-pass", "next": "/leases/"})
    assert ok.status_code == 302 and ok["Location"] == "/leases/"
    home = c.get("/")
    assert home.status_code == 200
    assert "alice" in text(home) and "viewer" in text(home)        # user and role in the header
    out = c.post("/accounts/logout/")
    assert out.status_code == 302
    assert c.get("/").status_code == 302


# ---------------------------------------------------------------------------------------------
# Leases


def test_leases_held_and_expired(api, admin):
    assert api.post(LEASES, fresh_lease("alive", holder="node-a")).status_code == 201
    assert api.post(LEASES, stale_lease("dead", holder="node-b")).status_code == 201
    assert api.post(LEASES, lease(name="free", holder="")).status_code == 201
    resp = admin.get("/leases/")
    assert resp.status_code == 200
    html = text(resp)
    alive = row(html, "lease-default--alive")
    assert "is-held" in alive and ">held<" in alive and "node-a" in alive
    assert "data-expires-at=" in alive and "data-renewed-at=" in alive and "data-lease-live" in alive
    assert "expires in" in alive and "60s" in alive and ">3<" in alive
    dead = row(html, "lease-default--dead")
    assert "is-expired" in dead and ">expired<" in dead and "node-b" in dead and "expired " in dead
    free = row(html, "lease-default--free")
    assert "no holder" in free and "data-lease-live" not in free
    # The live contract: items container, websocket address, revision.
    assert re.search(r'<tbody id="items" data-rv="\d+">', html)
    assert 'hx-ext="ws"' in html and 'ws-connect="/ws/live/?view=leases&amp;rv=' in html
    assert 'id="live-status"' in html and 'role="status"' in html and 'aria-live="polite"' in html
    # Sorted by (namespace, name).
    assert html.index('id="lease-default--alive"') < html.index('id="lease-default--dead"') < html.index(
        'id="lease-default--free"')


def test_lease_detail_history_and_yaml(api, admin):
    assert api.post(LEASES, fresh_lease("leader", holder="pod-1")).status_code == 201
    current = api.get(LEASES + "/leader").json()
    current["spec"]["holderIdentity"] = "pod-2"
    current["spec"]["leaseTransitions"] = 4
    current["spec"]["acquireTime"] = current["spec"]["renewTime"] = micro(datetime.now(timezone.utc))
    assert api.put(LEASES + "/leader", current).status_code == 200
    resp = admin.get("/leases/default/leader/")
    assert resp.status_code == 200
    html = text(resp)
    assert '<div id="detail"' in html and 'data-rv="' in html
    assert "ws-connect=\"/ws/live/?view=lease&amp;namespace=default&amp;name=leader&amp;rv=" in html
    history = html[html.index('id="history"'):]
    assert history.index("pod-1") < history.index("pod-2")
    assert "taken over" in history and "holding" in history
    assert "holderIdentity: pod-2" in html and "kind: Lease" in html


def test_detail_not_found(admin):
    assert admin.get("/leases/default/missing/").status_code == 404
    assert admin.get("/jobs/default/missing/").status_code == 404


# ---------------------------------------------------------------------------------------------
# Endpoints


def test_endpoints_matrix(api, admin):
    body = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web", "namespace": "default"},
            "subsets": [
                {"addresses": [{"ip": "10.0.0.1", "hostname": "web-0", "nodeName": "node-1",
                                "targetRef": {"kind": "Pod", "name": "web-0", "namespace": "default", "uid": "u0"}}],
                 "notReadyAddresses": [{"ip": "10.0.0.2", "targetRef": {"kind": "Pod", "name": "web-1", "uid": "u1"}}],
                 "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
                {"addresses": [{"ip": "10.0.0.1", "hostname": "web-0", "nodeName": "node-1",
                                "targetRef": {"kind": "Pod", "name": "web-0", "namespace": "default", "uid": "u0"}}],
                 "ports": [{"name": "metrics", "port": 9090, "protocol": "TCP"}]},
            ]}
    assert api.post(ENDPOINTS, body).status_code == 201
    resp = admin.get("/endpoints/")
    assert resp.status_code == 200
    card = row(text(resp), "endpoints-default--web")
    assert "http 80/TCP" in card and "metrics 9090/TCP" in card
    assert '<span class="cell ready">ready</span>' in card
    assert '<span class="cell not-ready">not ready</span>' in card
    assert '<span class="cell absent">absent</span>' in card             # 10.0.0.2 has no metrics port
    assert "10.0.0.1" in card and "web-0" in card and "node-1" in card and "Pod/web-1" in card
    assert '<th scope="row">' in card and "<caption>" in card
    assert "<strong>1</strong> ready" in card and "<strong>1</strong> not ready" in card
    assert 'id="rollup"' in text(resp)
    detail = admin.get("/endpoints/default/web/")
    assert detail.status_code == 200 and "subsets:" in text(detail) and "not ready" in text(detail)


# ---------------------------------------------------------------------------------------------
# Jobs


def test_job_progress_and_indexed_grid(api, admin):
    assert api.post(JOBS, job("batch", completions=5, parallelism=2)).status_code == 201
    obj = api.get(JOBS + "/batch").json()
    obj["status"] = {"startTime": "2026-01-01T00:00:00Z", "active": 2, "ready": 1, "succeeded": 2, "failed": 1}
    assert api.put(JOBS + "/batch/status", obj).status_code == 200

    assert api.post(JOBS, job("indexed", completions=6, parallelism=3, completionMode="Indexed",
                              backoffLimitPerIndex=1)).status_code == 201
    obj = api.get(JOBS + "/indexed").json()
    obj["status"] = {"startTime": "2026-01-01T00:00:00Z", "active": 1, "succeeded": 3,
                     "completedIndexes": "0-1,4", "failedIndexes": "2", "failed": 1}
    resp = api.put(JOBS + "/indexed/status", obj)
    assert resp.status_code == 200, resp.content

    page = admin.get("/jobs/")
    assert page.status_code == 200
    html = text(page)
    batch = row(html, "job-default--batch")
    assert "2/5" in batch and '<progress max="5" value="2"' in batch
    assert "Running" in batch and "2 active" in batch and "1 ready" in batch
    assert "1 failed" in batch and "backoff limit 6" in batch
    indexed = row(html, "job-default--indexed")
    assert "3/6" in indexed and 'class="ix-grid" role="img"' in indexed
    assert "Indexes: 3 of 6 completed (0-1,4), 1 failed (2)" in indexed
    cells = re.findall(r'<span class="ix (\w+)" title="index (\d+): ([\w ]+)">', indexed)
    assert [c[0] for c in cells] == ["done", "done", "failed", "pending", "done", "pending"]
    detail = admin.get("/jobs/default/indexed/")
    assert detail.status_code == 200 and "completedIndexes: 0-1,4" in text(detail)


def test_job_conditions_and_status(api, admin):
    assert api.post(JOBS, job("done", completions=1)).status_code == 201
    obj = api.get(JOBS + "/done").json()
    moment = "2026-01-01T00:01:00Z"
    obj["status"] = {"startTime": "2026-01-01T00:00:00Z", "completionTime": moment, "succeeded": 1,
                     "conditions": [
                         {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                          "message": "Reached expected number of succeeded pods", "lastTransitionTime": moment,
                          "lastProbeTime": moment},
                         {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                          "message": "Reached expected number of succeeded pods", "lastTransitionTime": moment,
                          "lastProbeTime": moment}]}
    resp = api.put(JOBS + "/done/status", obj)
    assert resp.status_code == 200, resp.content
    done = row(text(admin.get("/jobs/")), "job-default--done")
    assert ">Complete<" in done and "1/1" in done and "60s" in done
    assert "CompletionsReached" in done and "Reached expected number of succeeded pods" in done


# ---------------------------------------------------------------------------------------------
# Filters


@pytest.fixture
def spread(api):
    for ns in ("default", "team-a"):
        for name, labels in (("alpha", {"app": "web"}), ("beta", {"app": "db"}), ("gamma", {"app": "web", "tier": "fe"})):
            resp = api.post(ns_path(LEASES, ns), fresh_lease(name, ns=ns, labels=labels))
            assert resp.status_code == 201, resp.content
    return api


def ids(html: str, prefix="lease-") -> list[str]:
    return re.findall(rf'<(?:tr|article) id="({prefix}[^"]+)"', html)


def test_filter_namespace(spread, admin):
    html = text(admin.get("/leases/?namespace=team-a"))
    assert ids(html) == ["lease-team-a--alpha", "lease-team-a--beta", "lease-team-a--gamma"]
    assert '<option value="team-a" selected>' in html
    assert "namespace=team-a" in unescape(re.search(r'ws-connect="([^"]+)"', html).group(1))


def test_filter_label_selector(spread, admin):
    html = text(admin.get("/leases/", {"labelSelector": "app=web,tier!=fe"}))
    assert ids(html) == ["lease-default--alpha", "lease-team-a--alpha"]
    assert 'value="app=web,tier!=fe"' in html
    html = text(admin.get("/leases/", {"labelSelector": "app in (db)", "namespace": "default"}))
    assert ids(html) == ["lease-default--beta"]


@pytest.mark.parametrize("bad", ["app=(", "a b", "x in (", "!", "=web"])
def test_malformed_label_selector_is_friendly(spread, admin, bad):
    resp = admin.get("/leases/", {"labelSelector": bad})
    assert resp.status_code == 400
    html = text(resp)
    assert 'role="alert"' in html and "Label selector:" in html
    assert 'aria-invalid="true"' in html
    assert ids(html) == []


def test_filter_name_search(spread, admin):
    html = text(admin.get("/leases/?q=AMM"))
    assert ids(html) == ["lease-default--gamma", "lease-team-a--gamma"]
    html = text(admin.get("/leases/?q=zzz"))
    assert ids(html) == [] and 'id="items-empty"' in html and "match these filters" in html


def test_filters_on_other_pages(api, admin):
    assert api.post(ENDPOINTS, endpoints("svc-a", labels={"app": "a"})).status_code == 201
    assert api.post(ENDPOINTS, endpoints("svc-b", labels={"app": "b"})).status_code == 201
    assert api.post(JOBS, job("job-a")).status_code == 201
    assert api.post(JOBS, job("job-b")).status_code == 201
    assert ids(text(admin.get("/endpoints/?labelSelector=app%3Da")), "endpoints-") == ["endpoints-default--svc-a"]
    assert ids(text(admin.get("/jobs/?q=-b")), "job-") == ["job-default--job-b"]
    assert admin.get("/jobs/?labelSelector=%3D%3D").status_code == 400


def test_pagination(spread, admin):
    first = admin.get("/leases/?limit=4")
    html = text(first)
    assert ids(html) == ["lease-default--alpha", "lease-default--beta", "lease-default--gamma", "lease-team-a--alpha"]
    nxt = re.search(r'<a class="button" href="([^"]+)" rel="next">', html)
    assert nxt, "no next-page link"
    second = admin.get("/leases/" + unescape(nxt.group(1)))
    assert second.status_code == 200
    html2 = text(second)
    assert ids(html2) == ["lease-team-a--beta", "lease-team-a--gamma"]
    assert 'rel="next"' not in html2
    # Name search across pages keeps the filter.
    page = text(admin.get("/leases/?limit=1&q=beta"))
    assert ids(page) == ["lease-default--beta"]
    link = unescape(re.search(r'href="([^"]+)" rel="next"', page).group(1))
    assert "q=beta" in link
    assert ids(text(admin.get("/leases/" + link))) == ["lease-team-a--beta"]


def test_garbage_continue_is_friendly(spread, admin):
    resp = admin.get("/leases/?continue=garbage")
    assert resp.status_code == 400 and "First page" in text(resp)


# ---------------------------------------------------------------------------------------------
# Permissions and escaping


def test_namespace_limited_viewer(spread, login):
    c = login("viewer", namespaces=["team-a"], username="limited")
    html = text(c.get("/leases/"))
    assert ids(html) == ["lease-team-a--alpha", "lease-team-a--beta", "lease-team-a--gamma"]
    assert "in team-a" in html                                 # the header says so
    assert '<option value="default"' not in html
    assert c.get("/leases/?namespace=default").status_code == 403
    assert c.get("/leases/default/alpha/").status_code == 403
    assert c.get("/leases/team-a/alpha/").status_code == 200
    overview = text(c.get("/"))
    assert 'id="ns-team-a"' in overview and 'id="ns-default"' not in overview
    assert c.get("/?namespace=default").status_code == 403


def test_html_is_escaped(api, admin):
    evil = "<script>alert(1)</script>"
    obj = fresh_lease("evil", holder=evil, annotations={"note": evil})
    assert api.post(LEASES, obj).status_code == 201
    for path in ("/leases/", "/leases/default/evil/", "/"):
        html = text(admin.get(path))
        assert "<script>alert(1)" not in html, path
    detail = text(admin.get("/leases/default/evil/"))
    assert "note: &lt;script&gt;alert(1)&lt;/script&gt;" in detail
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text(admin.get("/leases/"))


# ---------------------------------------------------------------------------------------------
# Overview


def test_overview(api, admin):
    assert api.post(LEASES, fresh_lease("a")).status_code == 201
    assert api.post(LEASES, stale_lease("b")).status_code == 201
    assert api.post(ENDPOINTS, endpoints("svc", ips=("10.0.0.1", "10.0.0.2"), not_ready=("10.0.0.3",))).status_code == 201
    assert api.post(ns_path(JOBS, "batch"), job("j", ns="batch")).status_code == 201
    html = text(admin.get("/"))
    assert re.search(r'<div id="namespaces" class="[^"]*" data-rv="\d+">', html)
    card = row(html, "ns-default")
    assert '<span data-held>1</span>' in card and '<span data-expired>1</span>' in card
    assert "2&nbsp;ready" in card and "1&nbsp;not ready" in card
    assert 'href="/leases/?namespace=default"' in card
    jobs = row(html, "ns-batch")
    assert "1&nbsp;running" in jobs
    assert 'ws-connect="/ws/live/?view=overview&amp;rv=' in html
    only = text(admin.get("/?namespace=batch"))
    assert 'id="ns-batch"' in only and 'id="ns-default"' not in only


# ---------------------------------------------------------------------------------------------
# The partials the live consumer renders


def test_partials_render_one_item_with_oob(api):
    obj = fresh_lease("one")
    obj["metadata"]["resourceVersion"] = "7"
    item = p.present("Lease", obj, datetime.now(timezone.utc))
    html = render_to_string("coordination/leases.html#item", {"item": item, "oob": "true"}).strip()
    assert html.startswith('<tr id="lease-default--one"') and 'hx-swap-oob="true"' in html.split(">")[0]
    assert html.endswith("</tr>")
    plain = render_to_string("coordination/leases.html#item", {"item": item})
    assert "hx-swap-oob" not in plain

    ep = {"metadata": {"name": "svc.x", "namespace": "default"},
          "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80, "protocol": "TCP"}]}]}
    card = render_to_string("core/endpoints.html#item", {"item": p.present("Endpoints", ep, NOW), "oob": "outerHTML"})
    assert card.strip().startswith('<article id="endpoints-default--svc_x"') and 'hx-swap-oob="outerHTML"' in card

    j = job("j1")
    j["metadata"]["namespace"] = "default"
    rendered = render_to_string("batch/jobs.html#item", {"item": p.present("Job", j, NOW), "oob": "true"})
    assert rendered.strip().startswith('<tr id="job-default--j1"')

    detail = render_to_string("coordination/lease_detail.html#detail",
                              {"item": item, "yaml": p.object_yaml(obj), "oob": "true"})
    assert detail.strip().startswith('<div id="detail"') and 'hx-swap-oob="true"' in detail
    assert 'data-rv="7"' in detail

    ns = p.namespace_card("default", NOW, leases=[("a", NOW, 10)])
    card = render_to_string("web/overview.html#namespace", {"ns": ns, "oob": "true"})
    assert card.strip().startswith('<article id="ns-default"') and 'hx-swap-oob="true"' in card


def test_static_files_are_served(admin):
    from django.contrib.staticfiles import finders
    for name in ("kubedash/app.css", "kubedash/live.js", "vendor/htmx.min.js", "vendor/ws.js"):
        assert finders.find(name), name


# ---------------------------------------------------------------------------------------------
# present(): pure functions


def test_dom_id():
    assert p.dom_id("Lease", "kube-system", "kube-scheduler") == "lease-kube-system--kube-scheduler"
    assert p.dom_id("Endpoints", "a", "x.y.z") == "endpoints-a--x_y_z"


def test_present_lease_states():
    base = {"metadata": {"name": "l", "namespace": "n"},
            "spec": {"holderIdentity": "h", "leaseDurationSeconds": 10, "renewTime": micro(NOW)}}
    held = p.present("Lease", base, NOW + timedelta(seconds=4))
    assert held["state"] == "held" and held["expires_text"] == "expires in 6s" and held["renewed_text"] == "renewed 4s ago"
    expired = p.present("Lease", base, NOW + timedelta(seconds=13))
    assert expired["state"] == "expired" and expired["expires_text"] == "expired 3s ago"
    assert expired["expires_at"] == "2026-01-02T03:04:15.000Z"
    free = p.present("Lease", {**base, "spec": {**base["spec"], "holderIdentity": ""}}, NOW)
    assert free["state"] == "free" and not free["live"] and free["expires_at"] == ""
    unknown = p.present("Lease", {**base, "spec": {"holderIdentity": "h"}}, NOW)
    assert unknown["state"] == "unknown" and unknown["renewed_text"] == "never renewed"


def test_present_endpoints_not_ready_wins_and_no_ports():
    obj = {"metadata": {"name": "e", "namespace": "n"}, "subsets": [
        {"addresses": [{"ip": "10.0.0.2"}], "ports": [{"port": 80, "protocol": "TCP"}]},
        {"notReadyAddresses": [{"ip": "10.0.0.2"}], "ports": [{"port": 80, "protocol": "TCP"}]},
        {"addresses": [{"ip": "10.0.0.10"}]}]}
    item = p.present("Endpoints", obj, NOW)
    assert [port["text"] for port in item["ports"]] == ["80/TCP", "no ports"]
    assert [a["ip"] for a in item["addresses"]] == ["10.0.0.2", "10.0.0.10"]      # numeric IP order
    assert [c["state"] for c in item["addresses"][0]["cells"]] == ["not-ready", "absent"]
    assert [c["state"] for c in item["addresses"][1]["cells"]] == ["absent", "ready"]
    assert item["health"] == "warn" and item["ready"] == 1 and item["not_ready"] == 1


def test_limited_viewer_pages_across_namespaces(spread, api, login):
    assert api.post(ns_path(LEASES, "team-b"), fresh_lease("zeta", ns="team-b")).status_code == 201
    c = login("viewer", namespaces=["team-b", "default"], username="two-ns")
    seen, url = [], "/leases/?limit=2"
    while url:
        html = text(c.get(url))
        seen += ids(html)
        nxt = re.search(r'href="([^"]+)" rel="next"', html)
        url = "/leases/" + unescape(nxt.group(1)) if nxt else ""
    assert seen == ["lease-default--alpha", "lease-default--beta", "lease-default--gamma", "lease-team-b--zeta"]


def test_namespace_summary_for_the_live_overview(api):
    from dashboard.web.queries import namespace_summary
    assert api.post(LEASES, fresh_lease("a")).status_code == 201
    card = namespace_summary("default", datetime.now(timezone.utc))
    assert card["dom_id"] == "ns-default" and card["leases"]["held"] == 1
    empty = namespace_summary("nothing-here", datetime.now(timezone.utc))
    assert empty["dom_id"] == "ns-nothing-here" and empty["leases"]["total"] == 0 and empty["jobs"]["total"] == 0


def test_readiness_matrix_is_the_format_html_markup():
    """core/templatetags/readiness.py builds the matrix with f-strings over html.escape: the
    same markup, escaping included, as format_html gave (the version before, kept here)."""
    import random

    from django.utils.html import format_html, format_html_join
    from django.utils.safestring import mark_safe

    from dashboard.core.templatetags.readiness import readiness_matrix

    def head_of(a, namespace):
        parts = [format_html('<span class="ip">{}</span>', a.get("ip", ""))]
        if a.get("hostname"):
            parts.append(format_html('<span class="meta">host {}</span>', a["hostname"]))
        if a.get("node"):
            parts.append(format_html('<span class="meta">node {}</span>', a["node"]))
        if a.get("target"):
            other = a.get("target_namespace")
            suffix = format_html(" ({})", other) if other and other != namespace else ""
            parts.append(format_html('<span class="meta">{}{}</span>', a["target"], suffix))
        return "".join(parts)

    def reference(item):
        ports, addresses = item["ports"], item["addresses"]
        head = format_html_join("", '<th scope="col">{}</th>', ((p["text"],) for p in ports))
        if addresses:
            body = mark_safe("".join(
                format_html('<tr>\n          <th scope="row">{}</th>\n          {}\n        </tr>',
                            mark_safe(head_of(a, item["namespace"])),
                            format_html_join("", '<td><span class="cell {}">{}</span></td>',
                                             ((c["state"], c["text"]) for c in a["cells"])))
                for a in addresses))
        else:
            body = format_html('<tr><td colspan="{}" class="muted">No addresses.</td></tr>', len(ports) + 1)
        foot = ""
        if addresses and ports:
            foot = format_html('\n      <tfoot>\n        <tr><th scope="row">Ready</th>{}</tr>\n      </tfoot>',
                               format_html_join("", "<td>{} of {}</td>", ((p["ready"], p["total"]) for p in ports)))
        return format_html(
            '<table class="matrix">\n      <caption>Readiness of {}: addresses × ports</caption>\n      <thead>\n'
            '        <tr>\n          <th scope="col">Address</th>\n          {}\n        </tr>\n      </thead>\n'
            '      <tbody>\n        {}\n      </tbody>{}\n    </table>',
            item["name"], head, body, foot)

    rnd = random.Random(14)
    texts = ["web", "a<b>&\"c'", "10.0.0.1", "", "Pod/web-0", "ünï"]
    for _ in range(300):
        ports = [{"text": rnd.choice(texts), "ready": rnd.randint(0, 3), "total": rnd.randint(0, 3)}
                 for _ in range(rnd.randint(0, 3))]
        addresses = [{"ip": rnd.choice(texts), "hostname": rnd.choice(texts), "node": rnd.choice(texts),
                      "target": rnd.choice(texts), "target_namespace": rnd.choice(["ns", "other<x>", ""]),
                      "cells": [{"state": rnd.choice(["ready", "not-ready", "absent", 'x"y']),
                                 "text": rnd.choice(texts)} for _ in ports]}
                     for _ in range(rnd.randint(0, 3))]
        item = {"name": rnd.choice(texts), "namespace": "ns", "ports": ports, "addresses": addresses}
        assert str(readiness_matrix(item)) == str(reference(item))

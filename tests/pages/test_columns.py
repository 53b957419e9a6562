"""A list's chosen columns (`?columns=`, web/columns.py) over HTTP and its websocket: the rendered
headers and cells, label columns sorted and filtered, the address canonical, the column menu,
the CSV export and the live pushes keeping the columns."""
from __future__ import annotations

import csv
import io
import re
from html import unescape
from urllib.parse import quote, urlencode

import pytest
from asgiref.sync import sync_to_async

from dashboard.kube import store
from dashboard.kube.registry import by_kind
from manifests import job, lease
from page_helpers import connect, receive_until

ALL_LEASE_COLUMNS = "name,state,holder,expiry,duration,acquired,transitions,age"


def add(name: str, ns: str = "cols", holder: str = "node-a", annotations=None, **labels):
    obj = lease(name, holder=holder, ns=ns)
    if labels:
        obj["metadata"]["labels"] = labels
    if annotations:
        obj["metadata"]["annotations"] = annotations
    return store.create(by_kind("Lease"), ns, obj).object


@pytest.fixture
def seeded():
    add("a", tier="fe", app="web", annotations={"owner": "zoe"})
    add("b", holder="node-b", tier="be", app="web", annotations={"owner": "ann"})
    add("c", tier="db")
    add("d", holder="node-c")   # no labels at all


def headers(html: str) -> list[str]:
    thead = re.search(r"<thead>(.*?)</thead>", html, re.S).group(1)
    cells = re.findall(r'<th scope="col"[^>]*>(.*?)</th>', thead, re.S)[1:]   # (after the select column)
    return [unescape(re.sub(r"<[^>]+>|[▲▼↕]", "", c)).strip() for c in cells]


def row(html: str, name: str, ns: str = "cols") -> str:
    return re.search(rf'<tr id="lease-{ns}--{name}".*?</tr>', html, re.S).group(0)


def cells(row_html: str) -> int:
    return len(re.findall(r"<t[dh][ >]", row_html)) - 1   # (without the select cell)


def names(html: str) -> list[str]:
    return re.findall(r'<tr id="lease-cols--([^"]+)"', html)


def test_chosen_columns_render_in_their_order_with_label_and_annotation_cells(login, seeded):
    r = login("viewer").get("/leases/?namespace=cols&columns=" + quote("name,label:tier,holder,annotation:owner"))
    assert r.status_code == 200
    html = r.content.decode()
    assert headers(html) == ["Lease", "tier", "Holder", "owner"]
    a = row(html, "a")
    assert cells(a) == 4
    assert re.search(r'<td class="meta-col" data-label="tier"><a class="mono" href="\?labelSelector=tier%3Dfe&amp;'
                     r'columns=name%2Clabel%3Atier%2Cholder%2Cannotation%3Aowner"[^>]*>fe</a></td>', a)
    assert '<span class="mono">zoe</span>' in a and 'class="state"' not in a   # (State not chosen)
    assert 'aria-label="no label"' in row(html, "d")   # no such label: a dash, said so
    # The fixed-cols grid gets the chosen columns' tracks.
    assert 'style="--cols: minmax(8.5em, 1.3fr) minmax(7em, 1fr) minmax(7em, 1.5fr) minmax(7em, 1fr); ' \
           '--cols-min: 29.5em"' in html


def test_the_address_is_canonical(login, seeded):
    viewer = login("viewer")
    # The menu's form posts one `columns` per ticked box: joined into one parameter.
    r = viewer.get("/leases/?namespace=cols&columns=name&columns=holder&columns=")
    assert r.status_code == 302 and r["Location"] == "/leases/?namespace=cols&columns=name%2Cholder"
    # The name column is always there (first), a repeat is dropped, the kind's own columns in
    # their order are no parameter at all.
    r = viewer.get("/leases/?namespace=cols&columns=holder,holder")
    assert r["Location"] == "/leases/?namespace=cols&columns=name%2Cholder"
    r = viewer.get(f"/leases/?namespace=cols&columns={ALL_LEASE_COLUMNS}")
    assert r["Location"] == "/leases/?namespace=cols"
    r = viewer.get("/leases/?namespace=cols&columns=nope")
    assert r.status_code == 400
    assert "Columns: “nope” is not a column of this list" in unescape(r.content.decode())
    assert viewer.get("/leases/?columns=label:bad%20key").status_code == 400
    # Links keep the columns: sort headers, the filters form, paging.
    html = viewer.get("/leases/?namespace=cols&columns=name%2Cholder").content.decode()
    assert 'href="?namespace=cols&amp;sort=holder&amp;columns=name%2Cholder"' in html
    assert '<input type="hidden" name="columns" value="name,holder">' in html


def test_sort_by_a_label_column_both_ways_missing_last(login, seeded):
    viewer = login("viewer")
    base = "/leases/?namespace=cols&columns=" + quote("name,label:tier")
    html = viewer.get(base + "&sort=label%3Atier").content.decode()
    assert names(html) == ["b", "c", "a", "d"]   # be, db, fe, then none
    assert re.search(r'<th scope="col" class="meta-col" aria-sort="ascending"><a href="[^"]*sort=-label%3Atier', html)
    assert names(viewer.get(base + "&sort=-label%3Atier").content.decode()) == ["a", "c", "b", "d"]
    # An annotation column sorts too (from the objects).
    html = viewer.get("/leases/?namespace=cols&columns=name,annotation:owner&sort=annotation:owner").content.decode()
    assert names(html) == ["b", "a", "c", "d"]
    # A label order whose column is not shown still says so in the Sort menu.
    html = viewer.get("/leases/?namespace=cols&sort=label%3Atier").content.decode()
    assert '<option value="label:tier" selected>label tier ▲</option>' in html


def test_a_label_cell_filters_the_list_to_its_value(login, seeded):
    viewer = login("viewer")
    html = viewer.get("/leases/?namespace=cols&columns=name,label:app").content.decode()
    link = unescape(re.search(r'data-label="app"><a class="mono" href="([^"]+)"', row(html, "a")).group(1))
    filtered = viewer.get("/leases/" + link)
    assert filtered.status_code == 200
    assert names(filtered.content.decode()) == ["a", "b"]


def test_the_menu_offers_the_views_label_keys_and_moves_columns(login, seeded):
    viewer = login("viewer")
    listed = viewer.get("/leases/?namespace=cols&columns=name,holder,state").content.decode()
    assert '<a href="/leases/columns/?namespace=cols&amp;columns=name%2Cholder%2Cstate">Columns…</a>' in listed
    r = viewer.get("/leases/columns/?namespace=cols&columns=name,holder,state")
    assert r.status_code == 200
    menu = re.search(r'<form method="get" action="/leases/" class="filters columns-form".*?</form>',
                     r.content.decode(), re.S).group(0)
    assert re.findall(r'<option value="(label:[^"]+)">', menu) == ["label:tier", "label:app"]   # (most common first)
    ticked = re.findall(r'name="columns" value="([^"]+)" checked', menu)
    assert ticked == ["name", "holder", "state"]
    assert 'value="name" checked disabled' in menu   # (the name: always, sent by a hidden field)
    assert '<input type="hidden" name="columns" value="name">' in menu
    assert 'value="expiry">' in menu   # offered, not ticked
    right = re.search(r'<a class="move" href="([^"]+)" aria-label="Move Holder right">', menu).group(1)
    assert unescape(right) == "?namespace=cols&columns=name%2Cstate%2Cholder"   # (reordered on the menu's page)
    # The other settings ride along as hidden fields; "the list's own columns" drops the choice.
    assert '<input type="hidden" name="namespace" value="cols">' in menu
    assert 'href="/leases/?namespace=cols">The list’s own columns</a>' in menu
    # Limits hold on the menu's page too.
    assert login("viewer", namespaces=["x"]).get("/leases/columns/?namespace=cols").status_code == 403


def test_the_csv_export_has_the_chosen_columns(login, seeded):
    r = login("viewer").get("/leases/?namespace=cols&columns=holder,label:tier&format=csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert list(rows[0]) == ["Namespace", "Name", "Holder", "label:tier"]
    assert [(x["Name"], x["label:tier"]) for x in rows] == [("a", "fe"), ("b", "be"), ("c", "db"), ("d", "")]


def test_jobs_columns_hide_and_reorder(login):
    store.create(by_kind("Job"), "cj", job("j1", ns="cj", completions=2))
    html = login("viewer").get("/jobs/?namespace=cj&columns=name,age,status").content.decode()
    assert headers(html) == ["Job", "Age", "Status"]
    tr = re.search(r'<tr id="job-cj--j1".*?</tr>', html, re.S).group(0)
    assert tr.index('class="opt age"') < tr.index('class="state')
    assert "progress-cell" not in tr


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_live_pushes_keep_the_chosen_columns(transactional_db):
    from dashboard.access.tokens import ensure_user
    user = await sync_to_async(ensure_user)("page-viewer", "viewer")
    await sync_to_async(add)("live", ns="cols-live", tier="fe")
    rv = await sync_to_async(store.current_revision)()
    query = urlencode({"view": "leases", "namespace": "cols-live", "columns": "name,label:tier", "rv": rv})
    comm, ok, _ = await connect(user, query)
    assert ok

    def relabel(obj):
        obj["metadata"]["labels"] = {"tier": "be"}
        return obj

    await sync_to_async(store.update)(by_kind("Lease"), "cols-live", "live", relabel, is_patch=True)
    html = await receive_until(comm, 'id="lease-cols-live--live"')
    pushed = re.search(r'<tr id="lease-cols-live--live".*?</tr>', html, re.S).group(0)
    assert cells(pushed) == 2 and 'data-label="tier"' in pushed and ">be</a>" in pushed
    assert 'class="holder"' not in pushed
    await comm.disconnect()


def test_a_share_link_opens_with_the_chosen_columns(login, seeded):
    from page_helpers import SHARE_TOKEN, form_fields
    from django.test import Client
    editor = login("editor")
    html = editor.get("/leases/?namespace=cols&columns=name%2Clabel%3Atier").content.decode()
    share = unescape(re.search(r'<a class="button share-this" href="([^"]+)"', html).group(1))
    assert "columns=name%2Clabel%3Atier" in share
    fields = form_fields(editor.get(share).content.decode())
    assert fields["columns"] == "name,label:tier"
    fields.update(label="columns", expiry="1d")
    token = SHARE_TOKEN.search(editor.post("/share/new/", fields).content.decode()).group(1)
    guest = Client()
    landed = guest.get(f"/s/{token}/", {"columns": fields["columns"]})
    assert landed.status_code == 302 and "columns=name%2Clabel%3Atier" in landed["Location"]
    assert headers(guest.get(landed["Location"]).content.decode()) == ["Lease", "tier"]
    # The visitor may choose columns too (the menu's page is part of a shared view), and export.
    assert guest.get("/leases/columns/?namespace=cols").status_code == 200
    assert guest.get("/jobs/columns/").status_code in (403, 404)   # (another kind: outside the link)


def test_endpoints_cards_show_label_columns_and_export_the_chosen_ones(login):
    from manifests import endpoints
    store.create(by_kind("Endpoints"), "ce", endpoints("svc", ns="ce", labels={"tier": "fe"}))
    viewer = login("viewer")
    html = viewer.get("/endpoints/?namespace=ce&columns=name,ready,label:tier").content.decode()
    assert re.search(r'<span class="meta-fact"><span class="muted">tier:</span> <span class="mono">fe</span>', html)
    r = viewer.get("/endpoints/?namespace=ce&columns=name,ready,label:tier&format=csv")
    assert b"".join(r.streaming_content).decode().splitlines() == ["Namespace,Name,Ready,label:tier", "ce,svc,1,fe"]


def test_the_events_feed_takes_columns_too(login):
    viewer = login("viewer")
    r = viewer.get("/events/?columns=message,count")
    assert r.status_code == 302 and r["Location"] == "/events/?columns=object%2Cmessage%2Ccount"   # (its row's link first)
    html = viewer.get(r["Location"]).content.decode()
    assert headers(html) == ["Object", "Message", "Count"]
    assert viewer.get("/events/columns/?columns=object,message,count").status_code == 200
    r = viewer.get("/events/?columns=object,message,count&format=csv")
    assert b"".join(r.streaming_content).decode().splitlines()[0] == \
        "Object kind,Object namespace,Object name,Message,Source,Count"

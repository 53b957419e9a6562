"""A list's whole filtered view as a file (`?format=csv|json|yaml`, web/export.py), through the
Django test client: equal to the API's list for the same filter, every page of it, streamed,
named after the view, and no more than the viewer may see."""
from __future__ import annotations

import csv
import io
import re
import time
from urllib.parse import quote

import orjson
import pytest
import yaml

from dashboard.kube import store
from dashboard.kube.meta import now as utcnow
from dashboard.kube.registry import by_kind
from manifests import endpoints, job, lease
from page_helpers import create_link, visitor

LEASES_API = "/apis/coordination.k8s.io/v1"


def body(resp) -> bytes:
    assert resp.streaming, "an export is streamed, never one body"
    return b"".join(resp.streaming_content)


def csv_rows(resp) -> list[dict]:
    return list(csv.DictReader(io.StringIO(body(resp).decode())))


def add_lease(ns: str, name: str, holder: str = "node-a", fresh: bool = False, **labels) -> dict:
    obj = lease(name, holder=holder, ns=ns, labels=labels or None)
    if not labels:
        del obj["metadata"]["labels"]
    if fresh:   # renewed now: held, not expired
        obj["spec"]["renewTime"] = utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        obj["spec"]["leaseDurationSeconds"] = 3600
    return store.create(by_kind("Lease"), ns, obj).object


@pytest.fixture
def seeded():
    for i in range(7):
        add_lease("team-a", f"web-{i}", holder=f"node-{i % 3}", fresh=i % 2 == 0, app="web")
    add_lease("team-a", "db-0", app="db")
    add_lease("team-b", "web-9", app="web")


def test_json_yaml_and_csv_equal_the_apis_list_for_the_same_filter(login, api, seeded):
    viewer = login("viewer")
    selector = "app=web"
    listed = orjson.loads(api.get(f"{LEASES_API}/namespaces/team-a/leases?labelSelector={quote(selector)}").content)
    assert len(listed["items"]) == 7

    r = viewer.get(f"/leases/?namespace=team-a&labelSelector={quote(selector)}&format=json")
    assert r.status_code == 200 and r["Content-Type"] == "application/json"
    assert r["Content-Disposition"] == 'attachment; filename="leases-team-a-app-web.json"'
    exported = orjson.loads(body(r))
    assert exported["kind"] == "LeaseList" and exported["apiVersion"] == "coordination.k8s.io/v1"
    assert exported["items"] == listed["items"]   # the objects as the API returns them, whole

    r = viewer.get(f"/leases/?namespace=team-a&labelSelector={quote(selector)}&format=yaml")
    assert r["Content-Type"].startswith("application/yaml")
    as_yaml = yaml.safe_load(body(r))
    assert as_yaml["kind"] == "LeaseList" and as_yaml["items"] == listed["items"]

    r = viewer.get(f"/leases/?namespace=team-a&labelSelector={quote(selector)}&format=csv")
    assert r["Content-Type"] == "text/csv; charset=utf-8"
    rows = csv_rows(r)
    assert [(row["Namespace"], row["Name"]) for row in rows] == \
        [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in listed["items"]]
    # The list's columns, unformatted: times ISO 8601, durations in seconds.
    assert list(rows[0]) == ["Namespace", "Name", "State", "Holder", "Renewed", "Expires", "Duration (s)",
                             "Acquired", "Transitions", "Created"]
    first = listed["items"][0]
    assert rows[0]["Holder"] == first["spec"]["holderIdentity"]
    assert rows[0]["Duration (s)"] == str(first["spec"]["leaseDurationSeconds"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rows[0]["Renewed"])
    assert rows[0]["Created"].startswith(first["metadata"]["creationTimestamp"][:19])


def test_export_keeps_the_state_name_search_and_sort_and_is_named_after_the_view(login, seeded):
    viewer = login("viewer")
    r = viewer.get("/leases/?namespace=team-a&state=held&format=csv")
    assert r["Content-Disposition"] == 'attachment; filename="leases-team-a-held.csv"'
    rows = csv_rows(r)
    assert [row["Name"] for row in rows] == ["web-0", "web-2", "web-4", "web-6"]
    assert {row["State"] for row in rows} == {"held"}
    # Sorted by holder, descending, with a name search: the page's order, every page of it.
    query = "namespace=team-a&q=web&sort=-holder&limit=2"
    page_one = viewer.get(f"/leases/?{query}").content.decode()
    exported = [row["Name"] for row in csv_rows(viewer.get(f"/leases/?{query}&format=csv"))]
    assert len(exported) == 7
    assert [row["Holder"] for row in csv_rows(viewer.get(f"/leases/?{query}&format=csv"))] == \
        sorted((f"node-{i % 3}" for i in range(7)), reverse=True)
    shown = re.findall(r'<tr id="lease-team-a--([^"]+)"', page_one)
    assert exported[:2] == shown


def test_the_list_page_offers_the_exports_of_its_view(login, seeded):
    html = login("viewer").get("/leases/?namespace=team-a&state=held").content.decode()
    menu = re.search(r'<details class="export-menu">.*?</details>', html, re.S).group(0)
    assert "Export" in menu
    for fmt in ("csv", "json", "yaml"):
        assert f'href="?namespace=team-a&amp;state=held&amp;format={fmt}"' in menu


def test_bad_format_and_bad_filters_say_why(login, seeded):
    viewer = login("viewer")
    r = viewer.get("/leases/?format=xml")
    assert r.status_code == 400 and "not an export format" in r.content.decode()
    r = viewer.get("/leases/?labelSelector=a%20in&format=csv")
    assert r.status_code == 400 and "Label selector" in r.content.decode()
    r = viewer.get("/leases/?sort=nope&format=csv")
    assert r.status_code == 400 and "not an order of this list" in r.content.decode()


def test_exports_stay_within_the_viewers_rights(login, seeded):
    limited = login("viewer", namespaces=["team-b"])
    r = limited.get("/leases/?namespace=team-a&format=json")
    assert r.status_code == 403 and not getattr(r, "streaming", False)
    exported = orjson.loads(body(limited.get("/leases/?format=json")))
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in exported["items"]] == [("team-b", "web-9")]


def test_a_share_link_exports_what_it_shows_and_nothing_else(login, seeded):
    editor = login("editor")
    add_lease("team-a", "web-x", app="other")
    _, token = create_link(editor)   # team-a, app=web
    guest = visitor(token)
    names = [row["Name"] for row in csv_rows(guest.get("/leases/?namespace=team-a&format=csv"))]
    assert names == [f"web-{i}" for i in range(7)]   # not db-0, web-x (outside its selector)
    assert guest.get("/leases/?namespace=team-b&format=csv").status_code == 403


def test_a_jobs_export_has_the_jobs_columns(login, api):
    store.create(by_kind("Job"), "batch-a", job("j1", ns="batch-a", completions=3))
    rows = csv_rows(login("viewer").get("/jobs/?format=csv"))
    assert rows[0]["Name"] == "j1" and rows[0]["Completions"] == "3" and rows[0]["Status"]


@pytest.mark.slow
def test_ten_thousand_rows_export_streamed_and_equal_to_the_api(login, api):
    res = by_kind("Lease")
    started = time.monotonic()
    for i in range(10_000):
        store.create(res, "big", lease(f"l{i:05d}", holder=f"node-{i % 7}", ns="big"))
    print(f"seeded in {time.monotonic() - started:.1f}s")
    viewer = login("viewer")
    r = viewer.get("/leases/?namespace=big&format=csv")
    pieces = list(r.streaming_content)
    assert len(pieces) >= 10   # batch by batch, not one body
    rows = list(csv.DictReader(io.StringIO(b"".join(pieces).decode())))
    listed = orjson.loads(api.get(f"{LEASES_API}/namespaces/big/leases").content)["items"]
    assert len(rows) == len(listed) == 10_000
    assert [row["Name"] for row in rows] == [o["metadata"]["name"] for o in listed]
    exported = orjson.loads(body(viewer.get("/leases/?namespace=big&format=json")))["items"]
    assert exported == listed


def test_a_kinds_export_item_reads_as_its_presenter_for_every_column(db):
    """A kind's cheaper export item (KindWeb.export_item) gives every column the presenter's value."""
    from dashboard.web import kinds

    web = kinds.by_kind("Lease")
    fresh = add_lease("ei", "fresh", fresh=True, app="web")
    stale = add_lease("ei", "stale", holder="n-1")
    free = add_lease("ei", "free", holder="")
    acquired = lease("acq", ns="ei", annotations={"owner": "zoe"})
    acquired["spec"]["acquireTime"] = "2026-11-22T02:00:00.000000Z"
    acquired["spec"]["leaseTransitions"] = 3
    columns = [*web.all_columns(), web.column("label:app"), web.column("annotation:owner")]
    now = utcnow()
    for obj in (fresh, stale, free, store.create(by_kind("Lease"), "ei", acquired).object):
        presented, exported = web.present(obj, now), web.export_item(obj, now)
        for column in columns:
            for header, get in column.fields:
                assert get(exported) == get(presented), (obj["metadata"]["name"], header)


def test_a_leases_exported_expiry_is_its_presented_one_across_a_minute_and_a_year(db):
    """The export's expiry (the renewal's text with the seconds changed while within its minute,
    else the time computed) equals the page's, whatever renewal and duration."""
    from dashboard.web import kinds

    web = kinds.by_kind("Lease")
    now = utcnow()
    cases = [("2026-11-22T03:00:44.123456Z", 15), ("2026-11-22T03:00:45.123456Z", 15), ("2026-12-31T23:59:59.000000Z", 1),
             ("2026-11-22T03:00:59.999999Z", 1), ("2026-11-22T03:00:10.000999Z", 49), ("2026-11-22T03:00:10.000000Z", 86400 * 400)]
    for i, (renewed, duration) in enumerate(cases):
        obj = lease(f"x{i}", ns="exp", duration=duration)
        obj["spec"]["renewTime"] = renewed
        obj = store.create(by_kind("Lease"), "exp", obj).object
        presented, exported = web.present(obj, now), web.export_item(obj, now)
        assert exported["expires_at"] == presented["expires_at"], (renewed, duration)
        assert exported["state_text"] == presented["state_text"], (renewed, duration)
    assert web.export_item(store.get(by_kind("Lease"), "exp", "x1"), now)["expires_at"] == "2026-11-22T03:01:00.123Z"


@pytest.mark.django_db(transaction=True)
def test_a_followed_clusters_export_and_the_cluster_limits(login, transactional_db):
    """`?cluster=` exports that cluster's copy (read at its own revisions), sorted too; a user
    limited to other clusters gets nothing of it."""
    from django.utils import timezone

    from dashboard.follow.models import Cluster
    from dashboard.kube import mirror as kmirror

    Cluster.objects.create(name="prod", server="https://prod.example:6443", credentials=b"x", state=Cluster.LIVE,
                           heartbeat_at=timezone.now(), last_event_at=timezone.now())
    for i, holder in enumerate(("b-holder", "a-holder")):
        obj = lease(f"prod-{i}", holder=holder, ns="team-a")
        obj["metadata"].update(uid=f"u-{i}", creationTimestamp="2026-01-02T03:04:05Z", resourceVersion=str(100 + i))
        kmirror.mirror("prod", [kmirror.Mirrored(by_kind("Lease"), "team-a", obj["metadata"]["name"], obj)])
    add_lease("team-a", "local-one")
    viewer = login("viewer")
    r = viewer.get("/leases/?namespace=team-a&format=csv&cluster=prod")
    assert r["Content-Disposition"] == 'attachment; filename="prod-leases-team-a.csv"'
    rows = csv_rows(r)
    assert [r["Name"] for r in rows] == ["prod-0", "prod-1"]
    rows = csv_rows(viewer.get("/leases/?namespace=team-a&sort=holder&format=csv&cluster=prod"))
    assert [r["Holder"] for r in rows] == ["a-holder", "b-holder"]
    assert [r["Name"] for r in csv_rows(viewer.get("/leases/?namespace=team-a&format=csv"))] == ["local-one"]
    limited = login("viewer", clusters=["local"])
    assert limited.get("/leases/?namespace=team-a&format=csv&cluster=prod").status_code in (403, 404)


def test_csv_cells_with_commas_quotes_and_line_breaks_are_quoted_as_csv_writes_them(login):
    """Most rows are joined directly (web/export.csv_line); a cell that needs quoting is written
    by the csv module, and the file reads back to the same values."""
    note = 'first, "second"\nthird\r\nend'
    add_lease("q", "plain", holder="node-a")
    obj = lease("quoted", holder='a "holder", with a comma', ns="q", annotations={"note": note})
    store.create(by_kind("Lease"), "q", obj)
    r = login("viewer").get("/leases/?namespace=q&columns=" + quote("name,holder,annotation:note") + "&format=csv")
    text = body(r).decode()
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert [(row["Name"], row["Holder"], row["annotation:note"]) for row in rows] == \
        [("plain", "node-a", ""), ("quoted", 'a "holder", with a comma', note)]
    expected = io.StringIO()
    writer = csv.writer(expected, lineterminator="\r\n")
    writer.writerow(["Namespace", "Name", "Holder", "annotation:note"])
    writer.writerow(["q", "plain", "node-a", ""])
    writer.writerow(["q", "quoted", 'a "holder", with a comma', note])
    assert text == expected.getvalue()   # byte for byte what csv.writer writes


def test_a_stored_times_export_text_is_its_iso_time():
    """present.iso_text (an export's time cells, read from the stored text) says what
    iso(parse_time(…)) says, for stored forms and any other."""
    from datetime import timezone

    from dashboard.kube.formats import parse_time
    from dashboard.web.present import iso, iso_text

    for value in ("2026-11-29T10:33:03.123456Z", "2026-11-29T10:33:03.999999Z", "2026-11-29T10:33:03Z",
                  "0001-01-01T00:00:00Z", "2026-11-29T10:33:03.1Z", "2026-11-29T12:33:03.5+02:00",
                  "2026-11-29T10:33:03", "garbage", "", None, 17):
        assert iso_text(value) == iso(parse_time(value)), value
    for moment in (parse_time("2026-11-29T10:33:03Z"), parse_time("2026-11-29T10:33:03.999999Z"),
                   parse_time("2026-11-29T12:33:03.000500+02:00")):   # (milliseconds cut, as isoformat cuts them)
        assert iso(moment) == moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _CountingOrjson:
    """export's orjson, counting the objects it parses."""

    def __init__(self):
        self.parsed = 0

    def loads(self, text):
        self.parsed += 1
        return orjson.loads(text)

    def __getattr__(self, name):
        return getattr(orjson, name)


def test_the_csv_from_the_typed_rows_is_byte_for_byte_the_csv_from_the_objects(login, monkeypatch, settings):
    """A CSV's cells read from the typed rows in the snapshot's own query (kube/lists.TimeText,
    KindWeb.typed_export) make the same file as the cells of each parsed object, for every
    column set: the kind's own, chosen ones, label and annotation ones (those parse), quoting,
    a name search and a label selector, several namespaces, Endpoints and Jobs (name and age
    from the typed rows, their other columns parsed), and rows written after the snapshot (read
    from the log as they stood, then parsed: nothing else is)."""
    from dashboard.web import export

    settings.KUBEDASH_LIST_STREAM_BATCH = 3   # (log rows within and across batches)
    fresh = utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    specs = {   # name -> spec changes (lease(): renewed 2026-11-22T03:00:00.000000Z, 15 s: expired)
        "web-held": {"renewTime": fresh, "leaseDurationSeconds": 3600, "acquireTime": "2026-11-22T02:59:58.123456Z"},
        "web-expired": {"leaseTransitions": 4},
        "web-free": {"holderIdentity": ""},
        "web-no-renewal": {"renewTime": None},
        "web-no-duration": {"leaseDurationSeconds": None},
        "web-next-minute": {"renewTime": "2026-11-22T03:00:59.999999Z", "leaseDurationSeconds": 1},
        "web-next-year": {"renewTime": "2026-12-31T23:59:30.000000Z", "leaseDurationSeconds": 45},
        "web-whole-second": {"renewTime": "2026-11-22T03:00:44.000000Z"},   # (stored without a fraction)
        "db-quoted": {"holderIdentity": 'a "holder", with a comma\nand a line'},
        "db-to-change": {}, "db-to-delete": {},
    }
    for ns in ("tx-a", "tx-b"):
        for name, spec in specs.items():
            obj = lease(name, ns=ns, labels={"app": name.split("-")[0], "tier": "x.y"},
                        annotations={"note": 'say "hi", then\r\nleave'})
            obj["spec"].update(spec)
            store.create(by_kind("Lease"), ns, obj)
        store.create(by_kind("Endpoints"), ns, endpoints("svc-1", ns=ns, not_ready=("10.0.0.9",)))
        store.create(by_kind("Job"), ns, job("j1", ns=ns, completions=2))
    viewer = login("viewer")
    cases = {   # the view -> the objects it parses from the typed rows: those written since (None: each)
        "/leases/?namespace=tx-a": 2,
        "/leases/": 4,   # (every namespace, at the first one's revision)
        "/leases/?namespace=tx-a&columns=age,holder,expiry,name": 2,
        "/leases/?namespace=tx-a&q=WEB&labelSelector=" + quote("app in (web,db)"): 2,   # (the search drops them)
        "/leases/?namespace=tx-a&columns=" + quote("name,state,label:tier,annotation:note"): None,
        "/leases/?namespace=tx-a&state=expired": None,
        "/endpoints/?namespace=tx-a&columns=name,age": 1,
        "/endpoints/?namespace=tx-a": None,
        "/jobs/?columns=age,name": 2,
        "/jobs/?namespace=tx-b": None,
    }
    typed, parsed = {}, {}
    for view in cases:   # every response begun (its snapshot taken) before the writes below
        typed[view] = viewer.get(view + "&format=csv" if "?" in view else view + "?format=csv")
        with monkeypatch.context() as off:   # the cells of each object, parsed
            off.setattr(export, "typed_export", lambda web, columns: None)
            parsed[view] = viewer.get(view + "&format=csv" if "?" in view else view + "?format=csv")
    for ns in ("tx-a", "tx-b"):
        store.update(by_kind("Lease"), ns, "db-to-change",
                     lambda o: {**o, "spec": {**o["spec"], "holderIdentity": "changed later"}})
        store.delete(by_kind("Lease"), ns, "db-to-delete")
        store.create(by_kind("Lease"), ns, lease("db-created-later", ns=ns))
        store.update(by_kind("Job"), ns, "j1", lambda o: {**o, "metadata": {**o["metadata"], "labels": {"x": "y"}}})
        store.delete(by_kind("Endpoints"), ns, "svc-1")

    for view, from_log in cases.items():
        counting = _CountingOrjson()
        with monkeypatch.context() as spy:
            spy.setattr(export, "orjson", counting)
            text = body(typed[view])
        assert text == body(parsed[view]), view
        rows = list(csv.DictReader(io.StringIO(text.decode(), newline="")))
        assert rows and "db-created-later" not in text.decode() and "changed later" not in text.decode(), view
        if view.startswith("/leases/") and "q=" not in view:
            assert {"db-to-change", "db-to-delete", "db-quoted"} <= {row["Name"] for row in rows}, view
        # From the typed rows, only the objects written since the snapshot are parsed (the log's).
        assert counting.parsed == from_log if from_log is not None else counting.parsed >= len(rows), \
            (view, counting.parsed)

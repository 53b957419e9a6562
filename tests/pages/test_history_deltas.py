"""The history kept past the watch window stored as deltas (issue 38's bytes target; kube/delta.py,
kube/compaction.py plan()): after compaction, every kept revision reads back exactly as it was
written (the log's readers, asof.state_at, the pages as of it), the API's current objects are
untouched, and the history cut keeps what the deltas above it need."""
from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import orjson
import pytest
from django.test import override_settings

from dashboard.kube import asof, compaction, delta, revlog, store
from dashboard.kube.models import Revision
from dashboard.kube.registry import by_kind
from manifests import job, lease, micro

pytestmark = [pytest.mark.portable, pytest.mark.django_db(transaction=True)]

NS = "hd"


@pytest.fixture(autouse=True)
def _no_packs(settings):
    """These tests look at the deltas (the revisions of the span still filling); packing, which
    would take whole spans of them out of the log, has its own tests (test_history_packs.py)."""
    settings.KUBEDASH_HISTORY_PACK_SECONDS = 0


def _update(kind: str, name: str, change, subresource: str = "") -> int:
    def fn(current):
        new = orjson.loads(orjson.dumps(current))
        change(new)
        return new
    return int(store.update(by_kind(kind), NS, name, fn, subresource=subresource).object["metadata"]["resourceVersion"])


def _story(minutes: int = 10, start_minute: int = 0):
    """A Lease renewed every 10 s (a holder change at minute 5) and a Job whose status steps once
    a minute, for `minutes`, with write times spread over the past (so thinning sees their ages).
    Returns {rv: stored text} of every revision written."""
    lease_res, job_res = by_kind("Lease"), by_kind("Job")
    if start_minute == 0:
        store.create(lease_res, NS, lease("leader", holder="node-a", ns=NS, duration=40))
        store.create(job_res, NS, job("steps", ns=NS, completions=100, parallelism=2))
    t0 = asof.written_at(revlog.last_logged()) - timedelta(hours=3) + timedelta(minutes=start_minute)
    if start_minute == 0:
        Revision.everywhere.update(created=t0 - timedelta(seconds=10))   # (created just before)
    else:
        t0 = asof.written_at(revlog.last_logged()) + timedelta(seconds=10)
    for tick in range(minutes * 6):
        moment = t0 + timedelta(seconds=10 * tick)

        def renew(obj, moment=moment, tick=tick):
            obj["spec"]["renewTime"] = micro(moment)
            if tick == 30:
                obj["spec"]["holderIdentity"] = "node-b"
        rv = _update("Lease", "leader", renew)
        Revision.everywhere.filter(rv=rv).update(created=moment)
        if tick % 6 == 0:
            def step(obj, n=tick // 6 + start_minute):
                obj["status"] = {"succeeded": n, "active": 2, "ready": 2, "startTime": "2026-11-22T00:00:00Z"}
            rv = _update("Job", "steps", step, subresource="status")
            Revision.everywhere.filter(rv=rv).update(created=moment)
    return dict(Revision.everywhere.values_list("rv", "object"))


def test_delta_gives_the_same_text_back():
    base = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "a", "resourceVersion": "5", "managedFields": [{"manager": "m", "time": "t1"}]},
            "spec": {"holderIdentity": "x", "renewTime": "2026-01-01T00:00:00.000000Z", "leaseDurationSeconds": 40}}
    text = orjson.dumps(base).decode()
    for change in ({"renewTime": "2026-01-01T00:00:02.000000Z"}, {"holderIdentity": None}, {"extra": [1, 2]}):
        new = orjson.loads(text)
        new["spec"].update(change)
        new["metadata"]["resourceVersion"] = "9"
        new["metadata"]["managedFields"][0]["time"] = "t2"
        new_text = orjson.dumps(new).decode()
        stored = delta.encode(new_text, 5, text)
        assert stored is not None and delta.is_delta(stored) and delta.base_of(stored) == 5
        assert len(stored) < len(new_text)
        assert delta.decode(stored, text) == new_text
    # A key moved (same dict, other order) is not offered as a delta that would reorder it.
    moved = orjson.dumps({**{k: base[k] for k in ("kind", "apiVersion")}, **base}).decode()
    assert delta.encode(moved, 5, text) is None or delta.decode(delta.encode(moved, 5, text), text) == moved


def test_compaction_stores_deltas_that_read_back_exactly(db):
    written = _story()
    current = {kind: store.get(by_kind(kind), NS, name) for kind, name in (("Lease", "leader"), ("Job", "steps"))}
    with override_settings(KUBEDASH_RETAIN_REVISIONS=0, KUBEDASH_RETAIN_SECONDS=0):
        compaction.compact(keep=0, keep_seconds=0)
    stored = dict(Revision.everywhere.values_list("rv", "object"))
    deltas = [rv for rv, text in stored.items() if delta.is_delta(text)]
    # Most kept revisions past the window became deltas; each key's newest stays full.
    assert len(deltas) >= len(stored) // 2, (len(deltas), len(stored))
    for kind, name in (("Lease", "leader"), ("Job", "steps")):
        assert not delta.is_delta(stored[revlog.last_at_or_below(kind, "local", NS, name, 10 ** 12)[0]])
        assert store.get(by_kind(kind), NS, name) == current[kind]   # (the API reads the same)
    # Every kept revision reads back exactly as written, through each reader of the log.
    for kind, name in (("Lease", "leader"), ("Job", "steps")):
        for rv, _, obj, _ in revlog.object_revisions(kind, NS, name, 1000):
            assert orjson.dumps(obj).decode() == written[rv]
            assert revlog.object_at(kind, NS, name, rv) == orjson.loads(written[rv])
            assert revlog.text_as_of(kind, NS, name, rv) == written[rv]
            assert [t for _, _, n, r, t in asof.state_at(kind, rv) if n == name] == [written[rv]]
        assert [orjson.dumps(o).decode() for _, o, _ in revlog.history(kind, NS, name, 1000)] == \
            [written[rv] for rv in sorted(rv for rv, _, _, _ in revlog.object_revisions(kind, NS, name, 1000))]


def _time(html: str) -> set[str]:
    return set(re.findall(r'datetime="([^"]+)"', html))


def test_pages_as_of_a_compacted_moment_show_the_kept_states(db, login):
    written = _story()
    with override_settings(KUBEDASH_RETAIN_REVISIONS=0, KUBEDASH_RETAIN_SECONDS=0):
        compaction.compact(keep=0, keep_seconds=0)
    client = login("admin")
    kept_leases = [(rv, orjson.loads(written[rv])) for rv, _, _, _ in revlog.object_revisions("Lease", NS, "leader", 1000)]
    delta_leases = [(rv, obj) for rv, obj in kept_leases if delta.is_delta(Revision.everywhere.get(rv=rv).object)]
    assert len(delta_leases) >= 3
    for rv, obj in delta_leases[:: max(len(delta_leases) // 4, 1)]:
        renew = obj["spec"]["renewTime"][:19]   # (the page shows it to the second)
        holder = obj["spec"]["holderIdentity"]
        for path in (f"/leases/?namespace={NS}", f"/leases/{NS}/leader/"):
            r = client.get(f"{path}{'&' if '?' in path else '?'}at=rv:{rv}")
            html = unescape(r.content.decode())
            assert r.status_code == 200 and holder in html, path
            assert any(t.startswith(renew) for t in _time(html)), (path, renew, sorted(_time(html)))
            assert '["{",{' not in html   # (no delta text reached the page)
    # The Job's progress as it was at a kept step stored as a delta.
    steps = [(rv, orjson.loads(written[rv])) for rv, _, _, _ in revlog.object_revisions("Job", NS, "steps", 1000)
             if delta.is_delta(Revision.everywhere.get(rv=rv).object)]
    assert steps
    rv, obj = steps[len(steps) // 2]
    r = client.get(f"/jobs/?namespace={NS}&at=rv:{rv}")
    succeeded = obj["status"]["succeeded"]
    assert r.status_code == 200 and re.search(rf"\b{succeeded}\s*/\s*100\b", unescape(r.content.decode())), succeeded
    # Live again: the live page is untouched by the shadow (no table or view left behind).
    assert client.get(f"/leases/?namespace={NS}").status_code == 200
    assert store.get(by_kind("Lease"), NS, "leader")["spec"]["holderIdentity"] == "node-b"


def test_later_rounds_and_the_history_cut_keep_every_kept_state_exact(db, monkeypatch):
    written = _story(minutes=5)
    with override_settings(KUBEDASH_RETAIN_REVISIONS=0, KUBEDASH_RETAIN_SECONDS=0):
        compaction.compact(keep=0, keep_seconds=0)
        written.update(_story(minutes=5, start_minute=5))   # (a second round: the old heads are decided now)
        compaction.compact(keep=0, keep_seconds=0)
    kept = {rv for rv, _, _, _ in revlog.object_revisions("Lease", NS, "leader", 1000)}
    heads = sorted(kept)
    # The first round's head is stored as a delta now (it is no longer the key's newest).
    assert sum(delta.is_delta(Revision.everywhere.get(rv=rv).object) for rv in heads[:-1]) >= len(heads) // 2
    # Cut the pages' history in the middle: what stays reads back exactly, deltas and their bases.
    middle = heads[len(heads) // 2]
    monkeypatch.setattr(revlog, "SPARED", 1)   # (the cut's ranges, one base each)
    before = Revision.everywhere.count()
    spared = {delta.base_of(t) for t in Revision.everywhere.filter(rv__gt=middle).values_list("object", flat=True)
              if delta.is_delta(t)}
    assert any(b <= middle for b in spared)   # (some delta above the cut names a revision below it)
    assert revlog.drop_before_history(middle) > 0 and Revision.everywhere.count() < before
    assert spared <= set(Revision.everywhere.values_list("rv", flat=True))   # (every delta's base kept)
    for kind, name in (("Lease", "leader"), ("Job", "steps")):
        for rv, _, obj, _ in revlog.object_revisions(kind, NS, name, 1000):
            assert orjson.dumps(obj).decode() == written[rv]
        assert [t for _, _, n, _, t in asof.state_at(kind, middle) if n == name] == \
            [revlog.text_as_of(kind, NS, name, middle)]


def test_history_page_and_changes_over_the_compacted_past(db, login):
    written = _story()
    with override_settings(KUBEDASH_RETAIN_REVISIONS=0, KUBEDASH_RETAIN_SECONDS=0):
        compaction.compact(keep=0, keep_seconds=0)
    client = login("admin")
    kept = sorted(rv for rv, _, _, _ in revlog.object_revisions("Lease", NS, "leader", 1000))
    stored = dict(Revision.everywhere.filter(rv__in=kept).values_list("rv", "object"))
    holders = [orjson.loads(written[rv])["spec"]["holderIdentity"] for rv in kept]
    at = next(rv for rv in kept if delta.is_delta(stored[rv]) and orjson.loads(written[rv])["spec"]["holderIdentity"] == "node-b")
    # History as of a delta-stored revision: every kept revision up to it, the renew times exact.
    r = client.get(f"/leases/{NS}/leader/history/?at=rv:{at}")
    html = unescape(r.content.decode())
    assert r.status_code == 200 and '["{",{' not in html
    shown = {int(rv) for rv in re.findall(r'id="rev-(\d+)"', html)}
    assert shown and max(shown) == at and shown <= set(kept)
    for rv in shown:
        assert orjson.loads(written[rv])["spec"]["renewTime"][:19] in html
    # /changes/ from a delta-stored revision holding node-a to one holding node-b: the holder diff.
    start = max(rv for rv, h in zip(kept, holders) if h == "node-a" and delta.is_delta(stored[rv]))
    r = client.get(f"/changes/?from=rv:{start}&to=rv:{at}&kind=Lease")
    html = unescape(b"".join(r.streaming_content).decode())   # (/changes/ is streamed)
    assert r.status_code == 200 and "spec.holderIdentity" in html and "node-a" in html and "node-b" in html
    assert "1 lease changed holder" in html

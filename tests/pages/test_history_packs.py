"""The history kept past the watch window packed several revisions to a row (issue 38's bytes
target; kube/pack.py, compaction.pack_spans): after compaction, every revision written reads
back exactly as it was written through every reader of the log (an object's revisions, its
state at any revision, the time bar's neighbours and marks, /changes/' counts), and the pages
(list, detail, History, /changes/) travel through packed time; the history cut and a migration
back to 0005 lose nothing the pages could still show."""
from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import orjson
import pytest
from django.apps import apps
from django.db import connection
from django.test import override_settings

from dashboard.kube import asof, compaction, revlog, store
from dashboard.kube.models import Revision, RevisionPack
from dashboard.kube.registry import by_kind
from pages.test_history_deltas import NS, _story

pytestmark = [pytest.mark.portable, pytest.mark.django_db(transaction=True)]

# Spans of 2 minutes and no thinning: of the 10 minutes of the story (a renewal every 10 s, a Job
# step a minute), the whole spans before the last one (at least 8 minutes) are packed per key.
PACKED = override_settings(KUBEDASH_RETAIN_REVISIONS=0, KUBEDASH_RETAIN_SECONDS=0, KUBEDASH_HISTORY_THIN_SECONDS=0,
                           KUBEDASH_HISTORY_PACK_SECONDS=120)
KEYS = (("Lease", "leader"), ("Job", "steps"))


def _written(kind: str, name: str, written: dict[int, str]) -> list[int]:
    """The rvs of one key's revisions among those written, oldest first."""
    return sorted(rv for rv, text in written.items() if (o := orjson.loads(text))["kind"] == kind
                  and o["metadata"]["name"] == name)


def _packed_story(minutes: int = 10) -> dict[int, str]:
    written = {rv: text for rv, text in _story(minutes).items()}
    with PACKED:
        compaction.compact(keep=0, keep_seconds=0)
    return written


def _packed_rvs() -> list[int]:
    from dashboard.kube import pack
    return sorted(e[0] for data in RevisionPack.everywhere.values_list("entries", flat=True) for e in pack.entries(data))


def test_every_revision_reads_back_exactly_from_packs(db):
    written = _packed_story()
    packed = _packed_rvs()
    rows = set(Revision.everywhere.values_list("rv", flat=True))
    assert len(packed) >= len(written) * 3 // 4, (len(packed), len(written))   # (most of it is in packs now)
    assert not rows & set(packed) and rows | set(packed) == set(written)   # (each revision once, none lost)
    assert RevisionPack.everywhere.count() <= 2 * 6   # (a pack per key and whole span)
    for kind, name in KEYS:
        rvs = _written(kind, name, written)
        # An object's revisions, newest first, paged, counted.
        got = revlog.object_revisions(kind, NS, name, 1000)
        assert [rv for rv, *_ in got] == rvs[::-1]
        assert all(orjson.dumps(obj).decode() == written[rv] for rv, _, obj, _ in got)
        assert revlog.count_revisions(kind, NS, name) == len(rvs)
        assert revlog.revision_numbers(kind, NS, name, 7, offset=5) == rvs[::-1][5:12]
        middle = rvs[len(rvs) // 2]
        assert [rv for rv, *_ in revlog.object_revisions(kind, NS, name, 3, before=middle)] == \
            [rv for rv in rvs[::-1] if rv < middle][:3]
        assert [orjson.dumps(o).decode() for _, o, _ in revlog.history(kind, NS, name, 4, upto=middle)] == \
            [written[rv] for rv in rvs if rv <= middle][-4:]
        # Its state at every revision (and just after it: the time bar's moments fall between).
        for i, rv in enumerate(rvs):
            assert revlog.object_at(kind, NS, name, rv) == orjson.loads(written[rv])
            assert revlog.text_as_of(kind, NS, name, rv) == written[rv]
            assert [t for _, _, n, r, t in asof.state_at(kind, rv) if n == name] == [written[rv]]
            assert revlog.logged([rv]) == revlog.logged([rv], ("local", kind, NS, name)) == \
                {rv: ("ADDED" if i == 0 else "MODIFIED", written[rv])}
        # The time bar's previous / next change of this object, and its marks.
        for before, rv, after in zip(rvs, rvs[1:], rvs[2:]):
            assert revlog.neighbours(rv, kinds=[kind], namespace=NS, name=name) == (before, after)
        marks = revlog.change_times(5, kinds=[kind], namespace=NS, name=name)
        assert len(marks) == 5 and marks == sorted(marks, reverse=True)
        # /changes/' count of the revisions in a window, its newest, and the key's newest before it.
        low, high = rvs[3], rvs[-4]
        assert revlog.key_window(kind, "local", NS, name, low, high) == \
            (sum(low < rv <= high for rv in rvs), high, low)
    # Everything's neighbours: both keys' revisions interleave, packed or not.
    every = sorted(written)
    for before, rv, after in zip(every, every[1:], every[2:]):
        assert revlog.neighbours(rv) == (before, after)
    # A moment and a revision find each other (?at= a time or rv:), packed or not.
    times = {rv: at for kind, name in KEYS for rv, _, _, at in revlog.object_revisions(kind, NS, name, 1000)}
    for rv in packed[::3]:
        assert asof.written_at(rv) == times[rv]
        assert asof.newest_at(times[rv]) == max(r for r, at in times.items() if at <= times[rv])
    # The API's current objects are the typed rows' revisions, never packed.
    for kind, name in KEYS:
        assert store.get(by_kind(kind), NS, name)["metadata"]["resourceVersion"] == str(_written(kind, name, written)[-1])


def test_a_round_packs_a_few_spans_and_the_next_ones_catch_up(db, monkeypatch):
    """The first round after an upgrade finds the whole history unpacked: it packs the oldest
    PACK_SPANS_PER_ROUND spans only, and each round after it the next ones, to the same packs."""
    monkeypatch.setattr(compaction, "PACK_SPANS_PER_ROUND", 2)
    written = _story(12)
    with PACKED:
        compaction.compact(keep=0, keep_seconds=0)
        packed_times = [asof.written_at(rv) for rv in _packed_rvs()]
        assert packed_times and max(packed_times) - min(packed_times) < timedelta(seconds=2 * 120)
        rounds = [len(packed_times)]
        while compaction.pack_spans():
            rounds.append(len(_packed_rvs()))
    assert len(rounds) >= 3 and rounds == sorted(rounds), rounds   # (12 minutes: 5 whole spans of 2)
    packed = _packed_rvs()
    rows = set(Revision.everywhere.values_list("rv", flat=True))
    assert len(packed) >= len(written) * 3 // 4 and not rows & set(packed) and rows | set(packed) == set(written)
    for kind, name in KEYS:
        got = revlog.object_revisions(kind, NS, name, 1000)
        assert [rv for rv, *_ in got] == _written(kind, name, written)[::-1]
        assert all(orjson.dumps(obj).decode() == written[rv] for rv, _, obj, _ in got)


def test_pages_travel_through_packed_time(db, login):
    written = _packed_story()
    packed = set(_packed_rvs())
    client = login("admin")
    leases = _written("Lease", "leader", written)
    in_pack = [rv for rv in leases if rv in packed]
    assert len(in_pack) >= 10
    for rv in in_pack[::max(len(in_pack) // 5, 1)]:
        obj = orjson.loads(written[rv])
        moment = asof.written_at(rv).strftime("%Y-%m-%dT%H:%M:%S.%fZ")   # (the time form finds it too)
        for path in (f"/leases/?namespace={NS}&at=rv:{rv}", f"/leases/{NS}/leader/?at=rv:{rv}",
                     f"/leases/{NS}/leader/?at={moment}"):
            r = client.get(path)
            html = unescape(r.content.decode())
            assert r.status_code == 200 and obj["spec"]["holderIdentity"] in html, path
            assert obj["spec"]["renewTime"][:19] in " ".join(re.findall(r'datetime="([^"]+)"', html)), path
    # The Job's progress as of a packed step.
    steps = [rv for rv in _written("Job", "steps", written) if rv in packed]
    rv = steps[len(steps) // 2]
    succeeded = orjson.loads(written[rv])["status"]["succeeded"]
    r = client.get(f"/jobs/?namespace={NS}&at=rv:{rv}")
    assert r.status_code == 200 and re.search(rf"\b{succeeded}\s*/\s*100\b", unescape(r.content.decode()))
    # The History page as of a packed revision: exactly the revisions up to it, newest first.
    holder_b = [rv for rv in in_pack if orjson.loads(written[rv])["spec"]["holderIdentity"] == "node-b"]
    at = holder_b[len(holder_b) // 2]
    r = client.get(f"/leases/{NS}/leader/history/?at=rv:{at}")
    html = unescape(r.content.decode())
    shown = [int(rv) for rv in re.findall(r'id="rev-(\d+)"', html)]
    assert r.status_code == 200 and shown == [rv for rv in leases if rv <= at][::-1][:len(shown)] and shown
    for rv in shown:
        assert orjson.loads(written[rv])["spec"]["renewTime"][:19] in html
    # /changes/ from a packed node-a revision to a packed node-b one: the holder's diff and the
    # exact count of the revisions between.
    start = max(rv for rv in in_pack if orjson.loads(written[rv])["spec"]["holderIdentity"] == "node-a")
    r = client.get(f"/changes/?from=rv:{start}&to=rv:{at}&kind=Lease")
    html = unescape(b"".join(r.streaming_content).decode())
    between = sum(start < rv <= at for rv in leases)
    assert r.status_code == 200 and "spec.holderIdentity" in html and "node-a" in html and "node-b" in html
    assert f"{between} revisions" in html and "1 lease changed holder" in html
    # Live again: nothing of the pin is left behind.
    assert client.get(f"/leases/?namespace={NS}").status_code == 200
    assert store.get(by_kind("Lease"), NS, "leader")["spec"]["holderIdentity"] == "node-b"


def test_the_history_cut_and_later_rounds_keep_the_state_exact(db):
    written = _packed_story(minutes=12)
    leases = _written("Lease", "leader", written)
    packed = _packed_rvs()
    cut = packed[len(packed) // 2]   # (inside a pack: the key's newest at or below it is packed)
    states = {kind: revlog.text_as_of(kind, NS, name, cut) for kind, name in KEYS}
    revlog.drop_before_history(cut)
    for kind, name in KEYS:
        # The state at the cut reads the same (its revision is a row again, or still in a pack
        # that reaches above the cut), and everything above it is still there, exactly.
        assert revlog.text_as_of(kind, NS, name, cut) == states[kind]
        assert [t for _, _, n, _, t in asof.state_at(kind, cut) if n == name] == [states[kind]]
        rvs = _written(kind, name, written)
        kept = [rv for rv, *_ in revlog.object_revisions(kind, NS, name, 1000)]
        assert {rv for rv in rvs if rv > cut} <= set(kept)
        assert revlog.count_revisions(kind, NS, name) == len(kept)
        for rv, _, obj, _ in revlog.object_revisions(kind, NS, name, 1000):
            assert orjson.dumps(obj).decode() == written[rv]
    assert not RevisionPack.everywhere.filter(last_rv__lte=cut).exists()
    # A later round packs the story's next minutes the same way; the earlier packs stay.
    before = RevisionPack.everywhere.count()
    with PACKED:
        top = max(written)
        written.update({rv: text for rv, text in _story(minutes=6, start_minute=12).items() if rv > top})
        compaction.compact(keep=0, keep_seconds=0)
    assert RevisionPack.everywhere.count() > before
    leases = _written("Lease", "leader", written)
    assert [rv for rv, *_ in revlog.object_revisions("Lease", NS, "leader", 1000) if rv > cut] == \
        [rv for rv in leases if rv > cut][::-1]


def test_going_back_to_0006_writes_the_packs_back_as_rows(db):
    written = _packed_story()
    assert RevisionPack.everywhere.exists()
    from importlib import import_module
    unpack = import_module("dashboard.kube.migrations.0007_revision_pack").unpack

    class Editor:
        pass
    editor = Editor()
    editor.connection = connection
    unpack(apps, editor)
    RevisionPack.everywhere.all().delete()   # (the migration's next step drops the table)
    rvs, texts = zip(*Revision.everywhere.order_by("rv").values_list("rv", "object"))
    assert dict(zip(rvs, revlog.full_texts(list(texts)))) == written   # (the span still filling: deltas)

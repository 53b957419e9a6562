"""A finished Job's "Run again" (batch/actions.py do_rerun_job, the detail page's confirmation
and the list's bulk action) and its ttlSecondsAfterFinished countdown, through the Django test
client. kubectl's round trip of a copy is in tests/clients/test_job_rerun_kubectl.py."""
from __future__ import annotations

import re
from datetime import timedelta
from html import unescape

import pytest

from dashboard.batch.actions import RERUN_OF, rerun_copy, rerun_name
from dashboard.batch.strategy import CONTROLLER_UID_LABEL, JOB_NAME_LABEL
from dashboard.batch.web import countdown_text, ttl_text
from dashboard.kube import store
from dashboard.kube.meta import now as utcnow
from dashboard.kube.registry import by_kind
from manifests import job

JOBS = by_kind("Job")


def finish(ns: str, name: str, outcome: str = "Complete", at=None) -> dict:
    """The Job marked complete (or failed) through its status, as the job controller would."""
    moment = (at or utcnow()).strftime("%Y-%m-%dT%H:%M:%SZ")

    def cond(kind):
        return {"type": kind, "status": "True", "lastProbeTime": moment, "lastTransitionTime": moment}

    status = ({"succeeded": 1, "startTime": moment, "completionTime": moment,
               "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]} if outcome == "Complete"
              else {"failed": 1, "startTime": moment, "conditions": [cond("FailureTarget"), cond("Failed")]})

    def change(obj):
        obj["status"] = status
        return obj

    return store.update(JOBS, ns, name, change, subresource="status").object


def made(ns: str, name: str, outcome: str | None = "Complete", **spec) -> dict:
    obj = job(name, ns=ns, **spec)
    obj["metadata"]["labels"] = {"team": "a"}
    obj["metadata"]["annotations"] = {"note": "keep"}
    store.create(JOBS, ns, obj)
    return finish(ns, name, outcome) if outcome else store.get(JOBS, ns, name)


def test_a_copy_is_fresh_and_names_its_original(db):
    original = made("rr", "nightly-report")
    copy = rerun_copy(original, "ab12c")
    meta = copy["metadata"]
    assert meta["name"] == "nightly-report-ab12c" and "status" not in copy
    assert meta["annotations"] == {"note": "keep", RERUN_OF: "nightly-report"}
    assert meta["labels"] == {"team": "a"}
    assert not {"uid", "resourceVersion", "creationTimestamp", "managedFields"} & set(meta)
    assert "selector" not in copy["spec"]
    assert not {CONTROLLER_UID_LABEL, JOB_NAME_LABEL} & set(copy["spec"]["template"]["metadata"]["labels"])
    # Created through the store's create path, kube's Job strategy generates them anew.
    created = store.create(JOBS, "rr", copy).object
    uid = created["metadata"]["uid"]
    assert uid != original["metadata"]["uid"]
    assert created["spec"]["selector"]["matchLabels"] == {CONTROLLER_UID_LABEL: uid}
    labels = created["spec"]["template"]["metadata"]["labels"]
    assert labels[CONTROLLER_UID_LABEL] == uid and labels[JOB_NAME_LABEL] == "nightly-report-ab12c"
    assert created["status"] == {}


def test_the_new_name_fits_63_characters():
    long = "x" * 60 + "-.y"
    name = rerun_name(long)
    assert len(name) <= 63 and re.fullmatch(r"x{57}-[a-z0-9]{5}", name)
    assert re.fullmatch(r"ab-[a-z0-9]{5}", rerun_name("ab"))
    assert rerun_name("ab") != rerun_name("ab")   # (random: two runs, two names)


def test_run_again_confirms_with_the_copy_then_creates_it(login):
    made("rr", "etl")
    editor = login("editor")
    detail = editor.get("/jobs/rr/etl/").content.decode()
    assert 'href="/jobs/rr/etl/rerun/">Run again…</a>' in detail
    page = editor.get("/jobs/rr/etl/rerun/")
    assert page.status_code == 200
    html = unescape(page.content.decode())
    suffix = re.search(r'<input type="hidden" name="suffix" value="([a-z0-9]{5})">', html).group(1)
    assert f"name: etl-{suffix}" in html and f"{RERUN_OF}: etl" in html and "status:" not in html
    assert f"Create etl-{suffix}" in html
    r = editor.post("/jobs/rr/etl/rerun/", {"suffix": suffix})
    assert r.status_code == 302 and r["Location"] == f"/jobs/rr/etl-{suffix}/"   # the copy's page
    copy = store.get(JOBS, "rr", f"etl-{suffix}")
    assert copy["metadata"]["annotations"][RERUN_OF] == "etl"
    assert "Job rr/etl-" in unescape(editor.get(r["Location"]).content.decode())


def test_run_again_only_for_finished_jobs_and_editors(login):
    made("rr", "busy", outcome=None)
    made("rr", "broke", outcome="Failed")
    editor = login("editor")
    assert "rerun/" not in editor.get("/jobs/rr/busy/").content.decode()
    r = editor.get("/jobs/rr/busy/rerun/")
    assert r.status_code == 302 and r["Location"] == "/jobs/rr/busy/"
    assert "the job has not finished" in unescape(editor.get(r["Location"]).content.decode())
    assert editor.post("/jobs/rr/busy/rerun/", {}).status_code == 302
    assert [j for j in store_names("rr") if j.startswith("busy-")] == []
    # A failed job runs again too.
    assert editor.post("/jobs/rr/broke/rerun/", {"suffix": "zz9zz"})["Location"] == "/jobs/rr/broke-zz9zz/"
    viewer = login("viewer")
    assert viewer.get("/jobs/rr/broke/rerun/").status_code == 403
    assert viewer.post("/jobs/rr/broke/rerun/", {}).status_code == 403
    assert login("editor", namespaces=["other"]).post("/jobs/rr/broke/rerun/", {}).status_code == 403


def store_names(ns: str) -> list[str]:
    return list(JOBS.model.objects.filter(namespace=ns).values_list("name", flat=True))


def test_bulk_run_again(login):
    made("rb", "a")
    made("rb", "b", outcome="Failed")
    made("rb", "c", outcome=None)
    editor = login("editor")
    html = editor.get("/jobs/?namespace=rb").content.decode()
    assert '<button type="submit" name="action" value="rerun">Run again…</button>' in html
    form = {"action": "rerun", "selected": ["rb/a", "rb/b", "rb/c"], "next": "/jobs/?namespace=rb"}
    confirm = unescape(editor.post("/jobs/bulk/", form).content.decode())
    assert "Each selected job that has finished gets a fresh copy" in confirm
    r = editor.post("/jobs/bulk/", {**form, "confirm": "1"}, follow=True)
    said = unescape(r.content.decode())
    assert "2 jobs run again: rb/a, rb/b." in said and "Not run again: rb/c: " in said
    copies = sorted(n for n in store_names("rb") if n not in ("a", "b", "c"))
    assert [re.sub(r"-[a-z0-9]{5}$", "", n) for n in copies] == ["a", "b"]
    assert login("viewer").post("/jobs/bulk/", {**form, "confirm": "1"}).status_code == 403


def test_ttl_countdown_text_and_the_local_note(login):
    assert countdown_text(190) == "3m 10s" and countdown_text(45) == "45s" and countdown_text(3900) == "1h 5m"
    now = utcnow()
    assert ttl_text(now + timedelta(seconds=190), now) == "deleted in 3m 10s"
    assert ttl_text(now - timedelta(seconds=5), now) == "due for deletion 5s ago"
    store.create(JOBS, "tt", job("short", ns="tt", ttlSecondsAfterFinished=600))
    finish("tt", "short", at=utcnow() - timedelta(seconds=410))   # 190 s left
    viewer = login("viewer")
    row = re.search(r'<tr id="job-tt--short".*?</tr>', viewer.get("/jobs/?namespace=tt").content.decode(), re.S).group(0)
    found = re.search(r'<time datetime="([^"]+)" data-ttl-at="[^"]+"[^>]*>([^<]+)</time>', row)
    assert found.group(2) in ("deleted in 3m 10s", "deleted in 3m 9s", "deleted in 3m 11s")
    assert "no TTL controller runs on the local cluster" in row
    detail = viewer.get("/jobs/tt/short/").content.decode()
    assert "Time to live" in detail and "data-ttl-at" in detail
    # A job without a TTL, or not finished, says nothing of the kind.
    store.create(JOBS, "tt", job("keep", ns="tt"))
    finish("tt", "keep")
    store.create(JOBS, "tt", job("running", ns="tt", ttlSecondsAfterFinished=5))
    html = viewer.get("/jobs/?namespace=tt").content.decode()
    for name in ("keep", "running"):
        assert "data-ttl-at" not in re.search(rf'<tr id="job-tt--{name}".*?</tr>', html, re.S).group(0)


@pytest.mark.parametrize("suffix", ["", "BAD!!"])
def test_a_bad_posted_suffix_gets_a_random_one(login, suffix):
    made("rs", "j")
    r = login("editor").post("/jobs/rs/j/rerun/", {"suffix": suffix})
    assert re.fullmatch(r"/jobs/rs/j-[a-z0-9]{5}/", r["Location"])

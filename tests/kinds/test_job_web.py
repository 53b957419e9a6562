"""Job pages (dashboard/batch/web.py): the presenter's index grid; the suspend action."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from dashboard.batch.actions import do_suspend_job, with_suspend
from dashboard.batch.web import GRID_CELLS
from dashboard.web import present as p
from manifests import job

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def test_present_job_grid_is_capped():
    obj = job("big", completions=2000, completionMode="Indexed")
    obj["status"] = {"completedIndexes": "0-999", "succeeded": 1000}
    item = p.present("Job", obj, NOW)
    assert len(item["grid"]["cells"]) == GRID_CELLS and item["grid"]["more"] == 2000 - GRID_CELLS
    assert item["grid"]["done"] == 1000 and item["progress_text"] == "1000/2000" and item["progress_pct"] == 50


def test_with_suspend_keeps_the_rest_of_the_spec():
    spec = {"completions": 2, "suspend": False, "parallelism": 1}
    assert with_suspend(spec, True) == {"completions": 2, "suspend": True, "parallelism": 1}
    assert spec["suspend"] is False                       # a new spec; the given one is untouched


def test_do_suspend_job(db):
    from dashboard.access.principals import Principal
    from dashboard.kube import store
    from dashboard.kube.errors import ApiError
    from dashboard.kube.registry import by_kind

    jobs = by_kind("Job")
    store.create(jobs, "default", job("j1"))
    result = do_suspend_job("default", "j1", suspend=True)
    assert result.changed and store.get(jobs, "default", "j1")["spec"]["suspend"] is True
    assert not do_suspend_job("default", "j1", suspend=True).changed
    with pytest.raises(ApiError) as refused:
        do_suspend_job("default", "j1", suspend=False, acting=Principal(username="v", role="viewer"))
    assert refused.value.code == 403 and store.get(jobs, "default", "j1")["spec"]["suspend"] is True

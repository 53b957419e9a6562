"""What people (and the simulator) do to a Job besides editing it: the one place each such
change lives. Forms, pages and tests call do_*; the pure rule beside it (with_suspend) is what
a client that goes over HTTP (dashboard/demo) reuses."""
from __future__ import annotations

from dashboard.kube import store
from dashboard.kube.errors import conflict, forbidden_request
from dashboard.kube.codec import decode_object

from .resource import JOBS
from .strategy import phase


def with_suspend(spec: dict, suspend: bool) -> dict:
    """A Job spec suspended (no pods run; the job controller stops its active pods) or resumed."""
    return {**spec, "suspend": suspend}


def finished(obj: dict) -> str:
    """"Complete" or "Failed" for a Job that has finished (nothing left to suspend), else ""."""
    shown = phase(obj)
    return shown if shown in ("Complete", "Failed") else ""


def do_suspend_job(namespace: str, name: str, *, suspend: bool, acting=None, through=None) -> store.Result:
    """Suspend or resume a Job: a patch of the current object inside the store's write
    transaction. 403 if the acting principal (None: the system) may not patch it; 409 to
    suspend a Job that has finished (the pages never offer it). through: a followed cluster's
    writer, from the pages (store.update's)."""
    if acting is not None and not acting.can("patch", namespace, JOBS.kind):
        raise forbidden_request(acting.username, "patch", JOBS.group, JOBS.plural, namespace)

    def change(current: dict) -> dict:
        done = finished(current)
        if suspend and done:
            raise conflict(JOBS.group, JOBS.plural, name, f"the job has finished ({done}): nothing to suspend")
        current["spec"] = with_suspend(current.get("spec") or {}, suspend)
        return decode_object(JOBS, current, "Strict")[0]

    return store.update(JOBS, namespace, name, change, is_patch=True, through=through)

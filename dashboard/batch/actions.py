"""What people (and the simulator) do to a Job besides editing it: the one place each such
change lives. Forms, pages and tests call do_*; the pure rule beside it (with_suspend) is what
a client that goes over HTTP (dashboard/demo) reuses."""
from __future__ import annotations

import copy
import re
import secrets
import string

from dashboard.kube import store
from dashboard.kube.errors import conflict, forbidden_request
from dashboard.kube.codec import decode_object

from .resource import JOBS
from .strategy import (CONTROLLER_UID_LABEL, JOB_NAME_LABEL, LEGACY_CONTROLLER_UID_LABEL, LEGACY_JOB_NAME_LABEL,
                       phase)

RERUN_OF = "kubedash.io/rerun-of"   # the annotation naming the Job a copy re-runs
# The labels kube's Job strategy generates on create (unless spec.manualSelector): a copy's are made anew.
GENERATED_LABELS = (CONTROLLER_UID_LABEL, JOB_NAME_LABEL, LEGACY_CONTROLLER_UID_LABEL, LEGACY_JOB_NAME_LABEL)
# Metadata that belongs to the original (the store, its owner, its last kubectl apply) and not to a copy.
_NOT_COPIED = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "deletionTimestamp",
               "deletionGracePeriodSeconds", "ownerReferences", "finalizers", "generateName", "selfLink")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SUFFIX_CHARS = string.ascii_lowercase + string.digits
SUFFIX = re.compile(r"^[a-z0-9]{5}$")
NAME_MAX = 63   # a Job's name is its pods' job-name label value: at most 63 characters


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


def rerun_name(name: str, suffix: str | None = None) -> str:
    """`<name>-<5 random lowercase alphanumerics>`, the name cut so the whole fits 63 characters."""
    suffix = suffix or "".join(secrets.choice(SUFFIX_CHARS) for _ in range(5))
    return f"{name[:NAME_MAX - 6].rstrip('-.')}-{suffix}"


def rerun_copy(obj: dict, suffix: str | None = None) -> dict:
    """A finished Job's fresh copy, as a client would create it: a new name, no status, no
    server-owned metadata, and (unless spec.manualSelector) no selector and none of the labels
    kube's Job strategy generates: the store's create path (strategy.prepare_for_create)
    generates them for the new uid and name. The copy's annotation names the original."""
    meta = obj.get("metadata") or {}
    spec = copy.deepcopy(obj.get("spec") or {})
    new_meta = {k: copy.deepcopy(v) for k, v in meta.items() if k not in _NOT_COPIED}
    new_meta["name"] = rerun_name(meta.get("name", ""), suffix)
    annotations = {k: v for k, v in (new_meta.get("annotations") or {}).items() if k != _LAST_APPLIED}
    new_meta["annotations"] = {**annotations, RERUN_OF: meta.get("name", "")}
    if not spec.get("manualSelector"):
        spec.pop("selector", None)
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels")
        for labels in (template_labels, new_meta.get("labels")):
            for key in GENERATED_LABELS:
                (labels or {}).pop(key, None)
        if "labels" in new_meta and not new_meta["labels"]:
            del new_meta["labels"]   # (defaulted again from the template's, as on any create)
    return {"apiVersion": obj.get("apiVersion", "batch/v1"), "kind": "Job", "metadata": new_meta, "spec": spec}


def do_rerun_job(namespace: str, name: str, *, acting=None, through=None, suffix: str | None = None) -> store.Result:
    """"Run again": create a fresh copy of a finished Job (rerun_copy). 403 if the acting
    principal may not create Jobs there; 409 if the Job has not finished. through: a followed
    cluster's writer (store.create's): the copy is created there, as the user."""
    if acting is not None and not acting.can("create", namespace, JOBS.kind):
        raise forbidden_request(acting.username, "create", JOBS.group, JOBS.plural, namespace)
    current = store.get(JOBS, namespace, name)
    if not finished(current):
        raise conflict(JOBS.group, JOBS.plural, name, "the job has not finished: run it again once it is complete "
                                                      "or failed")
    return store.create(JOBS, namespace, decode_object(JOBS, rerun_copy(current, suffix), "Strict")[0],
                        through=through)

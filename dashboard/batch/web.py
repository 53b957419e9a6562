"""Job pages: the presenter (progress, the index grid, conditions), the form, and the
declaration that registers them with the pages (web.kinds, like an admin.ModelAdmin)."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from django import forms
from django.db.models import Count, Q

from dashboard.access import clusters
from dashboard.kube import store
from dashboard.kube.errors import conflict
from dashboard.kube.formats import parse_time
from dashboard.web import kinds
from dashboard.web.forms import (INT64_MAX, ObjectForm, count_field, field_text, format_env, line_list_field,
                                 numbered_lines, parse_env, put)
from dashboard.web.present import base_item, iso

from .actions import SUFFIX, do_rerun_job, do_suspend_job, finished, rerun_copy
from .resource import JOBS
from .strategy import completions_text, duration_text, parse_index_intervals, phase

# Index grids beyond this many cells show a text summary for the rest (a 100,000-index job
# would otherwise be 100,000 elements per row).
GRID_CELLS = 500


# ---------------------------------------------------------------------------------------------
# Presenter


PHASE_CLASS = {"Complete": "ok", "Failed": "bad", "Running": "run", "Suspended": "idle",
               "Terminating": "idle", "FailureTarget": "bad", "SuccessCriteriaMet": "ok"}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _index_set(text: str | None, completions: int) -> list[tuple[int, int]]:
    try:
        return parse_index_intervals(text or "", completions)
    except ValueError:
        return []


def _grid(spec: dict, status: dict) -> dict:
    completions = _int(spec.get("completions"))
    done = _index_set(status.get("completedIndexes"), completions)
    failed = _index_set(status.get("failedIndexes"), completions)
    state = ["pending"] * min(completions, GRID_CELLS)
    for intervals, name in ((done, "done"), (failed, "failed")):
        for first, last in intervals:
            for i in range(first, min(last, GRID_CELLS - 1) + 1):
                state[i] = name
    n_done = sum(b - a + 1 for a, b in done)
    n_failed = sum(b - a + 1 for a, b in failed)
    glyph = {"done": "✓", "failed": "✗", "pending": ""}
    word = {"done": "completed", "failed": "failed", "pending": "not completed"}
    cells = [{"i": i, "state": s, "glyph": glyph[s], "title": f"index {i}: {word[s]}"} for i, s in enumerate(state)]
    label = (f"Indexes: {n_done} of {completions} completed ({status.get('completedIndexes') or 'none'})"
             + (f", {n_failed} failed ({status.get('failedIndexes')})" if n_failed else ""))
    return {"cells": cells, "label": label, "more": max(0, completions - GRID_CELLS),
            "done": n_done, "failed": n_failed, "pending": completions - n_done - n_failed}


def _grouped(conditions: list[dict]) -> list[dict]:
    """True conditions that share a reason and message (Complete + SuccessCriteriaMet, Failed
    + FailureTarget) shown once, with their types joined."""
    out: dict[tuple[str, str], dict] = {}
    for c in conditions:
        key = (c["reason"], c["message"])
        if key in out:
            out[key]["type"] += ", " + c["type"]
        else:
            out[key] = dict(c)
    return list(out.values())


def countdown_text(seconds: float) -> str:
    """"3m 10s", "1h 5m", "45s" (static/batch/jobs.js writes the same as time passes)."""
    s = max(int(seconds), 0)
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 60}m {s % 60}s" if s >= 60 else f"{s}s"


def ttl_text(deleted_at: datetime, now: datetime) -> str:
    left = (deleted_at - now).total_seconds()
    return f"deleted in {countdown_text(left + 0.999)}" if left > 0 else f"due for deletion {countdown_text(-left)} ago"


def _ttl(obj: dict, status: dict, done: str, now: datetime) -> dict:
    """A finished Job with spec.ttlSecondsAfterFinished: when the TTL controller deletes it (its
    finish time, the Complete or Failed condition's, plus the TTL). kubedash runs no TTL
    controller for Jobs on its own cluster (its maintenance expires Events only), so there it says
    so; a followed cluster's own controller deletes them there."""
    ttl = (obj.get("spec") or {}).get("ttlSecondsAfterFinished")
    if not done or not isinstance(ttl, int) or isinstance(ttl, bool):
        return {"ttl_at": ""}
    ended = next((parse_time(c.get("lastTransitionTime")) for c in status.get("conditions") or []
                  if c.get("type") == done and c.get("status") == "True"), None) \
        or parse_time(status.get("completionTime"))
    if ended is None:
        return {"ttl_at": ""}
    at = ended + timedelta(seconds=ttl)
    return {"ttl_at": iso(at), "ttl_text": ttl_text(at, now), "ttl_seconds": ttl, "ttl_local": clusters.is_local()}


def shown_phase(job_phase: str, suspend: bool) -> str:
    """The phase the pages show: kubectl's STATUS (strategy.phase), except that a job whose
    spec says suspend is Suspended, not Running, even before a controller has written the
    Suspended condition kubectl reads (a finished job stays Complete / Failed)."""
    return "Suspended" if suspend and job_phase == "Running" else job_phase


def present_job(obj: dict, now: datetime) -> dict:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    succeeded = _int(status.get("succeeded"))
    completions = spec.get("completions")
    target = completions if isinstance(completions, int) else 1
    status_text = shown_phase(phase(obj), bool(spec.get("suspend")))
    conditions = [{
        "type": c.get("type", ""),
        "status": c.get("status", ""),
        "reason": c.get("reason") or "",
        "message": c.get("message") or "",
        "time": parse_time(c.get("lastTransitionTime")),
    } for c in status.get("conditions") or []]
    indexed = spec.get("completionMode") == "Indexed"
    item = base_item("Job", obj, now)
    item.update({
        "phase": status_text,
        "phase_class": PHASE_CLASS.get(status_text, "run"),
        "progress_text": completions_text(obj),
        "progress_value": min(succeeded, target),
        "progress_max": target,
        "progress_pct": round(100 * min(succeeded, target) / target) if target else 0,
        "succeeded": succeeded,
        "completions": completions,
        "parallelism": spec.get("parallelism"),
        "active": _int(status.get("active")),
        "ready": _int(status.get("ready")),
        "failed": _int(status.get("failed")),
        "terminating": status.get("terminating"),
        "backoff_limit": spec.get("backoffLimit"),
        "backoff_limit_per_index": spec.get("backoffLimitPerIndex"),
        "suspended": bool(spec.get("suspend")),
        "finished": finished(obj),   # (a finished Job is not offered Suspend)
        "duration": duration_text(obj, now),
        "start_time": parse_time(status.get("startTime")),
        "completion_time": parse_time(status.get("completionTime")),
        "conditions": _grouped([c for c in conditions if c["status"] == "True"]),
        "all_conditions": conditions,
        "indexed": indexed,
        "completion_mode": spec.get("completionMode") or "NonIndexed",
        "grid": _grid(spec, status) if indexed and isinstance(completions, int) else None,
    })
    item.update(_ttl(obj, status, item["finished"], now))
    return item


# ---------------------------------------------------------------------------------------------
# Form


class JobForm(ObjectForm):
    """On create: the spec fields and one container. On edit the pod template and the
    completion mode are immutable (the API says so), so they are shown, not offered."""

    KIND = "Job"
    CREATE_ONLY = ("name", "namespace", "completion_mode", "container_name", "image", "command", "env",
                   "restart_policy")
    CONTAINER = "spec.template.spec.containers[0]"
    CAUSES = (("spec.completions", "completions"), ("spec.parallelism", "parallelism"),
              ("spec.completionMode", "completion_mode"), ("spec.backoffLimit", "backoff_limit"),
              ("spec.activeDeadlineSeconds", "active_deadline_seconds"),
              ("spec.ttlSecondsAfterFinished", "ttl_seconds_after_finished"), ("spec.suspend", "suspend"),
              (CONTAINER + ".name", "container_name"), (CONTAINER + ".image", "image"),
              (CONTAINER + ".command", "command"), (CONTAINER + ".env[", "env"),
              ("spec.template.spec.restartPolicy", "restart_policy"))

    # Ranges: strategy.validate_job_spec (each >= 0); activeDeadlineSeconds is int64, the others int32.
    completions = count_field("Completions", "Successful pods needed. Empty: 1 (with parallelism empty too).", 0)
    parallelism = count_field("Parallelism", "Pods running at once. Empty: 1.", 0)
    completion_mode = forms.ChoiceField(label="Completion mode", initial="NonIndexed",
                                        choices=[("NonIndexed", "NonIndexed"), ("Indexed", "Indexed")],
                                        help_text="Indexed: each pod gets an index 0…completions−1.")
    backoff_limit = count_field("Backoff limit", "Retries before the job fails. Empty: 6.", 0)
    active_deadline_seconds = count_field("Active deadline (seconds)", "Fail the job after this long. Empty: no deadline.",
                                          0, INT64_MAX)
    ttl_seconds_after_finished = count_field("Delete after finished (seconds)", "ttlSecondsAfterFinished. Empty: keep.",
                                             0)
    suspend = forms.BooleanField(required=False, label="Suspended", help_text="No pods run while suspended.")
    container_name = forms.CharField(required=False, label="Container name", initial="main",
                                     widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}))
    image = forms.CharField(required=False, label="Image", help_text="e.g. busybox:1.36",
                            widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}))
    command = line_list_field("Command", "One argument per line, e.g. sh / -c / echo hello. Empty: the image’s entrypoint.")
    env = line_list_field("Environment", "One NAME=value per line.")
    restart_policy = forms.ChoiceField(label="Pod restart policy", initial="Never",
                                       choices=[("Never", "Never"), ("OnFailure", "OnFailure")])

    @classmethod
    def data_from_object(cls, obj):
        data = super().data_from_object(obj)
        spec = obj.get("spec") or {}
        data.update(completions=field_text(spec.get("completions")), parallelism=field_text(spec.get("parallelism")),
                    completion_mode=spec.get("completionMode") or "NonIndexed",
                    backoff_limit=field_text(spec.get("backoffLimit")),
                    active_deadline_seconds=field_text(spec.get("activeDeadlineSeconds")),
                    ttl_seconds_after_finished=field_text(spec.get("ttlSecondsAfterFinished")))
        if spec.get("suspend"):
            data["suspend"] = "on"
        pod = (spec.get("template") or {}).get("spec") or {}
        container = (pod.get("containers") or [{}])[0]
        data.update(container_name=container.get("name", ""), image=container.get("image", ""),
                    command="\n".join(container.get("command") or []), env=format_env(container.get("env")),
                    restart_policy=pod.get("restartPolicy") or "")
        return data

    def clean_command(self):
        return [line for _, line in numbered_lines(self.cleaned_data.get("command", ""))]

    def clean_env(self):
        items = parse_env(self.cleaned_data.get("env", ""))
        self.line_maps["env"] = [n for n, _ in numbered_lines(self.cleaned_data.get("env", ""))]
        return items

    def skeleton(self):
        c = self.cleaned_data
        container: dict[str, Any] = {"name": c.get("container_name") or "", "image": c.get("image") or ""}
        if c.get("command"):
            container["command"] = c["command"]
        if c.get("env"):
            container["env"] = c["env"]
        return {"metadata": {}, "spec": {"completionMode": c.get("completion_mode") or "NonIndexed",
                                         "template": {"spec": {"containers": [container],
                                                               "restartPolicy": c.get("restart_policy") or ""}}}}

    def apply(self, obj):
        super().apply(obj)
        spec = obj.setdefault("spec", {})
        c = self.cleaned_data
        for field, key in (("completions", "completions"), ("parallelism", "parallelism"),
                           ("backoff_limit", "backoffLimit"), ("active_deadline_seconds", "activeDeadlineSeconds"),
                           ("ttl_seconds_after_finished", "ttlSecondsAfterFinished")):
            put(spec, key, c.get(field))
        spec["suspend"] = bool(c.get("suspend"))
        return obj

    @classmethod
    def readonly_section(cls, obj):
        return {"legend": "Pod template (read-only)",
                "help": "Set when the job was created; Kubernetes does not allow changing it afterwards.",
                "facts": job_template_facts(obj)}

    def sections(self):
        out = super().sections()
        out.append({"legend": "Run", "fields": [self[n] for n in (
            "completions", "parallelism", "completion_mode", "backoff_limit", "active_deadline_seconds",
            "ttl_seconds_after_finished", "suspend") if n in self.fields]})
        if self.mode == "create":
            out.append({"legend": "Container", "fields": [self[n] for n in (
                "container_name", "image", "command", "env", "restart_policy")],
                "help": "The pod template. It cannot be changed after the job is created."})
        return out


def job_template_facts(obj: dict) -> list[tuple[str, str]]:
    """The immutable part of a Job, for the edit page to show (not offer)."""
    spec = obj.get("spec") or {}
    pod = (spec.get("template") or {}).get("spec") or {}
    facts = [("Completion mode", spec.get("completionMode") or "NonIndexed"),
             ("Pod restart policy", pod.get("restartPolicy") or "—")]
    for c in pod.get("containers") or []:
        facts.append((f"Container “{c.get('name', '')}” image", c.get("image") or "—"))
        if c.get("command"):
            facts.append(("Command", " ".join(c["command"])))
        if c.get("args"):
            facts.append(("Arguments", " ".join(c["args"])))
        if c.get("env"):
            facts.append(("Environment", format_env(c["env"]) or "(from references)"))
    return facts


# ---------------------------------------------------------------------------------------------
# What changed between two moments (web/changes_views.py)


def change_facts(before: dict | None, after: dict | None) -> list[str]:
    """What changed (issue 38): "failed" / "completed" when the job's phase became that."""
    if after is None:
        return []
    was, now = (phase(before) if before is not None else ""), phase(after)
    return {"Failed": ["failed"], "Complete": ["completed"]}.get(now, []) if now != was else []


# ---------------------------------------------------------------------------------------------
# Overview: a namespace's jobs by phase, from the typed columns


def overview_counts(rows) -> dict[str, dict[str, int]]:
    """namespace -> {phase as the pages show it: count}."""
    out: dict[str, dict[str, int]] = {}
    for ns, job_phase, suspend, count in rows.values_list("namespace", "phase", "suspend").annotate(
            n=Count("id")).order_by():
        phases = out.setdefault(ns, {})
        shown = shown_phase(job_phase, suspend)
        phases[shown] = phases.get(shown, 0) + count
    return out


# The overview's coloured counts and the list's `?state=` filter: the shown phases of each.
STATE_PHASES = {"running": ("Running",), "complete": ("Complete", "SuccessCriteriaMet"),
                "failed": ("Failed", "FailureTarget"), "suspended": ("Suspended",)}


def overview_card(phases: dict[str, int] | None, now: datetime) -> dict:
    phases = phases or {}
    running, complete, failed, suspended = (sum(phases.get(shown, 0) for shown in STATE_PHASES[state])
                                            for state in ("running", "complete", "failed", "suspended"))
    other = sum(phases.values()) - running - complete - failed - suspended
    return {"total": sum(phases.values()), "running": running, "complete": complete, "failed": failed,
            "suspended": suspended, "other": other}


# ---------------------------------------------------------------------------------------------
# One-click actions and the declaration


def suspend(data, namespace: str, name: str, principal, through):
    """The Suspend / Resume button: POST suspend=true|false."""
    value = data.get("suspend") == "true"
    result = do_suspend_job(namespace, name, suspend=value, acting=principal, through=through)
    return result, f"Job {namespace}/{name} {'suspended' if value else 'resumed'}."


def _progress(values, now):
    succeeded, completions = values
    return (succeeded or 0) / (completions if completions else 1)


def _run_seconds(values, now):
    started, finished = values
    return ((finished or now) - started).total_seconds() if started is not None else None


JOB_SORTS = (
    kinds.Sort("status", "Status", ("phase", "suspend"), lambda v, now: shown_phase(v[0], v[1])),
    kinds.Sort("progress", "Progress", ("succeeded", "completions"), _progress),
    kinds.Sort("active", "Active pods", ("active",), lambda v, now: v[0] or 0),
    kinds.Sort("failed", "Failed", ("failed",), lambda v, now: v[0] or 0),
    kinds.Sort("duration", "Duration", ("start_time", "completion_time"), _run_seconds),
)


def _true_conditions(item: dict) -> str:
    return "; ".join(c["type"] + (f" ({c['reason']})" if c["reason"] else "")
                     for c in item["all_conditions"] if c["status"] == "True")


# The list's columns, as the export writes them (kinds.Column).
JOB_COLUMNS = (   # (widths: jobs.css says why)
    replace(kinds.NAME_COLUMN, label="Job", width="minmax(7.5em, 1.2fr)", min_em=7.5),
    kinds.column("status", "Status", ("Status", "phase"), sort="status", width="minmax(8.5em, 9.5em)", min_em=8.5),
    kinds.column("progress", "Succeeded", ("Succeeded", "succeeded"), ("Completions", "completions"), sort="progress",
                 width="minmax(13em, 14em)", min_em=13),
    kinds.column("active", "Pods", ("Active", "active"), ("Ready", "ready"), sort="active",
                 width="minmax(6.5em, 10.5em)", min_em=6.5),
    kinds.column("failed", "Failed", ("Failed", "failed"), ("Backoff limit", "backoff_limit"), sort="failed",
                 width="minmax(8em, 10em)", min_em=8),
    kinds.column("duration", "Duration", ("Started", lambda item: iso(item["start_time"])),
                 ("Completed", lambda item: iso(item["completion_time"])), sort="duration", css="opt num",
                 width="7.5em", min_em=7.5),
    kinds.AGE_COLUMN,
    kinds.column("conditions", "Conditions", ("Conditions", _true_conditions), css="opt"),
)


def _shown_phase_in(shown: tuple[str, ...]) -> Q:
    """shown_phase(phase, suspend) in `shown`, in SQL: a suspended Job that runs shows Suspended."""
    where = Q(phase__in=[p for p in shown if p != "Running"])
    if "Running" in shown:
        where |= Q(phase="Running", suspend=False)
    if "Suspended" in shown:
        where |= Q(phase="Running", suspend=True)
    return where


JOB_STATES = tuple(
    kinds.State(state, state.capitalize(), ("phase", "suspend"),
                lambda v, now, shown=shown: shown_phase(v[0], v[1]) in shown, where=_shown_phase_in(shown))
    for state, shown in STATE_PHASES.items())


GENERATED_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid")


def recreatable(obj: dict) -> dict:
    """A deleted Job to create again: a generated selector (and the template labels it
    matches) names the old uid, so drop them and let the new Job generate its own, as
    `kubectl replace --force` users must. A manualSelector Job keeps its own."""
    spec = obj.get("spec") or {}
    if not spec.get("manualSelector"):
        spec.pop("selector", None)
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        for key in GENERATED_LABELS:
            labels.pop(key, None)
    return obj


def rerun(data, namespace: str, name: str, principal, through):
    """"Run again" (its confirmation showed the copy: the same name suffix is posted back)."""
    suffix = data.get("suffix", "")
    result = do_rerun_job(namespace, name, acting=principal, through=through,
                          suffix=suffix if SUFFIX.match(suffix) else None)
    return result, f"Job {namespace}/{result.object['metadata']['name']} created: a fresh run of {name}."


def rerun_preview(namespace: str, name: str) -> dict:
    current = store.get(JOBS, namespace, name)
    if not finished(current):
        raise conflict(JOBS.group, JOBS.plural, name, "the job has not finished: run it again once it is complete "
                                                      "or failed")
    return rerun_copy(current)


RERUN = kinds.Action("rerun", "job_rerun", rerun, verb="create", label="Run again",
                     explain="A fresh copy of this finished job: a new name, no status, its selector and "
                             "controller labels generated anew, an annotation naming this one.",
                     preview=rerun_preview,
                     preview_fields=lambda obj: {"suffix": obj["metadata"]["name"].rsplit("-", 1)[1]})


JOB_PAGES = kinds.register(kinds.KindWeb(
    kind="Job", plural="jobs", detail_view="job", title="Jobs", heading="Job progress",
    noun="job", list_noun="jobs",
    stylesheets=("batch/jobs.css",), scripts=("batch/jobs.js",),
    present=present_job, count_by="phase_class", form=JobForm,
    overview=kinds.Overview(counts=overview_counts, card=overview_card, count_key="total", warn_key="failed"),
    change_facts=change_facts,
    create_initial={"completion_mode": "NonIndexed", "container_name": "main", "restart_policy": "Never"},
    yaml_skeleton={"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": "busybox:1.36", "command": ["sh", "-c", "echo hello"]}]}}}},
    actions=(kinds.Action("suspend", "job_suspend", suspend), RERUN),
    bulk_actions=(
        kinds.BulkAction("suspend", "Suspend", "suspended", undo="resume",
                         perform=lambda ns, name, p, through: do_suspend_job(ns, name, suspend=True, acting=p,
                                                                             through=through)),
        kinds.BulkAction("resume", "Resume", "resumed", undo="suspend",
                         perform=lambda ns, name, p, through: do_suspend_job(ns, name, suspend=False, acting=p,
                                                                             through=through)),
        kinds.BulkAction("rerun", "Run again", "run again", verb="create",
                         perform=lambda ns, name, p, through: do_rerun_job(ns, name, acting=p, through=through),
                         note="Each selected job that has finished gets a fresh copy, <name>-<suffix>; a job "
                              "still running is left alone. Delete the copies to undo."),
    ),
    sorts=JOB_SORTS,
    states=JOB_STATES,
    columns=JOB_COLUMNS,
    recreate=recreatable,
))

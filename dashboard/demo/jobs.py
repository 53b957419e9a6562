"""The job controller: a JobController keeps a changing set of Jobs drawn from CATALOG, each
a JobSim whose Pods it reports through /status until the Job completes, fails or is suspended."""
from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable
from urllib.parse import quote

from dashboard.batch.strategy import parse_index_intervals
from dashboard.demo import MANAGED_BY, MANAGER
from dashboard.events.recorder import NORMAL, WARNING
from dashboard.kube import formats

if TYPE_CHECKING:
    from dashboard.demo.timeline import Timeline

JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"
JOB_CONTROLLER = "job-controller"          # the recorder's component, as kube-controller-manager names it
POD_SUFFIX_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def kube_time(ts: float) -> str:
    """metav1.Time of a wall-clock timestamp."""
    return formats.format_time(datetime.fromtimestamp(ts, timezone.utc))


def parse_time(text: Any) -> float | None:
    moment = formats.parse_time(text)
    return None if moment is None else moment.timestamp()


def format_indexes(indexes: Iterable[int]) -> str:
    """{0, 1, 2, 3, 5} -> "0-3,5" (a Job's completedIndexes / failedIndexes)."""
    out: list[str] = []
    run: list[int] = []
    for i in sorted(set(indexes)):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [i]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out)


def parse_indexes(text: Any) -> set[int]:
    """"0-3,5" -> {0, 1, 2, 3, 5}, each interval read by the batch strategy's rule. A status is
    taken as stored: a malformed piece is skipped rather than losing the whole list, and
    indexes are not bounded by completions (judging them is the API's business)."""
    out: set[int] = set()
    for piece in text.split(",") if isinstance(text, str) else []:
        try:
            intervals = parse_index_intervals(piece, completions=sys.maxsize)
        except ValueError:
            continue
        for first, last in intervals:
            out.update(range(first, last + 1))
    return out


# (name prefix, namespace slot, mode, completions range, parallelism range)
CATALOG = [
    ("nightly-report", 2, "NonIndexed", (1, 1), (1, 1)),
    ("db-backup", 2, "NonIndexed", (1, 3), (1, 1)),
    ("etl-orders", 2, "NonIndexed", (4, 10), (2, 4)),
    ("thumbnails", 2, "Indexed", (8, 20), (3, 5)),
    ("train-shard", 2, "Indexed", (5, 12), (2, 4)),
    ("reindex-search", 0, "Indexed", (5, 15), (2, 5)),
    ("data-import", 0, "NonIndexed", (2, 6), (1, 3)),
    ("settle-invoices", 1, "Indexed", (6, 16), (2, 4)),
    ("reconcile-ledger", 1, "NonIndexed", (1, 4), (1, 2)),
]


@dataclass
class Pod:
    """A pod of a JobSim: never created, only counted in the Job's status."""
    index: int | None
    ready: bool = False


class JobController:
    """Keeps a bounded, changing set of Jobs: creates them, deletes the finished ones."""

    def __init__(self, sim: Timeline):
        self.sim = sim
        self.jobs: list[JobSim] = []

    def start(self) -> None:
        self.sim.after(0.3, self.adopt)

    def adopt(self) -> None:
        """Pick up the Jobs a previous run left behind, so a restart leaves none stuck."""
        selector = quote(f"{MANAGED_BY}={MANAGER}")
        for ns in dict.fromkeys(self.sim.namespaces):
            resp = self.sim.client.call("GET", f"{JOBS.format(ns=ns)}?labelSelector={selector}", what="jobs")
            items = (resp.body or {}).get("items") or [] if resp.ok else []
            for obj in items:
                if not (obj.get("metadata") or {}).get("deletionTimestamp"):
                    self.jobs.append(JobSim.adopt(self, obj))
        self.spawn()

    @property
    def target(self) -> int:
        return max(1, self.sim.max_jobs - 2)

    def spawn(self) -> None:
        if len(self.jobs) < self.target:
            job = JobSim.new(self)
            self.jobs.append(job)
            job.create()
        # Fill the page quickly at first, then replace jobs at a calmer pace.
        filling = len(self.jobs) < self.target // 2
        self.sim.after(self.sim.uniform(0.5, 1.0) if filling else self.sim.uniform(3.0, 8.0), self.spawn)

    def forget(self, job: "JobSim") -> None:
        if job in self.jobs:
            self.jobs.remove(job)

    def recover(self) -> None:
        self.spawn()


class JobSim:
    """One Job and its pods, reported through /status the way the job controller does."""

    def __init__(self, controller: JobController, namespace: str, spec: dict):
        self.controller = controller
        self.sim = controller.sim
        self.namespace = namespace
        self.collection = JOBS.format(ns=namespace)
        self.mode = spec.get("completionMode") or "NonIndexed"
        self.completions = spec.get("completions") or 1
        self.parallelism = spec.get("parallelism") or 1
        self.backoff_limit = spec.get("backoffLimit")
        self.backoff_limit_per_index = spec.get("backoffLimitPerIndex")
        self.manifest: dict = {}          # what create() posts (new jobs only)
        self.obj: dict | None = None      # the Job as last seen (carries resourceVersion)
        self.name = ""
        # The model; the Job's status is computed from it.
        self.pods: list[Pod] = []
        self.succeeded = 0
        self.failed = 0
        self.completed: set[int] = set()
        self.failed_indexes: set[int] = set()
        self.index_failures: dict[int, int] = {}
        self.start_time: float | None = None
        self.completion_time: float | None = None
        self.terminating = 0
        self.conditions: list[dict] = []
        self.state = "new"      # new | running | suspended | ending | finished | gone
        self._final: tuple[bool, str, str] | None = None     # how an "ending" job ends
        self.suspended_by_us = False
        self.pods_created = 0
        # The plan: how failure-prone its pods are, and whether we will pause it.
        rng = self.sim.rng
        if self.backoff_limit_per_index is not None:
            self.fail_rate = 0.15     # now and then an index fails twice: failedIndexes
        elif self.backoff_limit is not None and self.backoff_limit <= 3:
            self.fail_rate = 0.5      # flaky pods and a low limit: likely BackoffLimitExceeded
        else:
            self.fail_rate = rng.choice([0.0, 0.03, 0.06, 0.12])
        self.suspend_at = rng.uniform(0.2, 0.6) if rng.random() < 0.15 else None

    @property
    def path(self) -> str:
        return f"{self.collection}/{self.name}"

    # -- creation ---------------------------------------------------------------------

    @classmethod
    def new(cls, controller: JobController) -> "JobSim":
        sim = controller.sim
        rng = sim.rng
        prefix, slot, mode, (cmin, cmax), (pmin, pmax) = rng.choice(CATALOG)
        completions = rng.randint(cmin, cmax)
        spec: dict = {"completions": completions, "parallelism": min(completions, rng.randint(pmin, pmax)),
                      "completionMode": mode}
        outcome = rng.random()
        if mode == "Indexed" and outcome < 0.25:
            spec["backoffLimitPerIndex"] = 1      # failedIndexes, and "FailedIndexes" when any
        elif outcome > 0.75:
            spec["backoffLimit"] = rng.randint(2, 3)   # with flaky pods: BackoffLimitExceeded
        created_suspended = rng.random() < 0.08
        job = cls(controller, sim.namespace(slot), spec)
        job.manifest = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"generateName": f"{prefix}-", "namespace": job.namespace,
                         "labels": {MANAGED_BY: MANAGER, "app.kubernetes.io/name": prefix}},
            "spec": {**spec, "suspend": created_suspended, "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": prefix}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "worker", "image": "busybox:1.36",
                    "command": ["sh", "-c", f"echo {prefix} item ${{JOB_COMPLETION_INDEX:-0}}; sleep 5"],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}},
        }
        return job

    def create(self) -> None:
        resp = self.sim.client.call("POST", self.collection, self.manifest, what="job")
        if not resp.ok:
            self.state = "gone"
            self.controller.forget(self)
            return
        self.obj = resp.body
        self.name = resp.body["metadata"]["name"]
        if (resp.body.get("spec") or {}).get("suspend"):
            self.state = "suspended"
            self.suspended_by_us = True
            self.sim.after(self.sim.uniform(0.5, 1.5), self.report_suspended)
        else:
            self.sim.after(self.sim.uniform(0.5, 2.0), self.begin)

    @classmethod
    def adopt(cls, controller: JobController, obj: dict) -> "JobSim":
        """Rebuild the model from a Job's spec and status (after a restart of the simulator)."""
        meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        job = cls(controller, meta["namespace"], spec)
        job.obj, job.name = obj, meta["name"]
        job.succeeded, job.failed = status.get("succeeded") or 0, status.get("failed") or 0
        job.completed = parse_indexes(status.get("completedIndexes"))
        job.failed_indexes = parse_indexes(status.get("failedIndexes"))
        job.start_time = parse_time(status.get("startTime"))
        job.completion_time = parse_time(status.get("completionTime"))
        job.conditions = list(status.get("conditions") or [])
        sim = controller.sim
        if job._has("Complete") or job._has("Failed"):
            job.state = "finished"
            sim.after(sim.uniform(2.0, 10.0), job.delete)
        elif job._has("SuccessCriteriaMet") or job._has("FailureTarget"):
            job.state = "ending"
            sim.after(sim.uniform(0.5, 1.5), job.finish)
        elif spec.get("suspend"):
            job.state = "suspended"
            job.suspended_by_us = True
            sim.after(sim.uniform(0.5, 1.5), job.report_suspended)
        else:
            job.state = "running"
            for _ in range(min(status.get("active") or 0, job.parallelism)):
                job._start_pod()
            sim.after(sim.uniform(0.5, 2.0), job.progress if job.start_time else job.begin)
        return job

    # -- status -----------------------------------------------------------------------

    def _has(self, kind: str) -> bool:
        return any(c.get("type") == kind and c.get("status") == "True" for c in self.conditions)

    def _condition(self, kind: str, status: str, reason: str, message: str) -> None:
        """Set a condition the way the controller does: the transition time moves only when
        the status changes."""
        now = kube_time(self.sim.wall())
        for c in self.conditions:
            if c.get("type") == kind:
                if c.get("status") != status:
                    c["lastTransitionTime"] = now
                c.update(status=status, reason=reason, message=message, lastProbeTime=now)
                return
        self.conditions.append({"type": kind, "status": status, "lastProbeTime": now,
                                "lastTransitionTime": now, "reason": reason, "message": message})

    def status(self) -> dict:
        status: dict = {}
        if self.start_time is not None:
            status["startTime"] = kube_time(self.start_time)
        if self.completion_time is not None:
            status["completionTime"] = kube_time(self.completion_time)
        for key, value in (("active", len(self.pods)), ("succeeded", self.succeeded), ("failed", self.failed)):
            if value:
                status[key] = value          # omitempty in kube's JSON
        status["ready"] = sum(p.ready for p in self.pods)
        status["terminating"] = self.terminating
        if self.mode == "Indexed" and self.completed:
            status["completedIndexes"] = format_indexes(self.completed)
        if self.backoff_limit_per_index is not None:
            status["failedIndexes"] = format_indexes(self.failed_indexes)
        status["uncountedTerminatedPods"] = {}
        if self.conditions:
            status["conditions"] = [dict(c) for c in self.conditions]
        return status

    def write_status(self) -> bool:
        """PUT /status on the Job as last seen; after a 409, read it and try once more."""
        client = self.sim.client
        for attempt in (1, 2):
            body = dict(self.obj or {})
            body["status"] = self.status()
            resp = client.call("PUT", self.path + "/status", body, what="job status", expect=(404,))
            if resp.ok:
                self.obj = resp.body
                return True
            if resp.status == 404:
                self._gone()
                return False
            if resp.status != 409 or attempt == 2:
                return False
            fresh = client.call("GET", self.path, what="job", expect=(404,))
            if not fresh.ok:
                if fresh.status == 404:
                    self._gone()
                return False
            self.obj = fresh.body
        return False

    def _gone(self) -> None:
        """Deleted behind our back (by a user): forget it."""
        self.state = "gone"
        self.controller.forget(self)

    # -- the life of a job ------------------------------------------------------------

    def _work_left(self) -> int:
        if self.mode == "Indexed":
            return len(self._pending_indexes())
        return self.completions - self.succeeded - len(self.pods)

    def _pending_indexes(self) -> list[int]:
        running = {p.index for p in self.pods}
        return [i for i in range(self.completions)
                if i not in self.completed and i not in self.failed_indexes and i not in running]

    def _start_pod(self) -> None:
        if self.mode == "Indexed":
            pending = self._pending_indexes()
            if pending:
                self.pods.append(Pod(pending[0]))
                self._event(NORMAL, "SuccessfulCreate", f"Created pod: {self._pod_name(pending[0])}")
        elif self._work_left() > 0:
            self.pods.append(Pod(None))
            self._event(NORMAL, "SuccessfulCreate", f"Created pod: {self._pod_name(None)}")

    def _pod_name(self, index: int | None) -> str:
        """A pod name as the controller generates it (from a counter: the story's RNG is not drawn)."""
        self.pods_created += 1
        digest = hashlib.sha1(f"{self.name}/{self.pods_created}".encode()).digest()
        suffix = "".join(POD_SUFFIX_CHARS[b % len(POD_SUFFIX_CHARS)] for b in digest[:5])
        return f"{self.name}-{index}-{suffix}" if index is not None else f"{self.name}-{suffix}"

    def _event(self, type_: str, reason: str, message: str) -> None:
        """What the job controller records on its Job (through the API, like client-go)."""
        if self.obj is not None:
            self.sim.record(self.obj, type_, reason, message, component=JOB_CONTROLLER)

    def _fill(self) -> None:
        while len(self.pods) < self.parallelism and self._work_left() > 0:
            self._start_pod()

    def begin(self) -> None:
        if self.state in ("gone", "finished"):
            return
        self.state = "running"
        self.start_time = self.sim.wall()
        self._fill()
        if self.write_status():
            self._next_progress()

    def _next_progress(self) -> None:
        self.sim.after(self.sim.uniform(0.8, 2.5), self.progress)

    def progress(self) -> None:
        """One controller sync: pods turn ready, finish (mostly succeed), new ones start."""
        if self.state != "running":
            return
        self._follow_spec()
        if self.state != "running":
            return
        rng = self.sim.rng
        new_failure = False
        for pod in list(self.pods):
            if not pod.ready:
                pod.ready = rng.random() < 0.6
                continue
            if rng.random() >= 0.35:
                continue
            self.pods.remove(pod)
            if rng.random() < self.fail_rate:
                self.failed += 1
                new_failure = True
                if pod.index is not None and self.backoff_limit_per_index is not None:
                    self.index_failures[pod.index] = self.index_failures.get(pod.index, 0) + 1
                    if self.index_failures[pod.index] > self.backoff_limit_per_index:
                        self.failed_indexes.add(pod.index)
            else:
                self.succeeded += 1
                if pod.index is not None:
                    self.completed.add(pod.index)
        if new_failure and self.backoff_limit is not None and self.failed > self.backoff_limit:
            self._end(success=False, reason="BackoffLimitExceeded", message="Job has reached the specified backoff limit")
            return
        if self.suspend_at is not None and self.succeeded >= self.suspend_at * self.completions:
            self.suspend_at = None
            self.suspend()
            return
        self._fill()
        if not self.pods and self._work_left() <= 0:
            if self.failed_indexes:
                self._end(success=False, reason="FailedIndexes", message="Job has failed indexes")
            else:
                self._end(success=True, reason="CompletionsReached",
                          message="Reached expected number of succeeded pods")
            return
        if self.write_status():
            self._next_progress()

    def _follow_spec(self) -> None:
        """A user may suspend our Job (kubectl patch): then act as the controller would."""
        if (self.obj or {}).get("spec", {}).get("suspend") and self.state == "running":
            self.suspended_by_us = False
            self._enter_suspended()

    def _end(self, success: bool, reason: str, message: str) -> None:
        """First the interim condition (SuccessCriteriaMet / FailureTarget) while pods are
        being terminated, then the final one: the order 1.32's controller writes them in."""
        self.state = "ending"
        self.terminating = len(self.pods)
        self.pods = []
        self._condition("SuccessCriteriaMet" if success else "FailureTarget", "True", reason, message)
        self._final = (success, reason, message)
        if self.write_status():
            self.sim.after(self.sim.uniform(0.5, 1.5), self.finish)

    def finish(self) -> None:
        if self.state != "ending":
            return
        success, reason, message = self._final or (
            self._has("SuccessCriteriaMet"), *self._interim_reason())
        self.terminating = 0
        self.pods = []
        if success:
            self.completion_time = self.sim.wall()
            self._condition("Complete", "True", reason, message)
        else:
            self._condition("Failed", "True", reason, message)
        if self.write_status():
            if success:
                self._event(NORMAL, "Completed", "Job completed")
            else:
                self._event(WARNING, reason, message)
            self.state = "finished"
            # Keep it on the page a while, then clean up (like ttlSecondsAfterFinished).
            self.sim.after(self.sim.uniform(15.0, 40.0), self.delete)

    def _interim_reason(self) -> tuple[str, str]:
        for c in self.conditions:
            if c.get("type") in ("SuccessCriteriaMet", "FailureTarget"):
                return c.get("reason") or "", c.get("message") or ""
        return "", ""

    def suspend(self) -> None:
        """Pause the Job through its spec (as a queueing system would), then report it."""
        resp = self.sim.client.call("PATCH", self.path, {"spec": {"suspend": True}}, what="job",
                                    expect=(404,), content_type="application/merge-patch+json")
        if resp.status == 404:
            self._gone()
            return
        if not resp.ok:
            self._next_progress()
            return
        self.obj = resp.body
        self.suspended_by_us = True
        self._enter_suspended()

    def _enter_suspended(self) -> None:
        self.state = "suspended"
        self.report_suspended()

    def report_suspended(self) -> None:
        """Pods are removed and startTime cleared (it restarts on resume), Suspended=True."""
        if self.state != "suspended":
            return
        self.pods = []
        self.start_time = None
        self._condition("Suspended", "True", "JobSuspended", "Job suspended")
        if self.write_status():
            self._event(NORMAL, "Suspended", "Job suspended")
            if self.suspended_by_us:
                self.sim.after(self.sim.uniform(10.0, 30.0), self.resume)
            else:
                self.sim.after(5.0, self.watch_user_resume)

    def watch_user_resume(self) -> None:
        """Suspended by someone else: look now and then whether they resumed it."""
        if self.state != "suspended":
            return
        resp = self.sim.client.call("GET", self.path, what="job", expect=(404,))
        if resp.status == 404:
            self._gone()
        elif resp.ok and not (resp.body.get("spec") or {}).get("suspend"):
            self.obj = resp.body
            self._resumed()
        else:
            self.sim.after(5.0, self.watch_user_resume)

    def resume(self) -> None:
        if self.state != "suspended":
            return
        resp = self.sim.client.call("PATCH", self.path, {"spec": {"suspend": False}}, what="job",
                                    expect=(404,), content_type="application/merge-patch+json")
        if resp.status == 404:
            self._gone()
        elif resp.ok:
            self.obj = resp.body
            self._resumed()
        else:
            self.sim.after(5.0, self.resume)

    def _resumed(self) -> None:
        self.state = "running"
        self.start_time = self.sim.wall()
        self._condition("Suspended", "False", "JobResumed", "Job resumed")
        self._event(NORMAL, "Resumed", "Job resumed")
        self._fill()
        if self.write_status():
            self._next_progress()

    def delete(self) -> None:
        # Background: a Job's default policy would orphan its (here imaginary) pods.
        self.sim.client.call("DELETE", self.path + "?propagationPolicy=Background", what="job", expect=(404,))
        self.state = "gone"
        self.controller.forget(self)

    def recover(self) -> None:
        """After an internal error: carry on from wherever the job was."""
        step = {"new": self.begin, "running": self.progress, "ending": self.finish,
                "finished": self.delete, "suspended": self.report_suspended}.get(self.state)
        if step is not None:
            step()

"""Job (batch/v1): defaults, selector generation, validation and table columns, as kube 1.32 has them.

Sections: Job defaults and preparation; Job validation (create, update, /status); dashboard
columns and the Table. The pod template's own defaults and rules are core's (core/pod_template.py).

Feature gates are taken at their 1.32 defaults: JobPodReplacementPolicy, JobBackoffLimitPerIndex,
JobSuccessPolicy, ElasticIndexedJob, JobManagedBy (beta, on), RelaxedEnvironmentVariableValidation
(beta, on).
"""
from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

from dashboard.core import pod_template
from dashboard.kube import formats, schema, selectors, validation as v
from dashboard.kube.errors import Cause, duplicate, invalid, not_supported, required, too_many
from dashboard.kube.registry import Column

DEFINITION = "io.k8s.api.batch.v1.Job"

# Labels the apiserver puts on a Job's pod template (and selects on) unless manualSelector.
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"

MAX_PARALLELISM_INDEXED = 100_000
MAX_FAILED_INDEXES = 100_000
COMPLETIONS_SOFT_LIMIT = 100_000
PARALLELISM_LIMIT_HIGH_COMPLETIONS = 10_000
MAX_FAILED_INDEXES_HIGH_COMPLETIONS = 10_000
MAX_POD_FAILURE_POLICY_RULES = 20
MAX_EXIT_CODE_VALUES = 255
MAX_POD_CONDITION_PATTERNS = 20
MAX_MANAGED_BY_LENGTH = 63
MAX_SUCCEEDED_INDEXES_LENGTH = 64 * 1024
MAX_SUCCESS_POLICY_RULES = 20

COMPLETION_MODES = ("NonIndexed", "Indexed")
POD_FAILURE_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")          # sorted, as kube lists
EXIT_CODE_OPERATORS = ("In", "NotIn")
CONDITION_STATUSES = ("False", "True", "Unknown")
POD_REPLACEMENT_POLICIES = ("Failed", "TerminatingOrFailed")


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


# =======================================================================================
# Defaults and preparation
# =======================================================================================

def normalize(obj: dict) -> None:
    """Decode the Go-typed values: Quantities (resources, sizeLimit...) are re-spelled in
    canonical form ("0.5" -> "500m", "1024Mi" -> "1Gi"), Times in UTC whole seconds.
    Raises kube's 400 for a value that does not decode. Call it on /status writes too."""
    schema.normalize_object(obj, DEFINITION)


def default(obj: dict) -> None:
    """SetDefaults_Job and the core/v1 pod defaults a round trip through kube-apiserver shows."""
    normalize(obj)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    # A non-parallel job may leave both unset: both become 1.
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        # With per-index backoff the global limit should never be the one that trips.
        spec["backoffLimit"] = v.MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else 6
    template = spec.get("template")
    if not isinstance(template, dict):
        template = spec["template"] = {}
    _default_job_labels(obj)
    if spec.get("completionMode") is None:
        spec["completionMode"] = "NonIndexed"
    if spec.get("suspend") is None:
        spec["suspend"] = False
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        for pattern in rule.get("onPodConditions") or []:
            if not pattern.get("status"):
                pattern["status"] = "True"
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if spec.get("podFailurePolicy") is not None else "TerminatingOrFailed"
    pod_template.default_pod_template(template)


def _default_job_labels(obj: dict) -> None:
    """A Job without labels takes its pod template's labels (SetDefaults_Job)."""
    labels = ((obj["spec"].get("template") or {}).get("metadata") or {}).get("labels")
    meta = obj.setdefault("metadata", {})
    if labels is not None and not meta.get("labels"):
        meta["labels"] = dict(labels)


def prepare_for_create(obj: dict) -> None:
    """Generate the selector and template labels (unless spec.manualSelector), clear status.

    metadata.uid must already be set. kube re-applies defaults whenever it reads a Job back
    from storage, so a Job created without labels is answered with the generated template
    labels as its own labels; we apply that here, once.
    """
    spec = obj.setdefault("spec", {})
    if not spec.get("manualSelector"):
        _generate_selector(obj)
    obj["status"] = {}
    _default_job_labels(obj)


def _generate_selector(obj: dict) -> None:
    meta, spec = obj.get("metadata") or {}, obj["spec"]
    template = spec.setdefault("template", {})
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    # Labels the user set are kept: a conflicting value is then reported by validation.
    for key in (LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL):
        labels.setdefault(key, meta.get("name", ""))
    for key in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        labels.setdefault(key, meta.get("uid", ""))
    selector = spec.get("selector")
    if not isinstance(selector, dict):
        selector = spec["selector"] = {}
    selector.setdefault("matchLabels", {}).setdefault(CONTROLLER_UID_LABEL, meta.get("uid", ""))


# =======================================================================================
# Validation: create
# =======================================================================================

def validate(obj: dict, require_prefixed_labels: bool = True) -> list[Cause]:
    """ValidateJob minus ObjectMeta (the store validates metadata for every kind)."""
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    causes = _validate_generated_selector(obj, require_prefixed_labels)
    causes += validate_job_spec(spec, "spec")
    completions = spec.get("completions")
    if spec.get("completionMode") == "Indexed" and isinstance(completions, int) and completions > 0:
        # Pods of an Indexed job are named "<job>-<index>" and use it as hostname.
        hostname = f"{meta.get('name', '')}-{completions - 1}"
        if v.is_dns1123_label(hostname):
            causes.append(invalid("metadata.name", meta.get("name", ""),
                                  f"will not able to create pod with invalid DNS label: {hostname}"))
    return causes


def _validate_generated_selector(obj: dict, require_prefixed_labels: bool) -> list[Cause]:
    spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
    if spec.get("manualSelector") or spec.get("selector") is None:
        return []     # a missing selector is reported by validate_job_spec
    causes: list[Cause] = []
    uid, name = meta.get("uid") or "", meta.get("name") or ""
    if not uid:
        causes.append(required("metadata.uid"))
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    wanted = [(LEGACY_CONTROLLER_UID_LABEL, uid), (LEGACY_JOB_NAME_LABEL, name)]
    if require_prefixed_labels:
        wanted += [(CONTROLLER_UID_LABEL, uid), (JOB_NAME_LABEL, name)]
    for key, value in wanted:
        path = f"spec.template.metadata.labels[{key}]"
        if key not in labels:
            causes.append(required(path, f"must be '{value}'"))
        elif labels[key] != value:
            causes.append(invalid(path, labels, f"must be '{value}'"))
    if selectors.selector_matches(spec["selector"], dict(wanted)) is False:
        causes.append(invalid("spec.selector", spec["selector"], "`selector` not auto-generated"))
    return causes


def validate_job_spec(spec: dict, path: str) -> list[Cause]:
    causes = _validate_job_spec_fields(spec, path)
    selector = spec.get("selector")
    if selector is None:
        causes.append(required(f"{path}.selector"))
    else:
        causes += selectors.validate_label_selector(selector, f"{path}.selector")
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if selector is not None and selectors.selector_matches(selector, template_labels) is False:
        causes.append(invalid(f"{path}.template.metadata.labels", template_labels,
                              "`selector` does not match template `labels`"))
    return causes


def _validate_job_spec_fields(spec: dict, path: str) -> list[Cause]:
    causes: list[Cause] = []
    for key in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit",
                "ttlSecondsAfterFinished", "backoffLimitPerIndex", "maxFailedIndexes"):
        if spec.get(key) is not None:
            causes += v.validate_nonnegative(spec[key], f"{path}.{key}")
        if key == "maxFailedIndexes" and spec.get(key) is not None and spec.get("backoffLimitPerIndex") is None:
            causes.append(required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified"))
    managed_by = spec.get("managedBy")
    if managed_by is not None:
        causes += v.validate_domain_prefixed_path(managed_by, f"{path}.managedBy")
        if len(managed_by) > MAX_MANAGED_BY_LENGTH:
            causes.append(v.too_long(f"{path}.managedBy", MAX_MANAGED_BY_LENGTH))
    mode = spec.get("completionMode")
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    per_index, max_failed = spec.get("backoffLimitPerIndex"), spec.get("maxFailedIndexes")
    if mode is not None and mode not in COMPLETION_MODES:
        causes.append(not_supported(f"{path}.completionMode", mode, list(COMPLETION_MODES)))
    if mode == "Indexed":
        if completions is None:
            causes.append(required(f"{path}.completions", "when completion mode is Indexed"))
        if parallelism is not None and parallelism > MAX_PARALLELISM_INDEXED:
            causes.append(invalid(f"{path}.parallelism", parallelism,
                                  f"must be less than or equal to {MAX_PARALLELISM_INDEXED} "
                                  "when completion mode is Indexed"))
        if completions is not None and max_failed is not None and max_failed > completions:
            causes.append(invalid(f"{path}.maxFailedIndexes", max_failed, "must be less than or equal to completions"))
        if max_failed is not None and max_failed > MAX_FAILED_INDEXES:
            causes.append(invalid(f"{path}.maxFailedIndexes", max_failed,
                                  f"must be less than or equal to {MAX_FAILED_INDEXES}"))
        if completions is not None and completions > COMPLETIONS_SOFT_LIMIT and per_index is not None:
            if max_failed is None:
                causes.append(required(f"{path}.maxFailedIndexes",
                                       f"must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"))
            if parallelism is not None and parallelism > PARALLELISM_LIMIT_HIGH_COMPLETIONS:
                causes.append(invalid(f"{path}.parallelism", parallelism,
                                      f"must be less than or equal to {PARALLELISM_LIMIT_HIGH_COMPLETIONS} when "
                                      f"completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff "
                                      "limit per index"))
            if max_failed is not None and max_failed > MAX_FAILED_INDEXES_HIGH_COMPLETIONS:
                causes.append(invalid(f"{path}.maxFailedIndexes", max_failed,
                                      f"must be less than or equal to {MAX_FAILED_INDEXES_HIGH_COMPLETIONS} when "
                                      f"completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff "
                                      "limit per index"))
    if mode in (None, "NonIndexed"):
        if per_index is not None:
            causes.append(invalid(f"{path}.backoffLimitPerIndex", per_index, "requires indexed completion mode"))
        if max_failed is not None:
            causes.append(invalid(f"{path}.maxFailedIndexes", max_failed, "requires indexed completion mode"))
    if spec.get("podFailurePolicy") is not None:
        causes += _validate_pod_failure_policy(spec, f"{path}.podFailurePolicy")
    if spec.get("successPolicy") is not None:
        if mode != "Indexed":
            causes.append(invalid(f"{path}.successPolicy", spec["successPolicy"], "requires indexed completion mode"))
        else:
            causes += _validate_success_policy(spec, f"{path}.successPolicy")
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        if spec.get("podFailurePolicy") is not None:
            if replacement != "Failed":
                causes.append(not_supported(f"{path}.podReplacementPolicy", replacement, ["Failed"]))
        elif replacement not in POD_REPLACEMENT_POLICIES:
            causes.append(not_supported(f"{path}.podReplacementPolicy", replacement, list(POD_REPLACEMENT_POLICIES)))
    template = spec.get("template") or {}
    causes += pod_template.validate_pod_template(template, f"{path}.template")
    restart = (template.get("spec") or {}).get("restartPolicy") or ""
    restart_path = f"{path}.template.spec.restartPolicy"
    if restart in ("", "Always"):
        # The pod defaults turn "" into Always, so both read as "not set" for a Job.
        causes.append(required(restart_path, 'valid values: "OnFailure", "Never"'))
    elif restart not in ("OnFailure", "Never"):
        causes.append(not_supported(restart_path, restart, ["OnFailure", "Never"]))
    elif spec.get("podFailurePolicy") is not None and restart != "Never":
        causes.append(invalid(restart_path, restart, 'only "Never" is supported when podFailurePolicy is specified'))
    return causes


def _validate_pod_failure_policy(spec: dict, path: str) -> list[Cause]:
    rules = spec["podFailurePolicy"].get("rules") or []
    causes: list[Cause] = []
    if len(rules) > MAX_POD_FAILURE_POLICY_RULES:
        causes.append(too_many(f"{path}.rules", len(rules), MAX_POD_FAILURE_POLICY_RULES))
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    names = {c.get("name") for c in (pod_spec.get("containers") or []) + (pod_spec.get("initContainers") or [])}
    for i, rule in enumerate(rules):
        rule_path = f"{path}.rules[{i}]"
        action = rule.get("action") or ""
        if not action:
            causes.append(required(f"{rule_path}.action", "valid values: " + v.go_list(POD_FAILURE_ACTIONS)))
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                causes.append(invalid(f"{rule_path}.action", action, "requires the backoffLimitPerIndex to be set"))
        elif action not in POD_FAILURE_ACTIONS:
            causes.append(not_supported(f"{rule_path}.action", action, list(POD_FAILURE_ACTIONS)))
        on_exit, on_conditions = rule.get("onExitCodes"), rule.get("onPodConditions") or []
        if on_exit is not None:
            causes += _validate_on_exit_codes(on_exit, f"{rule_path}.onExitCodes", names)
        if on_conditions:
            causes += _validate_on_pod_conditions(on_conditions, f"{rule_path}.onPodConditions")
        if on_exit is not None and on_conditions:
            causes.append(v.invalid_no_value(rule_path, "specifying both OnExitCodes and OnPodConditions is not supported"))
        if on_exit is None and not on_conditions:
            causes.append(v.invalid_no_value(rule_path, "specifying one of OnExitCodes and OnPodConditions is required"))
    return causes


def _validate_on_exit_codes(req: dict, path: str, container_names: set) -> list[Cause]:
    causes: list[Cause] = []
    operator = req.get("operator") or ""
    if not operator:
        causes.append(required(f"{path}.operator", "valid values: " + v.go_list(EXIT_CODE_OPERATORS)))
    elif operator not in EXIT_CODE_OPERATORS:
        causes.append(not_supported(f"{path}.operator", operator, list(EXIT_CODE_OPERATORS)))
    if req.get("containerName") is not None and req["containerName"] not in container_names:
        causes.append(invalid(f"{path}.containerName", req["containerName"],
                              "must be one of the container or initContainer names in the pod template"))
    values = req.get("values") or []
    if not values:
        causes.append(invalid(f"{path}.values", values, "at least one value is required"))
    elif len(values) > MAX_EXIT_CODE_VALUES:
        causes.append(too_many(f"{path}.values", len(values), MAX_EXIT_CODE_VALUES))
    seen: set[int] = set()
    for j, code in enumerate(values):
        if operator == "In" and code == 0:
            causes.append(invalid(f"{path}.values[{j}]", code, "must not be 0 for the In operator"))
        if code in seen:
            causes.append(duplicate(f"{path}.values[{j}]", code))
        seen.add(code)
    if any(a > b for a, b in zip(values, values[1:])):
        causes.append(invalid(f"{path}.values", values, "must be ordered"))
    return causes


def _validate_on_pod_conditions(patterns: list, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if len(patterns) > MAX_POD_CONDITION_PATTERNS:
        causes.append(too_many(path, len(patterns), MAX_POD_CONDITION_PATTERNS))
    for j, pattern in enumerate(patterns):
        causes += v.validate_qualified_name(pattern.get("type") or "", f"{path}[{j}].type")
        status = pattern.get("status") or ""
        if not status:
            causes.append(required(f"{path}[{j}].status", "valid values: " + v.go_list(CONDITION_STATUSES)))
        elif status not in CONDITION_STATUSES:
            causes.append(not_supported(f"{path}[{j}].status", status, list(CONDITION_STATUSES)))
    return causes


def _validate_success_policy(spec: dict, path: str) -> list[Cause]:
    rules = spec["successPolicy"].get("rules") or []
    causes: list[Cause] = []
    if not rules:
        causes.append(required(f"{path}.rules", "at least one rules must be specified when the successPolicy is specified"))
    if len(rules) > MAX_SUCCESS_POLICY_RULES:
        causes.append(too_many(f"{path}.rules", len(rules), MAX_SUCCESS_POLICY_RULES))
    completions = spec.get("completions")
    for i, rule in enumerate(rules):
        rule_path = f"{path}.rules[{i}]"
        count, indexes = rule.get("succeededCount"), rule.get("succeededIndexes")
        if count is None and indexes is None:
            causes.append(required(rule_path, "at least one of succeededCount or succeededIndexes must be specified"))
        total = 0
        if indexes is not None and completions is not None:
            if len(indexes) > MAX_SUCCEEDED_INDEXES_LENGTH:
                causes.append(v.too_long(f"{rule_path}.succeededIndexes", MAX_SUCCEEDED_INDEXES_LENGTH))
            try:
                total = count_indexes(indexes, completions)
            except ValueError as exc:
                causes.append(invalid(f"{rule_path}.succeededIndexes", indexes, f"error parsing succeededIndexes: {exc}"))
        if count is not None and completions is not None:
            count_path = f"{rule_path}.succeededCount"
            causes += v.validate_nonnegative(count, count_path)
            if count > completions:
                causes.append(invalid(count_path, count, f"must be less than or equal to {completions} "
                                                         "(the number of specified completions)"))
            if indexes is not None and count > total:
                causes.append(invalid(count_path, count, f"must be less than or equal to {total} "
                                                         "(the number of indexes in the specified succeededIndexes field)"))
    return causes


def parse_index_intervals(text: str, completions: int) -> list[tuple[int, int]]:
    """"1,3-5,7" -> [(1, 1), (3, 5), (7, 7)]: increasing, below completions, or ValueError
    with kube's message."""
    if not text:
        return []
    out: list[tuple[int, int]] = []
    for interval in text.split(","):
        first, last = _parse_interval(interval, completions)
        if out and out[-1][1] >= first:
            raise ValueError(f"non-increasing order, previous: {out[-1][1]}, current: {first}")
        out.append((first, last))
    return out


def _parse_interval(interval: str, completions: int) -> tuple[int, int]:
    parts = interval.split("-")
    if len(parts) > 2:
        raise ValueError(f'the fragment "{interval}" violates the requirement that an index interval '
                         "can have at most two parts separated by '-'")
    numbers = []
    for part in parts:
        number = formats.go_atoi(part)
        if number is None:
            raise ValueError(f'cannot convert string to integer for index: "{part}"')
        if number >= completions:
            raise ValueError(f'too large index: "{part}"')
        numbers.append(number)
    if len(numbers) == 2 and numbers[0] >= numbers[1]:
        raise ValueError(f"non-increasing order, previous: {numbers[0]}, current: {numbers[1]}")
    return numbers[0], numbers[-1]


def count_indexes(text: str, completions: int) -> int:
    return sum(last - first + 1 for first, last in parse_index_intervals(text, completions))


# =======================================================================================
# Validation: update
# =======================================================================================

def validate_update(new: dict, old: dict) -> list[Cause]:
    """ValidateJobSpecUpdate's immutability rules (validate(new) has run already)."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    causes = _validate_completions_update(spec, old_spec)
    causes += v.validate_immutable(spec.get("selector"), old_spec.get("selector"), "spec.selector",
                                   "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")
    causes += _validate_template_update(spec, old_spec, old)
    for key, definition in (("completionMode", None), ("podFailurePolicy", "io.k8s.api.batch.v1.PodFailurePolicy"),
                            ("backoffLimitPerIndex", None), ("managedBy", None),
                            ("successPolicy", "io.k8s.api.batch.v1.SuccessPolicy")):
        causes += v.validate_immutable(spec.get(key), old_spec.get(key), f"spec.{key}", definition)
    return causes


def _validate_completions_update(spec: dict, old_spec: dict) -> list[Cause]:
    """completions is immutable, except that an Indexed job may be scaled ("elastic") by
    changing completions and parallelism together, keeping them equal."""
    new_value, old_value = spec.get("completions"), old_spec.get("completions")
    if spec.get("completionMode") != "Indexed":
        return v.validate_immutable(new_value, old_value, "spec.completions")
    if new_value == old_value or new_value is None:
        return []
    if new_value != spec.get("parallelism"):
        return [invalid("spec.completions", new_value, "can only be modified in tandem with spec.parallelism")]
    return []


def _validate_template_update(spec: dict, old_spec: dict, old: dict) -> list[Cause]:
    """The template is immutable, except its scheduling directives (node affinity, node
    selector, tolerations, labels, annotations, scheduling gates) while the job is suspended
    and has never started."""
    template = spec.get("template") or {}
    old_template = old_spec.get("template") or {}
    suspended = bool(old_spec.get("suspend"))
    never_started = not (old.get("status") or {}).get("startTime")
    if suspended and never_started:
        old_template = copy.deepcopy(old_template)
        new_pod, old_pod = template.get("spec") or {}, old_template.setdefault("spec", {})
        new_affinity, old_affinity = new_pod.get("affinity"), old_pod.get("affinity")
        if new_affinity is None and old_affinity is not None:
            # Clearing affinity is allowed if node affinity was all it had.
            old_affinity.pop("nodeAffinity", None)
            if all(value is None for value in old_affinity.values()):
                old_pod.pop("affinity", None)
        elif new_affinity is not None and old_affinity is None:
            old_pod["affinity"] = {"nodeAffinity": new_affinity.get("nodeAffinity")}
        elif new_affinity is not None:
            old_affinity["nodeAffinity"] = new_affinity.get("nodeAffinity")
        for key in ("nodeSelector", "tolerations", "schedulingGates"):
            _copy_key(new_pod, old_pod, key)
        old_meta = old_template.setdefault("metadata", {})
        for key in ("labels", "annotations"):
            _copy_key(template.get("metadata") or {}, old_meta, key)
    return v.validate_immutable(template, old_template, "spec.template", "io.k8s.api.core.v1.PodTemplateSpec")


def _copy_key(source: dict, target: dict, key: str) -> None:
    if key in source:
        target[key] = copy.deepcopy(source[key])
    else:
        target.pop(key, None)


# =======================================================================================
# Validation: /status
# =======================================================================================

def _condition_true(job: dict, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def _is_finished(job: dict) -> bool:
    return _condition_true(job, "Complete") or _condition_true(job, "Failed")


def validate_status_update(new: dict, old: dict) -> list[Cause]:
    """ValidateJobStatusUpdate with 1.32's options (JobManagedBy on): most transition rules
    apply only when the fields they look at change, so that a status which is already off can
    still be updated in unrelated ways."""
    status, old_status = new.get("status") or {}, old.get("status") or {}
    spec = new.get("spec") or {}
    changed = {key: not schema.semantic_equal(status.get(key), old_status.get(key))
               for key in ("completedIndexes", "failedIndexes", "active", "startTime", "completionTime",
                           "uncountedTerminatedPods", "ready", "terminating")}
    flips = {kind: _condition_true(new, kind) != _condition_true(old, kind)
             for kind in ("Complete", "Failed", "FailureTarget", "SuccessCriteriaMet")}
    finished_changed = _is_finished(new) != _is_finished(old)
    is_indexed = spec.get("completionMode") == "Indexed"
    causes = _validate_status_fields(new, {
        "completed_indexes": changed["completedIndexes"],
        "failed_indexes": changed["failedIndexes"],
        "completed_indexes_non_indexed": changed["completedIndexes"],
        "failed_indexes_no_per_index": changed["failedIndexes"],
        "overlap": changed["failedIndexes"] or changed["completedIndexes"],
        "failed_without_target": flips["Failed"] or changed["failedIndexes"],
        "complete_without_criteria": flips["Complete"] or flips["SuccessCriteriaMet"],
        "finished_with_active": finished_changed or changed["active"],
        "finished_without_start": finished_changed or changed["startTime"],
        "finished_with_uncounted": finished_changed or changed["uncountedTerminatedPods"],
        "completion_before_start": changed["startTime"] or changed["completionTime"],
        "not_complete_with_completion_time": flips["Complete"] or changed["completionTime"],
        "complete_without_completion_time": flips["Complete"] or changed["completionTime"],
        "complete_and_failed": flips["Complete"] or flips["Failed"],
        "complete_and_failure_target": flips["Complete"] or flips["FailureTarget"],
        "ready_above_active": changed["ready"] or changed["active"],
        "finished_with_terminating": finished_changed or changed["terminating"],
    })
    for kind in ("Failed", "Complete", "FailureTarget"):
        if _condition_true(old, kind) and not _condition_true(new, kind):
            causes.append(v.invalid_no_value("status.conditions", f"cannot disable the terminal {kind}=True condition"))
    if _int(status.get("failed")) < _int(old_status.get("failed")):
        causes.append(invalid("status.failed", _int(status.get("failed")), "cannot decrease the failed counter"))
    # An elastic Indexed job scaled down may lose succeeded pods.
    may_decrease = is_indexed and spec.get("completions") == spec.get("parallelism")
    if not may_decrease and _int(status.get("succeeded")) < _int(old_status.get("succeeded")):
        causes.append(invalid("status.succeeded", _int(status.get("succeeded")), "cannot decrease the succeeded counter"))
    new_completion, old_completion = status.get("completionTime"), old_status.get("completionTime")
    if new_completion and old_completion and not _same_time(new_completion, old_completion):
        causes.append(invalid("status.completionTime", new_completion, "completionTime cannot be mutated"))
    old_start = old_status.get("startTime")
    if changed["startTime"] and old_start and not _same_time(old_start, status.get("startTime")) \
            and not spec.get("suspend"):
        causes.append(required("status.startTime", "startTime cannot be removed for unsuspended job"))
    if _condition_true(old, "SuccessCriteriaMet") and not _condition_true(new, "SuccessCriteriaMet"):
        causes.append(v.invalid_no_value("status.conditions", "cannot disable the SuccessCriteriaMet=True condition"))
    if _condition_true(old, "Complete") and not _condition_true(old, "SuccessCriteriaMet") \
            and _condition_true(new, "SuccessCriteriaMet"):
        causes.append(v.invalid_no_value("status.conditions",
                                         "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions"))
    return causes


def _same_time(a: Any, b: Any) -> bool:
    if not a or not b:
        return not a and not b
    ta, tb = formats.parse_time(a), formats.parse_time(b)
    return ta == tb if ta and tb else a == b


def _validate_status_fields(job: dict, rules: dict[str, bool]) -> list[Cause]:
    """validateJobStatus: counters, then each enabled rule."""
    status, spec = job.get("status") or {}, job.get("spec") or {}
    path = "status"
    causes: list[Cause] = []
    for key in ("active", "succeeded", "failed", "ready", "terminating"):
        if status.get(key) is not None:
            causes += v.validate_nonnegative(status[key], f"{path}.{key}")
    uncounted = status.get("uncountedTerminatedPods") or {}
    seen: set[str] = set()
    for key in ("succeeded", "failed"):
        for i, uid in enumerate(uncounted.get(key) or []):
            item = f"{path}.uncountedTerminatedPods.{key}[{i}]"
            if not uid:
                causes.append(invalid(item, uid, "must not be empty"))
            elif uid in seen:
                causes.append(duplicate(item, uid))
            else:
                seen.add(uid)
    complete, failed = _condition_true(job, "Complete"), _condition_true(job, "Failed")
    failure_target = _condition_true(job, "FailureTarget")
    criteria_met = _condition_true(job, "SuccessCriteriaMet")
    finished = complete or failed
    conditions = f"{path}.conditions"
    start, completion = status.get("startTime"), status.get("completionTime")
    if rules["complete_and_failed"] and complete and failed:
        causes.append(v.invalid_no_value(conditions, "cannot set Complete=True and Failed=true conditions"))
    if rules["complete_and_failure_target"] and complete and failure_target:
        causes.append(v.invalid_no_value(conditions, "cannot set Complete=True and FailureTarget=true conditions"))
    if rules["not_complete_with_completion_time"] and completion and not complete:
        causes.append(invalid(f"{path}.completionTime", completion,
                              "cannot set completionTime when there is no Complete=True condition"))
    if rules["complete_without_completion_time"] and not completion and complete:
        causes.append(required(f"{path}.completionTime", "completionTime is required for Complete jobs"))
    if rules["completion_before_start"] and start and completion:
        ts, tc = formats.parse_time(start), formats.parse_time(completion)
        if ts and tc and tc < ts:
            causes.append(invalid(f"{path}.completionTime", completion, "completionTime cannot be set before startTime"))
    if rules["failed_without_target"] and failed and not failure_target:
        causes.append(v.invalid_no_value(conditions,
                                         "cannot set Failed=True condition without the FailureTarget=true condition"))
    if rules["complete_without_criteria"] and complete and not criteria_met:
        causes.append(v.invalid_no_value(conditions,
                                         "cannot set Complete=True condition without the SuccessCriteriaMet=true condition"))
    active = _int(status.get("active"))
    if rules["finished_with_active"] and active > 0 and finished:
        causes.append(invalid(f"{path}.active", active, "active>0 is invalid for finished job"))
    if rules["finished_without_start"] and not start and finished:
        causes.append(required(f"{path}.startTime", "startTime is required for finished job"))
    if rules["finished_with_uncounted"] and finished and (uncounted.get("succeeded") or uncounted.get("failed")):
        causes.append(invalid(f"{path}.uncountedTerminatedPods", uncounted,
                              "uncountedTerminatedPods needs to be empty for finished job"))
    completions = spec.get("completions")
    completed_indexes = status.get("completedIndexes") or ""
    failed_indexes = status.get("failedIndexes")
    if rules["completed_indexes"] and completions is not None:
        try:
            parse_index_intervals(completed_indexes, completions)
        except ValueError as exc:
            causes.append(invalid(f"{path}.completedIndexes", completed_indexes,
                                  f"error parsing completedIndexes: {exc}"))
    if rules["failed_indexes"] and completions is not None and spec.get("backoffLimitPerIndex") is not None \
            and failed_indexes is not None:
        try:
            parse_index_intervals(failed_indexes, completions)
        except ValueError as exc:
            causes.append(invalid(f"{path}.failedIndexes", failed_indexes, f"error parsing failedIndexes: {exc}"))
    is_indexed = spec.get("completionMode") == "Indexed"
    if rules["completed_indexes_non_indexed"] and completed_indexes and not is_indexed:
        causes.append(invalid(f"{path}.completedIndexes", completed_indexes,
                              "cannot set non-empty completedIndexes when non-indexed completion mode"))
    if rules["failed_indexes_no_per_index"] and spec.get("backoffLimitPerIndex") is None and failed_indexes is not None:
        causes.append(invalid(f"{path}.failedIndexes", failed_indexes,
                              "cannot set non-null failedIndexes when backoffLimitPerIndex is null"))
    if rules["overlap"] and completions is not None and failed_indexes:
        overlap = _first_overlap(completed_indexes, failed_indexes, completions)
        if overlap is not None:
            causes.append(invalid(f"{path}.failedIndexes", failed_indexes,
                                  f"failedIndexes and completedIndexes overlap at index: {overlap}"))
    terminating = status.get("terminating")
    if rules["finished_with_terminating"] and terminating and terminating > 0 and finished:
        causes.append(invalid(f"{path}.terminating", terminating, "terminating>0 is invalid for finished job"))
    ready = status.get("ready")
    if rules["ready_above_active"] and ready is not None and ready > active:
        causes.append(invalid(f"{path}.ready", ready, "cannot set more ready pods than active"))
    if criteria_met and failed:
        causes.append(v.invalid_no_value(conditions, "cannot set SuccessCriteriaMet=True and Failed=true conditions"))
    if criteria_met and failure_target:
        causes.append(v.invalid_no_value(conditions,
                                         "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions"))
    if spec.get("successPolicy") is not None and not criteria_met and complete:
        causes.append(v.invalid_no_value(conditions,
                                         "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True"))
    return causes


def _first_overlap(completed: str, failed: str, completions: int) -> int | None:
    """The first index in both lists (malformed intervals are skipped: the format checks
    report them)."""
    def intervals(text: str) -> list[tuple[int, int]]:
        out = []
        for piece in text.split(",") if text else []:
            try:
                out.append(_parse_interval(piece, completions))
            except ValueError:
                continue
        return out

    for cx, cy in intervals(completed):
        for fx, fy in intervals(failed):
            if cx <= fy and fx <= cy:
                return max(cx, fx)
    return None


# =======================================================================================
# Field selectors, dashboard columns, the Table
# =======================================================================================

field_getters = {
    # kube's Job field selector: the succeeded count, as a decimal string.
    "status.successful": lambda obj: str(_int((obj.get("status") or {}).get("succeeded"))),
}


def phase(obj: dict) -> str:
    """The STATUS kubectl 1.32 prints: the first that applies of Complete, Failed,
    Terminating (being deleted), Suspended, FailureTarget, SuccessCriteriaMet, else Running."""
    def has(kind: str) -> bool:
        # hasJobCondition: the first condition of that type decides.
        for condition in (obj.get("status") or {}).get("conditions") or []:
            if condition.get("type") == kind:
                return condition.get("status") == "True"
        return False

    if has("Complete"):
        return "Complete"
    if has("Failed"):
        return "Failed"
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    for kind in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if has(kind):
            return kind
    return "Running"


def typed_columns(obj: dict) -> dict:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return {
        "completions": spec.get("completions"),
        "parallelism": spec.get("parallelism"),
        "succeeded": status.get("succeeded"),
        "failed": status.get("failed"),
        "active": status.get("active"),
        "ready": status.get("ready"),
        "suspend": bool(spec.get("suspend")),
        "completion_mode": spec.get("completionMode") or "NonIndexed",
        "start_time": formats.parse_time(status.get("startTime")),
        "completion_time": formats.parse_time(status.get("completionTime")),
        "phase": phase(obj),
    }


def completions_text(obj: dict) -> str:
    """"succeeded/completions"; a job without completions needs one success ("0/1"), and
    says how many run at once when that is more than one ("0/1 of 3")."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    succeeded = _int(status.get("succeeded"))
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = _int(spec.get("parallelism"))
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def duration_bounds(obj: dict) -> tuple:
    """(startTime, completionTime) as datetimes (None when unset): what the duration needs."""
    status = obj.get("status") or {}
    return formats.parse_time(status.get("startTime")), formats.parse_time(status.get("completionTime"))


def duration_at(bounds: tuple, now: datetime) -> str:
    start, end = bounds
    if start is None:
        return ""
    return formats.human_duration(((end or now) - start).total_seconds())


def duration_text(obj: dict, now: datetime) -> str:
    """startTime to completionTime, or to now while running; "" before the job starts."""
    return duration_at(duration_bounds(obj), now)


def _containers(obj: dict) -> list[dict]:
    return (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []


columns = (
    Column("Status", "string", lambda obj, now: phase(obj), description="Status of the job."),
    Column("Completions", "string", lambda obj, now: completions_text(obj),
           description="The number of pods which reached phase Succeeded. The value increases "
                       "monotonically for a given spec. However, it may decrease in reaction to scale "
                       "down of elastic indexed jobs."),
    Column("Duration", "string", duration_text, description="Time required to complete the job.",
           freeze=duration_bounds, at=duration_at),
    Column("Containers", "string", lambda obj, now: ",".join(c.get("name") or "" for c in _containers(obj)),
           description="Names of each container in the template.", priority=1),
    Column("Images", "string", lambda obj, now: ",".join(c.get("image") or "" for c in _containers(obj)),
           description="Images referenced by each container in the template.", priority=1),
    Column("Selector", "string", lambda obj, now: selectors.format_label_selector((obj.get("spec") or {}).get("selector")),
           description="A label query over pods that should match the pod count. Normally, the system "
                       "sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/"
                       "working-with-objects/labels/#label-selectors", priority=1),
)

"""Job (batch/v1) strategy: defaults, selector generation, validation on create, update and
/status, columns (batch/strategy.py).

Plain functions on dicts: no database, no Django settings.
"""
from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

import pytest

from dashboard.batch import strategy as jobs
from dashboard.kube.errors import ApiError
from rule_helpers import NOW, UID, created, fields, full_job, job, texts


def test_job_defaults():
    obj = job()
    jobs.default(obj)
    spec = obj["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["completionMode"] == "NonIndexed" and spec["suspend"] is False
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed" and "manualSelector" not in spec
    pod = spec["template"]["spec"]
    assert (pod["dnsPolicy"], pod["schedulerName"], pod["securityContext"], pod["terminationGracePeriodSeconds"]) \
        == ("ClusterFirst", "default-scheduler", {}, 30)
    container = pod["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert (container["terminationMessagePath"], container["terminationMessagePolicy"]) == ("/dev/termination-log", "File")
    assert container["resources"] == {}
    before = copy.deepcopy(obj)
    jobs.default(obj)
    assert obj == before                                          # idempotent (runs on every update)


def test_job_default_variants():
    obj = job(completions=4)
    jobs.default(obj)
    assert (obj["spec"]["completions"], obj["spec"]["parallelism"]) == (4, 1)
    obj = job(parallelism=3)
    jobs.default(obj)
    assert "completions" not in obj["spec"] and obj["spec"]["parallelism"] == 3
    obj = job(backoffLimitPerIndex=1, completionMode="Indexed", completions=2)
    jobs.default(obj)
    assert obj["spec"]["backoffLimit"] == 2 ** 31 - 1
    obj = full_job()
    jobs.default(obj)
    spec = obj["spec"]
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["podFailurePolicy"]["rules"][2]["onPodConditions"][0]["status"] == "True"
    pod = spec["template"]["spec"]
    assert pod["volumes"][0]["emptyDir"] == {} and pod["volumes"][1]["configMap"]["defaultMode"] == 420
    assert pod["serviceAccount"] == "runner"
    main = pod["containers"][1 - 1]
    assert pod["initContainers"][0]["imagePullPolicy"] == "Always"          # no tag: latest
    assert main["ports"][0]["protocol"] == "TCP"
    assert main["env"][1]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert main["readinessProbe"] == {"httpGet": {"port": "metrics", "path": "/", "scheme": "HTTP"},
                                      "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                                      "failureThreshold": 3}
    assert main["resources"] == {"requests": {"cpu": "500m", "memory": "256Mi"},
                                 "limits": {"cpu": "1", "memory": "1Gi", "example.com/gpu": "1"}}


def test_job_bad_quantity_is_400():
    obj = job()
    obj["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "1K"}}
    with pytest.raises(ApiError) as exc:
        jobs.default(obj)
    assert exc.value.code == 400
    assert exc.value.message == ('Job in version "v1" cannot be handled as a Job: '
                                 "unable to parse quantity's suffix")


def test_job_prepare_for_create():
    obj = created(job())
    spec = obj["spec"]
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}}
    labels = {"batch.kubernetes.io/controller-uid": UID, "batch.kubernetes.io/job-name": "pi",
              "controller-uid": UID, "job-name": "pi"}
    assert spec["template"]["metadata"]["labels"] == labels
    assert obj["metadata"]["labels"] == labels                 # a Job without labels shows its template's
    assert obj["status"] == {}
    assert jobs.validate(obj) == []
    own = created(job(**{}))
    own["metadata"]["labels"] = {"team": "a"}
    assert created(dict(job(), metadata={"name": "pi", "namespace": "d", "labels": {"team": "a"}}))["metadata"][
        "labels"] == {"team": "a"}
    manual = job(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    manual["spec"]["template"]["metadata"] = {"labels": {"app": "x"}}
    manual = created(manual)
    assert manual["spec"]["selector"] == {"matchLabels": {"app": "x"}}
    assert jobs.validate(manual) == []


def test_full_featured_job_is_valid():
    obj = created(full_job())
    assert jobs.validate(obj) == []
    assert jobs.validate_update(copy.deepcopy(obj), obj) == []


def test_job_template_required_parts():
    obj = created(job(template={}))
    assert texts(jobs.validate(obj)) == [
        "spec.template.spec.containers: Required value",
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']
    obj = created(job())
    obj["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    assert texts(jobs.validate(obj)) == [
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']
    obj["spec"]["template"]["spec"]["restartPolicy"] = "Sometimes"
    assert texts(jobs.validate(obj)) == [
        'spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
        '"OnFailure", "Never"',
        'spec.template.spec.restartPolicy: Unsupported value: "Sometimes": supported values: "OnFailure", "Never"']


def test_job_numbers():
    obj = created(job(parallelism=-1, completions=-1, backoffLimit=-1, activeDeadlineSeconds=-1,
                      ttlSecondsAfterFinished=-1))
    assert texts(jobs.validate(obj)) == [
        "spec.parallelism: Invalid value: -1: must be greater than or equal to 0",
        "spec.completions: Invalid value: -1: must be greater than or equal to 0",
        "spec.activeDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
        "spec.backoffLimit: Invalid value: -1: must be greater than or equal to 0",
        "spec.ttlSecondsAfterFinished: Invalid value: -1: must be greater than or equal to 0"]


def test_job_indexed_rules():
    obj = created(job(completionMode="Indexed", parallelism=100_001))
    assert texts(jobs.validate(obj)) == [
        "spec.completions: Required value: when completion mode is Indexed",
        "spec.parallelism: Invalid value: 100001: must be less than or equal to 100000 when completion mode is Indexed"]
    obj = created(job(completionMode="Sideways"))
    assert texts(jobs.validate(obj)) == [
        'spec.completionMode: Unsupported value: "Sideways": supported values: "NonIndexed", "Indexed"']
    obj = created(job(backoffLimitPerIndex=1, maxFailedIndexes=1))
    assert texts(jobs.validate(obj)) == [
        "spec.backoffLimitPerIndex: Invalid value: 1: requires indexed completion mode",
        "spec.maxFailedIndexes: Invalid value: 1: requires indexed completion mode"]
    obj = created(job(completionMode="Indexed", completions=2, maxFailedIndexes=3))
    assert texts(jobs.validate(obj)) == [
        "spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified",
        "spec.maxFailedIndexes: Invalid value: 3: must be less than or equal to completions"]
    long_name = created(job("a" * 62, completionMode="Indexed", completions=10))
    assert texts(jobs.validate(long_name)) == [
        f'metadata.name: Invalid value: "{"a" * 62}": will not able to create pod with invalid DNS label: '
        f'{"a" * 62}-9']


def test_job_pod_failure_policy_rules():
    base = {"rules": [
        {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3, 0, 3]}},
        {"action": "", "onExitCodes": {"operator": "Maybe", "values": [], "containerName": "nope"}},
        {"action": "Panic", "onExitCodes": {"operator": "In", "values": [1]}, "onPodConditions": [{"type": "X"}]},
        {"action": "Ignore"},
        {"action": "Count", "onPodConditions": [{"type": "bad/type/x", "status": "Maybe"}]}]}
    obj = created(job(podFailurePolicy=base))
    obj["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    p = "spec.podFailurePolicy.rules"
    got = texts(jobs.validate(obj))
    assert got[:12] == [
        f'{p}[0].action: Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set',
        f"{p}[0].onExitCodes.values[1]: Invalid value: 0: must not be 0 for the In operator",
        f"{p}[0].onExitCodes.values[2]: Duplicate value: 3",
        f"{p}[0].onExitCodes.values: Invalid value: [3,0,3]: must be ordered",
        f'{p}[1].action: Required value: valid values: ["Count" "FailIndex" "FailJob" "Ignore"]',
        f'{p}[1].onExitCodes.operator: Unsupported value: "Maybe": supported values: "In", "NotIn"',
        f'{p}[1].onExitCodes.containerName: Invalid value: "nope": must be one of the container or initContainer '
        "names in the pod template",
        f"{p}[1].onExitCodes.values: Invalid value: []: at least one value is required",
        f'{p}[2].action: Unsupported value: "Panic": supported values: "Count", "FailIndex", "FailJob", "Ignore"',
        f"{p}[2]: Invalid value: specifying both OnExitCodes and OnPodConditions is not supported",
        f"{p}[3]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
        f'{p}[4].onPodConditions[0].type: Invalid value: "bad/type/x": a qualified name must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
        "'MyName' or 'my.name' or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?"
        "[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    assert got[12:] == [
        f'{p}[4].onPodConditions[0].status: Unsupported value: "Maybe": supported values: "False", "True", "Unknown"',
        'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported when '
        "podFailurePolicy is specified"]
    many = created(job(podFailurePolicy={"rules": [{"action": "Ignore", "onExitCodes": {"operator": "NotIn",
                                                                                          "values": list(range(256))}}] * 21}))
    got = texts(jobs.validate(many))
    assert got[0] == "spec.podFailurePolicy.rules: Too many: 21: must have at most 20 items"
    assert got[1] == "spec.podFailurePolicy.rules[0].onExitCodes.values: Too many: 256: must have at most 255 items"


def test_job_pod_replacement_and_success_policy():
    obj = created(job(podFailurePolicy={"rules": [{"action": "Ignore", "onPodConditions": [{"type": "A"}]}]},
                      podReplacementPolicy="TerminatingOrFailed"))
    assert texts(jobs.validate(obj)) == [
        'spec.podReplacementPolicy: Unsupported value: "TerminatingOrFailed": supported values: "Failed"']
    obj = created(job(podReplacementPolicy="Whenever"))
    assert texts(jobs.validate(obj)) == [
        'spec.podReplacementPolicy: Unsupported value: "Whenever": supported values: "Failed", "TerminatingOrFailed"']
    obj = created(job(successPolicy={"rules": [{"succeededCount": 1}]}))
    assert fields(jobs.validate(obj)) == ["spec.successPolicy"]
    obj = created(job(completionMode="Indexed", completions=3, successPolicy={"rules": [
        {}, {"succeededIndexes": "2-1"}, {"succeededIndexes": "0,1", "succeededCount": 3}]}))
    assert texts(jobs.validate(obj)) == [
        "spec.successPolicy.rules[0]: Required value: at least one of succeededCount or succeededIndexes must be specified",
        'spec.successPolicy.rules[1].succeededIndexes: Invalid value: "2-1": error parsing succeededIndexes: '
        "non-increasing order, previous: 2, current: 1",
        "spec.successPolicy.rules[2].succeededCount: Invalid value: 3: must be less than or equal to 2 "
        "(the number of indexes in the specified succeededIndexes field)"]


def test_job_selector_rules():
    obj = created(job())
    obj["spec"]["template"]["metadata"]["labels"]["controller-uid"] = "someone-else"
    assert texts(jobs.validate(obj))[0].startswith(
        "spec.template.metadata.labels[controller-uid]: Invalid value: ")
    assert texts(jobs.validate(obj))[0].endswith(f": must be '{UID}'")
    manual = created(job(manualSelector=True, selector={"matchLabels": {"app": "x"}}))
    assert texts(jobs.validate(manual)) == [
        "spec.template.metadata.labels: Invalid value: {}: `selector` does not match template `labels`"]
    no_selector = created(job(manualSelector=True))
    assert texts(jobs.validate(no_selector)) == ["spec.selector: Required value"]
    foreign = created(job(selector={"matchLabels": {"app": "x"}}))
    assert "spec.selector" in fields(jobs.validate(foreign))
    # Jobs from before 1.27 carry only the legacy labels and select on them: still valid
    # when the stored object had no prefixed labels (validate_update's case).
    legacy = created(job(selector={"matchLabels": {"controller-uid": UID}}))
    for key in ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name"):
        del legacy["spec"]["template"]["metadata"]["labels"][key]
    legacy["spec"]["selector"] = {"matchLabels": {"controller-uid": UID}}
    assert jobs.validate(legacy, require_prefixed_labels=False) == []
    assert fields(jobs.validate(legacy)) == ["spec.template.metadata.labels[batch.kubernetes.io/controller-uid]",
                                             "spec.template.metadata.labels[batch.kubernetes.io/job-name]"]


def test_job_update_immutability():
    old = created(job())
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    new["spec"]["completions"] = 2
    new["spec"]["completionMode"] = "Indexed"
    new["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": UID, "x": "y"}}
    got = jobs.validate_update(new, old)
    assert fields(got) == ["spec.completions", "spec.selector", "spec.template", "spec.completionMode"]
    assert got[0].text == "spec.completions: Invalid value: 2: can only be modified in tandem with spec.parallelism"
    assert got[3].text == 'spec.completionMode: Invalid value: "Indexed": field is immutable'
    for key, value in (("podFailurePolicy", {"rules": []}), ("backoffLimitPerIndex", 2),
                       ("managedBy", "example.com/ctl"), ("successPolicy", {"rules": [{"succeededCount": 1}]})):
        changed = copy.deepcopy(old)
        changed["spec"][key] = value
        assert fields(jobs.validate_update(changed, old)) == [f"spec.{key}"], key
    # Mutable: parallelism, suspend, backoffLimit, activeDeadlineSeconds, ttl, labels of the Job itself.
    fine = copy.deepcopy(old)
    fine["spec"].update(parallelism=5, suspend=True, backoffLimit=1, activeDeadlineSeconds=9, ttlSecondsAfterFinished=1)
    assert jobs.validate_update(fine, old) == []


def test_job_elastic_indexed_completions():
    old = created(job(completionMode="Indexed", completions=3, parallelism=3))
    new = copy.deepcopy(old)
    new["spec"].update(completions=5, parallelism=5)
    assert jobs.validate_update(new, old) == []
    new["spec"]["parallelism"] = 4
    assert fields(jobs.validate_update(new, old)) == ["spec.completions"]


def test_job_suspended_scheduling_directives():
    old = created(job(suspend=True))
    new = copy.deepcopy(old)
    pod = new["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"zone": "a"}
    pod["tolerations"] = [{"key": "k", "operator": "Exists"}]
    pod["schedulingGates"] = [{"name": "example.com/wait"}]
    pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]}]}}}
    new["spec"]["template"]["metadata"]["annotations"] = {"example.com/x": "y"}
    assert jobs.validate_update(new, old) == []
    pod["affinity"]["podAffinity"] = {}
    pod["affinity"]["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname"}]}
    assert fields(jobs.validate_update(new, old)) == ["spec.template"]
    started = copy.deepcopy(old)
    started["status"] = {"startTime": "2026-11-22T00:00:00Z"}
    newer = copy.deepcopy(old)
    newer["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    assert fields(jobs.validate_update(newer, started)) == ["spec.template"]
    running = created(job())
    moved = copy.deepcopy(running)
    moved["spec"]["template"]["spec"]["nodeSelector"] = {"zone": "a"}
    assert fields(jobs.validate_update(moved, running)) == ["spec.template"]


# /status ------------------------------------------------------------------------------

def status_pair(spec=None, old_status=None, **status):
    old = created(job(**(spec or {})))
    old["status"] = old_status or {}
    new = copy.deepcopy(old)
    new["status"] = status
    return new, old


def condition(kind, status="True"):
    return {"type": kind, "status": status, "lastProbeTime": "2026-11-22T00:00:00Z",
            "lastTransitionTime": "2026-11-22T00:00:00Z"}


def test_job_status_valid_progression():
    start = "2026-11-22T00:00:00Z"
    new, old = status_pair(active=1, ready=1, startTime=start)
    assert jobs.validate_status_update(new, old) == []
    done = {"succeeded": 1, "startTime": start, "completionTime": "2026-11-22T00:01:00Z",
            "conditions": [condition("SuccessCriteriaMet"), condition("Complete")]}
    new, old = status_pair(old_status={"active": 1, "startTime": start}, **done)
    assert jobs.validate_status_update(new, old) == []
    indexed = {"completionMode": "Indexed", "completions": 6, "parallelism": 2, "backoffLimitPerIndex": 1}
    new, old = status_pair(indexed, completedIndexes="0,2-4", failedIndexes="1", failed=1)
    assert jobs.validate_status_update(new, old) == []


def test_job_status_rules():
    new, old = status_pair(active=-1, succeeded=-2, ready=3)
    assert texts(jobs.validate_status_update(new, old)) == [
        "status.active: Invalid value: -1: must be greater than or equal to 0",
        "status.succeeded: Invalid value: -2: must be greater than or equal to 0",
        "status.ready: Invalid value: 3: cannot set more ready pods than active",
        "status.succeeded: Invalid value: -2: cannot decrease the succeeded counter"]
    new, old = status_pair(old_status={"failed": 2, "succeeded": 1}, failed=1)
    assert texts(jobs.validate_status_update(new, old)) == [
        "status.failed: Invalid value: 1: cannot decrease the failed counter",
        "status.succeeded: Invalid value: 0: cannot decrease the succeeded counter"]
    new, old = status_pair(conditions=[condition("Complete")], active=1)
    assert texts(jobs.validate_status_update(new, old)) == [
        "status.completionTime: Required value: completionTime is required for Complete jobs",
        "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true "
        "condition",
        "status.active: Invalid value: 1: active>0 is invalid for finished job",
        "status.startTime: Required value: startTime is required for finished job"]
    new, old = status_pair(conditions=[condition("Failed")], startTime="2026-11-22T00:00:00Z")
    assert texts(jobs.validate_status_update(new, old)) == [
        "status.conditions: Invalid value: cannot set Failed=True condition without the FailureTarget=true condition"]
    terminal = {"conditions": [condition("FailureTarget"), condition("Failed")], "startTime": "2026-11-22T00:00:00Z"}
    new, old = status_pair(old_status=terminal, startTime="2026-11-22T00:00:00Z")
    assert texts(jobs.validate_status_update(new, old)) == [
        "status.conditions: Invalid value: cannot disable the terminal Failed=True condition",
        "status.conditions: Invalid value: cannot disable the terminal FailureTarget=True condition"]
    new, old = status_pair(startTime="2026-11-22T00:01:00Z", completionTime="2026-11-22T00:00:00Z")
    assert texts(jobs.validate_status_update(new, old)) == [
        'status.completionTime: Invalid value: "2026-11-22T00:00:00Z": cannot set completionTime when there is '
        "no Complete=True condition",
        'status.completionTime: Invalid value: "2026-11-22T00:00:00Z": completionTime cannot be set before startTime']


def test_job_status_indexes():
    indexed = {"completionMode": "Indexed", "completions": 5, "parallelism": 5, "backoffLimitPerIndex": 1}
    new, old = status_pair(indexed, completedIndexes="1,x", failedIndexes="3-2")
    assert texts(jobs.validate_status_update(new, old)) == [
        'status.completedIndexes: Invalid value: "1,x": error parsing completedIndexes: cannot convert string '
        'to integer for index: "x"',
        'status.failedIndexes: Invalid value: "3-2": error parsing failedIndexes: non-increasing order, '
        "previous: 3, current: 2"]
    new, old = status_pair(indexed, completedIndexes="0-2,7", failedIndexes="2")
    assert texts(jobs.validate_status_update(new, old)) == [
        'status.completedIndexes: Invalid value: "0-2,7": error parsing completedIndexes: too large index: "7"',
        'status.failedIndexes: Invalid value: "2": failedIndexes and completedIndexes overlap at index: 2']
    new, old = status_pair(completedIndexes="0", failedIndexes="0")
    assert texts(jobs.validate_status_update(new, old)) == [
        'status.completedIndexes: Invalid value: "0": cannot set non-empty completedIndexes when non-indexed '
        "completion mode",
        'status.failedIndexes: Invalid value: "0": cannot set non-null failedIndexes when backoffLimitPerIndex is null',
        'status.failedIndexes: Invalid value: "0": failedIndexes and completedIndexes overlap at index: 0']
    assert jobs.parse_index_intervals("1,3-5", 6) == [(1, 1), (3, 5)]
    assert jobs.count_indexes("0-2,4", 5) == 4
    with pytest.raises(ValueError, match="at most two parts"):
        jobs.parse_index_intervals("1-2-3", 5)
    with pytest.raises(ValueError, match="non-increasing order, previous: 3, current: 3"):
        jobs.parse_index_intervals("1-3,3", 5)


def test_job_status_only_checks_changed_fields():
    # An old status that already breaks a rule may still be updated in unrelated ways.
    bad = {"conditions": [condition("Complete")], "active": 1}
    new, old = status_pair(old_status=bad, conditions=[condition("Complete")], active=1, ready=0)
    assert jobs.validate_status_update(new, old) == []


# Columns and selectors ----------------------------------------------------------------

def test_job_field_getter_and_typed_columns():
    obj = created(job(completions=3, parallelism=2))
    assert jobs.field_getters["status.successful"](obj) == "0"
    obj["status"] = {"succeeded": 2, "active": 1, "ready": 1, "failed": 0,
                     "startTime": "2026-11-22T11:00:00Z"}
    assert jobs.field_getters["status.successful"](obj) == "2"
    assert jobs.typed_columns(obj) == {
        "completions": 3, "parallelism": 2, "succeeded": 2, "failed": 0, "active": 1, "ready": 1,
        "suspend": False, "completion_mode": "NonIndexed",
        "start_time": datetime(2026, 11, 22, 11, tzinfo=timezone.utc), "completion_time": None, "phase": "Running"}


@pytest.mark.parametrize("conditions,deleting,expected", [
    ([], False, "Running"),
    ([condition("Complete")], True, "Complete"),
    ([condition("Failed")], False, "Failed"),
    ([condition("Suspended")], True, "Terminating"),
    ([condition("Suspended")], False, "Suspended"),
    ([condition("Suspended", "False"), condition("FailureTarget")], False, "FailureTarget"),
    ([condition("SuccessCriteriaMet")], False, "SuccessCriteriaMet"),
    ([condition("Complete", "False"), condition("Complete")], False, "Running"),   # first of a type decides
])
def test_job_phase(conditions, deleting, expected):
    obj = created(job())
    obj["status"] = {"conditions": conditions}
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-11-22T00:00:00Z"
    assert jobs.phase(obj) == expected


def test_job_table_cells():
    names = [c.name for c in jobs.columns]
    assert names == ["Status", "Completions", "Duration", "Containers", "Images", "Selector"]
    assert [c.priority for c in jobs.columns] == [0, 0, 0, 1, 1, 1]
    cell = {c.name: c.cell for c in jobs.columns}
    obj = created(full_job())
    obj["status"] = {"succeeded": 2, "startTime": "2026-11-22T11:58:30Z"}
    assert cell["Completions"](obj, NOW) == "2/5"
    assert cell["Duration"](obj, NOW) == "90s"
    obj["status"]["completionTime"] = "2026-11-22T12:30:30Z"
    assert cell["Duration"](obj, NOW) == "32m"
    assert cell["Containers"](obj, NOW) == "main"
    assert cell["Images"](obj, NOW) == "registry.example.com/team/app:2.1"
    assert cell["Selector"](obj, NOW) == f"batch.kubernetes.io/controller-uid={UID}"
    parallel = created(job(parallelism=3))
    assert cell["Completions"](parallel, NOW) == "0/1 of 3"
    assert cell["Duration"](parallel, NOW) == ""
    assert cell["Status"](parallel, NOW) == "Running"
    two = job()
    two["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "nginx"})
    assert cell["Containers"](two, NOW) == "main,side" and cell["Images"](two, NOW) == "busybox:1.36,nginx"


def test_job_time_normalization():
    obj = created(job())
    obj["status"] = {"startTime": "2026-11-22T13:00:00.75+01:00",
                     "conditions": [{"type": "Complete", "status": "True",
                                     "lastTransitionTime": "2026-11-22T12:00:01Z"}]}
    jobs.normalize(obj)
    assert obj["status"]["startTime"] == "2026-11-22T12:00:00Z"
    obj["status"]["completionTime"] = "yesterday"
    with pytest.raises(ApiError) as exc:
        jobs.normalize(obj)
    assert exc.value.message.startswith('Job in version "v1" cannot be handled as a Job: parsing time "yesterday"')
    assert NOW - timedelta(0) == NOW

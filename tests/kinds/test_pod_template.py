"""core/v1 pod template defaults and validation (core/pod_template.py), seen through a Job's
spec.template as kube-apiserver reports them.

Plain functions on dicts: no database, no Django settings.
"""
from __future__ import annotations

from dashboard.batch import strategy as jobs
from rule_helpers import LABEL_MSG, created, job, reasons, texts


def test_job_containers():
    obj = job()
    obj["spec"]["template"]["spec"]["containers"] = [
        {"image": "busybox"}, {"name": "Bad_Name", "image": "x"}, {"name": "dup", "image": "x"},
        {"name": "dup"}]
    causes = jobs.validate(created(obj))
    assert texts(causes) == [
        "spec.template.spec.containers[0].name: Required value",
        f'spec.template.spec.containers[1].name: Invalid value: "Bad_Name": {LABEL_MSG}',
        "spec.template.spec.containers[3].image: Required value",
        'spec.template.spec.containers[3].name: Duplicate value: "dup"']


def test_job_container_details():
    obj = job()
    obj["spec"]["template"]["spec"]["containers"][0].update(
        ports=[{"name": "web", "containerPort": 0}, {"name": "web", "containerPort": 80, "protocol": "ICMP"}],
        env=[{"name": ""}, {"name": "A=B"}, {"name": "X", "value": "v", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
             {"name": "Y", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}}, {"name": "Z", "valueFrom": {}}],
        resources={"requests": {"cpu": "2", "memory": "-1", "example.com/gpu": "1"},
                   "limits": {"cpu": "1", "foo": "1"}},
        volumeMounts=[{"name": "missing", "mountPath": "/a"}])
    causes = jobs.validate(created(obj))
    got = texts(causes)
    p = "spec.template.spec.containers[0]"
    assert f"{p}.ports[0].containerPort: Required value" in got
    assert f'{p}.ports[1].name: Duplicate value: "web"' in got
    assert f'{p}.ports[1].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"' in got
    assert f"{p}.env[0].name: Required value" in got
    assert (f'{p}.env[1].name: Invalid value: "A=B": a valid environment variable name must consist only of '
            "printable ASCII characters other than '='") in got
    assert f'{p}.env[2].valueFrom: Invalid value: "": may not be specified when `value` is not empty' in got
    assert any(t.startswith(f'{p}.env[3].valueFrom.fieldRef.fieldPath: Unsupported value: "status.phase"') for t in got)
    assert (f'{p}.env[4].valueFrom: Invalid value: "": must specify one of: `fieldRef`, `resourceFieldRef`, '
            "`configMapKeyRef` or `secretKeyRef`") in got
    assert f'{p}.resources.limits[foo]: Invalid value: "foo": must be a standard resource type or fully qualified' in got
    assert f'{p}.resources.limits[foo]: Invalid value: "foo": must be a standard resource for containers' in got
    assert f'{p}.resources.requests[memory]: Invalid value: "-1": must be greater than or equal to 0' in got
    assert f'{p}.resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1' in got
    assert f"{p}.resources.limits: Required value: Limit must be set for non overcommitable resources" in got
    assert f'{p}.volumeMounts[0].name: Not found: "missing"' in got
    assert "FieldValueNotFound" in reasons(causes)


def test_job_template_metadata_and_pod_spec():
    obj = job()
    obj["spec"]["template"]["metadata"] = {"labels": {"bad key": "v"}}
    pod = obj["spec"]["template"]["spec"]
    pod.update(dnsPolicy="Sometimes", nodeSelector={"k": "bad value!"}, activeDeadlineSeconds=0,
               tolerations=[{"operator": "Equal", "value": "x"}, {"key": "k", "operator": "Near", "effect": "Now"}],
               volumes=[{"name": "v", "secret": {}, "configMap": {"name": "c"}}, {"name": "Bad_Vol"}],
               ephemeralContainers=[{"name": "debug", "image": "busybox"}])
    got = texts(jobs.validate(created(obj)))
    assert any(t.startswith('spec.template.labels: Invalid value: "bad key"') for t in got)
    assert "spec.template.spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type" in got
    assert "spec.template.spec.volumes[0].secret.secretName: Required value" in got
    assert any(t.startswith('spec.template.spec.volumes[1].name: Invalid value: "Bad_Vol"') for t in got)
    assert ('spec.template.spec.dnsPolicy: Unsupported value: "Sometimes": supported values: '
            '"ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"') in got
    assert any(t.startswith('spec.template.spec.nodeSelector: Invalid value: "bad value!"') for t in got)
    assert ("spec.template.spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, "
            "inclusive") in got
    assert ('spec.template.spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when '
            '`key` is empty, which means "match all values and all keys"') in got
    assert ('spec.template.spec.tolerations[1].operator: Unsupported value: "Near": supported values: "Equal", '
            '"Exists"') in got
    assert ('spec.template.spec.tolerations[1].effect: Unsupported value: "Now": supported values: '
            '"NoSchedule", "PreferNoSchedule", "NoExecute"') in got
    assert "spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template" in got


def test_job_init_containers():
    obj = job()
    pod = obj["spec"]["template"]["spec"]
    pod["initContainers"] = [
        {"name": "main", "image": "x"},                                              # clashes with a container
        {"name": "probe", "image": "x", "readinessProbe": {"exec": {"command": ["true"]}}},
        {"name": "sidecar", "image": "x", "restartPolicy": "Always", "readinessProbe": {"exec": {"command": ["a"]}}},
        {"name": "odd", "image": "x", "restartPolicy": "Never"}]
    assert texts(jobs.validate(created(obj))) == [
        'spec.template.spec.initContainers[0].name: Duplicate value: "main"',
        "spec.template.spec.initContainers[1].readinessProbe: Forbidden: may not be set for init containers "
        "without restartPolicy=Always",
        'spec.template.spec.initContainers[3].restartPolicy: Unsupported value: "Never": supported values: "Always"']


def test_image_pull_policy_defaults():
    for image, policy in (("busybox", "Always"), ("busybox:latest", "Always"), ("busybox:1.36", "IfNotPresent"),
                          ("localhost:5000/app", "Always"), ("app@sha256:" + "a" * 64, "IfNotPresent"),
                          ("Bad/Name", "IfNotPresent")):
        obj = job()
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = image
        jobs.default(obj)
        assert obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == policy, image
    obj = job()
    obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Never"
    jobs.default(obj)
    assert obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Never"


def test_security_contexts():
    obj = job()
    pod = obj["spec"]["template"]["spec"]
    pod.update(hostPID=True, shareProcessNamespace=True, securityContext={
        "runAsUser": -1, "fsGroup": 2 ** 31, "supplementalGroups": [1, -5], "fsGroupChangePolicy": "Sometimes",
        "sysctls": [{"name": "net.ipv4.ip_forward", "value": "1"}, {"name": "Bad!", "value": "1"},
                    {"name": "net.ipv4.ip_forward", "value": "0"}],
        "seccompProfile": {"type": "Localhost"}, "appArmorProfile": {"type": "RuntimeDefault", "localhostProfile": "p"}})
    pod["containers"][0]["securityContext"] = {
        "runAsGroup": -2, "procMount": "Weird", "allowPrivilegeEscalation": False, "privileged": True,
        "seccompProfile": {"type": "Nope"}, "capabilities": {"add": ["CAP_SYS_ADMIN"]}}
    got = texts(jobs.validate(created(obj)))
    p, c = "spec.template.spec.securityContext", "spec.template.spec.containers[0].securityContext"
    for text in (
        f"{p}.fsGroup: Invalid value: 2147483648: must be between 0 and 2147483647, inclusive",
        f"{p}.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
        f"{p}.supplementalGroups[1]: Invalid value: -5: must be between 0 and 2147483647, inclusive",
        f"{p}.shareProcessNamespace: Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled",
        f'{p}.fsGroupChangePolicy: Unsupported value: "Sometimes": supported values: "OnRootMismatch", "Always"',
        f'{p}.sysctls[2].name: Duplicate value: "net.ipv4.ip_forward"',
        f"{p}.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost",
        f'{p}.appArmorProfile.localhostProfile: Invalid value: "p": can only be set when AppArmor type is Localhost',
        f"{c}.runAsGroup: Invalid value: -2: must be between 0 and 2147483647, inclusive",
        f'{c}.procMount: Unsupported value: "Weird": supported values: "Default", "Unmasked"',
        f"{c}: Invalid value: cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
        f"{c}: Invalid value: cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
        f'{c}.seccompProfile.type: Unsupported value: "Nope": supported values: "Localhost", "RuntimeDefault", "Unconfined"',
    ):
        assert text in got, (text, got)
    assert any(t.startswith(f'{p}.sysctls[1].name: Invalid value: "Bad!": must have at most 253 characters') for t in got)


def test_affinity_and_topology_spread():
    obj = job()
    pod = obj["spec"]["template"]["spec"]
    pod["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "zone", "operator": "In"}, {"key": "n", "operator": "Gt", "values": ["1", "2"]},
                                     {"key": "bad key", "operator": "Maybe"}],
                "matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["a"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]},
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "", "namespaces": ["Bad_NS"],
                                                                 "labelSelector": {"matchLabels": {"app": "a"}},
                                                                 "matchLabelKeys": ["app"]}],
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 101, "podAffinityTerm": {"topologyKey": "zone"}}]}}
    pod["topologySpreadConstraints"] = [
        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2},
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "nodeTaintsPolicy": "Maybe"},
        {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "Sometimes", "matchLabelKeys": ["app"]}]
    got = texts(jobs.validate(created(obj)))
    a = "spec.template.spec.affinity"
    r = f"{a}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
    t = "spec.template.spec.topologySpreadConstraints"
    for text in (
        f"{r}.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        f"{r}.matchExpressions[1].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
        f'{r}.matchExpressions[2].operator: Unsupported value: "Maybe": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"',
        f'{r}.matchFields[0].key: Unsupported value: "metadata.uid": supported values: "metadata.name"',
        f"{a}.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100",
        f"{a}.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty",
        f'{a}.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].matchLabelKeys[0]: Invalid value: "app": exists in both matchLabelKeys and labelSelector',
        f"{a}.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 101: must be in the range 1-100",
        f"{t}[0].maxSkew: Invalid value: 0: must be greater than zero",
        f"{t}[0].minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway",
        f'{t}[1].{{topologyKey, whenUnsatisfiable}}: Duplicate value: "{{zone, ScheduleAnyway}}"',
        f'{t}[1].nodeTaintsPolicy: Unsupported value: "Maybe": supported values: "Honor", "Ignore"',
        f"{t}[2].topologyKey: Required value: can not be empty",
        f'{t}[2].whenUnsatisfiable: Unsupported value: "Sometimes": supported values: "DoNotSchedule", "ScheduleAnyway"',
        f"{t}[2].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set",
    ):
        assert text in got, (text, got)
    assert any(x.startswith(f"{r}.matchExpressions[2].key: Invalid value: \"bad key\"") for x in got)
    assert any(x.startswith(f'{a}.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespace: Invalid value: "Bad_NS"') for x in got)


def test_valid_security_context_affinity_and_spread_pass():
    obj = job()
    pod = obj["spec"]["template"]["spec"]
    pod["securityContext"] = {"runAsUser": 1000, "runAsNonRoot": True, "fsGroup": 2000,
                              "seccompProfile": {"type": "RuntimeDefault"}, "sysctls": [{"name": "kernel.shm_rmid_forced", "value": "0"}]}
    pod["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                               "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}
    pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}},
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": {
            "topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "a"}}, "matchLabelKeys": ["version"]}}]}}
    pod["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                         "whenUnsatisfiable": "DoNotSchedule", "minDomains": 2,
                                         "labelSelector": {"matchLabels": {"app": "a"}}}]
    assert texts(jobs.validate(created(obj))) == []

"""Helpers shared by the rule tests (test_validation, test_formats, test_*_strategy,
test_pod_template): how causes read, kube's name-format messages, and Jobs to run through
the strategy as the store does.
"""
from __future__ import annotations

from datetime import datetime, timezone

from dashboard.batch import strategy as jobs

UID = "3f0c8e0a-5d2e-4e55-9d55-0a6a2f3d1b7c"
NOW = datetime(2026, 11, 22, 12, 0, 0, tzinfo=timezone.utc)


def texts(causes) -> list[str]:
    return [c.text for c in causes]


def fields(causes) -> list[str]:
    return [c["field"] for c in causes]


def reasons(causes) -> list[str]:
    return [c["reason"] for c in causes]


SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                 r"validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')").replace(",  or", " or")


def job(name="pi", **spec):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "busybox:1.36",
                                                           "command": ["true"]}]}},
                     **spec}}


def created(obj):
    """What the store does on create: defaults, uid, then prepare_for_create."""
    jobs.default(obj)
    obj["metadata"]["uid"] = UID
    jobs.prepare_for_create(obj)
    return obj


def full_job():
    """Indexed, per-index backoff, a pod failure policy, a container with env/ports/resources."""
    return job(
        "full", completions=5, parallelism=2, completionMode="Indexed", backoffLimitPerIndex=1,
        maxFailedIndexes=2, activeDeadlineSeconds=600, ttlSecondsAfterFinished=0,
        podFailurePolicy={"rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42, 43]}},
            {"action": "FailIndex", "onExitCodes": {"operator": "NotIn", "values": [0, 1]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "Count", "onPodConditions": [{"type": "example.com/Oom", "status": "False"}]}]},
        successPolicy={"rules": [{"succeededIndexes": "0-2,4", "succeededCount": 3}]},
        template={"metadata": {"labels": {"app": "full"}, "annotations": {"example.com/a": "b"}},
                  "spec": {"restartPolicy": "Never", "serviceAccountName": "runner",
                           "nodeSelector": {"kubernetes.io/os": "linux"},
                           "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                           "volumes": [{"name": "scratch"}, {"name": "conf", "configMap": {"name": "cfg"}}],
                           "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]}],
                           "containers": [{
                               "name": "main", "image": "registry.example.com/team/app:2.1",
                               "env": [{"name": "MODE", "value": "batch"},
                                       {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                       {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                               "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
                               "ports": [{"name": "metrics", "containerPort": 9090}],
                               "resources": {"requests": {"cpu": "0.5", "memory": "256Mi"},
                                             "limits": {"cpu": 1, "memory": "1024Mi", "example.com/gpu": 1}},
                               "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"},
                                                {"name": "conf", "mountPath": "/etc/app"}],
                               "readinessProbe": {"httpGet": {"port": "metrics"}},
                               "livenessProbe": {"exec": {"command": ["true"]}}}]}})

"""Object builders shared by the ported upstream tests (upstream's e2e fixtures, in small)."""
from __future__ import annotations

from kubernetes import client as k8s


def lease_body(name, holder="holder", labels=None, duration=30):
    return k8s.V1Lease(metadata=k8s.V1ObjectMeta(name=name, labels=labels),
                       spec=k8s.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=duration))


def job_body(name, labels=None, parallelism=1, completions=1):
    return k8s.V1Job(
        metadata=k8s.V1ObjectMeta(name=name, labels=labels),
        spec=k8s.V1JobSpec(parallelism=parallelism, completions=completions, backoff_limit=6, template=k8s.V1PodTemplateSpec(
            metadata=k8s.V1ObjectMeta(labels={"job": name}),
            spec=k8s.V1PodSpec(restart_policy="Never", containers=[
                k8s.V1Container(name="c", image="registry.k8s.io/e2e-test-images/busybox:1.36.1-1",
                                command=["sh", "-c", "exit 0"])]))))

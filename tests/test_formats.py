"""Value formats: Go's Time / MicroTime parsing, Quantity, durations, and their normalization
through the schema (kube/formats.py, schema.normalize_formats).

Plain functions on values: no database, no Django settings.
"""
from __future__ import annotations

from dashboard.batch import strategy as jobs
from dashboard.kube import schema as v   # v: these tests came from test_validation.py, where v held them


def job(name="pi", **spec):
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "busybox:1.36",
                                                           "command": ["true"]}]}},
                     **spec}}


def test_normalize_formats_walks_the_schema():
    obj = job()
    pod = obj["spec"]["template"]["spec"]
    pod["volumes"] = [{"name": "s", "emptyDir": {"sizeLimit": "1024Mi"}}]
    pod["overhead"] = {"cpu": 0.25}
    obj["metadata"]["creationTimestamp"] = "2026-11-22T12:00:00.9Z"
    v.normalize_object(obj, jobs.DEFINITION)
    assert pod["volumes"][0]["emptyDir"]["sizeLimit"] == "1Gi"
    assert pod["overhead"] == {"cpu": "250m"}
    assert obj["metadata"]["creationTimestamp"] == "2026-11-22T12:00:00Z"
    assert v.normalize_formats({"holderIdentity": "x"}, "io.k8s.api.coordination.v1.LeaseSpec") == {"holderIdentity": "x"}

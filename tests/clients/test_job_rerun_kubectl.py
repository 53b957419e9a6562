"""A finished Job's "Run again" copy as kubectl sees it (batch/actions.py do_rerun_job, the
action the Job page and the list's bulk bar call): `kubectl get job -o yaml` round trip, its
annotation and generated selector, and kube's validation accepting it when applied back."""
from __future__ import annotations

import json
import secrets

import yaml

from dashboard.batch.actions import RERUN_OF

JOB = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: nightly
  namespace: {ns}
  labels: {{team: data}}
  annotations: {{note: keep}}
spec:
  completions: 1
  ttlSecondsAfterFinished: 3600
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox:1.36
        command: ["sh", "-c", "echo hi"]
"""
AT = "2026-11-29T00:00:00Z"


def cond(kind: str) -> dict:
    return {"type": kind, "status": "True", "lastProbeTime": AT, "lastTransitionTime": AT}


def test_run_again_round_trips_through_kubectl_and_applies_back(kubectl, kube_server):
    ns = f"rerun-{secrets.token_hex(3)}"
    kubectl("create", "namespace", ns, check=False)   # (kubedash has no Namespace kind: either answer will do)
    kubectl("apply", "-f", "-", stdin=JOB.format(ns=ns))
    status, _, out = kube_server.request(
        "PATCH", f"/apis/batch/v1/namespaces/{ns}/jobs/nightly/status",
        {"status": {"succeeded": 1, "startTime": AT, "completionTime": AT,
                    "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}},
        content_type="application/merge-patch+json")
    assert status == 200, out
    original = yaml.safe_load(kubectl("get", "job", "nightly", "-n", ns, "-o", "yaml").stdout)

    made = kube_server.manage("shell", "-c", (
        "from dashboard.batch.actions import do_rerun_job\n"
        f"print(do_rerun_job({ns!r}, 'nightly', suffix='x7k2q').object['metadata']['name'])\n"))
    assert made.strip().splitlines()[-1] == "nightly-x7k2q"

    text = kubectl("get", "job", "nightly-x7k2q", "-n", ns, "-o", "yaml").stdout
    copy = yaml.safe_load(text)
    meta, spec = copy["metadata"], copy["spec"]
    assert meta["annotations"] == {"note": "keep", RERUN_OF: "nightly"}
    assert meta["labels"]["team"] == "data"
    assert meta["uid"] != original["metadata"]["uid"]
    # The selector and the controller labels, generated for the copy as kube's Job strategy does.
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": meta["uid"]}}
    labels = spec["template"]["metadata"]["labels"]
    assert labels["batch.kubernetes.io/controller-uid"] == labels["controller-uid"] == meta["uid"]
    assert labels["batch.kubernetes.io/job-name"] == labels["job-name"] == "nightly-x7k2q"
    assert copy.get("status") in (None, {})   # (cleared: nothing has run yet)
    assert spec["template"]["spec"] == original["spec"]["template"]["spec"]
    assert spec["ttlSecondsAfterFinished"] == 3600

    # Applied back as kubectl wrote it: kube's validation accepts it, and nothing changes.
    applied = kubectl("apply", "-f", "-", stdin=text)
    assert "job.batch/nightly-x7k2q" in applied.stdout
    again = yaml.safe_load(kubectl("get", "job", "nightly-x7k2q", "-n", ns, "-o", "yaml").stdout)
    assert again["spec"] == spec and again["metadata"]["uid"] == meta["uid"]
    # And the copy as the confirmation page shows it is a valid create (server-side dry run).
    preview = kube_server.manage("shell", "-c", (
        "import json\nfrom dashboard.batch.actions import rerun_copy\nfrom dashboard.kube import store\n"
        "from dashboard.batch.resource import JOBS\n"
        f"print(json.dumps(rerun_copy(store.get(JOBS, {ns!r}, 'nightly-x7k2q'), 'b3b3b')))\n"))
    dry = kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=preview.strip().splitlines()[-1])
    created = json.loads(dry.stdout)
    assert created["metadata"]["name"] == "nightly-x7k2q-b3b3b"
    assert created["metadata"]["annotations"][RERUN_OF] == "nightly-x7k2q"

"""kubectl (the machine's /usr/bin/kubectl, 1.32) against a live `manage.py serve` over HTTPS."""
from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest


LEASE_YAML = """\
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: {name}
  namespace: {ns}
  labels: {{app: kd, idx: "{idx}"}}
spec:
  holderIdentity: {holder}
  leaseDurationSeconds: 15
"""

JOB_YAML = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: kt
spec:
  backoffLimit: {backoff}
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox:1.36
        command: ["sh", "-c", "echo hi"]
"""


def test_create_get_describe_delete_lease(kubectl):
    kubectl("create", "-f", "-", stdin=LEASE_YAML.format(name="l1", ns="kt", idx=1, holder="node-a"))
    out = kubectl("get", "lease", "l1", "-n", "kt").stdout
    assert "HOLDER" in out and "node-a" in out
    obj = json.loads(kubectl("get", "lease", "l1", "-n", "kt", "-o", "json").stdout)
    assert obj["spec"]["holderIdentity"] == "node-a"
    desc = kubectl("describe", "lease", "l1", "-n", "kt").stdout
    assert "Holder Identity:" in desc and "node-a" in desc
    dup = kubectl("create", "-f", "-", stdin=LEASE_YAML.format(name="l1", ns="kt", idx=1, holder="x"), check=False)
    assert dup.returncode != 0 and "AlreadyExists" in dup.stderr
    kubectl("delete", "lease", "l1", "-n", "kt")
    gone = kubectl("get", "lease", "l1", "-n", "kt", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_get_all_namespaces_wide_chunks_sort_and_selectors(kubectl):
    # The server is shared with other modules: label this test's leases and select on it.
    for i, ns in enumerate(["ka", "kb", "ka", "kb", "ka"]):
        manifest = LEASE_YAML.format(name=f"s{i}", ns=ns, idx=i, holder=f"h{4 - i}").replace("app: kd", "app: kd-chunks")
        kubectl("create", "-f", "-", stdin=manifest)
    out = kubectl("get", "leases", "-A").stdout
    assert out.splitlines()[0].split()[:3] == ["NAMESPACE", "NAME", "HOLDER"]
    assert all(f"s{i}" in out for i in range(5))
    chunked = kubectl("get", "leases", "-A", "-l", "app=kd-chunks", "--chunk-size=2", "-o", "name").stdout.split()
    assert sorted(chunked) == sorted(f"lease.coordination.k8s.io/s{i}" for i in range(5))
    by_holder = kubectl("get", "leases", "-n", "ka", "--sort-by=.spec.holderIdentity", "-o",
                        "custom-columns=N:.metadata.name", "--no-headers").stdout.split()
    assert by_holder == ["s4", "s2", "s0"]
    assert kubectl("get", "leases", "-A", "-l", "app=kd-chunks,idx in (1,3)", "-o", "name").stdout.split() == [
        "lease.coordination.k8s.io/s1", "lease.coordination.k8s.io/s3"]
    assert kubectl("get", "leases", "-n", "ka", "--field-selector", "metadata.name=s2", "-o", "name").stdout.split() == [
        "lease.coordination.k8s.io/s2"]
    kubectl("delete", "leases", "--all", "-n", "ka")
    assert "No resources found" in kubectl("get", "leases", "-n", "ka").stderr
    assert kubectl("get", "leases", "-n", "kb", "-o", "name").stdout.split() == [
        "lease.coordination.k8s.io/s1", "lease.coordination.k8s.io/s3"]


def test_apply_twice_then_change(kubectl, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(JOB_YAML.format(name="ap", backoff=2))
    assert "created" in kubectl("apply", "-f", str(path)).stdout
    assert "unchanged" in kubectl("apply", "-f", str(path)).stdout
    path.write_text(JOB_YAML.format(name="ap", backoff=4))
    assert "configured" in kubectl("apply", "-f", str(path)).stdout
    job = json.loads(kubectl("get", "job", "ap", "-n", "kt", "-o", "json").stdout)
    assert job["spec"]["backoffLimit"] == 4
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"
    assert job["metadata"]["generation"] == 2
    wide = kubectl("get", "jobs", "-n", "kt", "-o", "wide").stdout
    assert "IMAGES" in wide and "busybox:1.36" in wide and "COMPLETIONS" in wide


def test_server_side_apply_creates(kubectl, tmp_path):
    path = tmp_path / "lease.yaml"
    path.write_text(LEASE_YAML.format(name="ssa", ns="kt", idx=9, holder="ssa-holder"))
    out = kubectl("apply", "--server-side", "-f", str(path))
    assert "serverside-applied" in out.stdout
    assert json.loads(kubectl("get", "lease", "ssa", "-n", "kt", "-o", "json").stdout)["spec"]["holderIdentity"] == "ssa-holder"


def test_replace(kubectl, tmp_path):
    kubectl("create", "-f", "-", stdin=LEASE_YAML.format(name="rp", ns="kt", idx=1, holder="before"))
    path = tmp_path / "lease.yaml"
    path.write_text(LEASE_YAML.format(name="rp", ns="kt", idx=1, holder="after"))
    kubectl("replace", "-f", str(path))
    assert json.loads(kubectl("get", "lease", "rp", "-n", "kt", "-o", "json").stdout)["spec"]["holderIdentity"] == "after"


def test_patch_three_types_and_status(kubectl):
    kubectl("create", "-f", "-", stdin=JOB_YAML.format(name="pj", backoff=1))
    kubectl("patch", "job", "pj", "-n", "kt", "--type=merge", "-p", '{"spec":{"backoffLimit":3}}')
    kubectl("patch", "job", "pj", "-n", "kt", "--type=json", "-p",
            '[{"op":"replace","path":"/spec/backoffLimit","value":5}]')
    kubectl("patch", "job", "pj", "-n", "kt", "-p", '{"metadata":{"labels":{"patched":"yes"}}}')
    kubectl("patch", "job", "pj", "-n", "kt", "--subresource=status", "--type=merge", "-p",
            '{"status":{"succeeded":1}}')
    job = json.loads(kubectl("get", "job", "pj", "-n", "kt", "-o", "json").stdout)
    assert job["spec"]["backoffLimit"] == 5 and job["metadata"]["labels"]["patched"] == "yes"
    assert job["status"]["succeeded"] == 1


def test_dry_run_and_strict_validation(kubectl):
    kubectl("create", "--dry-run=server", "-f", "-", stdin=LEASE_YAML.format(name="dry", ns="kt", idx=1, holder="x"))
    assert kubectl("get", "lease", "dry", "-n", "kt", check=False).returncode != 0
    typo = LEASE_YAML.format(name="typo", ns="kt", idx=1, holder="x").replace("leaseDurationSeconds", "leaseDurationSecs")
    bad = kubectl("create", "-f", "-", stdin=typo, check=False)
    assert bad.returncode != 0 and 'unknown field "spec.leaseDurationSecs"' in bad.stderr
    warned = kubectl("create", "--validate=warn", "-f", "-", stdin=typo)
    assert 'unknown field "spec.leaseDurationSecs"' in warned.stderr


MIXED_YAML = """\
apiVersion: v1
kind: Namespace
metadata:
  name: kmixed
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: kmixed}
data: {a: b}
---
""" + LEASE_YAML.format(name="mixed", ns="kmixed", idx=1, holder="m")


def test_apply_of_a_mixed_file_applies_what_it_can_and_names_the_rest(kubectl, tmp_path):
    # kinds kubedash does not serve (a Namespace, a ConfigMap) beside a Lease: kubectl's
    # validation falls back to /openapi/v2 (protobuf) for them, finds nothing, and reports each
    # such object alone; the Lease is applied. kube answers /namespaces/<ns> with a 404 Status.
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED_YAML)
    out = kubectl("apply", "-f", str(path), check=False)
    assert out.returncode == 1, out
    assert "lease.coordination.k8s.io/mixed created" in out.stdout
    assert 'no matches for kind "Namespace" in version "v1"' in out.stderr
    assert 'no matches for kind "ConfigMap" in version "v1"' in out.stderr
    assert "500" not in out.stderr and "openapi" not in out.stderr
    assert kubectl("get", "lease", "mixed", "-n", "kmixed", "-o", "name").stdout.strip() == \
        "lease.coordination.k8s.io/mixed"
    # A typo in the Lease of the same file is still refused (strict validation, by the server).
    path.write_text(MIXED_YAML.replace("leaseDurationSeconds", "leaseDurationSecs"))
    typo = kubectl("apply", "-f", str(path), check=False)
    assert 'unknown field "spec.leaseDurationSecs"' in typo.stderr
    raw = kubectl("get", "--raw", "/api/v1/namespaces/kmixed", check=False)
    assert raw.returncode != 0 and "NotFound" in raw.stderr


def test_edit_with_scripted_editor(kubectl, tmp_path):
    kubectl("create", "-f", "-", stdin=LEASE_YAML.format(name="ed", ns="kt", idx=1, holder="before-edit"))
    editor = tmp_path / "editor.sh"
    editor.write_text(textwrap.dedent("""\
        #!/bin/sh
        sed -i 's/holderIdentity: before-edit/holderIdentity: edited-by-script/' "$1"
        """))
    editor.chmod(0o755)
    kubectl("edit", "lease", "ed", "-n", "kt", env={"KUBE_EDITOR": str(editor)})
    obj = json.loads(kubectl("get", "lease", "ed", "-n", "kt", "-o", "json").stdout)
    assert obj["spec"]["holderIdentity"] == "edited-by-script"


def test_explain_and_api_resources(kubectl):
    out = kubectl("explain", "lease.spec").stdout
    assert "holderIdentity" in out and "leaseDurationSeconds" in out
    assert "image" in kubectl("explain", "job.spec.template.spec.containers").stdout
    res = kubectl("api-resources").stdout
    assert "leases" in res and "jobs" in res and "ep" in res


def test_endpoints_short_name_and_describe(kubectl):
    kubectl("create", "-f", "-", stdin=textwrap.dedent("""\
        apiVersion: v1
        kind: Endpoints
        metadata: {name: web, namespace: kt}
        subsets:
        - addresses: [{ip: 10.1.0.1}, {ip: 10.1.0.2}]
          notReadyAddresses: [{ip: 10.1.0.3}]
          ports: [{name: http, port: 8080}]
        """))
    out = kubectl("get", "ep", "web", "-n", "kt").stdout
    assert "10.1.0.1:8080,10.1.0.2:8080" in out
    assert "10.1.0.3" in kubectl("describe", "endpoints", "web", "-n", "kt").stdout


def _read_until(proc, needles: list[str], timeout: float = 20) -> str:
    """Read a running kubectl's stdout until every needle appeared (in order of arrival)."""
    import selectors as sel
    import time

    out = ""
    deadline = time.monotonic() + timeout
    watcher = sel.DefaultSelector()
    watcher.register(proc.stdout, sel.EVENT_READ)
    while not all(n in out for n in needles):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not watcher.select(remaining):
            break
        chunk = os.read(proc.stdout.fileno(), 65536)  # unbuffered: select() must see what is left
        if not chunk:
            break
        out += chunk.decode()
    return out


@pytest.mark.parametrize("events_flag", [False, True])
def test_get_watch(kubectl, events_flag):
    ns = "kw-events" if events_flag else "kw-plain"
    kubectl("create", "-f", "-", stdin=LEASE_YAML.format(name="w1", ns=ns, idx=1, holder="first"))
    args = [kubectl.binary, "--cache-dir", str(kubectl.home / "cache"), "get", "leases", "-n", ns, "-w"]
    if events_flag:
        args.append("--output-watch-events")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "HOME": str(kubectl.home), "KUBECONFIG": str(kubectl.config)})
    try:
        first = _read_until(proc, ["first"])
        assert "w1" in first and "first" in first
        kubectl("patch", "lease", "w1", "-n", ns, "--type=merge", "-p", '{"spec":{"holderIdentity":"second"}}')
        kubectl("create", "-f", "-", stdin=LEASE_YAML.format(name="w2", ns=ns, idx=2, holder="third"))
        later = _read_until(proc, ["second", "third"])
        assert "second" in later and "third" in later
        if events_flag:
            assert "MODIFIED" in later and "ADDED" in later
    finally:
        proc.kill()
        proc.wait()

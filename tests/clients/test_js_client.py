"""The JavaScript client smoke suite (tests/js, node's test runner with @kubernetes/client-node)
against a live server. .ci/run installs node and the pinned packages (npm ci); elsewhere the
test skips with a clear message when they are missing."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from conftest import ROOT

JS = ROOT / "tests" / "js"


def _require_node() -> str:
    node = shutil.which("node")
    missing = None
    if node is None:
        missing = "node is not installed (apt-get install nodejs npm)"
    elif not (JS / "node_modules" / "@kubernetes" / "client-node").is_dir():
        missing = "tests/js has no node_modules: run `npm ci` in tests/js"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"the JavaScript smoke suite must run in CI: {missing}")
        pytest.skip(missing)
    return node


def test_javascript_client_smoke_suite(kube_server, tmp_path):
    node = _require_node()
    kubeconfig = kube_server.kubeconfig(tmp_path / "kubeconfig", username="js-admin")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "NODE_NO_WARNINGS": "1"}
    run = subprocess.run([node, "--test", "--test-reporter=tap", "smoke.test.mjs"], cwd=JS, env=env,
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert "# pass 4" in run.stdout and "# fail 0" in run.stdout, run.stdout[-3000:]

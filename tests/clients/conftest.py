"""kubectl for the client tests: the machine's binary with a kubeconfig of the module's own for
the shared `kube_server` (an admin's token, its CA), in a HOME of its own."""
from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from conftest import require_kubectl


@pytest.fixture(scope="module")
def kubectl(kube_server, tmp_path_factory):
    """kubectl(*args, stdin=None, check=True, env=None) -> the finished process; stdin may be a
    dict (sent as YAML); check: fail the test on a non-zero exit."""
    binary = require_kubectl()
    home = tmp_path_factory.mktemp("kubectl-home")
    config = kube_server.kubeconfig(home / "kubeconfig")

    def run(*args, stdin: str | dict | None = None, check: bool = True, env: dict | None = None):
        if isinstance(stdin, dict):
            stdin = yaml.safe_dump(stdin)
        full_env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(config), **(env or {})}
        proc = subprocess.run([binary, "--cache-dir", str(home / "cache"), *args], input=stdin, text=True,
                              capture_output=True, env=full_env, timeout=120)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    run.home, run.config, run.binary = home, config, binary
    return run

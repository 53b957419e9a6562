"""Which build is this (dashboard/kube/build.py): /version's gitVersion, gitCommit and buildDate,
kubedash_build_info in /metrics, from the image's build arguments or a git checkout's files."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import tomllib
from pathlib import Path

import pytest

from conftest import ROOT, require_kubectl, sample, scrape, served, server_env
from dashboard.kube import build as build_module

RELEASE = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.mark.slow
def test_the_image_build_arguments_make_version_and_build_info(tmp_path):
    """The Dockerfile's KUBEDASH_GIT_COMMIT / KUBEDASH_BUILD_DATE reach /version and /metrics,
    and kubectl reads the version without a skew warning (it parses gitVersion as semver)."""
    kubectl = require_kubectl()
    commit, date = secrets.token_hex(20), "2026-11-29T04:30:00Z"
    env = server_env(tmp_path, KUBEDASH_GIT_COMMIT=commit, KUBEDASH_BUILD_DATE=date)
    with served(tmp_path, env=env) as server:
        status, _, info = server.request("GET", "/version", token="-")
        assert status == 200
        assert info["gitVersion"] == f"v1.32.0-kubedash.{RELEASE}"
        assert (info["major"], info["minor"], info["gitCommit"], info["buildDate"]) == ("1", "32", commit, date)
        assert sample(scrape(server), "kubedash_build_info", version=RELEASE, git_version=info["gitVersion"],
                      git_commit=commit, build_date=date) == 1

        kubeconfig = server.kubeconfig(tmp_path / "kubeconfig")
        out = subprocess.run([kubectl, "--kubeconfig", str(kubeconfig), "version", "-o", "json"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["serverVersion"]["gitVersion"] == info["gitVersion"]
        assert "WARNING" not in out.stderr and "version difference" not in out.stderr, out.stderr


def test_a_checkout_reports_its_commit(kube_server):
    """Run from this git checkout (no build arguments): gitCommit is its HEAD."""
    if not (ROOT / ".git").exists():
        if os.environ.get("CI"):
            pytest.fail("CI runs from a git clone, but there is no .git here")
        pytest.skip("not a git checkout (an unpacked archive)")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    assert build_module.checkout_commit(ROOT) == head
    status, _, info = kube_server.request("GET", "/version", token="-")
    assert status == 200 and info["gitCommit"] == head and info["buildDate"] == "1970-01-01T00:00:00Z"


def _git_dir(path: Path, head: str, refs: dict[str, str] | None = None, packed: str = "") -> Path:
    path.mkdir(parents=True)
    (path / "HEAD").write_text(head + "\n")
    for name, sha in (refs or {}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(sha + "\n")
    if packed:
        (path / "packed-refs").write_text(packed)
    return path


def test_commit_read_from_every_kind_of_checkout(tmp_path):
    a, b = secrets.token_hex(20), secrets.token_hex(20)
    loose = tmp_path / "loose"
    _git_dir(loose / ".git", "ref: refs/heads/main", {"refs/heads/main": a})
    assert build_module.checkout_commit(loose) == a
    packed = tmp_path / "packed"
    _git_dir(packed / ".git", "ref: refs/heads/main",
             packed=f"# pack-refs with: peeled fully-peeled sorted\n{b} refs/heads/other\n{a} refs/heads/main\n")
    assert build_module.checkout_commit(packed) == a
    detached = tmp_path / "detached"
    _git_dir(detached / ".git", b)
    assert build_module.checkout_commit(detached) == b
    # A worktree: .git is a file naming its git dir, whose branches live in the common dir.
    common = _git_dir(tmp_path / "main.git", "ref: refs/heads/main", {"refs/heads/wt": b})
    worktree_git = _git_dir(common / "worktrees" / "wt", "ref: refs/heads/wt")
    (worktree_git / "commondir").write_text("../..\n")
    (tmp_path / "wt").mkdir()
    (tmp_path / "wt" / ".git").write_text(f"gitdir: {worktree_git}\n")
    assert build_module.checkout_commit(tmp_path / "wt") == b
    assert build_module.checkout_commit(tmp_path / "none") is None
    _git_dir(tmp_path / "unborn" / ".git", "ref: refs/heads/main")   # a repository with no commit yet
    assert build_module.checkout_commit(tmp_path / "unborn") is None


def test_build_arguments_left_unset_or_malformed_are_not_reported(monkeypatch):
    """An image built without --build-arg has them empty (or, from a shell that did not expand
    them, literal): the checkout's commit (none in an image) and the epoch are reported instead."""
    for commit, date in (("", ""), ("$KUBEDASH_GIT_COMMIT", "$KUBEDASH_BUILD_DATE"), ("xyz", "yesterday")):
        monkeypatch.setenv("KUBEDASH_GIT_COMMIT", commit)
        monkeypatch.setenv("KUBEDASH_BUILD_DATE", date)
        monkeypatch.setattr(build_module, "ROOT", Path("/nonexistent"))
        build_module.build.cache_clear()
        try:
            got = build_module.build()
        finally:
            build_module.build.cache_clear()
        assert got.git_commit == build_module.UNKNOWN_COMMIT and got.build_date == build_module.EPOCH
        assert got.version == "0.0.0"   # (no pyproject.toml there either)

"""Which build this is: the release (pyproject.toml's version), the git commit and the build date.

An image says it through the Dockerfile's build arguments, written to its environment
(KUBEDASH_GIT_COMMIT, KUBEDASH_BUILD_DATE; `docker build --build-arg ...`, docs/OPERATIONS.md);
a run from a git checkout reads its commit from .git (HEAD, then the branch's ref, loose or
packed; a worktree's .git file points at its git directory), once: no subprocess, no git needed.
/version reports them (kube/discovery.py) and /metrics has kubedash_build_info.
"""
from __future__ import annotations

import functools
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent   # beside dashboard/: pyproject.toml, .git
UNKNOWN_COMMIT = "0" * 40
EPOCH = "1970-01-01T00:00:00Z"
_SHA = re.compile(r"[0-9a-f]{40}")
_GIVEN_SHA = re.compile(r"[0-9a-f]{7,40}")   # a build argument may name an abbreviated commit
_DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")   # kube's buildDate: `date -u +%Y-%m-%dT%H:%M:%SZ`


@dataclass(frozen=True)
class Build:
    version: str       # the release, "0.9.0"
    git_commit: str    # 40 hex digits; UNKNOWN_COMMIT when neither the image nor a checkout says
    build_date: str    # RFC 3339; EPOCH when not built as an image


def _release(root: Path) -> str:
    try:
        return tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "0.0.0"


def _git_dir(root: Path) -> Path | None:
    dot_git = root / ".git"
    if dot_git.is_dir():
        return dot_git
    try:   # a worktree (or submodule): "gitdir: <path>"
        text = dot_git.read_text().strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    return (root / text.partition(":")[2].strip()).resolve()


def checkout_commit(root: Path = ROOT) -> str | None:
    """The commit a git checkout at `root` has checked out, read from its files; None if unknown."""
    git_dir = _git_dir(root)
    if git_dir is None:
        return None
    try:
        head = (git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head if _SHA.fullmatch(head) else None   # a detached HEAD
        ref = head.partition(":")[2].strip()
        common = git_dir
        if (git_dir / "commondir").exists():   # a worktree's branches live in the main git dir
            common = (git_dir / (git_dir / "commondir").read_text().strip()).resolve()
        for base in (git_dir, common):
            loose = base / ref
            if loose.is_file():
                sha = loose.read_text().strip()
                return sha if _SHA.fullmatch(sha) else None
        packed = common / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                sha, _, name = line.partition(" ")
                if name == ref and _SHA.fullmatch(sha):
                    return sha
    except OSError:
        return None
    return None


@functools.cache
def build() -> Build:
    """This process's build, read once."""
    commit = os.environ.get("KUBEDASH_GIT_COMMIT", "").strip().lower()
    if not _GIVEN_SHA.fullmatch(commit):
        commit = checkout_commit(ROOT) or UNKNOWN_COMMIT
    date = os.environ.get("KUBEDASH_BUILD_DATE", "").strip()
    return Build(version=_release(ROOT), git_commit=commit, build_date=date if _DATE.fullmatch(date) else EPOCH)

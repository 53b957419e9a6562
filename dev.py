#!/usr/bin/env python3
"""Developer entry point; needs only Python 3.11+ (standard library only).

    python3 dev.py start [args...]        # set up .venv, then: manage.py start args...
    python3 dev.py test  [pytest args...] # set up .venv, then: pytest args... (its exit code)

Setting up means: create .venv if it is missing, and `pip install -e .[test]` into it when
pyproject.toml changed since the last successful install (a stamp file in .venv).
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".kubedash-install-stamp"
USAGE = "usage: python3 dev.py start [manage.py start args...] | test [pytest args...]"


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_venv() -> None:
    if venv_python().exists():
        return
    print(f"dev.py: creating {VENV} ...", flush=True)
    result = subprocess.run([sys.executable, "-m", "venv", str(VENV)])
    if result.returncode != 0:
        sys.exit("dev.py: could not create the virtualenv (on Debian/Ubuntu: "
                 "apt install python3-venv), then run this again")


def install_stamp() -> str:
    # What the install depends on: the declared dependencies and the interpreter.
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    digest.update(os.fsencode(os.path.realpath(venv_python())))
    return digest.hexdigest()


def ensure_installed() -> None:
    stamp = install_stamp()
    if STAMP.exists() and STAMP.read_text().strip() == stamp:
        return
    print("dev.py: installing the project and its dependencies into .venv ...", flush=True)
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    cmd = [str(venv_python()), "-m", "pip", "install", "--quiet", "-e", ".[test]"]
    result = subprocess.run(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        sys.exit(f"dev.py: `{' '.join(cmd)}` failed (exit {result.returncode})")
    # Only after success: a failed install is retried next time.
    STAMP.write_text(stamp + "\n")


def run(args: list[str]) -> None:
    """Replace this process, so signals and the exit code belong to the real program."""
    os.chdir(ROOT)
    python = str(venv_python())
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(python, [python, *args])


def main(argv: list[str]) -> None:
    if sys.version_info < (3, 11):
        sys.exit(f"dev.py: kubedash needs Python 3.11 or newer (this is {sys.version.split()[0]})")
    if len(argv) < 1 or argv[0] not in {"start", "test"}:
        sys.exit(USAGE)
    command, rest = argv[0], argv[1:]
    ensure_venv()
    ensure_installed()
    if command == "start":
        run(["manage.py", "start", *rest])
    else:
        run(["-m", "pytest", *rest])


if __name__ == "__main__":
    main(sys.argv[1:])

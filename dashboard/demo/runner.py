"""Running the demo simulator beside the server (for `manage.py start`): a `manage.py simulate`
subprocess with a token of its own, kept in DATA_DIR so restarts do not pile up tokens."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from dashboard.access.models import Role
from dashboard.access.tokens import issue_token, token_works

SIMULATOR_USER = "simulator"
TOKEN_FILE = "simulator-token"    # in DATA_DIR, for `start`
DEFAULT_NAMESPACES = "demo,payments,batch"


def ensure_token_file(path: Path) -> Path:
    """Keep the simulator's token in `path` (0600) and reuse it while it works, so restarts
    of `start` do not pile up tokens."""
    token = path.read_text().strip() if path.exists() else ""
    if not token or not token_works(token, SIMULATOR_USER, Role.EDITOR):
        token = issue_token(SIMULATOR_USER, Role.EDITOR, name="demo simulator")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
    return path


def start_demo(server: str) -> subprocess.Popen:
    """For `start`: run `manage.py simulate` beside the server, with a token of its own. It
    waits for the server to answer /readyz before its first write."""
    token_file = ensure_token_file(Path(settings.DATA_DIR) / TOKEN_FILE)
    proc = subprocess.Popen([sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), "simulate",
                             "--server", server, "--token-file", str(token_file)])
    # Stop it as soon as the server starts shutting down, before the listeners close, so its
    # last requests do not meet a refused connection. (serve runs Daphne's Twisted reactor.)
    from twisted.internet import reactor   # noqa: PLC0415 (importing it installs a reactor, Daphne's must be first)
    reactor.addSystemEventTrigger("before", "shutdown", proc.terminate)
    return proc


def stop_demo(proc: subprocess.Popen | None) -> None:
    """For `start`, once the server has stopped: SIGTERM (a Ctrl-C may have stopped it
    already), then a kill if it does not exit promptly."""
    if proc is None:
        return
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()

"""A followed cluster's key material as files the TLS library can read, kept off the disk.

Python's ssl loads a client certificate and key only from a file (load_cert_chain). The
`kubernetes` client's own loader writes them, decrypted, to /tmp and keeps them until the
process exits normally (so a removed cluster or a kill -9 left them there). Here each one is
an anonymous in-memory file (Linux memfd_create, read through /proc/self/fd/N): nothing on a
disk, gone when the follower closes it (the cluster removed or no longer followed here) and
with the process, however it ends.

Where memfd_create does not exist, the files go to a private directory (0700) under the data
directory, one per process, removed when closed; directories of processes that no longer
run are removed at start (clean_stale()).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from django.conf import settings


def _root() -> Path:
    return Path(settings.DATA_DIR) / "follow-keys"


class KeyFiles:
    """Files holding one cluster's key material; close() removes them."""

    def __init__(self):
        self.fds: list[int] = []
        self.directory: str | None = None

    def file(self, data: bytes) -> str:
        """A path the TLS library can open, holding `data`."""
        if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
            fd = os.memfd_create("kubedash-follow-key", os.MFD_CLOEXEC)
            os.write(fd, data)
            self.fds.append(fd)
            return f"/proc/self/fd/{fd}"
        if self.directory is None:
            _root().mkdir(mode=0o700, exist_ok=True)
            self.directory = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=_root())   # 0700
        fd, path = tempfile.mkstemp(dir=self.directory)   # 0600
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return path

    def close(self) -> None:
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self.fds = []
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None


def clean_stale() -> None:
    """Remove the key directories of processes that no longer run (a kill -9 left them)."""
    root = _root()
    if not root.is_dir():
        return
    for entry in root.iterdir():
        pid = entry.name.split("-", 1)[0]
        if not pid.isdigit() or not _running(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True   # someone else's process: not ours to judge
    return True

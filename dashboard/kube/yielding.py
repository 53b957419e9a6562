"""Long work on the expensive lane (a list or Table of thousands of objects) lets the fast lane
go first: every ROWS rows it calls `pause()`, which the server installs (server/lanes.py:
a short sleep, the GIL free, while renewals keep coming). kube knows no lane: this is the seam;
without a server (tests, commands) `pause` does nothing."""
from __future__ import annotations

from typing import Callable

ROWS = 256

pause: Callable[[], None] = lambda: None


def install(fn: Callable[[], None]) -> None:
    global pause
    pause = fn


def every(i: int) -> None:
    """Row i of a long loop: a pause point every ROWS rows."""
    if i and not i % ROWS:
        pause()

"""asyncio internals kubedash relies on (checked with Python 3.11.7; tests/serving/test_compat.py)."""
from __future__ import annotations

import asyncio
from contextlib import contextmanager


@contextmanager
def loop_hidden():
    """No running event loop in this thread while the block runs (sync code on the loop).

    Django's ORM refuses to run wherever asyncio.get_running_loop() answers (its async_unsafe
    check), and asyncio has no public way to step out of the running loop for one synchronous
    call; Django's only switch, DJANGO_ALLOW_ASYNC_UNSAFE, is process-wide and would drop the
    check for every request. So asyncio's private getter and setter of the thread's running loop
    (asyncio.events._get_running_loop, _set_running_loop: the ones uvloop and asyncio's own
    runners use)."""
    loop = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    try:
        yield
    finally:
        asyncio.events._set_running_loop(loop)

"""A failure that repeats (Redis down, a database not migrated yet, a probe failing) is logged
when it starts, when its reason changes and when it ends: one line each, not one per retry, write
or probe (a write a millisecond, an election round every 2 s, a probe every 10 s).

    redis = Outage(log, "publishing revisions to Redis")
    try: publish()
    except Exception as err: redis.failed(err)
    else: redis.ok()
"""
from __future__ import annotations

import logging
import threading


class Outage:
    def __init__(self, log: logging.Logger, what: str):
        self.log, self.what = log, what
        self.reason: str | None = None   # why it is failing now (its type); None while it works
        self._lock = threading.Lock()

    @property
    def failing(self) -> bool:
        return self.reason is not None

    def failed(self, err: BaseException | str, *, trace: bool = False) -> bool:
        """It failed (again): logged if it was working or failed for another reason (an exception
        of another type: their texts vary with each try; with the traceback when `trace`, for
        errors nobody expected). True when this call logged."""
        key = err if isinstance(err, str) else type(err).__name__
        with self._lock:
            if key == self.reason:
                return False
            self.reason = key
        reason = err if isinstance(err, str) else f"{type(err).__name__}: {err}".strip()
        exc_info = err if trace and isinstance(err, BaseException) else None
        self.log.warning("%s failed: %s (logged again when it works or fails otherwise)", self.what, reason,
                         exc_info=exc_info)
        return True

    def ok(self) -> None:
        """It worked: logged once if it was failing."""
        if self.reason is None:
            return
        with self._lock:
            if self.reason is None:
                return
            self.reason = None
        self.log.warning("%s works again", self.what)

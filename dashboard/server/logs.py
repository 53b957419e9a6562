"""What the processes write to stdout and stderr: with KUBEDASH_LOG_FORMAT=json (the default)
every line is one JSON object, so a log pipeline parses all of it alike.

The request lines (observe.py) are written by themselves; every other line is a logging record
formatted by JsonFormatter: ts (the request lines' format), level, logger, message, pid, the
request's auditID when the record is about one (Django's convention: `extra={"request": ...}`),
and the traceback as `exc`; a record with `extra={"fields": {...}}` (kubedash.audit) has those
fields instead of a message. `serve`'s banner and its supervisor's lines are records of
`kubedash.serve`, Daphne's optional access log (`serve --access-log`) of `kubedash.access`; an
exception no thread caught and Python's warnings are records too (install_excepthooks). KUBEDASH_LOG_FORMAT=text
writes the message alone (tracebacks as Python prints them). Settings' LOGGING names these.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from datetime import datetime, timezone

import orjson

from dashboard.kube.context import KEY


def now() -> str:
    """The log's time format: RFC 3339 in UTC with microseconds."""
    return datetime.now(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def audit_id(request) -> str | None:
    """The Audit-ID of a Django request (its context's log record, observe.py), if it has one."""
    ctx = getattr(request, "META", {}).get(KEY) or (getattr(request, "scope", None) or {}).get(KEY)   # (WSGI, ASGI)
    return ctx.record.get("auditID") if ctx is not None else None


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)   # a record that is a JSON line of its own (kubedash.audit)
        line = {"ts": now(), "level": record.levelname, "logger": record.name}
        if fields:
            line.update((k, v) for k, v in fields.items() if k != "ts")
        else:
            line["message"] = record.getMessage()
        line["pid"] = os.getpid()
        request = getattr(record, "request", None)
        if request is not None:
            found = audit_id(request)
            if found:
                line["auditID"] = found
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["exc"] = self.formatStack(record.stack_info)
        return orjson.dumps(line, default=str).decode()


class LogStream:
    """A stream whose lines become records of `logger` (Daphne's AccessLogGenerator writes to one)."""

    def __init__(self, logger: str):
        self.log = logging.getLogger(logger)

    def write(self, text: str) -> None:
        for line in text.splitlines():
            if line.strip():
                self.log.info(line)

    def flush(self) -> None:
        pass


def install_excepthooks() -> None:
    """An exception nothing caught (in a thread or the main one) is a log record, not a bare
    traceback on stderr."""
    log = logging.getLogger("kubedash.crash")

    def thread_hook(args) -> None:
        if args.exc_type is SystemExit:
            return
        name = args.thread.name if args.thread is not None else "?"
        log.error("uncaught exception in thread %s", name, exc_info=(args.exc_type, args.exc_value, args.exc_traceback))

    def main_hook(exc_type, exc_value, traceback) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc_value, traceback)
            return
        log.critical("uncaught exception", exc_info=(exc_type, exc_value, traceback))

    threading.excepthook = thread_hook
    sys.excepthook = main_hook
    logging.captureWarnings(True)   # (a Python warning: a py.warnings record, not a bare line)

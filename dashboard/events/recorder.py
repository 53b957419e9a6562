"""What client-go's event recorder (k8s.io/client-go/tools/record) writes, for kubedash's own
clients: the maintenance elector (through the store) and the demo simulator (over HTTP).

make_event() is record's makeEvent: a core/v1 Event named `<object>.<unix nanoseconds in hex>`,
count 1, firstTimestamp = lastTimestamp = now, source {component, host} (and, as client-go
1.32 fills them, reportingComponent / reportingInstance). Recorder adds the correlator's
EventLogger: an identical event (same source, object, type, reason, message) seen again within
ten minutes is not created anew but PATCHed: count + 1 and lastTimestamp now, as client-go's
eventCorrelator does. Pure: it sends through the two callables it is given.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Callable

NORMAL, WARNING = "Normal", "Warning"
CACHE_SIZE = 4096                 # client-go's maxLruCacheEntries
CORRELATION_SECONDS = 600         # client-go's defaultAggregateIntervalInSeconds


def reference(obj: dict) -> dict:
    """An ObjectReference to a stored object (client-go's reference.GetReference)."""
    meta = obj.get("metadata") or {}
    ref = {"kind": obj.get("kind", ""), "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
           "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion", ""),
           "resourceVersion": meta.get("resourceVersion", "")}
    return {k: v for k, v in ref.items() if v}


def _time(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_event(ref: dict, type_: str, reason: str, message: str, *, component: str, host: str = "",
               moment: datetime | None = None, field_path: str = "") -> dict:
    moment = moment or datetime.now(timezone.utc)
    involved = dict(ref, fieldPath=field_path) if field_path else dict(ref)
    source = {"component": component, **({"host": host} if host else {})}
    stamp = _time(moment)
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{ref.get('name', '')}.{int(moment.timestamp() * 1e9):x}",
                     "namespace": ref.get("namespace") or "default"},
        "involvedObject": involved, "reason": reason, "message": message, "type": type_,
        "source": source, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        "reportingComponent": component, "reportingInstance": host,
    }


def _key(event: dict) -> tuple:
    involved, source = event["involvedObject"], event["source"]
    return (source.get("component"), source.get("host"), involved.get("kind"), involved.get("namespace"),
            involved.get("name"), involved.get("fieldPath"), involved.get("uid"), involved.get("apiVersion"),
            event["type"], event["reason"], event["message"])


class Recorder:
    """Eventf() with client-go's correlation. create(namespace, event) and patch(namespace,
    name, merge patch) send the writes and return True when the server took them."""

    def __init__(self, component: str, host: str, create: Callable[[str, dict], bool],
                 patch: Callable[[str, str, dict], bool], clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(timezone.utc)):
        self.component, self.host = component, host
        self.create, self.patch, self.clock, self.wall = create, patch, clock, wall
        self.seen: OrderedDict[tuple, tuple[str, int, float]] = OrderedDict()   # key -> (name, count, when)

    def event(self, obj_or_ref: dict, type_: str, reason: str, message: str, *, field_path: str = "") -> bool:
        ref = reference(obj_or_ref) if "metadata" in obj_or_ref else obj_or_ref
        now = self.wall()
        event = make_event(ref, type_, reason, message, component=self.component, host=self.host, moment=now,
                           field_path=field_path)
        key, tick = _key(event), self.clock()
        previous = self.seen.get(key)
        namespace = event["metadata"]["namespace"]
        if previous is not None and tick - previous[2] < CORRELATION_SECONDS:
            name, count = previous[0], previous[1] + 1
            if self.patch(namespace, name, {"count": count, "lastTimestamp": _time(now)}):
                self._remember(key, (name, count, tick))
                return True
            # (gone meanwhile, e.g. expired: record it anew, as client-go does after a failed patch)
        if self.create(namespace, event):
            self._remember(key, (event["metadata"]["name"], 1, tick))
            return True
        return False

    def _remember(self, key: tuple, value: tuple) -> None:
        self.seen[key] = value
        self.seen.move_to_end(key)
        while len(self.seen) > CACHE_SIZE:
            self.seen.popitem(last=False)

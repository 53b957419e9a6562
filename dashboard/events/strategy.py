"""Event (core/v1, stored once; served as events.k8s.io/v1 too): defaults, validation, field
selectors and table columns, as kube 1.32 has them (pkg/registry/core/event,
pkg/apis/core/validation/events.go, pkg/printers/internalversion printEvent), and the field
mapping between the two versions (pkg/apis/events/v1/conversion.go).

kube validates an Event by the version it was written through: core/v1 writes get the legacy
rules only (old clients), events.k8s.io/v1 writes the strict ones too. The store runs
`validate` on creates and updates and `validate_update` on updates; the events.k8s.io rules
that apply only to a create are told apart by the object having no resourceVersion yet (the
store sets it from the stored object before validating an update).
"""
from __future__ import annotations

from datetime import datetime

from dashboard.kube import formats, schema, validation as v
from dashboard.kube.errors import Cause, invalid, required
from dashboard.kube.registry import Column

DEFINITION = "io.k8s.api.core.v1.Event"
EVENTS_V1_DEFINITION = "io.k8s.api.events.v1.Event"

NORMAL, WARNING = "Normal", "Warning"
REPORTING_INSTANCE_LIMIT = ACTION_LIMIT = REASON_LIMIT = 128
NOTE_LIMIT = 1024

# core/v1 field -> events.k8s.io/v1 field (everything else has the same name in both).
TO_EVENTS_V1 = {
    "involvedObject": "regarding",
    "source": "deprecatedSource",
    "message": "note",
    "firstTimestamp": "deprecatedFirstTimestamp",
    "lastTimestamp": "deprecatedLastTimestamp",
    "count": "deprecatedCount",
    "reportingComponent": "reportingController",
}
TO_CORE = {new: old for old, new in TO_EVENTS_V1.items()}


# ---------------------------------------------------------------------------------------------
# The two versions


def to_events_v1(stored: dict) -> dict:
    """A stored (core/v1) Event as events.k8s.io/v1 serves it; the stored dict is not changed."""
    out = {TO_EVENTS_V1.get(key, key): value for key, value in stored.items()}
    out["apiVersion"] = "events.k8s.io/v1"
    # events.k8s.io/v1 omits empty strings and a zero count (omitempty); its structs and
    # eventTime (not omitempty) are always there, as Go serializes them.
    for key in ("reportingController", "reportingInstance", "note", "action", "reason", "type"):
        if out.get(key) == "":
            del out[key]
    if not out.get("deprecatedCount"):
        out.pop("deprecatedCount", None)
    out.setdefault("regarding", {})
    out.setdefault("deprecatedSource", {})
    out.setdefault("eventTime", None)
    return out


def to_core(event: dict) -> dict:
    """An events.k8s.io/v1 Event (a whole object or an applied configuration) as stored."""
    out = {TO_CORE.get(key, key): value for key, value in event.items()}
    if "apiVersion" in out:
        out["apiVersion"] = "v1"
    if out.get("eventTime", "") is None:
        del out["eventTime"]
    return out


# ---------------------------------------------------------------------------------------------
# Defaults


def default(obj: dict) -> None:
    """Times re-spelled as Go sends them back, and what Go's serializer always writes for a
    core/v1 Event: involvedObject and source (structs), reportingComponent and
    reportingInstance (strings without omitempty).

    An old-style Event's message (no eventTime: kube has no limit for it but the request's size)
    is stored cut to NOTE_LIMIT bytes, the bound kube puts on every new-style Event's message
    (note), which `validate` answers with 422 instead, as kube does: so no Event holds more
    than 1 KiB of text, and an old client's recorder (client-go's record package) still
    succeeds."""
    schema.normalize_object(obj, DEFINITION)
    message = obj.get("message")
    if not obj.get("eventTime") and isinstance(message, str) and _len(message) > NOTE_LIMIT:
        obj["message"] = message.encode()[:NOTE_LIMIT].decode(errors="ignore")   # (a cut character goes)
    for key in ("involvedObject", "source"):
        if not isinstance(obj.get(key), dict):
            obj[key] = {}
    for key in ("reportingComponent", "reportingInstance"):
        if obj.get(key) is None:
            obj[key] = ""


# ---------------------------------------------------------------------------------------------
# Validation


def _len(value) -> int:
    """A string's length as kube's Go len() counts it: UTF-8 bytes."""
    return len(value.encode()) if isinstance(value, str) else 0


def validate(obj: dict) -> list[Cause]:
    """legacyValidateEvent: what every Event must pass, whichever version wrote it."""
    causes: list[Cause] = []
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    involved = obj.get("involvedObject") or {}
    involved_ns = involved.get("namespace") or ""
    if not obj.get("eventTime"):
        # An old-style Event: its namespace and its object's must agree.
        if not involved_ns:
            if namespace not in ("", "default"):
                causes.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
        elif namespace != involved_ns:
            causes.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            causes.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
        controller = obj.get("reportingComponent") or ""
        if not controller:
            causes.append(required("reportingController"))
        causes += v.validate_each(v.is_qualified_name(controller), "reportingController", controller)
        instance = obj.get("reportingInstance") or ""
        if not instance:
            causes.append(required("reportingInstance"))
        if _len(instance) > REPORTING_INSTANCE_LIMIT:
            causes.append(invalid("reportingInstance", "", f"can have at most {REPORTING_INSTANCE_LIMIT} characters"))
        action = obj.get("action") or ""
        if not action:
            causes.append(required("action"))
        if _len(action) > ACTION_LIMIT:
            causes.append(invalid("action", "", f"can have at most {ACTION_LIMIT} characters"))
        reason = obj.get("reason") or ""
        if not reason:
            causes.append(required("reason"))
        if _len(reason) > REASON_LIMIT:
            causes.append(invalid("reason", "", f"can have at most {REASON_LIMIT} characters"))
        if _len(obj.get("message")) > NOTE_LIMIT:
            causes.append(invalid("message", "", f"can have at most {NOTE_LIMIT} characters"))
    causes += v.validate_each(v.is_dns1123_subdomain(namespace), "namespace", namespace)
    return causes


def validate_update(new: dict, old: dict) -> list[Cause]:
    """core/v1: the legacy rules (validate, which the store has run) and nothing more."""
    return []


def _series_causes(obj: dict) -> list[Cause]:
    series = obj.get("series")
    if series is None:
        return []
    causes = []
    if (series.get("count") or 0) < 2:
        causes.append(invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        causes.append(required("series.lastObservedTime"))
    return causes


def validate_strict(obj: dict) -> list[Cause]:
    """ValidateEventCreate for events.k8s.io/v1 (and the legacy rules on updates, where the
    object already has its resourceVersion)."""
    causes = validate(obj)
    if (obj.get("metadata") or {}).get("resourceVersion"):
        return causes
    causes += _series_causes(obj)
    if not obj.get("eventTime"):
        causes.append(required("eventTime"))
    kind = obj.get("type") or ""
    if kind not in (NORMAL, WARNING):
        causes.append(invalid("type", "", f"has invalid value: {kind}"))
    for key in ("firstTimestamp", "lastTimestamp"):
        if obj.get(key):
            causes.append(invalid(key, "", "needs to be unset"))
    if obj.get("count"):
        causes.append(invalid("count", "", "needs to be unset"))
    source = obj.get("source") or {}
    if source.get("component") or source.get("host"):
        causes.append(invalid("source", "", "needs to be unset"))
    return causes


IMMUTABLE = ("involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count",
             "type", "eventTime", "action", "related", "reportingComponent", "reportingInstance")
# (kube's own error paths: the internal names, reportingController for reportingComponent)
_IMMUTABLE_PATH = {"reportingComponent": "reportingController"}


def validate_update_strict(new: dict, old: dict) -> list[Cause]:
    """ValidateEventUpdate for events.k8s.io/v1: what an Event said may not change."""
    causes = []
    if new.get("series") != old.get("series"):
        causes += _series_causes(new)
    for key in IMMUTABLE:
        causes += v.validate_immutable(new.get(key) or None, old.get(key) or None, _IMMUTABLE_PATH.get(key, key))
    return causes


# ---------------------------------------------------------------------------------------------
# Field selectors (EventToSelectableFields), read from the stored object


def _ref(key: str):
    return lambda obj: str((obj.get("involvedObject") or {}).get(key) or "")


def _source(obj: dict) -> str:
    return (obj.get("source") or {}).get("component") or obj.get("reportingComponent") or ""


def _text(key: str):
    return lambda obj: str(obj.get(key) or "")


REF_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")

field_getters = {
    **{f"involvedObject.{key}": _ref(key) for key in REF_FIELDS},
    "reason": _text("reason"),
    "reportingComponent": _text("reportingComponent"),
    "source": _source,
    "type": _text("type"),
}

# events.k8s.io/v1's names for the same fields (k8s.io/api/events/v1 EventToSelectableFields).
events_v1_field_getters = {
    **{f"regarding.{key}": _ref(key) for key in REF_FIELDS},
    "reason": _text("reason"),
    "reportingController": _text("reportingComponent"),
    "source": _source,
    "type": _text("type"),
}


# ---------------------------------------------------------------------------------------------
# Typed columns and the Table (printEvent)


def last_seen(obj: dict) -> datetime | None:
    """When the Event last happened: the series' last observation, lastTimestamp, else when
    it was first seen (firstTimestamp or eventTime)."""
    series = obj.get("series") or {}
    return (formats.parse_time(series.get("lastObservedTime")) or formats.parse_time(obj.get("lastTimestamp"))
            or first_seen(obj))


def first_seen(obj: dict) -> datetime | None:
    return formats.parse_time(obj.get("firstTimestamp")) or formats.parse_time(obj.get("eventTime"))


def count(obj: dict) -> int:
    """series.count, else count; a singleton Event of the new API has neither: 1."""
    series = obj.get("series") or {}
    return series.get("count") or obj.get("count") or 1


def typed_columns(obj: dict) -> dict:
    involved = obj.get("involvedObject") or {}
    return {
        "involved_kind": str(involved.get("kind") or "")[:63],
        "involved_namespace": str(involved.get("namespace") or "")[:253],
        "involved_name": str(involved.get("name") or "")[:253],
        "involved_uid": str(involved.get("uid") or "")[:36],
        "type": str(obj.get("type") or "")[:32],
        "reason": str(obj.get("reason") or "")[:128],
        "count": count(obj),
        "last_seen": last_seen(obj),
    }


def _since(moment: datetime | None, now: datetime) -> str:
    """translateTimestampSince: "<unknown>" for an unset time."""
    if moment is None:
        return "<unknown>"
    return formats.human_duration((now - moment).total_seconds())


def _target(obj: dict, now) -> str:
    involved = obj.get("involvedObject") or {}
    kind = str(involved.get("kind") or "").lower()
    return f"{kind}/{involved['name']}" if involved.get("name") else kind


def _source_text(obj: dict, now) -> str:
    """formatEventSource: component (or reportingController), then ", host" (or instance)."""
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    host = source.get("host") or obj.get("reportingInstance") or ""
    return f"{component}, {host}" if host else component


def _doc(key: str) -> str:
    return (schema.definitions()[DEFINITION]["properties"].get(key) or {}).get("description", "")


columns = (
    Column("Last Seen", "string", lambda obj, now: _since(last_seen(obj), now), description=_doc("lastTimestamp"),
           freeze=last_seen, at=_since),
    Column("Type", "string", lambda obj, now: obj.get("type") or "", description=_doc("type")),
    Column("Reason", "string", lambda obj, now: obj.get("reason") or "", description=_doc("reason")),
    Column("Object", "string", _target, description=_doc("involvedObject")),
    Column("Subobject", "string", lambda obj, now: (obj.get("involvedObject") or {}).get("fieldPath") or "",
           priority=1, description="If referring to a piece of an object instead of an entire object, this "
                                   "string should contain a valid JSON/Go field access statement, such as "
                                   "desiredState.manifest.containers[2]."),
    Column("Source", "string", _source_text, priority=1, description=_doc("source")),
    Column("Message", "string", lambda obj, now: (obj.get("message") or "").strip(), description=_doc("message")),
    Column("First Seen", "string", lambda obj, now: _since(first_seen(obj), now), priority=1,
           description=_doc("firstTimestamp"), freeze=first_seen, at=_since),
    Column("Count", "string", lambda obj, now: count(obj), priority=1, description=_doc("count")),
    Column("Name", "string", lambda obj, now: (obj.get("metadata") or {}).get("name") or "", format="name",
           priority=1, description="Name must be unique within a namespace. Is required when creating "
                                   "resources, although some resources may allow a client to request the "
                                   "generation of an appropriate name automatically. Name is primarily "
                                   "intended for creation idempotence and configuration definition. Cannot "
                                   "be updated. More info: https://kubernetes.io/docs/concepts/overview/"
                                   "working-with-objects/names#names"),
)

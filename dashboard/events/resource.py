"""Event: stored once as core/v1 Event, served as v1 and as events.k8s.io/v1 (kube stores
both in one place too; a write through either is read through both)."""
from dataclasses import replace

from django.conf import settings

from dashboard.kube.registry import Resource, all_resources, register

from . import strategy
from .models import Event

EVENTS = register(Resource(
    group="", version="v1", kind="Event", plural="events", singular="event", short_names=("ev",),
    model=Event, definition=strategy.DEFINITION,
    allow_unconditional_update=True, allow_create_on_update=True, background_writes=True,
    default=strategy.default,
    validate=strategy.validate,
    validate_update=strategy.validate_update,
    spec_keys=(), status_keys=(),
    field_getters=strategy.field_getters,
    typed_columns=strategy.typed_columns,
    columns=strategy.columns, name_and_age_columns=False,
    ttl_seconds=lambda: settings.KUBEDASH_EVENT_TTL_SECONDS,
    follow_selectors=lambda: tuple((f"involvedObject.kind={r.kind}", {"involved_kind": r.kind})
                                   for r in all_resources() if r.kind != "Event"),
))

# The same storage as events.k8s.io/v1 asks for it: its stricter rules and field names.
EVENTS_V1 = register(Resource(
    group="events.k8s.io", version="v1", kind="Event", plural="events", singular="event", short_names=("ev",),
    model=Event, definition=strategy.EVENTS_V1_DEFINITION,
    allow_unconditional_update=True, allow_create_on_update=True, background_writes=True,
    field_getters=strategy.events_v1_field_getters,
    columns=strategy.columns, name_and_age_columns=False,
    storage=replace(EVENTS, validate=strategy.validate_strict, validate_update=strategy.validate_update_strict,
                    field_getters=strategy.events_v1_field_getters),
    to_storage=strategy.to_core, from_storage=strategy.to_events_v1, field_names=strategy.TO_EVENTS_V1,
))

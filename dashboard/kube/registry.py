"""Resource declarations: the per-kind "strategy" the generic machinery consults.

Each API-group app (coordination, core, batch) builds one Resource and registers it in its
AppConfig.ready(). Nothing in kube/ names a kind; everything asks the registry.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import Cause


def _no_causes(*_args: Any) -> list[Cause]:
    return []


def _no_op(*_args: Any) -> None:
    return None


@dataclass(frozen=True)
class Column:
    """One meta.k8s.io/v1 Table column. cell(obj, now) -> the cell value.

    A cell that depends on the time (a running Job's duration) also gives `freeze(obj)`, the
    few values it needs, and `at(frozen, now)`, the cell from them: Tables cache each stored
    revision's cells (kube/tables.py) and recompute only these at each request."""

    name: str
    type: str
    cell: Callable[[dict, Any], Any]
    format: str = ""
    description: str = ""
    priority: int = 0
    freeze: Callable[[dict], Any] | None = None
    at: Callable[[Any, Any], Any] | None = None


@dataclass(frozen=True)
class Resource:
    group: str                     # "" for the core group
    version: str
    kind: str
    plural: str
    singular: str
    model: Any                     # a subclass of dashboard.kube.models.ObjectRow
    definition: str                # OpenAPI definition name, e.g. io.k8s.api.batch.v1.Job
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    has_status: bool = False       # a /status subresource exists
    has_generation: bool = False   # metadata.generation bumps on spec changes
    allow_unconditional_update: bool = True
    allow_create_on_update: bool = False
    # Strategy hooks. obj is the full object as a dict (apiVersion, kind, metadata, ...).
    default: Callable[[dict], None] = _no_op                  # fill defaults in place
    prepare_for_create: Callable[[dict], None] = _no_op       # e.g. generate selector
    prepare_for_update: Callable[[dict, dict], None] = _no_op  # (new, old): drop what may not change
    canonicalize: Callable[[dict], None] = _no_op             # after validation (Endpoints repacking)
    validate: Callable[[dict], list[Cause]] = _no_causes
    validate_update: Callable[[dict, dict], list[Cause]] = _no_causes   # (new, old)
    validate_status_update: Callable[[dict, dict], list[Cause]] = _no_causes
    # Top-level keys that are "spec" (kept by main-resource writes) vs "status" (kept by /status).
    spec_keys: tuple[str, ...] = ("spec",)
    status_keys: tuple[str, ...] = ("status",)
    # fieldSelector support beyond metadata.name / metadata.namespace: path -> getter(obj) -> str
    field_getters: dict[str, Callable[[dict], str]] = field(default_factory=dict)
    # Typed model columns derived from an object (for the dashboard's queries).
    typed_columns: Callable[[dict], dict] = lambda obj: {}
    # Table columns (Name is implicit and first); wide ones have priority 1.
    columns: tuple[Column, ...] = ()
    # Objects of the kind live this long after their last write (None: for ever); the
    # maintenance leader deletes older ones (expiry.py), as etcd leases expire kube's Events.
    ttl_seconds: Callable[[], float | None] | None = None
    # How followers copy the kind from a followed cluster (dashboard/follow): None, all of it;
    # else one (fieldSelector, typed-column filter) per part wanted (Events: those about the
    # kinds kubedash follows, so a big cluster's Pod events are not copied).
    follow_selectors: Callable[[], tuple[tuple[str, dict], ...]] | None = None
    # False: `columns` are the whole Table row, in order (no implicit Name and Age: Event's).
    name_and_age_columns: bool = True
    # Another version of a stored kind (events.k8s.io/v1 Event of core/v1 Event): `storage` is
    # the Resource the store reads and writes for it (kind, model, rules as this version asks),
    # to_storage / from_storage convert an object between this version and the stored one.
    storage: "Resource | None" = None
    to_storage: Callable[[dict], dict] | None = None
    from_storage: Callable[[dict], dict] | None = None
    # Writes that yield to the fast lane's other requests when both are waiting (Events: many,
    # never urgent; server/lanes.py), within a bound, so a burst of them never delays a renewal.
    background_writes: bool = False
    # Its top-level fields named otherwise than the stored version's: {stored name: its name}.
    # managedFields keep the version a manager wrote through, in that version's names, as kube's do.
    field_names: dict[str, str] = field(default_factory=dict)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def qualified(self) -> str:
        """leases.coordination.k8s.io, endpoints, jobs.batch: the name used in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


_by_path: dict[tuple[str, str, str], Resource] = {}
_by_kind: dict[str, Resource] = {}
_field_names: dict[str, dict[str, dict[str, str]]] = {}   # kind -> {apiVersion: field_names}


def register(resource: Resource) -> Resource:
    _by_path[(resource.group, resource.version, resource.plural)] = resource
    if resource.field_names:
        _field_names.setdefault(resource.kind, {})[resource.api_version] = resource.field_names
    if resource.storage is None:   # (a kind is stored once: its other versions are served only)
        _by_kind[resource.kind] = resource
    return resource


def lookup(group: str, version: str, plural: str) -> Resource | None:
    return _by_path.get((group, version, plural))


def by_kind(kind: str) -> Resource | None:
    return _by_kind.get(kind)


def all_resources() -> list[Resource]:
    """The stored kinds, one Resource each (what the store, compaction and followers walk)."""
    return [r for r in _by_path.values() if r.storage is None]


def served() -> list[Resource]:
    """Every resource the API serves, other versions of a stored kind included (OpenAPI)."""
    return list(_by_path.values())


def backend(res: Resource) -> Resource:
    """The Resource whose rows hold res's objects (itself, or its storage)."""
    return res.storage or res


def to_storage(res: Resource, obj: dict) -> dict:
    return res.to_storage(obj) if res.storage is not None else obj


def from_storage(res: Resource, obj: dict) -> dict:
    return res.from_storage(obj) if res.storage is not None else obj


def version_field_names(res: Resource) -> dict[str, dict[str, str]]:
    """{apiVersion: {stored name: that version's}} for the kind's versions that rename fields."""
    return _field_names.get(res.kind, {})


def group_versions() -> dict[tuple[str, str], list[Resource]]:
    out: dict[tuple[str, str], list[Resource]] = {}
    for r in _by_path.values():
        out.setdefault((r.group, r.version), []).append(r)
    return out

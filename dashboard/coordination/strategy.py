"""Lease (coordination.k8s.io/v1): defaults, validation and table columns, as kube 1.32 has them.

kube's lease strategy is tiny: no defaults, a few spec rules, and the coordinated-leader-
election fields (strategy, preferredHolder) that exist only behind an alpha feature gate.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from dashboard.kube import formats, schema, validation as v
from dashboard.kube.errors import Cause, forbidden, invalid, not_supported
from dashboard.kube.registry import Column

DEFINITION = "io.k8s.api.coordination.v1.Lease"

# CoordinatedLeaderElection is alpha (off by default) in 1.32: with it off the apiserver drops
# spec.strategy / spec.preferredHolder. We serve them (as with the gate on), so every 1.32
# manifest round-trips unchanged; validation below applies. False restores the default.
COORDINATED_LEADER_ELECTION = True
LEASE_STRATEGIES = ("OldestEmulationVersion",)


def normalize(obj: dict) -> None:
    """Decode acquireTime / renewTime as metav1.MicroTime: exactly six fractional digits are
    required on input (Go's RFC3339Micro layout); they are sent back in UTC with 'Z'.

    Raises a 400 (kube's decode error) for a value that does not parse.
    """
    schema.normalize_object(obj, DEFINITION)


def default(obj: dict) -> None:
    """LeaseSpec has no defaulted fields; spec itself is always present on the wire."""
    normalize(obj)
    if not isinstance(obj.get("spec"), dict):
        obj["spec"] = {}


def prepare_for_create(obj: dict) -> None:
    if not COORDINATED_LEADER_ELECTION:
        spec = obj.get("spec") or {}
        spec.pop("strategy", None)
        spec.pop("preferredHolder", None)


def prepare_for_update(new: dict, old: dict) -> None:
    if not COORDINATED_LEADER_ELECTION:
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        for key in ("strategy", "preferredHolder"):
            if old_spec.get(key) is None:
                spec.pop(key, None)


def validate_strategy(strategy: str, path: str) -> list[Cause]:
    """ValidateCoordinatedLeaseStrategy. (kube passes it `spec.strategy` and appends
    `.strategy` again, so its errors read `spec.strategy.strategy`; we keep that path.)"""
    path = f"{path}.strategy"
    if "/" not in strategy:
        if strategy not in LEASE_STRATEGIES:
            return [not_supported(path, strategy, list(LEASE_STRATEGIES))]
        return []
    return v.validate_each(v.is_qualified_name(strategy), path, strategy)


def validate(obj: dict) -> list[Cause]:
    """ValidateLeaseSpec (ObjectMeta is validated by the store for every kind)."""
    spec = obj.get("spec") or {}
    causes: list[Cause] = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        causes.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        causes.append(invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0"))
    strategy = spec.get("strategy")
    if strategy is not None:
        causes += validate_strategy(strategy, "spec.strategy")
    if spec.get("preferredHolder") and not strategy:
        causes.append(forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"))
    # holderIdentity is free-form; the times were checked when decoded (normalize).
    return causes


def validate_update(new: dict, old: dict) -> list[Cause]:
    """Nothing in a Lease spec is immutable; validate(new) has run already."""
    return []


def typed_columns(obj: dict) -> dict:
    spec = obj.get("spec") or {}
    return {
        "holder_identity": spec.get("holderIdentity") or "",
        "lease_duration_seconds": spec.get("leaseDurationSeconds"),
        "acquire_time": formats.parse_time(spec.get("acquireTime")),
        "renew_time": formats.parse_time(spec.get("renewTime")),
        "lease_transitions": spec.get("leaseTransitions"),
    }


def expiry(renew_time: datetime | None, duration: Any) -> datetime | None:
    """renewTime + leaseDurationSeconds: the moment other candidates may take over (client-go's
    leader election rule). None when either is unset: such a lease never expires by itself."""
    if renew_time is None or not isinstance(duration, int) or isinstance(duration, bool):
        return None
    return renew_time + timedelta(seconds=duration)


def lease_expiry(spec: dict) -> datetime | None:
    return expiry(formats.parse_time(spec.get("renewTime")), spec.get("leaseDurationSeconds"))


def _holder(obj: dict, now: datetime) -> str:
    # printLease prints the holder as is: "" (not "<none>") when nobody holds the lease.
    return (obj.get("spec") or {}).get("holderIdentity") or ""


columns = (
    Column("Holder", "string", _holder,
           description="holderIdentity contains the identity of the holder of a current lease. "
                       "If Coordinated Leader Election is used, the holder identity must be equal "
                       "to the elected LeaseCandidate.metadata.name field."),
)

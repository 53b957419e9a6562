"""What people (and the simulator) do to a Lease besides editing it: the one place each such
change lives. Forms, pages and tests call do_*; the pure rule beside it (released) is what a
client that goes over HTTP (dashboard/demo) reuses."""
from __future__ import annotations

from datetime import datetime

from dashboard.kube import store
from dashboard.kube.errors import ApiError, forbidden_request
from dashboard.kube.formats import format_micro_time
from dashboard.kube.meta import now as utcnow
from dashboard.kube.codec import decode_object

from .resource import LEASES


def released(spec: dict, now: datetime) -> dict:
    """What client-go's LeaderElector.release() writes: no holder, a 1 s duration, acquire and
    renew time now, the transition count kept, so the next candidate may take over at once.
    (strategy / preferredHolder describe the lease, not its holder: they are kept.)"""
    out = dict(spec)
    stamp = format_micro_time(now)
    out.update(holderIdentity="", leaseDurationSeconds=1, acquireTime=stamp, renewTime=stamp)
    return out


def do_release_lease(namespace: str, name: str, *, holder: str, acting=None, through=None) -> store.Result:
    """Release the Lease that `holder` holds (the holder the user saw): a patch of the current
    object inside the store's write transaction, so it needs no resourceVersion and overwrites
    nothing else. Refused (409) if someone else holds it by now or nobody does; 403 if the
    acting principal (None: the system) may not patch it. through: a followed cluster's writer,
    from the pages (store.update's)."""
    if acting is not None and not acting.can("patch", namespace, LEASES.kind):
        raise forbidden_request(acting.username, "patch", LEASES.group, LEASES.plural, namespace)

    def change(current: dict) -> dict:
        spec = current.get("spec") or {}
        now_held_by = spec.get("holderIdentity") or ""
        if now_held_by != holder:
            raise ApiError(409, "Conflict", f"the lease is held by “{now_held_by}” now, not “{holder}”."
                           if now_held_by else "the lease has no holder any more.")
        current["spec"] = released(spec, utcnow())
        return decode_object(LEASES, current, "Strict")[0]

    return store.update(LEASES, namespace, name, change, is_patch=True, through=through)

"""What people (and the simulator) do to Endpoints besides editing them: the one place each
such change lives. Forms, pages and tests call do_*; the pure rule beside it (with_readiness)
is what a client that goes over HTTP (dashboard/demo) reuses."""
from __future__ import annotations

import copy

from dashboard.kube import store
from dashboard.kube.errors import ApiError, forbidden_request
from dashboard.kube.codec import decode_object

from .resource import ENDPOINTS


def with_readiness(obj: dict, ip: str, ready: bool) -> dict | None:
    """A copy of obj with every address of this IP moved to `addresses` (ready) or
    `notReadyAddresses`, in every subset that has it; None when no address has this IP."""
    out = copy.deepcopy(obj)
    found = False
    source, target = ("notReadyAddresses", "addresses") if ready else ("addresses", "notReadyAddresses")
    for subset in out.get("subsets") or []:
        moving = [a for a in subset.get(source) or [] if a.get("ip") == ip]
        found = found or bool(moving) or any(a.get("ip") == ip for a in subset.get(target) or [])
        if not moving:
            continue
        subset[source] = [a for a in subset[source] if a.get("ip") != ip]
        subset[target] = (subset.get(target) or []) + moving
        if not subset[source]:
            del subset[source]
    return out if found else None


def do_set_address_readiness(namespace: str, name: str, *, ip: str, ready: bool, acting=None,
                              through=None) -> store.Result:
    """Mark an address ready or not ready: a patch of the current object inside the store's
    write transaction (the strategy repacks the subsets). Refused (409) when the Endpoints no
    longer have this IP; 403 if the acting principal (None: the system) may not patch them.
    through: a followed cluster's writer, from the pages (store.update's)."""
    if acting is not None and not acting.can("patch", namespace, ENDPOINTS.kind):
        raise forbidden_request(acting.username, "patch", ENDPOINTS.group, ENDPOINTS.plural, namespace)

    def change(current: dict) -> dict:
        moved = with_readiness(current, ip, ready)
        if moved is None:
            raise ApiError(409, "Conflict", f"no address {ip} in these Endpoints any more.")
        return decode_object(ENDPOINTS, moved, "Strict")[0]

    return store.update(ENDPOINTS, namespace, name, change, is_patch=True, through=through)

"""Endpoints (v1): defaults, validation, canonical form and table columns, as kube 1.32 has them."""
from __future__ import annotations

import json
from datetime import datetime

from dashboard.kube import schema, validation as v
from dashboard.kube.errors import Cause, not_supported, required
from dashboard.kube.registry import Column

DEFINITION = "io.k8s.api.core.v1.Endpoints"
PORT_PROTOCOLS = ("SCTP", "TCP", "UDP")     # sorted, as kube lists them in messages


def normalize(obj: dict) -> None:
    """Endpoints carry no Quantity/MicroTime of their own; this re-spells metadata times."""
    schema.normalize_object(obj, DEFINITION)


def default(obj: dict) -> None:
    """SetDefaults_EndpointPort: a port's protocol defaults to TCP."""
    normalize(obj)
    for subset in obj.get("subsets") or []:
        for port in subset.get("ports") or []:
            if not port.get("protocol"):
                port["protocol"] = "TCP"


# ---------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------

def validate(obj: dict) -> list[Cause]:
    """validateEndpointSubsets (ObjectMeta is validated by the store for every kind)."""
    causes: list[Cause] = []
    for i, subset in enumerate(obj.get("subsets") or []):
        path = f"subsets[{i}]"
        addresses = subset.get("addresses") or []
        not_ready = subset.get("notReadyAddresses") or []
        if not addresses and not not_ready:
            # Ports are optional: a headless service's endpoints may have none.
            causes.append(required(path, "must specify `addresses` or `notReadyAddresses`"))
        for j, address in enumerate(addresses):
            causes += validate_address(address, f"{path}.addresses[{j}]")
        for j, address in enumerate(not_ready):
            causes += validate_address(address, f"{path}.notReadyAddresses[{j}]")
        ports = subset.get("ports") or []
        for j, port in enumerate(ports):
            causes += validate_port(port, len(ports) > 1, f"{path}.ports[{j}]")
    return causes


def validate_address(address: dict, path: str) -> list[Cause]:
    ip = address.get("ip", "")
    causes = v.validate_ip(ip, f"{path}.ip")
    if address.get("hostname"):
        causes += v.validate_dns1123_label(address["hostname"], f"{path}.hostname")
    if address.get("nodeName") is not None:
        causes += v.validate_each(v.name_is_dns_subdomain(address["nodeName"]), f"{path}.nodeName",
                                  address["nodeName"])
    # kube checks the IP a second time here, hence two causes for a malformed one.
    causes += v.validate_non_special_ip(ip, f"{path}.ip")
    return causes


def validate_port(port: dict, require_name: bool, path: str) -> list[Cause]:
    """Names are DNS labels, required when the subset has several ports (kube does not
    require them to be unique); 1 <= port <= 65535; TCP/UDP/SCTP; appProtocol qualified."""
    causes: list[Cause] = []
    name = port.get("name") or ""
    if require_name and not name:
        causes.append(required(f"{path}.name"))
    elif name:
        causes += v.validate_dns1123_label(name, f"{path}.name")
    number = port.get("port", 0)
    causes += v.validate_each(v.is_valid_port_num(number), f"{path}.port", number)
    protocol = port.get("protocol") or ""
    if not protocol:
        causes.append(required(f"{path}.protocol"))
    elif protocol not in PORT_PROTOCOLS:
        causes.append(not_supported(f"{path}.protocol", protocol, list(PORT_PROTOCOLS)))
    if port.get("appProtocol") is not None:
        causes += v.validate_qualified_name(port["appProtocol"], f"{path}.appProtocol")
    return causes


def validate_update(new: dict, old: dict) -> list[Cause]:
    """Nothing is immutable in Endpoints (nodeName may change: node IPs get reused)."""
    return []


# ---------------------------------------------------------------------------------------
# Canonical form (kube's endpoints strategy Canonicalize = RepackSubsets, after validation)
# ---------------------------------------------------------------------------------------

def address_key(address: dict) -> tuple[str, str]:
    # Same IP from two pods (targetRef uid) are two addresses, as kube keys them.
    return address.get("ip", ""), ((address.get("targetRef") or {}).get("uid") or "")


def _address_sort_key(address: dict) -> tuple:
    """LessEndpointAddress: IP bytes, then no targetRef before any, then targetRef uid."""
    ref = address.get("targetRef")
    return address.get("ip", "").encode(), ref is not None, (ref or {}).get("uid") or ""


def repack_subsets(subsets: list[dict]) -> list[dict]:
    """One subset per distinct set of (address, ready) pairs, carrying every port those
    addresses serve; duplicate addresses merged, and not-ready wins over ready for a port.

    kube then orders ports and subsets by an md5 of Go's struct dump, which cannot be
    reproduced here; we keep first-seen order instead. Addresses are sorted as kube sorts.
    """
    addresses: dict[tuple[str, str], dict] = {}
    port_sets: dict[str, dict[tuple[str, str], bool]] = {}   # port key -> {address: ready}
    port_objects: dict[str, dict | None] = {}
    for n, subset in enumerate(subsets):
        ports = subset.get("ports") or [None]        # None: a sentinel for "no ports"
        for m, port in enumerate(ports):
            if port is None:
                key = "none"
            elif port.get("appProtocol") is not None:
                key = f"unique:{n}:{m}"               # kube keys such ports by pointer
            else:
                key = json.dumps(port, sort_keys=True)
            for ready, field in ((True, "addresses"), (False, "notReadyAddresses")):
                for address in subset.get(field) or []:
                    akey = address_key(address)
                    addresses.setdefault(akey, address)
                    seen = port_sets.setdefault(key, {})
                    if seen.get(akey, True):
                        seen[akey] = ready
                    port_objects.setdefault(key, port)
    groups: dict[frozenset, list[dict]] = {}
    for key, members in port_sets.items():
        group = groups.setdefault(frozenset(members.items()), [])
        if port_objects[key] is not None:
            group.append(port_objects[key])
    out = []
    for members, ports in groups.items():
        ready = sorted((addresses[k] for k, r in members if r), key=_address_sort_key)
        not_ready = sorted((addresses[k] for k, r in members if not r), key=_address_sort_key)
        out.append(make_subset(ready, not_ready, ports))
    return out


def make_subset(ready: list, not_ready: list, ports: list) -> dict:
    """An EndpointSubset with only its non-empty lists (Go's omitempty)."""
    subset: dict = {}
    if ready:
        subset["addresses"] = ready
    if not_ready:
        subset["notReadyAddresses"] = not_ready
    if ports:
        subset["ports"] = ports
    return subset


def canonicalize(obj: dict) -> None:
    """Run after validation, before storing (kube does so for every create and update)."""
    if obj.get("subsets"):
        obj["subsets"] = repack_subsets(obj["subsets"])
        if not obj["subsets"]:
            del obj["subsets"]


# ---------------------------------------------------------------------------------------
# Dashboard columns and the Table
# ---------------------------------------------------------------------------------------

def typed_columns(obj: dict) -> dict:
    """Distinct ready / not-ready addresses (ip + targetRef uid) and distinct ports."""
    ready, not_ready, ports = set(), set(), set()
    for subset in obj.get("subsets") or []:
        ready.update(address_key(a) for a in subset.get("addresses") or [])
        not_ready.update(address_key(a) for a in subset.get("notReadyAddresses") or [])
        ports.update((p.get("name") or "", p.get("port"), p.get("protocol") or "TCP")
                     for p in subset.get("ports") or [])
    return {"ready_addresses": len(ready), "not_ready_addresses": len(not_ready), "ports": len(ports)}


def _host_port(ip: str, port) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"   # net.JoinHostPort


def format_endpoints(obj: dict, limit: int = 3) -> str:
    """The ENDPOINTS cell: up to three ready "ip:port" (one per address and port, just the IP
    for a subset without ports), then " + N more..."; "<none>" without subsets. Not-ready
    addresses are not shown (so ready-less subsets print as an empty cell, as kubectl does)."""
    subsets = obj.get("subsets") or []
    if not subsets:
        return "<none>"
    shown: list[str] = []
    total = 0
    for subset in subsets:
        addresses = subset.get("addresses") or []
        ports = subset.get("ports") or []
        pairs = ([a.get("ip", "") for a in addresses] if not ports else
                 [_host_port(a.get("ip", ""), p.get("port", 0)) for p in ports for a in addresses])
        total += len(pairs)
        shown += pairs[:max(0, limit - len(shown))]
    text = ",".join(shown)
    return f"{text} + {total - limit} more..." if total > limit else text


def _endpoints_cell(obj: dict, now: datetime) -> str:
    return format_endpoints(obj)


columns = (
    Column("Endpoints", "string", _endpoints_cell,
           description="The set of all endpoints is the union of all subsets. Addresses are placed "
                       "into subsets according to the IPs they share. A single address with multiple "
                       "ports, some of which are ready and some of which are not (because they come "
                       "from different containers) will result in the address being displayed in "
                       "different subsets for the different ports. No address will appear in both "
                       "Addresses and NotReadyAddresses in the same subset. Sets of addresses and "
                       "ports that comprise a service."),
)

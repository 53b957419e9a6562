"""Discovery documents: /api, /apis (aggregated or legacy), /apis/<g>, /api/v1,
/apis/<g>/<v> and /version, all derived from the registry.

kubectl asks /api and /apis for aggregated discovery first and recognises it only by the
response Content-Type (see KUBECTL.md section 1), so `negotiate()` picks the flavour and
`content_type()` names it; the view must send that exact Content-Type. We never answer
406 here: anything we cannot match gets the legacy JSON documents, which kubectl also
understands.
"""
from __future__ import annotations

import base64
import hashlib
import platform
import sys
from typing import Literal

from . import registry, reviews
from .build import build
from .tables import media_ranges

DISCOVERY_GROUP = "apidiscovery.k8s.io"
AGGREGATED_KIND = "APIGroupDiscoveryList"
AGGREGATED_CONTENT_TYPE = f"application/json;g={DISCOVERY_GROUP};v=v2;as={AGGREGATED_KIND}"
AGGREGATED_CONTENT_TYPE_V2BETA1 = f"application/json;g={DISCOVERY_GROUP};v=v2beta1;as={AGGREGATED_KIND}"
LEGACY_CONTENT_TYPE = "application/json"

Flavour = Literal["v2", "v2beta1", "legacy"]

# Every kind here supports the full set; kube lists verbs sorted.
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
STATUS_VERBS = ["get", "patch", "update"]

# Reported as /version; the gcloud kubectl dispatcher picks kubectl 1.<minor> from it.
MAJOR, MINOR = "1", "32"
# gitVersion: the Kubernetes version served, kubedash's release as a semver pre-release part (as
# managed clusters do: v1.32.0-eks-..., v1.32.0-gke.100), so kubectl's version-skew check still
# parses it (`kubectl version`: k8s.io/apimachinery's version.ParseSemantic).
KUBE_VERSION = "v1.32.0"


def git_version() -> str:
    return f"{KUBE_VERSION}-kubedash.{build().version}"


def negotiate(accept: str | None) -> Flavour:
    """The discovery flavour for an Accept header, in the client's order of preference.

    Aggregated v2 / v2beta1 when asked for (params in any order); legacy for
    application/json, */*, a missing header, or anything else (never 406).
    """
    for mtype, params in media_ranges(accept):
        target = params.get("as")
        if target is None:
            if mtype in ("application/json", "application/*", "*/*"):
                return "legacy"
            continue
        if (mtype == "application/json" and target == AGGREGATED_KIND
                and params.get("g") == DISCOVERY_GROUP and params.get("v") in ("v2", "v2beta1")):
            return params["v"]  # type: ignore[return-value]
    return "legacy"


def content_type(flavour: Flavour) -> str:
    return {"v2": AGGREGATED_CONTENT_TYPE, "v2beta1": AGGREGATED_CONTENT_TYPE_V2BETA1}.get(
        flavour, LEGACY_CONTENT_TYPE)


def _namespaced(r) -> bool:
    # Resource has no scope field today: every kind kubedash serves is namespaced.
    return getattr(r, "namespaced", True)


def _served() -> dict[tuple[str, str], list]:
    """{(group, version): [resources]}: the registry's kinds, then the access reviews."""
    return {**registry.group_versions(), **reviews.group_versions()}


def _groups(core: bool) -> dict[str, dict[str, list]]:
    """{group: {version: [resources]}} in registration order, core or named groups only."""
    out: dict[str, dict[str, list]] = {}
    for (group, version), resources in _served().items():
        if (group == "") != core:
            continue
        out.setdefault(group, {})[version] = resources
    return out


def _group_versions(group: str) -> list[str]:
    return list(_groups(group == "").get(group, {}))


# ---------------------------------------------------------------------------------------
# Aggregated discovery (apidiscovery.k8s.io/v2, v2beta1)
# ---------------------------------------------------------------------------------------

def _resource_discovery(r) -> dict:
    kind = {"group": r.group, "version": r.version, "kind": r.kind}
    entry: dict = {
        "resource": r.plural,
        "responseKind": kind,
        "scope": "Namespaced" if _namespaced(r) else "Cluster",
        "singularResource": r.singular,
        "verbs": list(getattr(r, "verbs", VERBS)),
    }
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    if r.categories:
        entry["categories"] = list(r.categories)
    if r.has_status:
        entry["subresources"] = [{"subresource": "status", "responseKind": dict(kind),
                                  "verbs": list(STATUS_VERBS)}]
    return entry


def aggregated(core: bool, flavour: Flavour = "v2") -> dict:
    """APIGroupDiscoveryList for /api (core=True) or /apis (core=False)."""
    if flavour not in ("v2", "v2beta1"):
        raise ValueError(f"not an aggregated discovery flavour: {flavour!r}")
    items = []
    for group, versions in _groups(core).items():
        items.append({
            "metadata": {"name": group} if group else {},
            "versions": [
                {"version": version,
                 "resources": [_resource_discovery(r) for r in resources],
                 "freshness": "Current"}
                for version, resources in versions.items()
            ],
        })
    return {"kind": AGGREGATED_KIND, "apiVersion": f"{DISCOVERY_GROUP}/{flavour}",
            "metadata": {}, "items": items}


# ---------------------------------------------------------------------------------------
# Legacy discovery
# ---------------------------------------------------------------------------------------

def legacy_api_versions(host: str) -> dict:
    """/api as APIVersions; host is the "host:port" clients reached us on."""
    return {"kind": "APIVersions", "versions": _group_versions("") or ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]}


def _api_group_body(group: str, versions: list[str]) -> dict:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": dict(gvs[0])}


def legacy_group_list() -> dict:
    """/apis as APIGroupList."""
    groups = [_api_group_body(g, list(vs)) for g, vs in _groups(core=False).items()]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group: str) -> dict | None:
    """/apis/<group> as APIGroup; None when the group is not served (-> 404)."""
    versions = _group_versions(group) if group else []
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_api_group_body(group, versions)}


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """discovery's StorageVersionHash: base64 of the first 8 bytes of sha256("g/v/Kind")."""
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def api_resource_list(group: str, version: str) -> dict | None:
    """/api/v1 or /apis/<g>/<v> as APIResourceList; None when not served (-> 404)."""
    resources = _served().get((group, version))
    if not resources:
        return None
    entries = []
    for r in resources:
        main = {"name": r.plural, "singularName": r.singular, "namespaced": _namespaced(r),
                "kind": r.kind, "verbs": list(getattr(r, "verbs", VERBS))}
        if r.short_names:
            main["shortNames"] = list(r.short_names)
        if r.categories:
            main["categories"] = list(r.categories)
        if not isinstance(r, reviews.Review):   # (reviews are not stored)
            main["storageVersionHash"] = storage_version_hash(r.group, r.version, r.kind)
        entries.append(main)
        if r.has_status:
            entries.append({"name": f"{r.plural}/status", "singularName": "",
                            "namespaced": _namespaced(r), "kind": r.kind,
                            "verbs": list(STATUS_VERBS)})
    body: dict = {"kind": "APIResourceList"}
    if group:
        body["apiVersion"] = "v1"     # kube-apiserver leaves it out for /api/v1 only
    body["groupVersion"] = f"{group}/{version}" if group else version
    body["resources"] = entries
    return body


def root_document(core: bool, accept: str | None, host: str) -> tuple[dict, str]:
    """(body, Content-Type) for GET /api (core) or /apis, negotiated from Accept."""
    flavour = negotiate(accept)
    if flavour != "legacy":
        return aggregated(core, flavour), content_type(flavour)
    body = legacy_api_versions(host) if core else legacy_group_list()
    return body, LEGACY_CONTENT_TYPE


# ---------------------------------------------------------------------------------------
# /version
# ---------------------------------------------------------------------------------------

_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def version_info() -> dict:
    """version.Info for /version. minor "32" makes the kubectl dispatcher run kubectl 1.32;
    gitCommit and buildDate are this build's (kube/build.py)."""
    machine = platform.machine().lower()
    this = build()
    return {
        "major": MAJOR,
        "minor": MINOR,
        "gitVersion": git_version(),
        "gitCommit": this.git_commit,
        "gitTreeState": "clean",
        "buildDate": this.build_date,
        "goVersion": f"python{sys.version_info.major}.{sys.version_info.minor}",
        "compiler": sys.implementation.name,
        "platform": f"{sys.platform}/{_ARCH.get(machine, machine)}",
    }

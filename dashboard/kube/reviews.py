"""Access reviews: what the caller may do, asked through the API as kube serves it.

SelfSubjectAccessReview and SelfSubjectRulesReview (authorization.k8s.io/v1: `kubectl auth
can-i`, `kubectl auth can-i --list`, dashboards that hide what a user may not do) and
SelfSubjectReview (authentication.k8s.io/v1: `kubectl auth whoami`). Every answer comes from
Principal.may (dashboard/access/principals.py): the roles, namespace limits and clusters that
the API enforces, plus the rule that a followed cluster is read-only; the pages' buttons ask
the same. Nothing here is stored: a review is created, answered and forgotten (201, as kube).
"""
from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from dashboard.access.principals import READ_VERBS

from . import registry
from .errors import bad_request, invalid, invalid_object

# The verbs kube's authorizers know for resources, as kube-apiserver lists them.
RESOURCE_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
# Non-resource paths every authenticated user may GET (kube's system:discovery, system:basic-user,
# system:public-info-viewer): discovery, OpenAPI, version, health.
PUBLIC_PATHS = ("/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/readyz", "/openapi", "/openapi/*",
                "/version", "/version/")
METRICS_PATH = "/metrics"


@dataclass(frozen=True)
class Review:
    """A review kind, as discovery lists it (the attributes discovery reads of a Resource)."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    definition: str                # its OpenAPI definition (openapi.py publishes it)
    namespaced: bool = False
    verbs: tuple[str, ...] = ("create",)
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    has_status: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}"

    def path(self) -> str:
        return f"{self.prefix()}/{self.plural}"


ACCESS = Review("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews",
                "selfsubjectaccessreview", "io.k8s.api.authorization.v1.SelfSubjectAccessReview")
RULES = Review("authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews",
               "selfsubjectrulesreview", "io.k8s.api.authorization.v1.SelfSubjectRulesReview")
WHOAMI = Review("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", "selfsubjectreview",
                "io.k8s.api.authentication.v1.SelfSubjectReview")
REVIEWS = (WHOAMI, ACCESS, RULES)
_BY_PATH = {r.path(): r for r in REVIEWS}


def by_path(path: str) -> Review | None:
    """The review served at path (a trailing slash allowed), or None."""
    return _BY_PATH.get(path.rstrip("/"))


def group_versions() -> dict[tuple[str, str], list[Review]]:
    out: dict[tuple[str, str], list[Review]] = {}
    for r in REVIEWS:
        out.setdefault((r.group, r.version), []).append(r)
    return out


# ---------------------------------------------------------------------------------------------
# The answers


def answer(review: Review, principal, body: dict, read_only: str = "") -> dict:
    """The review `body` (already decoded) answered for `principal`: the object kube returns.
    read_only: the cluster when the API is served read-only (`/clusters/<name>/...`): no writes."""
    if body.get("apiVersion") not in (None, review.api_version) or body.get("kind") not in (None, review.kind):
        raise bad_request(f"the object sent is not a {review.kind} ({review.api_version})")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise bad_request("spec must be an object")
    out = {"kind": review.kind, "apiVersion": review.api_version,
           "metadata": {**(body.get("metadata") or {}), "creationTimestamp": None}}
    if review is WHOAMI:
        out["status"] = {"userInfo": user_info(principal)}
    elif review is ACCESS:
        out["spec"] = spec
        out["status"] = access_status(_ReadOnly(principal, read_only) if read_only else principal, spec)
    else:
        out["spec"] = spec
        out["status"] = rules_status(_ReadOnly(principal, read_only) if read_only else principal,
                                     spec.get("namespace") or "")
    return out


class _ReadOnly:
    """A principal as seen through `/clusters/<name>/`, where the API serves reads only."""

    def __init__(self, principal, cluster: str):
        self._principal, self._cluster = principal, cluster

    def __getattr__(self, name):
        return getattr(self._principal, name)

    def may(self, verb: str, namespace, kind=None) -> str | None:
        why = self._principal.may(verb, namespace, kind)
        if why is None and verb not in READ_VERBS:
            return f'cluster "{self._cluster}" is served read-only under /clusters/{self._cluster}/'
        return why


def user_info(principal) -> dict:
    """authentication/v1 UserInfo: the name, and kube-style groups for the role and its limits;
    for an impersonated identity, what the Impersonate-* headers asked for (as kube answers)."""
    if principal.impersonator:
        info = {"username": principal.username, "groups": list(principal.groups)}
        if principal.uid:
            info["uid"] = principal.uid
        if principal.extra:
            info["extra"] = {key: list(values) for key, values in principal.extra}
        return info
    groups = [f"kubedash:{principal.role}", "system:authenticated"]
    info = {"username": principal.username, "groups": groups}
    if principal.user_id is not None:
        info["uid"] = str(principal.user_id)
    extra = {}
    if principal.namespaces:
        extra["kubedash.io/namespaces"] = list(principal.namespaces)
    if principal.clusters:
        extra["kubedash.io/clusters"] = list(principal.clusters)
    if extra:
        info["extra"] = extra
    return info


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def access_status(principal, spec: dict) -> dict:
    """SubjectAccessReviewStatus for a SelfSubjectAccessReviewSpec (422 unless exactly one of
    resourceAttributes / nonResourceAttributes is given, as kube validates it)."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (resource is None) == (non_resource is None):
        raise invalid_object("authorization.k8s.io", "SelfSubjectAccessReview", "", [invalid(
            "spec.resourceAttributes", "null" if resource is None else "set",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified")])
    if non_resource is not None:
        why = non_resource_refusal(principal, _text(non_resource.get("verb")), _text(non_resource.get("path")))
    else:
        a = resource if isinstance(resource, dict) else {}
        why = resource_refusal(principal, _text(a.get("verb")), _text(a.get("group")), _text(a.get("resource")),
                               _text(a.get("subresource")), _text(a.get("namespace")))
    if why is None:
        return {"allowed": True, "reason": f'kubedash: allowed by role "{principal.role}"'}
    return {"allowed": False, "reason": f"kubedash: {why}"}


def resource_refusal(principal, verb: str, group: str, resource: str, subresource: str,
                     namespace: str) -> str | None:
    """Why principal may not `verb` the resource (None: it may): every kind the attributes
    name ("*" for any group, resource or verb) must allow every verb they name."""
    if not verb or not resource:
        return "verb and resource are required"
    targets = [r for r in registry.all_resources()
               if group in ("*", r.group) and resource in ("*", r.plural)]
    reviews = [r for r in REVIEWS if group in ("*", r.group) and resource in ("*", r.plural)]
    if not targets and not reviews:
        return f'kubedash serves no resource "{resource}" in API group "{group}"'
    if subresource:
        if subresource != "status" or not any(r.has_status for r in targets):
            return f'kubedash serves no subresource "{subresource}" of "{resource}"'
        targets = [r for r in targets if r.has_status]
        reviews = []
    verbs = RESOURCE_VERBS if verb == "*" else (verb,)
    if reviews and (resource != "*" or not targets):
        if any(v != "create" for v in verbs):
            return f'{reviews[0].plural} can only be created'
        return None   # every authenticated user may ask about themselves
    if any(v not in RESOURCE_VERBS for v in verbs):
        return f'verb "{verb}" means nothing for {targets[0].plural}'
    ns = namespace or None
    for r in targets:
        for v in verbs:
            why = principal.may(v, ns, r.kind)
            if why is not None:
                return why
    return None


def non_resource_refusal(principal, verb: str, path: str) -> str | None:
    if verb not in ("get", "head"):
        return f'only get is served on non-resource paths, not "{verb}"'
    if path == METRICS_PATH:
        if principal.is_full_admin or (not principal.is_share and principal.username in settings.KUBEDASH_METRICS_USERS):
            return None
        return "/metrics is for admins without namespace or cluster limits and KUBEDASH_METRICS_USERS"
    if any(path == p or (p.endswith("*") and path.startswith(p[:-1])) for p in PUBLIC_PATHS):
        return None
    return f'kubedash serves nothing at "{path}"'


def rules_status(principal, namespace: str) -> dict:
    """SubjectRulesReviewStatus: what principal may do in namespace ("" cluster-wide), one rule
    per kind (its resources, with /status where served) plus the reviews and public paths."""
    rules = []
    ns = namespace or None
    for r in registry.all_resources():
        verbs = [v for v in RESOURCE_VERBS if principal.may(v, ns, r.kind) is None]
        if verbs:
            names = [r.plural] + ([f"{r.plural}/status"] if r.has_status else [])
            rules.append({"verbs": verbs, "apiGroups": [r.group], "resources": names})
    for group in sorted({r.group for r in REVIEWS}):
        rules.append({"verbs": ["create"], "apiGroups": [group],
                      "resources": [r.plural for r in REVIEWS if r.group == group]})
    paths = list(PUBLIC_PATHS) + ([METRICS_PATH] if non_resource_refusal(principal, "get", METRICS_PATH) is None else [])
    return {"resourceRules": rules, "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": paths}],
            "incomplete": False}

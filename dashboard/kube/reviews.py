"""Access reviews: what the caller may do, asked through the API as kube serves it.

SelfSubjectAccessReview and SelfSubjectRulesReview (authorization.k8s.io/v1: `kubectl auth
can-i`, `kubectl auth can-i --list`, dashboards that hide what a user may not do) and
SelfSubjectReview (authentication.k8s.io/v1: `kubectl auth whoami`). Every answer comes from
Principal.may (dashboard/access/principals.py): the roles, namespace limits and clusters that
the API enforces, plus the rule that a followed cluster is read-only; the pages' buttons ask
the same. Nothing here is stored: a review is created, answered and forgotten (201, as kube).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from django.conf import settings

from dashboard.access.principals import READ_VERBS

from . import formats, registry, schema
from . import managed_fields as mf
from .errors import Verbatim, bad_request, invalid, invalid_object

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


def answer(review: Review, principal, body: dict, read_only: str = "", *, manager: str = "") -> dict:
    """The review `body` (already decoded) answered for `principal`: the object kube returns.
    read_only: the cluster when the API is served read-only (`/clusters/<name>/...`): no writes.
    manager: the request's field manager (fieldManager, else its User-Agent), as kube's create
    handler records it in the request object's managedFields before the review's REST sees it."""
    if body.get("apiVersion") not in (None, review.api_version) or body.get("kind") not in (None, review.kind):
        raise bad_request(f"the object sent is not a {review.kind} ({review.api_version})")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise bad_request("spec must be an object")
    seen = _ReadOnly(principal, read_only) if read_only else principal
    if review is WHOAMI:
        # selfsubjectreview/rest.go: a new object, made now; nothing of the request's.
        return {"kind": review.kind, "apiVersion": review.api_version,
                "metadata": {"creationTimestamp": formats.format_time(formats.now())},
                "status": {"userInfo": user_info(principal)}}
    if review is RULES:
        # selfsubjectrulesreview/rest.go: a namespace is required; a new object with the status only.
        if not spec.get("namespace"):
            raise bad_request("no namespace on request")
        return {"kind": review.kind, "apiVersion": review.api_version, "metadata": {"creationTimestamp": None},
                "spec": {}, "status": rules_status(seen, spec["namespace"])}
    # selfsubjectaccessreview/rest.go: validated, then the request object itself is answered, with
    # its status set (and the managedFields the create handler gave it).
    metadata = body.get("metadata") or {}
    fields = _managed_fields(review, {**body, "metadata": {}}, metadata.get("managedFields"), manager)
    validate_access_review(spec, {**metadata, "managedFields": fields})
    out = {"kind": review.kind, "apiVersion": review.api_version,
           "metadata": {"creationTimestamp": None}, "spec": spec}
    if fields:
        out["metadata"]["managedFields"] = fields
    out["status"] = access_status(seen, spec)
    return out


def _managed_fields(review: Review, obj: dict, sent, manager: str) -> list[dict] | None:
    """The managedFields kube's create handler writes on the request object: the ones sent (if
    valid) plus the manager's Update entry for every field it set (against the empty review)."""
    zero = {"metadata": {}, "spec": {}, "status": {}}
    return mf.created(obj, zero, schema.node(review.definition), manager=manager, subresource="",
                      api_version=review.api_version, ignored=(), now=formats.format_time(formats.now()), sent=sent)


def validate_access_review(spec: dict, metadata: dict) -> None:
    """kube's ValidateSelfSubjectAccessReview: exactly one attribute kind, metadata empty (but for
    managedFields). The review's REST names it with the decoded object's kind, which decoding
    leaves empty: `.authorization.k8s.io "" is invalid: …` (kubectl: `The  "" is invalid`)."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    causes = []
    if resource is not None and non_resource is not None:
        attributes = non_resource if isinstance(non_resource, dict) else {}
        shown = f'authorization.NonResourceAttributes{{Path:{_go(attributes.get("path"))}, Verb:{_go(attributes.get("verb"))}}}'
        causes.append(invalid("spec.nonResourceAttributes", Verbatim(shown),
                              "cannot be specified in combination with resourceAttributes"))
    if resource is None and non_resource is None:
        causes.append(invalid("spec.resourceAttributes", "null",
                              "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
    if any(value not in (None, "", 0, {}, []) for key, value in metadata.items() if key != "managedFields"):
        causes.append(invalid("metadata", Verbatim(_go_object_meta(metadata)), "must be empty"))
    if causes:
        error = invalid_object("authorization.k8s.io", "", "", causes)
        error.details = {"group": "authorization.k8s.io", "causes": error.details["causes"]}   # (omitempty)
        raise error


def _go(value, go_type: str = "string") -> str:
    """A field's value as Go's %#v prints it (the types ObjectMeta holds)."""
    if go_type == "string":
        return json.dumps(value if isinstance(value, str) else "", ensure_ascii=False)
    if go_type == "int64":
        return str(value or 0)
    if go_type == "time":
        t = formats.parse_time_lenient(value) if value else None
        if t is None:
            return "time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)"
        return f"time.Date({t.year}, time.{t.strftime('%B')}, {t.day}, {t.hour}, {t.minute}, {t.second}, 0, time.UTC)"
    if not value:
        return f"{go_type}(nil)"
    if go_type == "map[string]string":
        return go_type + "{" + ", ".join(f"{_go(k)}:{_go(v)}" for k, v in sorted(value.items())) + "}"
    if go_type == "[]string":
        return go_type + "{" + ", ".join(_go(v) for v in value) + "}"
    return go_type + "{" + ", ".join(_go_entry(go_type[2:], e if isinstance(e, dict) else {}) for e in value) + "}"


# The struct lists of ObjectMeta, their fields as Go names them: (Go name, JSON name, Go type).
_STRUCTS = {
    "v1.OwnerReference": (("APIVersion", "apiVersion", "string"), ("Kind", "kind", "string"),
                          ("Name", "name", "string"), ("UID", "uid", "string"), ("Controller", "controller", "*bool"),
                          ("BlockOwnerDeletion", "blockOwnerDeletion", "*bool")),
    "v1.ManagedFieldsEntry": (("Manager", "manager", "string"), ("Operation", "operation", "string"),
                              ("APIVersion", "apiVersion", "string"), ("Time", "time", "*time"),
                              ("FieldsType", "fieldsType", "string"), ("FieldsV1", "fieldsV1", "*v1.FieldsV1"),
                              ("Subresource", "subresource", "string")),
}


def _go_entry(go_type: str, entry: dict) -> str:
    parts = []
    for name, key, kind in _STRUCTS[go_type]:
        value = entry.get(key)
        if kind == "string":
            text = _go(value)
        elif kind == "*time":
            text = _go(value, "time") if value else "<nil>"
        elif value is None:
            text = f"({kind})(nil)"
        elif kind == "*bool":
            text = f"(*bool)({'true' if value else 'false'})"
        else:   # a pointer Go prints as its address: the fields, as sent
            text = f"&v1.FieldsV1{{{json.dumps(value, separators=(',', ':'))}}}"
        parts.append(f"{name}:{text}")
    return go_type + "{" + ", ".join(parts) + "}"


def _go_object_meta(m: dict) -> str:
    """ObjectMeta as kube's field error prints it (%#v: it is no fmt.Stringer by value)."""
    deletion = m.get("deletionTimestamp")
    grace = m.get("deletionGracePeriodSeconds")
    parts = [f'Name:{_go(m.get("name"))}', f'GenerateName:{_go(m.get("generateName"))}',
             f'Namespace:{_go(m.get("namespace"))}', f'SelfLink:{_go(m.get("selfLink"))}',
             f'UID:{_go(m.get("uid"))}', f'ResourceVersion:{_go(m.get("resourceVersion"))}',
             f'Generation:{_go(m.get("generation"), "int64")}',
             f'CreationTimestamp:{_go(m.get("creationTimestamp"), "time")}',
             f'DeletionTimestamp:{_go(deletion, "time") if deletion else "<nil>"}',
             f'DeletionGracePeriodSeconds:{"(*int64)(nil)" if grace is None else f"(*int64)({grace})"}',
             f'Labels:{_go(m.get("labels"), "map[string]string")}',
             f'Annotations:{_go(m.get("annotations"), "map[string]string")}',
             f'OwnerReferences:{_go(m.get("ownerReferences"), "[]v1.OwnerReference")}',
             f'Finalizers:{_go(m.get("finalizers"), "[]string")}',
             f'ManagedFields:{_go(m.get("managedFields"), "[]v1.ManagedFieldsEntry")}']
    return "v1.ObjectMeta{" + ", ".join(parts) + "}"


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
    # (the identity provider's groups too, as kube-apiserver lists a JWT's groups)
    groups = [f"kubedash:{principal.role}", "system:authenticated", *principal.idp_groups]
    info = {"username": principal.username, "groups": groups}
    if principal.user_id is not None:
        info["uid"] = str(principal.user_id)
    extra = {}
    if principal.namespaces:
        extra["kubedash.io/namespaces"] = list(principal.namespaces)
    if principal.clusters:
        extra["kubedash.io/clusters"] = list(principal.clusters)
    if principal.idp_groups:
        # where each right comes from: "editor in team-a (group team-a)", "viewer (local grant)"
        extra["kubedash.io/rights"] = [grant.describe() for grant in principal.grants] or ["none"]
    if extra:
        info["extra"] = extra
    return info


def _text(value) -> str:
    return value if isinstance(value, str) else ""


def access_status(principal, spec: dict) -> dict:
    """SubjectAccessReviewStatus for a valid SelfSubjectAccessReviewSpec (validate_access_review)."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is None and non_resource is None:
        validate_access_review(spec, {})
    if non_resource is not None and resource is None:
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

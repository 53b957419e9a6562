"""Impersonation, as kube-apiserver does it: a caller allowed to impersonate sends
`Impersonate-User` (and optionally `Impersonate-Group`, repeatable, `Impersonate-Uid` and
`Impersonate-Extra-<key>`), and the request is then served as that identity: its roles and
limits apply, `kubectl auth whoami` names it, the request log names both (docs/SERVING.md).

Who may impersonate: admins without namespace or cluster limits, and API tokens issued with
`--impersonate` (ApiToken.may_impersonate). Impersonating is acting as anyone, so either can
act with more rights than its own (as kube's `impersonate` verb on users).

Whose permissions apply (the contract a dashboard writing through kubedash relies on):
- `Impersonate-User` names a kubedash user: that user's role, namespace and cluster limits
  (a deactivated user: none);
- otherwise the groups decide: the highest `kubedash:role:admin|editor|viewer` given, limited
  to the namespaces of the `kubedash:namespace:<ns>` groups if there are any, together with the
  group bindings (access/models.py GroupBinding) of any other group given (the union, as for a
  person signed in with those groups); with neither, no permissions at all (only discovery and
  the self reviews answer).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import unquote

from django.contrib.auth import get_user_model

from .models import GroupBinding, Role
from .principals import ROLE_RANK, Grant, Principal, principal_for, widest

PREFIX = "HTTP_IMPERSONATE_"
_PREFIX_LEN = len(PREFIX)
USER = "HTTP_IMPERSONATE_USER"
UID = "HTTP_IMPERSONATE_UID"
GROUP = "HTTP_IMPERSONATE_GROUP"
EXTRA = "HTTP_IMPERSONATE_EXTRA_"

ROLE_GROUP = "kubedash:role:"
NAMESPACE_GROUP = "kubedash:namespace:"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"

CANNOT = "only admins without namespace or cluster limits, and API tokens issued with --impersonate, may impersonate"


class Refused(Exception):
    """A request whose impersonation cannot be served: the Status fields kube answers with."""

    def __init__(self, code: int, reason: str, message: str, details: dict):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


@dataclass(frozen=True)
class Wanted:
    """The identity a request asks to act as."""

    user: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


def _values(header: str | None) -> tuple[str, ...]:
    # A repeated header reaches Django joined with commas (RFC 9110): one value per item.
    return tuple(v.strip() for v in (header or "").split(",") if v.strip())


def wanted(meta) -> Wanted | None:
    """The impersonation a request's headers ask for (None: none). 400 for groups, a uid or
    extra without a user, as kube refuses them."""
    headers = [key for key in meta if key[:_PREFIX_LEN] == PREFIX]   # (every API request asks: kept cheap)
    if not headers:
        return None
    user, uid, groups = meta.get(USER, "").strip(), meta.get(UID, "").strip(), _values(meta.get(GROUP))
    for header, value in (("Impersonate-User", user), ("Impersonate-Uid", uid)):
        if "," in value:
            # A repeated header reaches here joined with commas: one identity is one user (and a
            # name holding a comma cannot be told from two, so it is refused too).
            raise Refused(400, "BadRequest", f"{header} may be sent only once, with one value "
                          f'(got "{value}"): impersonate one user at a time', {})
    extra: dict[str, tuple[str, ...]] = {}
    for key in headers:
        if key.startswith(EXTRA) and len(key) > len(EXTRA):
            # Django turned "-" into "_" and upper-cased the name; kube lower-cases and %-unescapes it.
            name = unquote(key[len(EXTRA):].replace("_", "-")).lower()
            extra[name] = extra.get(name, ()) + _values(meta[key])
    if not user:
        asked = [f"{what} {', '.join(values)}" for what, values in
                 (("groups", groups), ("uid", (uid,) if uid else ()), ("extra", tuple(extra))) if values]
        if asked:
            raise Refused(400, "BadRequest", f"requested {'; '.join(asked)} without impersonating a user: "
                          "send Impersonate-User too (kubectl: --as)", {})
        return None
    return Wanted(user, uid, groups, tuple(sorted(extra.items())))


def groups_for(principal: Principal) -> tuple[str, ...]:
    """The groups that carry a principal's role and namespace limits (the contract above):
    what a kubedash writing to another as its users sends as Impersonate-Group. A person whose
    rights are a union of grants (group bindings) is sent the highest grant alone (one role and
    its limits: the contract cannot say "editor here, viewer there", and sending the widest role
    with the union of namespaces would give more than any grant does), plus their identity
    provider's groups, for the target's own bindings of them."""
    role, namespaces = principal.role, principal.namespaces
    if len(principal.grants) > 1:
        top = max(principal.grants, key=lambda g: ROLE_RANK.get(g.role, 0))
        role, namespaces = top.role, top.namespaces
    return (ROLE_GROUP + role, *(NAMESPACE_GROUP + ns for ns in namespaces), *principal.idp_groups)


def may_impersonate(caller: Principal, token_allows: bool) -> bool:
    if caller.is_share or caller.impersonator:
        return False
    return token_allows or caller.is_full_admin


def resolve(want: Wanted, caller: Principal, token_allows: bool = False) -> Principal:
    """The principal of the identity `caller` asks to act as (403 with kube's wording when
    the caller may not impersonate)."""
    if not may_impersonate(caller, token_allows):
        raise Refused(403, "Forbidden",
                      f'users "{want.user}" is forbidden: User "{caller.username}" cannot impersonate resource '
                      f'"users" in API group "" at the cluster scope: {CANNOT}',
                      {"name": want.user, "kind": "users"})
    return replace(acting_as(want), impersonator=caller.username)


def acting_as(want: Wanted) -> Principal:
    """The impersonated identity's principal (the contract in this module's docstring)."""
    User = get_user_model()
    user = User.objects.filter(**{User.USERNAME_FIELD: want.user}).select_related("kube_profile").first()
    if user is not None:
        base = principal_for(user) if user.is_active else Principal(want.user, "", user_id=user.pk)
    else:
        roles = {g[len(ROLE_GROUP):] for g in want.groups if g.startswith(ROLE_GROUP)}
        role = next((r for r in Role.values if r in roles), "")   # Role.values: highest first
        namespaces = tuple(dict.fromkeys(g[len(NAMESPACE_GROUP):] for g in want.groups
                                         if g.startswith(NAMESPACE_GROUP) and len(g) > len(NAMESPACE_GROUP)))
        base = Principal(want.user, role, namespaces)
        bound = [Grant(b.role, tuple(b.namespaces or ()), tuple(b.clusters or ()), f"group {b.group}")
                 for b in GroupBinding.objects.filter(group__in=want.groups).order_by("group")] if want.groups else []
        if bound:   # identity-provider groups with bindings here: their union with the role groups' grant
            own = [Grant(role, namespaces, (), "kubedash:role group")] if role else []
            base = widest(want.user, tuple(own + bound), idp_groups=tuple(g for g in want.groups
                                                                           if not g.startswith("kubedash:")))
    return replace(base, groups=_groups(want), uid=want.uid, extra=want.extra)


def _groups(want: Wanted) -> tuple[str, ...]:
    """The identity's groups, as kube builds them: those asked for, plus system:authenticated
    (system:unauthenticated for system:anonymous) unless either was asked for."""
    if want.user == ANONYMOUS:
        return want.groups if UNAUTHENTICATED in want.groups else (*want.groups, UNAUTHENTICATED)
    if AUTHENTICATED in want.groups or UNAUTHENTICATED in want.groups:
        return want.groups
    return (*want.groups, AUTHENTICATED)

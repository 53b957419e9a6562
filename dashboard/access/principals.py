"""Who is asking and what they may do: the Principal, and the one place roles are enforced."""
from __future__ import annotations

from dataclasses import dataclass, replace

from . import clusters
from .models import GroupBinding, Role

READ_VERBS = frozenset({"get", "list", "watch"})


SHARE = "share"           # the role of a share link's visitor (not a user role)
SHARE_VERB = "share"      # creating share links: editors and admins, within their own scope
# An impersonated identity that is no kubedash user and names no role group has no role ("").
NO_ROLE_REFUSAL = ("this identity has no kubedash role: impersonate a kubedash user, or add a group "
                   "kubedash:role:viewer, kubedash:role:editor or kubedash:role:admin")


@dataclass(frozen=True)
class Grant:
    """One source of a person's rights: their own grant ("local grant") or a group binding
    ("group <name>"): a role, optionally limited to namespaces and clusters."""

    role: str
    namespaces: tuple[str, ...] = ()
    clusters: tuple[str, ...] = ()
    source: str = "local grant"

    def describe(self, source: bool = True) -> str:
        where = [f"in {', '.join(self.namespaces)}"] if self.namespaces else []
        where += [f"on {', '.join(self.clusters)}"] if self.clusters else []
        return " ".join([self.role, *where, *([f"({self.source})"] if source else [])])


@dataclass(frozen=True)
class Principal:
    """Who is asking and what they may do; attached to request.user by authentication.

    One class for everyone: users (a role, optional namespace limits) and share links (role
    "share", one kind, optionally one namespace, plus a label selector objects must match).
    """

    username: str
    role: str
    namespaces: tuple[str, ...] = ()   # empty: all namespaces
    clusters: tuple[str, ...] = ()     # empty: every cluster (the local store and followed ones)
    kinds: tuple[str, ...] = ()        # empty: all kinds (share links: the one kind shared)
    label_selector: str = ""           # share links: only objects matching it
    share_id: int | None = None        # share links: the ShareLink row
    user_id: int | None = None         # users: whose access changes re-check open channels
    is_authenticated: bool = True
    # Impersonation (access/impersonation.py): who really asked, and the identity they asked
    # for as kube's UserInfo has it (groups, uid, extra as ((key, (values...)), ...)).
    impersonator: str = ""
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # A person whose rights come from more than one source (group bindings, access/models.py
    # GroupBinding): each grant, and the person's groups at the identity provider. `role`,
    # `namespaces` and `clusters` above are then the widest of them (what lists and menus
    # show); `refusal` asks each grant, so a right is never wider than one grant gives.
    grants: tuple[Grant, ...] = ()
    idp_groups: tuple[str, ...] = ()

    @property
    def rights_summary(self) -> str:
        """For a union of grants, each in short ("editor in team-a · viewer"); "" otherwise (the
        header then shows the role and its namespaces)."""
        return " · ".join(g.describe(source=False) for g in self.grants) if len(self.grants) > 1 else ""

    @property
    def namespaces_here(self) -> tuple[str, ...]:
        """The namespace limits that apply in the page's cluster (empty: none). With several
        grants `namespaces` is their union across every cluster; here only the grants that
        reach this cluster count, so a filter built from it is never wider than they give
        (a grant for team-b in prod shows nothing of team-b in local)."""
        if len(self.grants) <= 1:
            return self.namespaces
        here = [g.namespaces for g in self.grants if not g.clusters or clusters.current() in g.clusters]
        if not here:
            return (NO_NAMESPACE,)   # no grant reaches this cluster: a filter that matches nothing
        return () if any(not lim for lim in here) else tuple(sorted({ns for lim in here for ns in lim}))

    @property
    def is_share(self) -> bool:
        return self.role == SHARE

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN

    @property
    def is_full_admin(self) -> bool:
        """An admin without namespace or cluster limits: the only principal the admin pages
        (every token and share link, followed clusters, /metrics, Django's admin) serve. A
        limited admin sees only its own tokens and links there."""
        if self.grants:
            return any(full_admin_role(g.role, g.namespaces, g.clusters) for g in self.grants)
        return full_admin_role(self.role, self.namespaces, self.clusters)

    def sees_cluster(self, name: str) -> bool:
        return not self.clusters or name in self.clusters

    def can(self, verb: str, namespace: str | None, kind: str | None = None) -> bool:
        """The one place roles are enforced (API, pages, forms, websockets).

        `kind` is required for principals limited to kinds (share links): without it, or
        with another kind, the answer is no - so a caller that forgets it fails closed.
        """
        return self.refusal(verb, namespace, kind) is None

    def refusal(self, verb: str, namespace: str | None, kind: str | None = None) -> str | None:
        """Why `can` says no, in words (None: it says yes). With several grants: yes when any
        grant says yes (their union), else the first grant's reason."""
        if len(self.grants) > 1:
            reasons = [replace(self, grants=(), role=g.role, namespaces=g.namespaces, clusters=g.clusters)
                       .refusal(verb, namespace, kind) for g in self.grants]
            return None if None in reasons else reasons[0]
        if not self.role:
            return NO_ROLE_REFUSAL
        if self.kinds and kind not in self.kinds:
            return f"{self.username} may see only {', '.join(self.kinds)} objects"
        if not self.sees_cluster(clusters.current()):
            return f'cluster "{clusters.current()}" is not among this user\'s clusters'   # (access/clusters.py)
        if self.namespaces and (namespace is None or namespace not in self.namespaces):
            # Like a namespaced RoleBinding: no cluster-wide reads, nothing outside the list.
            if namespace is None:
                return "this user is limited to namespaces " + ", ".join(self.namespaces) + ": nothing cluster-wide"
            return f'namespace "{namespace}" is not among this user\'s namespaces (' + ", ".join(self.namespaces) + ")"
        if verb in READ_VERBS or self.role in (Role.ADMIN, Role.EDITOR):
            return None
        return f'role "{self.role}" may only read (get, list, watch)'

    def may(self, verb: str, namespace: str | None, kind: str | None = None) -> str | None:
        """What this principal may actually do here, as `refusal` words it (None: allowed):
        `can`, and writes only to kubedash's own objects (a followed cluster is a read-only
        copy). The API's access reviews (`kubectl auth can-i`) and the pages' buttons ask this."""
        why = self.refusal(verb, namespace, kind)
        if why is None and verb not in READ_VERBS and not clusters.is_local():
            return f'cluster "{clusters.current()}" is followed read-only: change it in the cluster itself'
        return why


def full_admin_role(role: str, namespaces, clusters) -> bool:
    """Whether a user's grant is an admin's without limits (what Django's is_staff and
    is_superuser follow: signals.sync_staff_flags)."""
    return role == Role.ADMIN and not namespaces and not clusters


NO_NAMESPACE = "\x00"   # namespaces_here when no grant reaches the cluster: no object's namespace


ROLE_RANK = {Role.VIEWER: 1, Role.EDITOR: 2, Role.ADMIN: 3}


def principal_for(user) -> Principal:
    """The one place a user's rights are computed: the union of their own grant (the Profile)
    and the bindings of their identity provider's groups (GroupBinding)."""
    profile = getattr(user, "kube_profile", None)
    if profile is None:
        role = Role.ADMIN if user.is_superuser else Role.VIEWER
        return Principal(user.get_username(), role, user_id=user.pk)
    own = Grant(profile.role, tuple(profile.namespaces or ()), tuple(profile.clusters or ()))
    groups = tuple(profile.groups or ())
    if not groups:
        return Principal(user.get_username(), own.role, own.namespaces, clusters=own.clusters, user_id=user.pk,
                         grants=(own,) if own.role else ())
    bindings = GroupBinding.objects.filter(group__in=groups).order_by("group")
    grants = tuple(g for g in (own, *(Grant(b.role, tuple(b.namespaces or ()), tuple(b.clusters or ()),
                                            f"group {b.group}") for b in bindings)) if g.role)
    return widest(user.get_username(), grants, user_id=user.pk, idp_groups=groups)


def widest(username: str, grants: tuple[Grant, ...], **fields) -> Principal:
    """A principal holding `grants`: its role the highest, its namespaces and clusters the union
    (empty when any grant has no such limit). No grant: no role (a page says whom to ask)."""
    if not grants:
        return Principal(username, "", **fields)

    def union(limits):
        return () if any(not lim for lim in limits) else tuple(sorted({x for lim in limits for x in lim}))

    role = max((g.role for g in grants), key=lambda r: ROLE_RANK.get(r, 0))
    return Principal(username, role, union([g.namespaces for g in grants]),
                     clusters=union([g.clusters for g in grants]), grants=grants, **fields)

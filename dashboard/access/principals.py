"""Who is asking and what they may do: the Principal, and the one place roles are enforced."""
from __future__ import annotations

from dataclasses import dataclass

from . import clusters
from .models import Role

READ_VERBS = frozenset({"get", "list", "watch"})


SHARE = "share"           # the role of a share link's visitor (not a user role)
SHARE_VERB = "share"      # creating share links: editors and admins, within their own scope
# An impersonated identity that is no kubedash user and names no role group has no role ("").
NO_ROLE_REFUSAL = ("this identity has no kubedash role: impersonate a kubedash user, or add a group "
                   "kubedash:role:viewer, kubedash:role:editor or kubedash:role:admin")


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
        """Why `can` says no, in words (None: it says yes)."""
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


def principal_for(user) -> Principal:
    profile = getattr(user, "kube_profile", None)
    if profile is None:
        role = Role.ADMIN if user.is_superuser else Role.VIEWER
        return Principal(user.get_username(), role, user_id=user.pk)
    return Principal(user.get_username(), profile.role, tuple(profile.namespaces or ()),
                     clusters=tuple(profile.clusters or ()), user_id=user.pk)


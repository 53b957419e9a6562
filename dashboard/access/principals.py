"""Who is asking and what they may do: the Principal, and the one place roles are enforced."""
from __future__ import annotations

from dataclasses import dataclass

from . import clusters
from .models import Role

READ_VERBS = frozenset({"get", "list", "watch"})


SHARE = "share"           # the role of a share link's visitor (not a user role)
SHARE_VERB = "share"      # creating share links: editors and admins, within their own scope


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

    @property
    def is_share(self) -> bool:
        return self.role == SHARE

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN

    def sees_cluster(self, name: str) -> bool:
        return not self.clusters or name in self.clusters

    def can(self, verb: str, namespace: str | None, kind: str | None = None) -> bool:
        """The one place roles are enforced (API, pages, forms, websockets).

        `kind` is required for principals limited to kinds (share links): without it, or
        with another kind, the answer is no - so a caller that forgets it fails closed.
        """
        if self.kinds and kind not in self.kinds:
            return False
        if not self.sees_cluster(clusters.current()):
            return False   # the cluster this request is about (access/clusters.py)
        if self.namespaces and (namespace is None or namespace not in self.namespaces):
            # Like a namespaced RoleBinding: no cluster-wide reads, nothing outside the list.
            return False
        if verb in READ_VERBS:
            return True
        return self.role in (Role.ADMIN, Role.EDITOR)


def principal_for(user) -> Principal:
    profile = getattr(user, "kube_profile", None)
    if profile is None:
        role = Role.ADMIN if user.is_superuser else Role.VIEWER
        return Principal(user.get_username(), role, user_id=user.pk)
    return Principal(user.get_username(), profile.role, tuple(profile.namespaces or ()),
                     clusters=tuple(profile.clusters or ()), user_id=user.pk)


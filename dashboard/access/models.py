"""Who may do what: a role per user (optionally limited to namespaces) and API tokens."""
import hashlib

from django.conf import settings
from django.db import models


# The session key holding the Profile's session_epoch at sign-in (signals.py writes it,
# sessions.py compares it: a raised epoch ends every older session).
EPOCH_KEY = "kubedash_epoch"


class Role(models.TextChoices):
    ADMIN = "admin"
    EDITOR = "editor"
    VIEWER = "viewer"


class Profile(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="kube_profile")
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.VIEWER)
    # Empty: every namespace. Otherwise the only namespaces this user may see or change.
    namespaces = models.JSONField(default=list, blank=True)
    # Empty: every cluster. Otherwise the only clusters (access/clusters.py) this user may see.
    clusters = models.JSONField(default=list, blank=True)
    # Bumped by logout: every session signed in before it stops (access/sessions.py).
    session_epoch = models.PositiveIntegerField(default=0)   # a session holds it under EPOCH_KEY
    # The groups the identity provider last said this person is in (OpenID Connect sign-in and
    # each token refresh, access/oidc.py): what their GroupBindings are looked up by.
    groups = models.JSONField(default=list, blank=True)
    # The OpenID subject (`iss` + `sub`) this user signed in as: back-channel logout names it.
    oidc_subject = models.CharField(max_length=512, blank=True, default="", db_index=True)


def hash_token(token: str) -> str:
    # Tokens carry 256 random bits, so a fast hash is as safe as a slow one and keeps auth cheap.
    return hashlib.sha256(token.encode()).hexdigest()


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, default="")
    token_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)
    expires = models.DateTimeField(null=True, blank=True)   # None: until revoked
    # May send Impersonate-* headers (access/impersonation.py), acting as any identity: set only
    # by an admin (`manage.py issue_token ... --impersonate`), e.g. for a dashboard that writes
    # to this kubedash as its own users. Admins may impersonate without it.
    may_impersonate = models.BooleanField(default=False)


class ShareLink(models.Model):
    """A read-only, expiring, revocable view of one list page (kind, namespaces, selector).

    Only the sha256 of the token is kept: the link is shown once, at creation.
    """

    token_hash = models.CharField(max_length=64, unique=True)
    label = models.CharField(max_length=100)
    kind = models.CharField(max_length=32)                             # Lease, Endpoints or Job
    namespace = models.CharField(max_length=253, blank=True, default="")  # "": all namespaces
    # Several namespaces (a namespace-limited creator sharing "All namespaces": theirs); when set,
    # the link shows these and `namespace` is "". Read through scope_namespaces().
    namespaces = models.JSONField(default=list, blank=True)
    cluster = models.CharField(max_length=63, default="local")   # the one cluster it shows (access/clusters.py)
    label_selector = models.CharField(max_length=1000, blank=True, default="")
    creator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="share_links")
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()
    last_used = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def scope_namespaces(self) -> tuple[str, ...]:
        """The namespaces the link shows (empty: every namespace)."""
        if self.namespaces:
            return tuple(self.namespaces)
        return (self.namespace,) if self.namespace else ()

    def state(self, now) -> str:
        """"active", "expired" or "revoked" at `now`."""
        if self.revoked_at is not None:
            return "revoked"
        return "active" if now < self.expires else "expired"


class AccessChange(models.Model):
    """A notice that some access changed: "user:<id>", "token:<id>" or "share:<id>".

    Written in the transaction that makes the change (access/signals.py), so it commits with
    it; every process's watch hub reads the new rows and re-checks the channels (websockets,
    watches) opened with that access. Rows are kept only briefly (signals.PRUNE_AFTER).
    """

    id = models.BigAutoField(primary_key=True)
    subject = models.CharField(max_length=64)
    at = models.DateTimeField(auto_now_add=True, db_index=True)


def username_subject(username: str) -> str:
    """The AccessChange subject of a user name, whether or not a user has it yet (a watch that
    impersonates a name re-checks when it becomes, or stops being, a user); hashed to fit."""
    return "username:" + hashlib.sha256(username.encode()).hexdigest()[:40]


class GroupBinding(models.Model):
    """A group of the identity provider gets a role, optionally limited to namespaces and
    clusters, like a user's own grant. A person's rights are the union of the bindings of their
    groups and their own grant (access/principals.py principal_for)."""

    group = models.CharField(max_length=256, unique=True)
    role = models.CharField(max_length=8, choices=Role.choices)
    namespaces = models.JSONField(default=list, blank=True)   # empty: every namespace
    clusters = models.JSONField(default=list, blank=True)     # empty: every cluster
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["group"]


class OidcSession(models.Model):
    """A browser session signed in through the identity provider, by the provider's session id
    (`sid`) and subject: what a back-channel logout names (access/oidc.py end_sessions)."""

    session_key = models.CharField(max_length=40, primary_key=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_sessions")
    sid = models.CharField(max_length=255, blank=True, default="", db_index=True)
    subject = models.CharField(max_length=512, db_index=True)
    created = models.DateTimeField(auto_now_add=True)

"""Managing people from the dashboard (web/people_views.py): their grant, their account, their tokens.

Every change goes through the models' own saves, so the access-change notices (signals.py) close
or re-check that user's open pages and watches exactly as Django's admin and `manage.py` do: a
grant saved here is a Profile save (staff flags follow, "user:<id>" is recorded), a deactivation
a User save, "sign out everywhere" signals.sign_out_everywhere, a revoked token an ApiToken save.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import transaction

from .models import ApiToken, Profile, Role
from .principals import principal_for
from .signals import sign_out_everywhere

__all__ = ["add_person", "deactivate", "reactivate", "revoke_token", "self_change_refusal", "set_grant",
           "sign_out_everywhere"]


def set_grant(user, role: str, namespaces: list[str], clusters: list[str]) -> bool:
    """Give `user` this role and these limits (empty: all); True when anything changed."""
    if role not in Role.values:
        raise ValueError(f"role must be one of {', '.join(Role.values)}")
    namespaces, clusters = sorted(set(namespaces)), sorted(set(clusters))
    with transaction.atomic():
        profile, _ = Profile.objects.select_for_update().get_or_create(user=user)
        if (profile.role, sorted(profile.namespaces or ()), sorted(profile.clusters or ())) == (role, namespaces, clusters):
            return False
        profile.role, profile.namespaces, profile.clusters = role, namespaces, clusters
        profile.save()   # signals: staff flags follow, open channels of this user re-check
    return True


def add_person(username: str, password: str, role: str, namespaces: list[str], clusters: list[str]):
    """A new local user with this password and grant."""
    with transaction.atomic():
        user = get_user_model().objects.create_user(username=username, password=password)
        set_grant(user, role, namespaces, clusters)
    return user


def deactivate(user) -> None:
    """The user can no longer sign in; their sessions, sockets, watches and tokens stop at once
    (every check asks is_active: sessions.session_user, authentication's token query)."""
    if user.is_active:
        user.is_active = False
        user.save(update_fields=["is_active"])


def reactivate(user) -> None:
    if not user.is_active:
        user.is_active = True
        user.save(update_fields=["is_active"])


def revoke_token(token: ApiToken) -> None:
    if not token.revoked:
        token.revoked = True
        token.save(update_fields=["revoked"])


def self_change_refusal(actor, user, role: str, namespaces, clusters) -> str | None:
    """An admin does not take away their own admin rights here (nobody else might be left to give
    them back): only another admin, or Django's admin, may."""
    if actor.pk != user.pk:
        return None
    mine = principal_for(actor)
    if (role, sorted(namespaces), sorted(clusters)) != (mine.role, sorted(mine.namespaces), sorted(mine.clusters)):
        return "You cannot change your own role or limits here: ask another admin."
    return None

"""Access-change notices: whatever changes who may see what leaves an AccessChange row.

Django's is_staff and is_superuser follow the kubedash grant (sync_staff_flags): true only for an
admin without namespace or cluster limits, whenever the profile or the user is saved, so they are
never a second source of rights (Django's admin serves only such admins: web/admin.py). Every user
has a profile from its creation (a superuser's says admin).

Users (deactivated, deleted, signed out), profiles (role, namespace limits), API tokens
(revoked, expired, deleted) and share links (revoked) each record "<what>:<id>" in the same
transaction as the change. Every process's watch hub reads these rows (kube/notify.py) and
re-checks the long-lived channels opened with that access. `access_changed` fires on commit
so the process that made the change can ring the other processes at once (Redis) instead of
waiting for their next database poll; it must never fail the change itself.
"""
from __future__ import annotations

import logging
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_logged_out
from django.db import transaction
from django.db.models import F
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import Signal
from django.utils import timezone

from .models import EPOCH_KEY, AccessChange, ApiToken, GroupBinding, Profile, Role, ShareLink, username_subject
from .principals import full_admin_role

log = logging.getLogger(__name__)

access_changed = Signal()        # on commit; kwargs: subjects (list of "what:id")
PRUNE_AFTER = timedelta(minutes=10)
PRUNE_EVERY = 200                # rows: prune old notices once in this many inserts


def record(*subjects: str) -> None:
    """Note that access changed for these subjects (inside the caller's transaction)."""
    rows = AccessChange.objects.bulk_create([AccessChange(subject=s) for s in subjects])
    if rows and rows[-1].id is not None and rows[-1].id % PRUNE_EVERY == 0:
        AccessChange.objects.filter(at__lt=timezone.now() - PRUNE_AFTER).delete()
    transaction.on_commit(lambda: _announce(list(subjects)))


def _announce(subjects: list[str]) -> None:
    for _receiver, result in access_changed.send_robust(sender=AccessChange, subjects=subjects):
        if isinstance(result, Exception):   # e.g. Redis down: the database carries the notice
            log.warning("access-change notice not announced: %s", result)


def sign_out_everywhere(user) -> None:
    """End every session of the user (all browsers, all tabs): bump the session epoch."""
    with transaction.atomic():
        profile, created = Profile.objects.get_or_create(
            user=user, defaults={"role": Role.ADMIN if user.is_superuser else Role.VIEWER, "session_epoch": 1})
        if not created:
            Profile.objects.filter(pk=profile.pk).update(session_epoch=F("session_epoch") + 1)
        record(f"user:{user.pk}")


def _only_last_login(update_fields) -> bool:
    # last_login is written on every login and changes no access.
    return update_fields is not None and set(update_fields) <= {"last_login"}


def _user_saving(sender, instance, update_fields=None, **kwargs):
    """Whatever was set on the user, its staff flags say what its profile grants."""
    if instance.pk is None or _only_last_login(update_fields):
        return
    profile = Profile.objects.filter(user_id=instance.pk).only("role", "namespaces", "clusters").first()
    if profile is not None:
        instance.is_staff = instance.is_superuser = full_admin_role(profile.role, profile.namespaces,
                                                                      profile.clusters)


def _user_saved(sender, instance, created, update_fields=None, **kwargs):
    if created:
        # From its creation every user has a grant, the one place its rights come from.
        Profile.objects.get_or_create(user=instance,
                                      defaults={"role": Role.ADMIN if instance.is_superuser else Role.VIEWER})
    if not _only_last_login(update_fields):
        # (by name too: a watch impersonating this name before it was a user re-checks: signals
        # subjects in kube/watch_views.py)
        record(f"user:{instance.pk}", username_subject(instance.get_username()))


def _user_deleted(sender, instance, **kwargs):
    record(f"user:{instance.pk}", username_subject(instance.get_username()))


def sync_staff_flags(profile: Profile) -> None:
    """is_staff and is_superuser: true exactly for an admin without namespace or cluster limits."""
    full = full_admin_role(profile.role, profile.namespaces, profile.clusters)
    get_user_model().objects.filter(pk=profile.user_id).exclude(is_staff=full, is_superuser=full) \
        .update(is_staff=full, is_superuser=full)


def _profile_saved(sender, instance, **kwargs):
    sync_staff_flags(instance)
    record(f"user:{instance.user_id}")


def _profile_deleted(sender, instance, **kwargs):
    record(f"user:{instance.user_id}")


def _binding_changed(sender, instance, **kwargs):
    """Every member of the group (as their last sign-in or refresh said) re-checks."""
    members = [f"user:{user_id}" for user_id, groups in Profile.objects.exclude(groups=[])
               .values_list("user_id", "groups") if instance.group in (groups or ())]
    if members:
        record(*members)


def _token_changed(sender, instance, created=False, update_fields=None, **kwargs):
    if not created and (update_fields is None or not set(update_fields) <= {"last_used"}):
        record(f"token:{instance.pk}")


def _share_changed(sender, instance, created=False, update_fields=None, **kwargs):
    if not created and (update_fields is None or not set(update_fields) <= {"last_used"}):
        record(f"share:{instance.pk}")


def _logged_in(sender, request, user, **kwargs):
    # The session remembers which epoch it was signed in under (sessions.session_current).
    if request is not None and hasattr(request, "session"):
        profile = Profile.objects.filter(user=user).only("session_epoch").first()
        request.session[EPOCH_KEY] = profile.session_epoch if profile else 0


def _logged_out(sender, request, user, **kwargs):
    if user is not None and user.pk is not None:
        sign_out_everywhere(user)


def connect() -> None:
    User = get_user_model()
    pre_save.connect(_user_saving, sender=User, dispatch_uid="access-user-saving")
    post_save.connect(_user_saved, sender=User, dispatch_uid="access-user-saved")
    post_delete.connect(_user_deleted, sender=User, dispatch_uid="access-user-deleted")
    post_save.connect(_profile_saved, sender=Profile, dispatch_uid="access-Profile-saved")
    post_delete.connect(_profile_deleted, sender=Profile, dispatch_uid="access-Profile-deleted")
    for model, handler in ((ApiToken, _token_changed), (ShareLink, _share_changed), (GroupBinding, _binding_changed)):
        post_save.connect(handler, sender=model, dispatch_uid=f"access-{model.__name__}-saved")
        post_delete.connect(handler, sender=model, dispatch_uid=f"access-{model.__name__}-deleted")
    user_logged_in.connect(_logged_in, dispatch_uid="access-logged-in")
    user_logged_out.connect(_logged_out, dispatch_uid="access-logged-out")

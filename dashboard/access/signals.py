"""Access-change notices: whatever changes who may see what leaves an AccessChange row.

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
from django.db.models.signals import post_delete, post_save
from django.dispatch import Signal
from django.utils import timezone

from .models import AccessChange, ApiToken, Profile, Role, ShareLink
from .sessions import EPOCH_KEY

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
    for receiver, result in access_changed.send_robust(sender=AccessChange, subjects=subjects):
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


def _user_saved(sender, instance, created, update_fields=None, **kwargs):
    # Only fields that change access: last_login is written on every login.
    if not created and (update_fields is None or not set(update_fields) <= {"last_login"}):
        record(f"user:{instance.pk}")


def _user_deleted(sender, instance, **kwargs):
    record(f"user:{instance.pk}")


def _profile_changed(sender, instance, **kwargs):
    record(f"user:{instance.user_id}")


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
    post_save.connect(_user_saved, sender=User, dispatch_uid="access-user-saved")
    post_delete.connect(_user_deleted, sender=User, dispatch_uid="access-user-deleted")
    for model, handler in ((Profile, _profile_changed), (ApiToken, _token_changed), (ShareLink, _share_changed)):
        post_save.connect(handler, sender=model, dispatch_uid=f"access-{model.__name__}-saved")
        post_delete.connect(handler, sender=model, dispatch_uid=f"access-{model.__name__}-deleted")
    user_logged_in.connect(_logged_in, dispatch_uid="access-logged-in")
    user_logged_out.connect(_logged_out, dispatch_uid="access-logged-out")

"""The notifications' actions: the command (`manage.py notify`) and the page both call these, so
they check the same things. Errors are ValueError with words for a person."""
from __future__ import annotations

import re
import uuid
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from dashboard.access import clusters
from dashboard.access.principals import principal_for
from dashboard.follow.secrets import encrypt
from dashboard.kube.errors import ApiError
from dashboard.kube.selectors import parse_label_selector

from . import delivery, messages, owners
from .models import Channel, Notification, Outbox, Rule
from .rules import KINDS, rule_refusal

NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class NameRefused(ValueError):
    """The name is the problem (the page shows it at the name field)."""


def _check_name(name: str, what: str) -> str:
    if not NAME_RE.match(name or ""):
        raise NameRefused(f'{what} name "{name}" must be lower-case letters, digits and "-" (at most 63)')
    return name


def add_channel(name: str, url: str, secret: str = "", created_by=None) -> Channel:
    """An admin's new channel; its URL is checked (form, then destination) and stored encrypted."""
    _check_name(name, "a channel")
    url = (url or "").strip()
    why = delivery.url_refusal(url)
    if why:
        raise ValueError(why)
    why = delivery.destination_refusal(url)
    if why:
        raise ValueError(f"not a destination kubedash sends to: {why}")
    if secret and urlsplit_scheme(url) not in delivery.WEBHOOK_SCHEMES:
        raise ValueError("a secret signs webhook (http/https) bodies only; Apprise services have their own")
    try:
        return Channel.objects.create(name=name, url=encrypt(url.encode()),
                                      secret=encrypt(secret.encode()) if secret else None,
                                      shown=delivery.masked(url), created_by=created_by)
    except IntegrityError:
        raise NameRefused(f'a channel named "{name}" exists already') from None


def urlsplit_scheme(url: str) -> str:
    return url.partition("://")[0].lower()


def remove_channel(name: str) -> None:
    if not Channel.objects.filter(name=name).delete()[0]:
        raise ValueError(f'no channel named "{name}"')


def add_rule(name: str, kind: str, channels: list[str], owner, *, namespace: str = "", selector: str = "",
             cluster: str = clusters.LOCAL, for_seconds: float = 0, below: float | None = None,
             reason: str = "", group: str = "") -> Rule:
    """A rule owned by `owner`, or, when `group` is given, by that group (`owner`, who makes it, must
    be an admin without limits; the group must have a binding: its rights are the rule's)."""
    _check_name(name, "a rule")
    why = rule_refusal(kind, for_seconds, below, reason)
    if why:
        raise ValueError(why)
    if selector:
        try:
            parse_label_selector(selector)
        except ApiError as err:
            raise ValueError(f"--selector: {err.message}") from None
    if not clusters.NAME_RE.match(cluster or ""):
        raise ValueError(f'cluster "{cluster}" is not a cluster name')
    if group:
        if not principal_for(owner).is_full_admin:
            raise ValueError("only admins without namespace or cluster limits make rules for a group")
        if group not in owners.group_choices():
            raise ValueError(f'group "{group}" has no group binding (its rights are the rule\'s): add one first')
    principal = owners.group_principal(group) if group else principal_for(owner)
    with clusters.within(cluster):
        refusal = principal.refusal("get", namespace or None, KINDS[kind].watches)
    if refusal and not (principal.namespaces and not namespace):
        raise ValueError(f"{f'group {group}' if group else owner.get_username()} may not see that: {refusal}")
    found = list(Channel.objects.filter(name__in=channels))
    missing = sorted(set(channels) - {c.name for c in found})
    if missing:
        raise ValueError("no channel named " + ", ".join(f'"{m}"' for m in missing))
    try:
        with transaction.atomic():
            rule = Rule.objects.create(name=name, kind=kind, cluster=cluster, namespace=namespace, selector=selector,
                                       for_seconds=for_seconds, below_percent=below, reason=reason, owner=owner,
                                       owner_group=group)
            rule.channels.set(found)
    except IntegrityError:
        raise ValueError(f'a rule named "{name}" exists already') from None
    return rule


def remove_rule(name: str) -> None:
    if not Rule.objects.filter(name=name).delete()[0]:
        raise ValueError(f'no rule named "{name}"')


def mute(rule: Rule, minutes: float) -> Rule:
    """Mute for `minutes` (0: unmute)."""
    rule.muted_until = timezone.now() + timedelta(minutes=minutes) if minutes > 0 else None
    rule.save(update_fields=["muted_until"])
    return rule


def send_test(channel: Channel, by: str) -> Outbox:
    """A test message to one channel, through the outbox like any other (the leader sends it)."""
    msg_id = f"test-{uuid.uuid4().hex[:16]}"
    now = timezone.now()
    payload = {"id": msg_id, "rule": "(test)", "state": "test", "when": "test", "kind": "", "cluster": "",
               "namespace": "", "name": "", "summary": f"A test from kubedash, sent by {by}.",
               "details": {}, "at": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "url": messages.conf.PUBLIC_URL + "/notifications/"}
    return Outbox.objects.create(message_id=msg_id, channel=channel, payload=payload, created=now, next_attempt_at=now)


def mark_read(user) -> int:
    n = Notification.objects.filter(user=user, read_at__isnull=True).update(read_at=timezone.now())
    if n:
        with transaction.atomic():
            messages.record_notice(messages.bell_subject(user.pk))
    return n


def owner_named(username: str):
    User = get_user_model()
    try:
        return User.objects.get(username=username)
    except User.DoesNotExist:
        raise ValueError(f'no user named "{username}"') from None


# The delivery log and read notifications are kept this long (the maintenance leader's clean-up).
LOG_RETENTION = timedelta(days=7)
READ_RETENTION = timedelta(days=30)


def purge_old() -> int:
    """Messages no longer waiting (delivered, folded, failed) and read notifications, past their
    retention; rows removed."""
    now = timezone.now()
    removed = Outbox.objects.exclude(status=Outbox.PENDING).filter(created__lt=now - LOG_RETENTION).delete()[0]
    return removed + Notification.objects.filter(read_at__lt=now - READ_RETENTION).delete()[0]

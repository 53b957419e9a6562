"""The words and the body of a message, and writing a decision's messages (one transaction with the
decision: the outbox row for each of the rule's channels, the owner's in-app notification and the
notice that rings their bell)."""
from __future__ import annotations

import hashlib
from datetime import datetime

from django.utils import timezone

from dashboard.access.signals import record as record_notice
from dashboard.kube.formats import format_time

from . import conf, owners
from .models import Channel, Notification, Outbox, Rule

FIRING, RESOLVED = "firing", "resolved"
PLURALS = {"Lease": "leases", "Endpoints": "endpoints", "Job": "jobs", "Event": "events"}


def bell_subject(user_id: int) -> str:
    """The notice (access/signals.py's, read by every process's hub) that a user's bell changed."""
    return f"bell:{user_id}"


def message_id(rule: Rule, cluster: str, kind: str, namespace: str, name: str, episode: int, state: str) -> str:
    """Stable per rule, object, episode and transition: a retry, a second channel or a second
    evaluation of the same decision all carry it (receivers dedupe by it)."""
    key = hashlib.sha256(f"{cluster}/{kind}/{namespace}/{name}".encode()).hexdigest()[:16]
    return f"{rule.pk}-{key}-{episode}-{state}"


def object_url(cluster: str, kind: str, namespace: str, name: str, rv: int | None) -> str:
    """The object's page (at that revision, when known)."""
    path = f"/{PLURALS.get(kind, kind.lower())}/{namespace}/{name}/"
    query = [f"cluster={cluster}"] if cluster != "local" else []
    if rv:
        query.append(f"at={rv}")
    return conf.PUBLIC_URL + path + ("?" + "&".join(query) if query else "")


def body(rule: Rule, state: str, msg_id: str, cluster: str, kind: str, namespace: str, name: str,
         summary: str, details: dict | None, at: datetime, rv: int | None) -> dict:
    """The webhook's JSON body (docs/OPERATIONS.md, "Notifications"): Apprise gets its title and summary."""
    return {"id": msg_id, "rule": rule.name, "state": state, "when": rule.kind, "kind": kind,
            "cluster": cluster, "namespace": namespace, "name": name, "summary": summary, "details": details or {},
            "at": format_time(at), "url": object_url(cluster, kind, namespace, name, rv)}


def title(payload: dict) -> str:
    if payload.get("digest"):
        return f"kubedash: {len(payload['messages'])} more notifications"
    word = "FIRING" if payload["state"] == FIRING else "resolved"
    return f"[{word}] {payload['rule']}: {payload['kind']} {payload['namespace']}/{payload['name']}"


def text(payload: dict) -> str:
    if payload.get("digest"):
        return "\n".join(f"- {title(p)}: {p['summary']}" for p in payload["messages"])
    return f"{payload['summary']}\n{payload['url']}"


def write(rule: Rule, payload: dict, channels: list[Channel] | None = None) -> int:
    """(Inside the decision's transaction) the outbox rows and the owner's notification (a group
    owner's: each member's); how many
    outbox rows. A muted rule writes nothing."""
    if rule.muted():
        return 0
    channels = list(rule.channels.all()) if channels is None else channels
    now = timezone.now()
    Outbox.objects.bulk_create([Outbox(message_id=payload["id"], channel=c, rule=rule, payload=payload, created=now,
                                       next_attempt_at=now) for c in channels])
    for user_id in owners.recipients(rule):
        Notification.objects.create(user_id=user_id, message_id=payload["id"], payload=payload, created=now)
        record_notice(bell_subject(user_id))
    return len(channels)

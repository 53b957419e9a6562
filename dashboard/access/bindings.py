"""Group bindings: the one way they change (the command, the admin page), with the same checks."""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from .models import GroupBinding, Role

NAME_LIMIT = 253


def _names(values, what: str) -> list[str]:
    names = sorted({v.strip() for v in values if v and v.strip()})
    for name in names:
        if len(name) > NAME_LIMIT or any(c.isspace() for c in name) or "," in name:
            raise ValidationError(f'"{name}" is not a {what} name')
    return names


def bind(group: str, role: str, namespaces=(), clusters=()) -> GroupBinding:
    group = (group or "").strip()
    if not group or len(group) > 256:
        raise ValidationError("a group name is required (at most 256 characters)")
    if role not in Role.values:
        raise ValidationError(f'role must be one of {", ".join(Role.values)}')
    with transaction.atomic():
        binding, _ = GroupBinding.objects.update_or_create(group=group, defaults={
            "role": role, "namespaces": _names(namespaces, "namespace"), "clusters": _names(clusters, "cluster")})
    return binding


def unbind(group: str) -> bool:
    with transaction.atomic():
        deleted, _ = GroupBinding.objects.filter(group=group).delete()
    return bool(deleted)

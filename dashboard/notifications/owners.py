"""Who a rule answers to: its owner (a user), or a group (Rule.owner_group). A group's rights are
its binding's (access/models.py GroupBinding; none: no rights, told nothing), built with the
principals' own helpers; its members are the users the identity provider put in it (Profile.groups)
and local users in a Django group of that name (as saved views count them: saved/saving.py)."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import connection

from dashboard.access.models import GroupBinding, Profile
from dashboard.access.principals import Grant, Principal, principal_for, widest


def group_principal(group: str) -> Principal:
    binding = GroupBinding.objects.filter(group=group).first()
    grants = (Grant(binding.role, tuple(binding.namespaces or ()), tuple(binding.clusters or ()),
                    f"group {group}"),) if binding is not None and binding.role else ()
    return widest(f"group:{group}", grants)


def rule_principal(rule) -> Principal:
    return group_principal(rule.owner_group) if rule.owner_group else principal_for(rule.owner)


def group_members(group: str) -> list[int]:
    """The active users in `group` (ids, sorted)."""
    # Only the profiles that can hold it are read. Profile.groups is a JSON list: PostgreSQL finds
    # them itself; SQLite has no JSON "contains", so those whose JSON text holds the name (a name
    # that JSON writes as is), checked exactly here.
    profiles = Profile.objects.exclude(groups=[])
    if connection.features.supports_json_field_contains:
        profiles = profiles.filter(groups__contains=[group])
    elif group.isascii() and group.isprintable() and '"' not in group and "\\" not in group:
        profiles = profiles.filter(groups__icontains=group)
    ids = {user_id for user_id, groups in profiles.values_list("user_id", "groups") if group in (groups or ())}
    ids |= set(get_user_model().objects.filter(groups__name=group).values_list("pk", flat=True))
    return sorted(get_user_model().objects.filter(pk__in=ids, is_active=True).values_list("pk", flat=True))


def recipients(rule) -> list[int]:
    """Whose bell a rule's message rings."""
    return group_members(rule.owner_group) if rule.owner_group else [rule.owner_id]


def group_choices() -> list[str]:
    """The groups an admin may make a rule for: those with a binding."""
    return list(GroupBinding.objects.order_by("group").values_list("group", flat=True))

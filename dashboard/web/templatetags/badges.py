"""{% load badges %}{% header_badges principal %}: the registered header badges (web/badges.py)."""
from django import template
from django.utils.safestring import mark_safe

from dashboard.web import badges

register = template.Library()


@register.simple_tag
def header_badges(principal) -> str:
    if principal is None or not getattr(principal, "user_id", None) or principal.is_share:
        return ""
    return mark_safe("".join(badges.render(b, principal) for b in badges.registered() if b.subject(principal)))

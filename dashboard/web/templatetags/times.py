"""Times on the pages: {% load times %}.

    {{ item.acquire_time|abstime }}     an exact time (a datetime; presenters pass theirs through)
                                        as <time datetime=… data-abs>, in present.clock's text; live.js
                                        shows it in the browser's time zone when the viewer
                                        chose "Local time" (header), UTC otherwise
    {% age item %}                      an object's age (kubectl's AGE), moving every second in
                                        live.js, with the exact creation time on hover
"""
from datetime import datetime, timezone

from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from dashboard.web.present import clock, iso

register = template.Library()

NO_AGE = mark_safe('<span class="muted">—</span>')


@register.filter
def abstime(value, empty: str = "—"):
    """<time datetime="…Z" data-abs>2026-01-02 03:04:05 UTC</time>; `empty` when there is none."""
    if not value:
        return empty
    if not isinstance(value, datetime):
        return value       # not a time: as it is
    moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return format_html('<time datetime="{}" data-abs>{}</time>', iso(moment), clock(moment))


@register.simple_tag
def age(item):
    """<time … data-age-since=…>3d4h</time> with the exact creation time as its title."""
    if not item.get("created_at"):
        return NO_AGE
    return format_html('<time datetime="{0}" data-age-since="{0}" title="created {1}">{2}</time>',
                       item["created_at"], item["created"], item.get("age") or "")

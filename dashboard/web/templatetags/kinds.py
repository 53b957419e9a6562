"""Template access to the kind registry: {% load kinds %}{% kind_pages as pages %}."""
from django import template

from dashboard.web import kinds

register = template.Library()


@register.simple_tag
def kind_pages() -> list:
    """Every registered kind's page declaration (web.kinds.KindWeb), in registration order."""
    return kinds.registered()

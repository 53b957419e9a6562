"""Template access to the kind registry: {% load kinds %}, then {% kind_pages as pages %},
{% feed_pages as feeds %} or {{ item.kind|action_buttons }}."""
from urllib.parse import urlencode

from django import template

from dashboard.web import kinds
from dashboard.web.share import page_principal

register = template.Library()


@register.simple_tag
def kind_pages() -> list:
    """Every registered kind's page declaration (web.kinds.KindWeb), in registration order."""
    return kinds.registered()


@register.simple_tag
def feed_pages() -> list:
    """The read-only lists (kinds.register_feed: Events), for the menu after the kinds."""
    return kinds.feeds()


@register.filter
def action_buttons(kind: str) -> list[str]:
    """The templates of a kind's one-click action buttons: by convention, a partial of its
    detail template named after each action (e.g. "<app>/<singular>_detail.html#<action>")."""
    web = kinds.by_kind(kind)
    return [f"{web.detail_template}#{action.name}" for action in web.actions if action.toolbar] if web else []


@register.filter
def with_state(url: str, state: str) -> str:
    """{{ link|with_state:"held" }}: a list's address filtered by that state (views.Filters.state);
    "" when there is no link (an overview partial shown in a list's heading)."""
    if not url:
        return ""
    url, hash_, fragment = str(url).partition("#")
    return f"{url}{'&' if '?' in url else '?'}{urlencode({'state': state})}{hash_}{fragment}"


@register.filter
def counted(n: int, web) -> str:
    """{{ n|counted:page }}: "1 lease", "1,100 leases" (web.kinds.KindWeb.counted)."""
    return web.counted(n or 0)


@register.simple_tag(takes_context=True)
def visitor(context):
    """Who is looking, for pages rendered outside the views (Django's 404 page): the signed-in
    user or the share link, as the views' `principal` (None for a visitor)."""
    request = context.get("request")
    return context.get("principal") or (page_principal(request) if request is not None else None)

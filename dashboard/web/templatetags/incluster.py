"""The page's cluster in templates: {% load incluster %}, then

    {% in_cluster url %}        a link that stays in the page's cluster (cluster_scope.in_cluster),
                                and at the page's moment (`at` in the context: a page as of then)
    {% cluster_field %}         the same for a GET form: a hidden cluster input (nothing when local),
                                and `at` on a page as of a past moment
    {% cluster_header as cx %}  the header's selector and the stale banner (base.html)
    {% read_only_note %}        where a change would be offered on a followed cluster: why not
    {% nav_url url %}           a menu link: in the page's cluster and the namespace the viewer
                                follows (scope.followed_namespace), as `?namespace=`
    {% nav_field %}             the same for a GET form: a hidden namespace input (nothing for all)
"""
from urllib.parse import urlencode

from django import template
from django.urls import reverse
from django.utils.html import format_html

from dashboard.access import clusters
from .. import cluster_scope, scope, timetravel

register = template.Library()


@register.simple_tag(takes_context=True)
def in_cluster(context, url):
    """(A tag, not a filter: the page's moment is in the template's context, issue 38.)"""
    return cluster_scope.in_cluster(str(url), at=timetravel.page_at(context))


@register.simple_tag(takes_context=True)
def cluster_field(context):
    at = timetravel.page_at(context)   # (a page as of a past moment: its filters stay there too, issue 38)
    kept = format_html('<input type="hidden" name="at" value="{}">', at.asked) if at is not None else ""
    name = clusters.current()
    if name == clusters.LOCAL:
        return kept
    return format_html('{}<input type="hidden" name="{}" value="{}">', kept, cluster_scope.PARAM, name)


@register.simple_tag(takes_context=True)
def read_only_note(context):
    """On a followed cluster, where a change would be offered: why not (the page's
    write_refusal: its write mode, the user's credentials, the cluster's answer for them)."""
    if clusters.is_local():
        return ""
    reason = context.get("write_refusal") or cluster_scope.read_only_reason()
    cluster = cluster_scope.followed(clusters.current())
    if cluster is not None and cluster.writes == cluster.OWN_CREDENTIALS:
        # Where a user stores (or replaces) theirs: the Clusters page itself is for admins.
        note = format_html('<p class="read-only-note" role="note">{} <a href="{}">Your credentials for {}</a></p>',
                           reason, reverse("cluster_credentials", args=[cluster.name]), cluster.name)
    else:
        note = format_html('<p class="read-only-note" role="note">{}</p>', reason)
    if "item" not in context:
        return note
    # A detail page: its buttons, shown disabled, with the reason beside them.
    return format_html(
        '<div class="edit-toolbar" role="group" aria-label="Change this {}"><fieldset disabled class="contents">'
        '<legend class="vh">Not available: {}</legend>'
        '<button type="button" disabled>Edit</button> <button type="button" disabled>Edit YAML</button> '
        '<button type="button" class="danger" disabled>Delete…</button></fieldset>{}</div>',
        context["item"].get("kind", "object"), reason, note)


@register.simple_tag(takes_context=True)
def cluster_header(context) -> dict:
    """current: the page's cluster; options: the clusters the selector offers (none when no
    cluster is followed, or for a shared view, which is pinned to one); banner: the stale
    banner's facts (cluster_scope.staleness) for a followed cluster, None when current."""
    name = clusters.current()
    principal = context.get("principal")
    out = {"current": name, "local": name == clusters.LOCAL, "options": [], "banner": None}
    if principal is not None and not principal.is_share:
        options = cluster_scope.visible_clusters(principal)
        if len(options) > 1 or (options and options != [name]):
            out["options"] = options + ([cluster_scope.ALL] if len(options) > 1 else [])
    if name != clusters.LOCAL:
        row = cluster_scope.followed(name)
        out["banner"] = cluster_scope.staleness(row) if row is not None else None
    if context.get("all_clusters"):   # every cluster at once (web/all_clusters.py): no one cluster's banner
        out.update(current=cluster_scope.ALL, local=True, banner=None)
    return out


def _followed(context) -> str:
    request = context.get("request")
    return scope.followed_namespace(request, context.get("principal")) if request is not None else ""


@register.simple_tag(takes_context=True)
def nav_url(context, url):
    """A menu link (Overview, a kind's list, Events) that keeps the namespace the viewer chose on
    a list, the Overview or search, and the page's cluster."""
    namespace = _followed(context)
    url = str(url)
    if namespace:
        url = f"{url}{'&' if '?' in url else '?'}{urlencode({'namespace': namespace})}"
    return cluster_scope.in_cluster(url, at=timetravel.page_at(context))


@register.simple_tag(takes_context=True)
def nav_field(context):
    namespace = _followed(context)
    return format_html('<input type="hidden" name="namespace" value="{}">', namespace) if namespace else ""

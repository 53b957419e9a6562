"""Sortable list headers: {% load sorting %}, then {% sort_th "holder" "Holder" "opt" %} renders a
column header whose link re-sorts the list by that key (views.sort_headers sets `sorting`)."""
from django import template
from django.utils.html import format_html

from dashboard.web.cluster_scope import in_cluster

register = template.Library()

_ARROW = {"ascending": "▲", "descending": "▼", "": "↕"}


@register.simple_tag(takes_context=True)
def sort_th(context, key: str, label: str, css: str = ""):
    """<th aria-sort=…><a class="sort" href="?…sort=…">label</a></th>.

    The link is this view's canonical address (views.Filters.query: the filters stay, one
    `sort`, the first page) in the other order; with no sort key of that name the header is
    plain text."""
    s = (context.get("sorting") or {}).get(key)
    cls = format_html(' class="{}"', css) if css else ""
    if s is None:
        return format_html('<th scope="col"{}>{}</th>', cls, label)
    aria = format_html(' aria-sort="{}"', s["aria"]) if s["aria"] else ""
    filters = context.get("filters")
    href = in_cluster("?" + (filters.query(sort=s["next"]) if filters is not None else f"sort={s['next']}"))
    return format_html('<th scope="col"{}{}><a href="{}" class="sort">{}<span class="sort-arrow" aria-hidden="true">{}</span>'
                       '</a></th>', cls, aria, href, label, _ARROW[s["aria"]])

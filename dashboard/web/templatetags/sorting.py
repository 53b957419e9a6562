"""Sortable list headers: {% load sorting %}, then {% sort_th "holder" "Holder" "opt" %} renders a
column header whose link re-sorts the list by that key (views.sort_headers sets `sorting`)."""
from urllib.parse import urlencode

from django import template
from django.utils.html import format_html

from dashboard.web import kinds, timetravel
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
    href = in_cluster("?" + (filters.query(sort=s["next"]) if filters is not None else f"sort={s['next']}"),
                      at=timetravel.page_at(context))
    return format_html('<th scope="col"{}{}><a href="{}" class="sort">{}<span class="sort-arrow" aria-hidden="true">{}</span>'
                       '</a></th>', cls, aria, href, label, _ARROW[s["aria"]])


@register.simple_tag(takes_context=True)
def column_th(context, column):
    """A chosen column's header (web/columns.py): sortable by its Sort key, if it has one."""
    return sort_th(context, column.sort or f"({column.key})", column.label, column.css)


@register.simple_tag(takes_context=True)
def meta_cell(context, item, column):
    """A label or annotation column's cell: the value (a label's links to the list of the objects
    with that value, with the same columns), or a dash."""
    found = (item.get(kinds.META_ITEM[column.meta]) or {}).get(column.meta_key)
    attrs = format_html(' class="meta-col" data-label="{}"', column.label)
    if found is None:
        return format_html('<td{}><span class="muted" aria-label="no {}">—</span></td>', attrs, column.meta)
    if column.meta != "label":
        return format_html('<td{}><span class="mono">{}</span></td>', attrs, found)
    query = {"labelSelector": f"{column.meta_key}={found}", "columns": ",".join(context.get("chosen_columns") or ())}
    href = in_cluster("?" + urlencode({k: v for k, v in query.items() if v}), at=timetravel.page_at(context))
    return format_html('<td{}><a class="mono" href="{}" title="Only the objects with {}={}">{}</a></td>', attrs, href,
                       column.meta_key, found, found)


@register.simple_tag
def meta_fact(item, column):
    """A label or annotation column on a card (a list of cards has no cells): "tier: fe"."""
    found = (item.get(kinds.META_ITEM[column.meta]) or {}).get(column.meta_key)
    return format_html('<span class="meta-fact"><span class="muted">{}:</span> <span class="mono">{}</span></span>',
                       column.meta_key, "—" if found is None else found)

"""Sortable list headers: {% load sorting %}, then {% sort_th "holder" "Holder" "opt" %} renders a
column header whose button re-sorts the list by that key (views.sort_headers sets `sorting`)."""
from django import template
from django.utils.html import format_html

register = template.Library()

_ARROW = {"ascending": "▲", "descending": "▼", "": "↕"}


@register.simple_tag(takes_context=True)
def sort_th(context, key: str, label: str, css: str = ""):
    """<th aria-sort=…><button form="list-filters" name="sort" value=…>label</button></th>.

    The button submits the filter form (so the filters stay, and the page is the first); with
    no sort key of that name the header is plain text."""
    s = (context.get("sorting") or {}).get(key)
    cls = format_html(' class="{}"', css) if css else ""
    if s is None:
        return format_html('<th scope="col"{}>{}</th>', cls, label)
    aria = format_html(' aria-sort="{}"', s["aria"]) if s["aria"] else ""
    return format_html('<th scope="col"{}{}><button type="submit" form="list-filters" name="sort" value="{}" '
                       'class="sort">{}<span class="sort-arrow" aria-hidden="true">{}</span></button></th>',
                       cls, aria, s["next"], label, _ARROW[s["aria"]])

"""The Endpoints cards' readiness matrix (core/templates/core/endpoints.html), built in Python.

The same markup the template partial wrote: a list page of 1,000 cards rendered some 50
template nodes per card, most of the page's 300 ms server render (docs/BENCHMARKS.md's history in git, issue
14). Then format_html per cell (Django's lazy-aware escaping: half of the remaining render);
now f-strings over the standard library's html.escape (what Django's escape calls), with one
mark_safe per matrix. tests/pages/test_pages.py compares it with the format_html version.
"""
from __future__ import annotations

from html import escape as _escape

from django import template
from django.utils.safestring import mark_safe

register = template.Library()


def e(value) -> str:
    """Django's escape() for the plain values a presenter gives (str, int), without its lazy
    wrapper: html.escape(str(value)), quotes included."""
    return _escape(str(value))


def _address_head(a: dict, namespace: str) -> str:
    out = f'<span class="ip">{e(a.get("ip", ""))}</span>'
    if a.get("hostname"):
        out += f'<span class="meta">host {e(a["hostname"])}</span>'
    if a.get("node"):
        out += f'<span class="meta">node {e(a["node"])}</span>'
    if a.get("target"):
        other = a.get("target_namespace")
        suffix = f" ({e(other)})" if other and other != namespace else ""
        out += f'<span class="meta">{e(a["target"])}{suffix}</span>'
    return out


@register.simple_tag
def readiness_matrix(item: dict) -> str:
    ports, addresses = item["ports"], item["addresses"]
    head = "".join(f'<th scope="col">{e(p["text"])}</th>' for p in ports)
    if addresses:
        body = "".join(
            f'<tr>\n          <th scope="row">{_address_head(a, item["namespace"])}</th>\n          '
            + "".join(f'<td><span class="cell {e(c["state"])}">{e(c["text"])}</span></td>' for c in a["cells"])
            + "\n        </tr>"
            for a in addresses)
    else:
        body = f'<tr><td colspan="{len(ports) + 1}" class="muted">No addresses.</td></tr>'
    foot = ""
    if addresses and ports:
        foot = ('\n      <tfoot>\n        <tr><th scope="row">Ready</th>'
                + "".join(f"<td>{e(p['ready'])} of {e(p['total'])}</td>" for p in ports)
                + "</tr>\n      </tfoot>")
    return mark_safe(
        f'<table class="matrix">\n      <caption>Readiness of {e(item["name"])}: addresses × ports</caption>\n'
        f'      <thead>\n        <tr>\n          <th scope="col">Address</th>\n          {head}\n        </tr>\n'
        f'      </thead>\n      <tbody>\n        {body}\n      </tbody>{foot}\n    </table>')

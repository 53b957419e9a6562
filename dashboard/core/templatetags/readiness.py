"""The Endpoints cards' readiness matrix (templates/web/endpoints.html), built in Python.

The same markup the template partial wrote, made with format_html: a list page of 1,000
cards rendered some 50 template nodes per card, most of the page's 300 ms server render
(docs/BENCHMARKS.md, issue 14); this is a few string joins per card.
"""
from __future__ import annotations

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

register = template.Library()


def _address_head(a: dict, namespace: str) -> str:
    parts = [format_html('<span class="ip">{}</span>', a.get("ip", ""))]
    if a.get("hostname"):
        parts.append(format_html('<span class="meta">host {}</span>', a["hostname"]))
    if a.get("node"):
        parts.append(format_html('<span class="meta">node {}</span>', a["node"]))
    if a.get("target"):
        other = a.get("target_namespace")
        suffix = format_html(" ({})", other) if other and other != namespace else ""
        parts.append(format_html('<span class="meta">{}{}</span>', a["target"], suffix))
    return "".join(parts)


@register.simple_tag
def readiness_matrix(item: dict) -> str:
    ports, addresses = item["ports"], item["addresses"]
    head = format_html_join("", '<th scope="col">{}</th>', ((p["text"],) for p in ports))
    if addresses:
        body = mark_safe("".join(
            format_html('<tr>\n          <th scope="row">{}</th>\n          {}\n        </tr>',
                        mark_safe(_address_head(a, item["namespace"])),
                        format_html_join("", '<td><span class="cell {}">{}</span></td>',
                                         ((c["state"], c["text"]) for c in a["cells"])))
            for a in addresses))
    else:
        body = format_html('<tr><td colspan="{}" class="muted">No addresses.</td></tr>', len(ports) + 1)
    foot = ""
    if addresses and ports:
        foot = format_html('\n      <tfoot>\n        <tr><th scope="row">Ready</th>{}</tr>\n      </tfoot>',
                           format_html_join("", "<td>{} of {}</td>", ((p["ready"], p["total"]) for p in ports)))
    return format_html(
        '<table class="matrix">\n      <caption>Readiness of {}: addresses × ports</caption>\n      <thead>\n'
        '        <tr>\n          <th scope="col">Address</th>\n          {}\n        </tr>\n      </thead>\n'
        '      <tbody>\n        {}\n      </tbody>{}\n    </table>',
        item["name"], head, body, foot)

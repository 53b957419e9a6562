"""View-models for the pages: one object -> what its row or card shows. Pure functions of
(object, now), with no database access, so the full page, an htmx fragment and a websocket push
all render the same dict through the same template partial. Each kind's presenter lives in its
app's web.py (declared in web.kinds); the helpers they share are here.

Contract with the live consumer:
    dom_id(kind, namespace, name) -> the row/card's HTML id
    present(kind, obj, now)       -> the `item` a list partial (KindWeb.list_template + "#item")
                                     or a detail partial (KindWeb.detail_template + "#detail") renders
    object_yaml(obj)              -> the `yaml` a detail partial shows
    namespace_card(...)           -> the `ns` of "web/overview.html#namespace"
"""
from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any, Iterable

import yaml

from dashboard.kube import yielding
from dashboard.kube.formats import human_duration, parse_time

from . import kinds

UTC = timezone.utc


def dom_id(kind: str, namespace: str, name: str) -> str:
    """A stable HTML id for an object. '.' would read as a class in CSS selectors, and '_'
    cannot occur in Kubernetes names, so '.' -> '_' keeps ids distinct. (Only a namespace or name
    containing "--" could make two ids alike; real names practically never do.)"""
    return f"{kind.lower()}-{namespace}--{name}".replace(".", "_")


def detail_url(kind: str, namespace: str, name: str) -> str:
    return kinds.by_kind(kind).detail_url(namespace, name)


# ---------------------------------------------------------------------------------------------
# Time helpers


def iso(moment: datetime | None) -> str:
    """What the browser parses (Date.parse wants at most milliseconds)."""
    if moment is None:
        return ""
    text = moment.astimezone(UTC).isoformat()   # (cut: isoformat(timespec=…) costs twice as much)
    return text[:23] + "Z" if moment.microsecond else text[:19] + ".000Z"


# A time as stored (kube/formats.py: UTC, "Z", no or six fractional digits): its `iso` is the text cut.
_STORED_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{6})?Z", re.ASCII)


def iso_text(value: Any) -> str:
    """iso(parse_time(value)) without making a datetime of a stored time (a 10,000-row CSV
    export: web/export.py; its date was checked when it was written); any other form is parsed."""
    if type(value) is str and _STORED_TIME.fullmatch(value):
        return value[:23] + "Z" if len(value) == 27 else value[:19] + ".000Z"
    return iso(parse_time(value))


def time_text_iso(text: str | None) -> str:
    """iso() of a time as kube/lists.TimeText reads it from a typed row (a CSV export's cells)."""
    if text is None:
        return ""
    return f"{text[:10]}T{text[11:23]}Z" if len(text) > 19 else f"{text[:10]}T{text[11:19]}.000Z"


def clock(moment: datetime | None) -> str:
    """A compact absolute time for tables."""
    if moment is None:
        return ""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(seconds: float) -> str:
    return "just now" if seconds < 1 else f"{human_duration(seconds)} ago"


def countdown(expires: datetime, now: datetime) -> str:
    """"expires in 4s" / "expired 3s ago" (live.js computes the same text every second)."""
    left = (expires - now).total_seconds()
    if left > 0:
        return f"expires in {human_duration(left + 0.999)}"   # round up: 0.4s left is "1s"
    return f"expired {human_duration(-left)} ago"


def label_texts(obj: dict) -> list[str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return [f"{k}={v}" for k, v in sorted(labels.items())]


def age(created: datetime | None, now: datetime | None) -> str:
    """kubectl's AGE column: the object's age as apimachinery's HumanDuration."""
    if created is None or now is None:
        return ""
    return human_duration(max((now - created).total_seconds(), 0))


def base_item(kind: str, obj: dict, now: datetime | None = None) -> dict:
    """What every item has (a presenter adds its kind's own keys). With `now`, its age too
    (live.js keeps the age text moving from `created_at`)."""
    m = obj.get("metadata") or {}
    ns, name = m.get("namespace", ""), m.get("name", "")
    created = parse_time(m.get("creationTimestamp"))
    return {
        "kind": kind,
        "dom_id": dom_id(kind, ns, name),
        "namespace": ns,
        "name": name,
        "url": detail_url(kind, ns, name),
        "uid": m.get("uid", ""),
        "resource_version": m.get("resourceVersion", ""),
        "labels": label_texts(obj),
        "label_map": m.get("labels") or {},             # (label and annotation columns: web/columns.py)
        "annotation_map": m.get("annotations") or {},
        "created": clock(created),
        "created_time": created,
        "created_at": iso(created),
        "age": age(created, now),
        "deleting": bool(m.get("deletionTimestamp")),
    }


# ---------------------------------------------------------------------------------------------
# Dispatch


def present(kind: str, obj: dict, now: datetime) -> dict:
    """The view-model of one object for its row or card (its kind's presenter)."""
    return kinds.by_kind(kind).present(obj, now)


def page_context(kind: str, objects: Iterable[dict], now: datetime) -> dict:
    """`items` for a list page, plus its kind's summary (e.g. a roll-up) and the counts per
    state for the page's summary line."""
    web = kinds.by_kind(kind)
    # (a page of 1,000 rows in the heavy child: its pause points let renewals go first)
    items = yielding.Paced(web.present(obj, now) for obj in yielding.paced(objects))
    context: dict = {"items": items}
    if web.summarize is not None:
        context.update(web.summarize(items))
    counts: dict[str, int] = {}
    for item in items:
        key = item.get(web.count_by) or ""
        counts[key] = counts.get(key, 0) + 1
    context["counts"] = counts
    return context


class _YamlDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    pass


_STR_TAG = "tag:yaml.org,2002:str"


def _str_representer(dumper, data: str):
    # As kubectl prints: multi-line strings as literal blocks, and strings that would read as
    # another type (times, numbers, booleans) in double quotes.
    if "\n" in data:
        style = "|"
    elif dumper.resolve(yaml.ScalarNode, data, (True, False)) != _STR_TAG:
        style = '"'
    else:
        style = None
    return dumper.represent_scalar(_STR_TAG, data, style=style)


_YamlDumper.add_representer(str, _str_representer)


def object_yaml(obj: dict) -> str:
    """The object as `kubectl get -o yaml` shows it: keys sorted, managedFields left out."""
    shown = dict(obj)
    meta = dict(shown.get("metadata") or {})
    meta.pop("managedFields", None)
    shown["metadata"] = meta
    return yaml.dump(shown, Dumper=_YamlDumper, sort_keys=True, default_flow_style=False,
                     allow_unicode=True, width=120)


def objects_yaml(objects: list[dict]) -> str:
    """Objects as the items of a YAML list (`- apiVersion: …`), whole, as the API returns them
    (an export: web/export.py)."""
    return yaml.dump(objects, Dumper=_YamlDumper, sort_keys=True, default_flow_style=False,
                     allow_unicode=True, width=120)


# ---------------------------------------------------------------------------------------------
# Overview: one card per namespace


def namespace_card(namespace: str, now: datetime, **parts: Any) -> dict:
    """The `ns` of the overview's namespace partial.

    parts: per registered kind, keyed by its plural, what its Overview.counts() found in this
    namespace (absent or None: nothing); each kind's Overview.card() turns it into its part of
    the card (ns.<plural>). ns.links.<Kind> is the kind's list page in this namespace;
    ns.sections what the card shows, kind by kind; ns.warn whether any part needs attention.
    """
    card: dict[str, Any] = {"dom_id": f"ns-{namespace}", "namespace": namespace}
    links: dict[str, str] = {}
    sections: list[dict] = []
    for web in kinds.registered():
        part = card[web.plural] = web.overview.card(parts.get(web.plural), now)
        links[web.kind] = f"{web.list_url}?namespace={namespace}"
        sections.append({"web": web, "part": part, "link": links[web.kind], "count": part[web.overview.count_key],
                         "template": f"{web.list_template}#{web.overview.partial}"})
    card.update(links=links, sections=sections,
                warn=any(s["part"][s["web"].overview.warn_key] for s in sections))
    return card


def overview_totals(cards: list[dict]) -> dict:
    """The overview's totals: namespaces, and per kind (by plural, and in order as `kinds`) its
    objects in these cards."""
    out: dict[str, Any] = {"namespaces": len(cards), "kinds": []}
    for web in kinds.registered():
        out[web.plural] = sum(c[web.plural][web.overview.count_key] or 0 for c in cards)
        out["kinds"].append({"label": web.list_noun, "n": out[web.plural]})
    return out

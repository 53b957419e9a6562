"""A list's chosen columns: `?columns=name,holder,label:app` (kinds.Column).

The kind's columns (KindWeb.columns) hidden, shown and reordered, plus label and annotation
columns (`label:<key>`, `annotation:<key>`: kubectl's -L), sortable like the others (kinds.meta_sort)
and, for labels, filterable (a cell links to the view narrowed by that label's value). The value
is canonical like the other parameters: one comma-separated `columns`, left out when it is the
kind's own columns in their order; the column menu posts one `columns` per box ticked, which the
canonical redirect joins. The required column (the row's link) is always shown. The page, its
live pushes (live_page.PageView.chosen) and the CSV export render the same chosen columns.
"""
from __future__ import annotations

from collections import Counter
from urllib.parse import parse_qsl

from . import cluster_scope, kinds

PARAM = "columns"
LABEL_KEYS_READ = 5000   # rows whose labels the menu's suggestions read (a bigger view: its first)
LABEL_KEYS_OFFERED = 30


def parse(web: kinds.KindWeb, values: list[str]) -> tuple[tuple[str, ...], str]:
    """(the chosen column keys, () for the kind's own in their order; what is wrong, "" if nothing)."""
    keys = [k.strip() for value in values for k in value.split(",") if k.strip()]
    if not keys:
        return (), ""
    chosen: list[str] = []
    for key in keys:
        if web.column(key) is None:
            known = ", ".join(c.key for c in web.all_columns())
            return (), (f"Columns: “{key}” is not a column of this list (one of {known}, or label:<key> "
                        "or annotation:<key>).")
        if key not in chosen:
            chosen.append(key)
    chosen = [c.key for c in web.all_columns() if c.required and c.key not in chosen] + chosen
    return ((), "") if chosen == default_keys(web) else (tuple(chosen), "")


def default_keys(web: kinds.KindWeb) -> list[str]:
    return [c.key for c in web.all_columns()]


def value(web: kinds.KindWeb, keys: list[str]) -> str:
    """The `columns` parameter for these keys ("" when they are the kind's own, in order)."""
    return "" if list(keys) == default_keys(web) else ",".join(keys)


def shown(web: kinds.KindWeb, chosen: tuple[str, ...]) -> list[kinds.Column]:
    """The columns a row shows, in order."""
    return [web.column(k) for k in chosen] if chosen else list(web.all_columns())


def grid_style(web: kinds.KindWeb, chosen: tuple[str, ...]) -> str:
    """A fixed-cols list's column tracks (app.css --cols) for chosen columns ("": the kind's own,
    declared in its stylesheet)."""
    if not chosen:
        return ""
    cols = shown(web, chosen)
    return f"--cols: {' '.join(c.width for c in cols)}; --cols-min: {sum(c.min_em for c in cols):g}em"


def label_keys(rows) -> list[str]:
    """The label keys present in a view (its typed rows: a queryset), most common first."""
    found: Counter = Counter()
    for labels in rows.values_list("labels", flat=True)[:LABEL_KEYS_READ]:
        found.update((labels or {}).keys())
    return [k for k, _ in sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))[:LABEL_KEYS_OFFERED]]


def menu(web: kinds.KindWeb, filters, present_keys: list[str]) -> dict:
    """The column menu: the view's other settings (kept as hidden fields), every column in the
    order it would be shown (the chosen ones first), each with whether it is shown and links
    moving it left or right, and the label keys of the view not shown yet."""
    keys = list(filters.chosen) or default_keys(web)
    entries = []
    for i, key in enumerate(keys):
        c = web.column(key)
        moved = []
        for j in (i - 1, i + 1):
            if 0 <= j < len(keys):
                order = list(keys)
                order[i], order[j] = order[j], order[i]
                moved.append("?" + filters.query(**{PARAM: value(web, order)}))
            else:
                moved.append("")
        entries.append({"column": c, "shown": True, "left": moved[0], "right": moved[1]})
    entries += [{"column": c, "shown": False} for c in web.all_columns() if c.key not in keys]
    keep = [(k, v) for k, v in parse_qsl(filters.query(**{PARAM: ""})) if k != PARAM]
    reset = filters.query(**{PARAM: ""})
    return {"entries": entries, "keep": keep, "reset": web.list_url + (f"?{reset}" if reset else ""),
            "suggested": [f"label:{k}" for k in present_keys if f"label:{k}" not in keys]}


def label_link(filters_selector: str, key: str, val: str) -> str:
    """The label selector narrowed to key=value (a label cell's filter link)."""
    term = f"{key}={val}"
    return term if not filters_selector else f"{filters_selector},{term}"


def page_context(web: kinds.KindWeb, filters, ctx: dict) -> dict:
    """A list page's context for its chosen columns: the row's cells (view_columns, as the live
    pushes render them), a fixed-cols list's tracks, and the sorts of its label and annotation
    columns (headers and the Sort menu)."""
    cols = shown(web, filters.chosen)
    sorting, options = dict(ctx.get("sorting") or {}), list(ctx.get("sort_options") or [])
    current, desc = filters.sort.lstrip("-"), filters.sort.startswith("-")
    for c in cols:
        if c.meta:
            on = c.key == current
            sorting[c.key] = {"aria": ("descending" if desc else "ascending") if on else "",
                              "next": (c.key if desc else f"-{c.key}") if on else c.key, "label": c.label}
            options.append((c.key, f"{c.meta} {c.meta_key}"))
    if kinds.meta_parts(current) and current not in {c.key for c in cols}:   # (sorted by a column not shown)
        options.append((current, current.replace(":", " ", 1)))
    query = filters.query()
    return {"view_columns": cols, "column_keys": {c.key for c in cols}, "chosen_columns": filters.chosen,
            "columns_style": grid_style(web, filters.chosen), "sorting": sorting, "sort_options": options,
            "columns_url": cluster_scope.in_cluster(f"{web.list_url}columns/" + (f"?{query}" if query else ""),
                                                    at=filters.at)}

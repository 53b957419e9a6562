"""A list's whole filtered view as a file: `?format=csv`, `json` or `yaml` on any list address.

The same view as the page (views.KindListView: namespace, label selector, name search, state,
column filters, warnings, sort), every page of it, with the viewer's rights applied as the list
applies them (scope.list_scope, and a share link's own selector: scope.narrow), streamed batch
by batch (never the whole body in memory):

- json: the API's list (`LeaseList`…, the objects as a GET on the API returns them);
- yaml: the same list in YAML, as `kubectl get -o yaml` writes one;
- csv: the list's columns (the chosen ones, `?columns=`: web/columns.py; each as its kinds.Column
  fields), one row per object.

In (namespace, name) order the objects come from one snapshot of the log (lists.stream_objects,
every namespace read at the first one's revision); a sorted view is ordered from the typed rows
(queries.sorted_keys) and its objects are read by id, a batch at a time, as the sorted pages are.
A view as of a past moment (`?at=`, web/timetravel.py) is read that way too, from the typed
rows as they stood then: the body's reads pin that moment themselves (_sorted).
"""
from __future__ import annotations

import csv
import io
import operator
import re
from contextlib import nullcontext
from datetime import datetime
from typing import Iterable, Iterator

import orjson
from django.http import HttpResponse, StreamingHttpResponse

from dashboard.access import clusters
from dashboard.access.principals import Principal
from dashboard.kube import asof, lists, revlog, store
from dashboard.kube.errors import ApiError
from dashboard.kube.registry import backend, from_storage
from dashboard.kube.selectors import parse_label_selector

from . import cluster_scope, columns, kinds, scope, warnings
from . import present as p
from .queries import sorted_keys, state_test

FORMATS = {"csv": "text/csv; charset=utf-8", "json": "application/json",
           "yaml": "application/yaml; charset=utf-8"}
BATCH = 1000   # objects read (and encoded) at a time
PARAM = "format"


def requested(request) -> str:
    """The export format the address asks for ("" for the page itself)."""
    return (request.GET.getlist(PARAM) or [""])[-1].strip()


def links(query) -> list[dict]:
    """The page's "Export" menu: one link per format, the view's own query plus `format`.
    query(**extra) -> the view's query string (views.Filters.query)."""
    return [{"format": fmt, "label": fmt.upper(), "url": "?" + query(**{PARAM: fmt})} for fmt in FORMATS]


def _refused(status: int, message: str) -> HttpResponse:
    return HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")


def file_name(web: kinds.KindWeb, filters, fmt: str) -> str:
    """The file named after the view: `leases-team-a-held.csv` (a followed cluster's: `prod-leases-….csv`)."""
    parts = ["" if clusters.is_local() else clusters.current(), web.plural, filters.namespace, filters.label_selector, filters.q, filters.state,
             *(value for _, value in filters.columns), "warnings" if filters.warnings else "",
             f"by-{filters.sort}" if filters.sort and filters.sort != filters.default_sort else ""]
    slug = "-".join(s for s in (re.sub(r"[^A-Za-z0-9._]+", "-", part).strip("-.") for part in parts if part) if s)
    return f"{slug[:150]}.{fmt}"


def download(request, web: kinds.KindWeb, principal: Principal, filters) -> HttpResponse:
    """The export of the view `filters` (views.Filters) describes, or why not (400, 403)."""
    fmt = requested(request)
    if fmt not in FORMATS:
        return _refused(400, f"Format: “{fmt}” is not an export format (one of {', '.join(FORMATS)}).")
    if filters.errors:
        return _refused(400, filters.errors[0][1])
    namespaces = scope.list_scope(principal, filters.namespace, web.kind)
    if namespaces is None:
        return _refused(403, f"You have no access to namespace “{filters.namespace}”."
                        if filters.namespace and not principal.is_share else "This view is outside what you may see.")
    try:
        selector = scope.narrow(principal, parse_label_selector(filters.label_selector))
    except ApiError as exc:
        return _refused(400, f"Label selector: {exc.message}")
    at = filters.at   # (as of a past moment: the typed rows hold then, not the log's lists)
    now = cluster_scope.moment(at=at)
    keys = warnings.warned_keys(web.kind, now, namespaces) if filters.warnings else None
    state = web.view_filter(filters.state, dict(filters.columns))
    shown = columns.shown(web, filters.chosen) if fmt == "csv" else None   # (?columns=, else the kind's own)
    if filters.sort or at is not None:
        rv, batches = _sorted(web, namespaces, selector, filters.q, filters.sort or filters.default_sort or "namespace",
                              now, keys, state, at)
        typed = None
    else:   # a CSV's cells from the typed rows where they hold them (no state filter: it reads the objects)
        typed = typed_export(web, shown) if shown and state is None else None
        rv, batches = _snapshot(web, namespaces, selector, filters.q, keys, state, typed.columns if typed else ())
    if fmt == "csv":
        body = _csv(web, rv, batches, now, shown, typed.item if typed else None)
    else:
        body = {"json": _json, "yaml": _yaml}[fmt](web, rv, batches, now)
    response = StreamingHttpResponse(body, content_type=FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="{file_name(web, filters, fmt)}"'
    response["Cache-Control"] = "no-store"
    response.compressible = True   # (a list: the pages' gzip may compress it as it goes)
    return response


# ---------------------------------------------------------------------------------------------
# The view's objects, batch by batch


def _snapshot(web: kinds.KindWeb, namespaces, selector, q: str, keys, state,
              typed: tuple = ()) -> tuple[int, Iterator[list[bytes | tuple]]]:
    """(namespace, name) order: every namespace of the view at one revision (the first's).
    `typed`: items as the typed rows' values where they show the snapshot (lists.stream_objects;
    they begin with namespace and name: TYPED_BASE), not with a state filter."""
    res = backend(web.resource)
    rv, streams = None, []
    for ns in namespaces:   # (the revision, and a 410, are decided here: before the first byte)
        query = lists.ListQuery(namespace=ns, label_selector=selector)
        if rv is not None:
            query.resource_version, query.resource_version_match = rv, "Exact"
        rv, batches = lists.stream_objects(res, query, typed)
        streams.append(batches)
    needle, in_state = q.lower(), state_test(web.kind, state)

    def kept(entry: bytes | tuple) -> bool:
        if not (needle or in_state or keys is not None):
            return True
        if type(entry) is tuple:
            ns, name, obj = entry[0], entry[1], None
        else:
            obj = orjson.loads(entry)
            ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        return ((not needle or needle in name.lower()) and (in_state is None or in_state(obj))
                and (keys is None or (ns, name) in keys))

    def batches() -> Iterator[list[bytes]]:
        for stream in streams:
            for batch in stream:
                found = [text for text in batch if kept(text)]
                if found:
                    yield found

    return (rv if rv is not None else store.current_revision()), batches()


def _sorted(web: kinds.KindWeb, namespaces, selector, q: str, sort: str, now: datetime, keys,
            state, at: asof.At | None = None) -> tuple[int, Iterator[list[bytes]]]:
    """Another order: the view's keys in order from the typed rows, then their objects by id.
    `at`: a view as of a past moment (the keys are read within the request's asof.pinned)."""
    rv = store.current_revision()   # (the objects are at least this new, as a sorted page's)
    ids = [k[0] for k in sorted_keys(web, namespaces, selector, q, sort, now, keys, state)]
    model, cluster = web.resource.model, clusters.current()

    def batches() -> Iterator[list[bytes]]:
        # Read later, on the thread that sends the response, after the request's pinned block
        # (timetravel.py) has ended: as of a past moment, the reads pin it again themselves
        # (the same revision: the rows the keys were read from), on this thread's connection.
        with asof.pinned(at) if at is not None else nullcontext():
            for start in range(0, len(ids), BATCH):
                chunk = ids[start:start + BATCH]
                with clusters.within(cluster):
                    texts = dict(revlog.with_current(model.objects.filter(id__in=chunk), "id"))
                found = [_bytes(texts[i]) for i in chunk if i in texts]   # (one deleted meanwhile: gone)
                if found:
                    yield found

    return rv, batches()


def _bytes(text) -> bytes:
    return text.encode() if isinstance(text, str) else bytes(text)


def _objects(web: kinds.KindWeb, batch: list[bytes]) -> list[dict]:
    """A batch's objects as the API returns them (a kind stored as another version converted)."""
    return [from_storage(web.resource, orjson.loads(text)) for text in batch]


# ---------------------------------------------------------------------------------------------
# Encoders: each yields the file piece by piece


def _json(web: kinds.KindWeb, rv: int, batches: Iterable[list[bytes]], now) -> Iterator[bytes]:
    res = web.resource
    yield orjson.dumps({"kind": res.list_kind, "apiVersion": res.api_version,
                        "metadata": {"resourceVersion": str(rv)}})[:-1] + b',"items":['
    sep = b""
    for batch in batches:
        texts = batch if web.resource.storage is None else [orjson.dumps(o) for o in _objects(web, batch)]
        yield sep + b",".join(texts)
        sep = b","
    yield b"]}"


def _yaml(web: kinds.KindWeb, rv: int, batches: Iterable[list[bytes]], now) -> Iterator[bytes]:
    """The list's keys in kubectl's order (sorted): apiVersion, items, kind, metadata."""
    res = web.resource
    yield f"apiVersion: {res.api_version}\n".encode()
    empty = True
    for batch in batches:
        yield (b"items:\n" if empty else b"") + p.objects_yaml(_objects(web, batch)).encode()
        empty = False
    yield (b"items: []\n" if empty else b"") + f'kind: {res.list_kind}\nmetadata:\n  resourceVersion: "{rv}"\n'.encode()


def csv_value(value) -> str:
    """A cell as text: times ISO 8601 (UTC), lists joined, nothing as ""."""
    if type(value) is str:   # (most cells: first)
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return p.iso(value)
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value)


def csv_line(cells: list[str]) -> str:
    """A row as csv.writer (QUOTE_MINIMAL, CRLF) writes it, joined directly when no cell needs
    quoting (no comma, quote or line break in any: the row holds exactly the separating commas),
    which is most rows and several times cheaper than the writer."""
    text = ",".join(cells)
    if (len(cells) > 1 and text.count(",") == len(cells) - 1 and '"' not in text
            and "\n" not in text and "\r" not in text):
        return text + "\r\n"
    out = io.StringIO()
    csv.writer(out, lineterminator="\r\n").writerow(cells)
    return out.getvalue()


def _item_key(get) -> str | None:
    """The item key a column field reads when it is kinds.column's methodcaller("get", key)."""
    if type(get) is operator.methodcaller:
        args = get.__reduce__()[1]
        if len(args) == 2 and args[0] == "get" and type(args[1]) is str:
            return args[1]
    return None


# What every kind's typed export reads first, and the item keys it gives (NAME_COLUMN, AGE_COLUMN).
TYPED_BASE = ("namespace", "name", lists.TimeText("creation_timestamp"))
TYPED_BASE_KEYS = frozenset({"namespace", "name", "created_at"})


def _typed_base_item(values: tuple, now: datetime) -> dict:
    return {"namespace": values[0], "name": values[1], "created_at": p.time_text_iso(values[2])}


def typed_export(web: kinds.KindWeb, columns) -> kinds.TypedExport | None:
    """The kind's typed export (with TYPED_BASE's columns first) when it gives every item key
    the columns' fields read (a label column, or a field computed from the item: None)."""
    typed = web.typed_export
    keys = {_item_key(get) for c in columns for _, get in c.fields}
    if None in keys or not keys <= TYPED_BASE_KEYS | typed.keys:
        return None
    return kinds.TypedExport(TYPED_BASE + typed.columns, typed.item or _typed_base_item, TYPED_BASE_KEYS | typed.keys)


def _csv(web: kinds.KindWeb, rv: int, batches: Iterable[list[bytes | tuple]], now, columns=None,
         typed_item=None) -> Iterator[bytes]:
    """`typed_item(values, now)`: the item of a batch's typed values (a tuple: typed_export);
    an item still as text (written since the snapshot, or no typed values asked) is parsed."""
    fields = [f for c in (columns or web.all_columns()) for f in c.fields]
    gets = [get for _, get in fields]
    yield csv_line([header for header, _ in fields]).encode()   # (the first byte leaves before the first batch is read)
    item_of, loads = web.export_item or web.present, orjson.loads
    keys = [_item_key(get) for get in gets]
    # Every field a key of the item (the kind's own columns; not label ones): one itemgetter
    # reads a row's cells in C, rather than a Python step per cell (a third of a 10,000-row
    # export's cell time). An item without one of the keys (.get's None) takes the cell path.
    row = operator.itemgetter(*keys) if len(keys) > 1 and None not in keys else None

    def line(entry: bytes | tuple) -> str:   # (per row: its item, the cells, one line; no writer call)
        item = typed_item(entry, now) if type(entry) is tuple else item_of(loads(entry), now)
        if row is not None:
            try:
                return csv_line([v if type(v) is str else csv_value(v) for v in row(item)])
            except KeyError:
                pass
        return csv_line([v if type(v := get(item)) is str else csv_value(v) for get in gets])

    for batch in batches:   # (one piece per batch read)
        yield "".join(map(line, batch)).encode()

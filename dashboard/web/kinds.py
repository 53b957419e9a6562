"""The pages' kind registry: everything web/ knows about a kind, declared by the kind's app.

Like Django's admin registry: each API-group app has a `web.py` (dashboard/coordination/web.py,
…) that builds a KindWeb (its presenter, form, templates, one-click actions, overview
counting) and registers it here; WebConfig.ready() imports those modules (autodiscover). The
pages, the live consumer, the forms and the share links ask this registry, so web/ names no
kind itself.

Names a declaration gives its pages:
    /<plural>/                    the list page (URL name and websocket view: plural)
    /<plural>/<namespace>/<name>/ the detail page (URL name and websocket view: detail_view)
    /<plural>/…/<action.name>/    each one-click action (URL name: action.route)
"""
from __future__ import annotations

import functools
import operator
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable, Mapping

import orjson
from django.db.models import Q

from dashboard.kube.registry import Resource, by_kind as resource_by_kind

OVERVIEW = "overview"   # the websocket view of the overview page: every registered kind


@dataclass(frozen=True)
class Action:
    """A one-click change on a detail page: POST /<plural>/<namespace>/<name>/<action name>/.

    perform(data, namespace, name, principal, through) -> (store.Result, the success message); it
    reads the posted values, calls the kind's do_* action (raising ApiError when refused), handing
    it `through` (a followed cluster's writer, or None: store.update's).
    """

    name: str        # the URL segment
    route: str       # the URL name
    perform: Callable[[Mapping[str, str], str, str, Any, Any], tuple[Any, str]]
    # Whether the detail page's toolbar shows its button: the detail template's partial named
    # after the action. (False: the kind's templates offer it elsewhere, e.g. in a panel.)
    toolbar: bool = True
    verb: str = "patch"   # what the user must be allowed ("create": it makes a new object, whose page it opens)
    label: str = ""       # its confirmation page's heading ("Run again") and what it says first (`explain`)
    explain: str = ""
    # A confirmation page first (GET): preview(namespace, name) -> the object it will create,
    # shown as YAML; its form posts back the fields of `preview_fields(obj)` (e.g. the new name).
    preview: Callable[[str, str], dict] | None = None
    preview_fields: Callable[[dict], Mapping[str, str]] | None = None


@dataclass(frozen=True)
class BulkAction:
    """A change the list page applies to the selected rows (web/bulk_views.py; Delete is common).

    perform(namespace, name, principal, through) -> store.Result; it calls the kind's do_* action
    (raising ApiError when refused; `through` as Action's). `undo` names the bulk action that reverses it ("": none,
    and the confirmation says `note`).
    """

    name: str
    label: str       # the button ("Suspend"); the past tense for messages is `done`
    done: str
    perform: Callable[[str, str, Any, Any], Any]
    undo: str = ""
    note: str = ""
    verb: str = "patch"   # what the user must be allowed for each object


@dataclass(frozen=True)
class Sort:
    """A column a list can be sorted by (`?sort=<key>`, `?sort=-<key>` descending).

    value(column values, now) -> the row's sort value from the typed model's `columns` (one
    query reads them for the whole view); None sorts last in either direction. Ties are in
    (namespace, name) order.
    """

    key: str
    label: str                       # the column's name (sort menu, announcements)
    columns: tuple[str, ...]
    value: Callable[[tuple, datetime], Any]
    # The same order as an indexed typed column, for SQL to sort and page (a big list: Events);
    # used when nothing of the view is left to check in Python.
    field: str = ""


# Every kind's lists sort by these; a KindWeb adds its own (KindWeb.sorts). "Age" ascending is
# the youngest first, as an age column reads.
COMMON_SORTS = (
    Sort("name", "Name", ("name", "namespace"), lambda v, now: v),
    Sort("namespace", "Namespace", ("namespace", "name"), lambda v, now: v),
    Sort("age", "Age", ("creation_timestamp",), lambda v, now: -v[0].timestamp()),
)


@dataclass(frozen=True)
class Column:
    """One of a list's columns (`?columns=` chooses and orders them: web/columns.py). `fields`
    are its CSV columns in an export, (header, presented item -> value), the values unformatted
    where the page formats them (times ISO 8601, durations in seconds). `sort`: its Sort key
    ("" not sortable); `css`: its header's classes; `width`: its grid track in a fixed-cols list
    (app.css) and `min_em` that track's least width; `required`: always shown (the row's link).
    A label or annotation column (`label:<key>`, kubectl's -L) has `meta` "label" or
    "annotation" and `meta_key` the key."""

    key: str
    label: str
    fields: tuple[tuple[str, Callable[[dict], Any]], ...]
    sort: str = ""
    css: str = ""
    width: str = "minmax(7em, 1fr)"
    min_em: float = 7
    required: bool = False
    meta: str = ""
    meta_key: str = ""


def column(key: str, label: str, *fields: tuple[str, str | Callable[[dict], Any]], sort: str = "",
           css: str = "", width: str = "minmax(7em, 1fr)", min_em: float = 7, required: bool = False) -> Column:
    """A Column whose fields name the presented item's keys (or give a function of it); a key
    is read by item.get in C (methodcaller: no Python call per cell of a 10,000-row export)."""
    return Column(key, label, tuple((header, get if callable(get) else operator.methodcaller("get", get))
                                    for header, get in fields), sort, css, width, min_em, required)


# The first column of most lists (the namespace under the name) and the last (kubectl's AGE).
NAME_COLUMN = column("name", "Name", ("Namespace", "namespace"), ("Name", "name"), sort="name", required=True)
AGE_COLUMN = column("age", "Age", ("Created", "created_at"), sort="age", css="opt", width="6.5em", min_em=6.5)


@dataclass(frozen=True)
class State:
    """A state a list can be filtered by (`?state=<key>`), from the typed model's `columns`:
    test(column values, now) says whether a row is in it. The pages read the columns from the
    typed rows (queries.view_rows); the live pushes compute them from the object as it is stored
    (Resource.typed_columns): the same test on the same values, so the two cannot disagree.
    until(column values) -> the instant the answer changes by time alone (a Lease's expiry; None:
    only a write changes it); a live page re-checks its rows then (consumers.py). `where`: the
    same test as a Q over the typed columns, for SQL, when it does not depend on the time."""

    key: str
    label: str
    columns: tuple[str, ...]
    test: Callable[[tuple, datetime], bool]
    until: Callable[[tuple], datetime | None] | None = None
    where: Any = None


@dataclass(frozen=True)
class ColumnFilter:
    """A list filter by a typed column's exact value (`?<param>=<value>`: an Event's type,
    its reason); `choices` the values a select offers (empty: a text field, any value)."""

    param: str
    label: str
    column: str
    choices: tuple[str, ...] = ()

    def state(self, value: str) -> State:
        return State(f"{self.param}={value}", self.label, (self.column,), lambda v, now: v[0] == value,
                     where=Q(**{self.column: value}))


def all_of(parts: list[State]) -> State | None:
    """Several filters as one State (every test holds; the time-derived parts' next instant)."""
    if len(parts) < 2:
        return parts[0] if parts else None
    columns = tuple(dict.fromkeys(c for part in parts for c in part.columns))

    def split(values: tuple):
        row = dict(zip(columns, values))
        return [(part, tuple(row[c] for c in part.columns)) for part in parts]

    def until(values: tuple):
        return min((at for part, own in split(values) if part.until and (at := part.until(own))), default=None)

    wheres = [part.where for part in parts]
    return State("&".join(part.key for part in parts), "", columns,
                 lambda values, now: all(part.test(own, now) for part, own in split(values)),
                 until if any(part.until for part in parts) else None,
                 None if None in wheres else functools.reduce(operator.and_, wheres))


@dataclass(frozen=True)
class Overview:
    """A kind's part of the overview's namespace cards, from the typed model columns only.

    The card shows the part with the list template's partial `partial` (context: `part`),
    after a heading that links to the kind's list and says part[count_key]; the overview's
    totals add up part[count_key]; a true part[warn_key] marks the card as needing attention.
    """

    counts: Callable[[Any], dict[str, Any]]     # queryset -> {namespace: what card() takes}
    card: Callable[[Any, datetime], dict]       # (that, or None: nothing there; now) -> the card's part
    count_key: str                              # the part's number of objects
    warn_key: str                               # the part's number of objects that need attention
    partial: str = "overview"


@dataclass(frozen=True)
class TypedExport:
    """A CSV export's items from the typed rows, read in the list's own query instead of each
    object's text (web/export.py; kube/lists.stream_objects' `typed`): `columns` of the kind's
    typed table (or expressions: lists.TimeText for a time), and item(values, now) -> the
    `keys` of the export item, the same values export_item gives them (a test holds them
    equal). `values` begin with the namespace, the name and the creation time's text
    (web/export.TYPED_BASE), every kind's; a kind's own columns follow."""

    columns: tuple = ()
    item: Callable[[tuple, datetime], dict] | None = None
    keys: frozenset[str] = frozenset()


@dataclass(frozen=True)
class KindWeb:
    kind: str
    plural: str             # URL segment; the list page's URL name, websocket view and header item
    detail_view: str        # the detail page's URL name and websocket view
    title: str              # the kind's pages in the header and crumbs, and in share link descriptions
    heading: str            # the list page's heading
    noun: str               # one object, in forms and messages ("New <noun>")
    list_noun: str          # the objects of a list: the filter's label, the overview's totals
    present: Callable[[dict, datetime], dict]   # (object, now) -> the item the partials render
    count_by: str           # the item key whose values the list page's summary counts
    form: type | None       # an ObjectForm subclass; None: a read-only list (a feed, register_feed)
    overview: Overview
    # The kind app owns its templates (<app>/templates/<app>/…), its stylesheets and its part of the
    # live-page script (<app>/static/<app>/…); every page links every kind's static (base.html).
    list_template: str = ""     # has partial "item" (a row or card); default <app>/<plural>.html
    detail_template: str = ""   # has partial "detail"; default <app>/<singular>_detail.html
    stylesheets: tuple[str, ...] = ()   # static paths, linked after the common app.css
    scripts: tuple[str, ...] = ()       # static paths, run after live.js (they register with it)
    wrapper: str = "tbody"      # the element a non-replacing oob swap of items needs: "tbody" rows, "div" cards
    create_initial: Mapping[str, str] = field(default_factory=dict)   # a new object's form values
    yaml_skeleton: Mapping[str, Any] = field(default_factory=dict)    # a new object's YAML (beyond metadata)
    actions: tuple[Action, ...] = ()
    bulk_actions: tuple[BulkAction, ...] = ()   # the list's bulk actions besides Delete
    # A deleted object made ready to create again (undo of a bulk delete), beyond dropping the
    # server-owned metadata: e.g. a Job's generated selector, which names the old uid.
    recreate: Callable[[dict], dict] | None = None
    # List page extras computed from the shown items (e.g. a roll-up), and the list template's
    # partial that shows them (re-rendered by the live push whenever an item changes).
    summarize: Callable[[list[dict]], dict] | None = None
    summary_partial: str = ""
    # Detail page extras: (namespace, name, now, at) -> context (e.g. a history from the revision
    # log; at: a page as of a past moment, kube/asof.At, or None), and the detail template's
    # partials that show it: pushed again with every change of the object, as the detail partial
    # is (a Lease's holder history).
    detail_context: Callable[[str, str, datetime, Any], dict] | None = None
    detail_partials: tuple[str, ...] = ()
    sorts: tuple[Sort, ...] = ()     # the kind's own sort keys, beyond COMMON_SORTS
    # Typed text columns the search across kinds also looks in (beyond names, namespaces,
    # labels), with what the results call them: (("holder_identity", "holder"),)
    search_columns: tuple[tuple[str, str], ...] = ()
    states: tuple[State, ...] = ()   # the list's `?state=` filter values (none: no such filter)
    column_filters: tuple[ColumnFilter, ...] = ()
    # The list's order when its address names none ("-key": descending); new_on_top: a feed in that
    # (newest-first) order, whose first page takes new objects on top as they come (live.py).
    default_sort: str = ""
    new_on_top: bool = False
    # The list's columns, in the page's order (the CSV export's; NAME_COLUMN when none are declared).
    columns: tuple[Column, ...] = ()
    # What the CSV export's columns read from an object, when cheaper than `present` (the same
    # values for the columns' keys): (object, now) -> item.
    export_item: Callable[[dict, datetime], dict] | None = None
    # The same items from the typed rows, for the columns whose keys it gives (export.TYPED_BASE's
    # alone when not declared): no object parsed (web/export.py).
    typed_export: TypedExport = TypedExport()
    # What changed (web/changes_views.py, issue 38): (object at the window's start, at its end;
    # either None: absent) -> what the headline counts of it ("changed holder"), beyond changed.
    change_facts: Callable[[dict | None, dict | None], list[str]] | None = None

    def __post_init__(self):
        app = self.resource.model._meta.app_label
        if not self.list_template:
            object.__setattr__(self, "list_template", f"{app}/{self.plural}.html")
        if not self.detail_template:
            object.__setattr__(self, "detail_template", f"{app}/{self.resource.singular}_detail.html")

    @property
    def list_url(self) -> str:
        return f"/{self.plural}/"

    def detail_url(self, namespace: str, name: str) -> str:
        return f"{self.list_url}{namespace}/{name}/"

    @property
    def resource(self) -> Resource:
        return resource_by_kind(self.kind)

    def all_sorts(self) -> tuple[Sort, ...]:
        return COMMON_SORTS + self.sorts

    def sort(self, key: str) -> Sort | None:
        return next((s for s in self.all_sorts() if s.key == key), None) or meta_sort(key)

    def state(self, key: str) -> State | None:
        return next((s for s in self.states if s.key == key), None)

    def view_filter(self, state: str, columns: Mapping[str, str]) -> State | None:
        """The view's state and column filters (`columns`: param -> value) as one State."""
        parts = [self.state(state)] if state else []
        parts += [f.state(columns[f.param]) for f in self.column_filters if columns.get(f.param)]
        return all_of([p for p in parts if p is not None])

    def all_columns(self) -> tuple[Column, ...]:
        return self.columns or (NAME_COLUMN, AGE_COLUMN)

    def column(self, key: str) -> Column | None:
        """A column of this list by its `?columns=` key: the kind's, or a label or annotation one."""
        return next((c for c in self.all_columns() if c.key == key), None) or meta_column(key)

    def action(self, name: str) -> Action | None:
        return next((a for a in self.actions if a.name == name), None)

    def counted(self, n: int) -> str:
        """"1 lease", "1,100 leases"."""
        return f"{n:,} {self.noun if n == 1 else self.list_noun}"


# Label and annotation columns (`label:app`): any key kube allows (an optional DNS prefix and "/").
META_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
META_ITEM = {"label": "label_map", "annotation": "annotation_map"}   # their maps in a presented item


def meta_parts(key: str) -> tuple[str, str] | None:
    """("label", "app") for "label:app"; None when the key is no label or annotation column."""
    what, sep, name = key.partition(":")
    return (what, name) if sep and what in META_ITEM and META_KEY.match(name) else None


def meta_column(key: str) -> Column | None:
    parts = meta_parts(key)
    if parts is None:
        return None
    what, name = parts
    return Column(key, name, ((key, lambda item: (item.get(META_ITEM[what]) or {}).get(name)),), sort=key,
                  css="meta-col", meta=what, meta_key=name)


def meta_sort(key: str) -> Sort | None:
    """A label column's order from the typed rows' labels; an annotation's from the objects
    (annotations have no typed column). Objects without the key sort last."""
    parts = meta_parts(key)
    if parts is None:
        return None
    what, name = parts
    if what == "label":
        return Sort(key, name, ("labels",), lambda v, now: (v[0] or {}).get(name))
    return Sort(key, name, ("current__object",),
                lambda v, now: ((orjson.loads(v[0]).get("metadata") or {}).get("annotations") or {}).get(name))


_by_kind: dict[str, KindWeb] = {}
_by_plural: dict[str, KindWeb] = {}
_by_view: dict[str, KindWeb] = {}
_feeds: dict[str, KindWeb] = {}


def register(web: KindWeb) -> KindWeb:
    """Add a kind's pages (from the kind app's web.py). The registration order is the order of
    the header, the overview and every other place that lists all kinds."""
    for table, key in ((_by_kind, web.kind), (_by_plural, web.plural), (_by_view, web.plural),
                       (_by_view, web.detail_view)):
        other = table.get(key)
        if other is not None and other.kind != web.kind:
            raise ValueError(f"{key!r} is taken by {other.kind}")
    if web.plural == OVERVIEW or web.detail_view == OVERVIEW:
        raise ValueError(f"{OVERVIEW!r} is the overview's view name")
    _by_kind[web.kind] = _by_plural[web.plural] = _by_view[web.plural] = _by_view[web.detail_view] = web
    return web


def register_feed(web: KindWeb) -> KindWeb:
    """Add a read-only list page (Events: no form, detail page, actions, overview part, search or
    share link): its list and its live pushes only, in the menu after the kinds (feeds())."""
    for key in (web.kind, web.plural):
        if key in _by_kind or key in _by_view or key == OVERVIEW:
            raise ValueError(f"{key!r} is taken")
    _feeds[web.kind] = _by_view[web.plural] = web
    return web


def feeds() -> list[KindWeb]:
    return list(_feeds.values())


def registered() -> list[KindWeb]:
    return list(_by_kind.values())


def kind_names() -> list[str]:
    return list(_by_kind)


def plurals() -> list[str]:
    return list(_by_plural)


def by_kind(kind: str) -> KindWeb | None:
    """A kind's pages (a feed's too: its list page and live rows)."""
    return _by_kind.get(kind) or _feeds.get(kind)


def by_plural(plural: str) -> KindWeb | None:
    return _by_plural.get(plural)


def by_view(view: str) -> KindWeb | None:
    """The kind of a list or detail page, by its websocket view (= URL) name."""
    return _by_view.get(view)


def is_detail_view(view: str) -> bool:
    web = _by_view.get(view)
    return web is not None and web.detail_view == view


def view_kinds(view: str) -> tuple[str, ...] | None:
    """The kinds a page shows (every kind for the overview), or None for an unknown view."""
    if view == OVERVIEW:
        return tuple(_by_kind)
    web = _by_view.get(view)
    return (web.kind,) if web is not None else None


@dataclass(frozen=True)
class Timeline:
    """What happened to an object, from another kind whose objects are about others (Events),
    merged into the object's History view and counted on the lists and the overview. Declared
    by that kind's web.py (dashboard/events/web.py); web/ names no kind.

    entries(kind, namespace, name, after_rv) -> the entries about that object (each with "at":
    a datetime to order by, "rv", "key": a DOM-safe id, "warning": bool), those written after
    after_rv only when it is given; selector(kind, name) -> the field selector of the objects
    about it (the History view's live subscription); warnings(kind, since) -> {(namespace,
    name): how many warnings about it since}; warnings_selector(kind or None) -> the field
    selector of the warnings about objects of that kind (None: of any kind), and about(obj) ->
    (kind, namespace, name) of the object one is about: the lists' badges and the overview's
    warnings line follow them live.
    """

    kind: str
    entries: Callable[[str, str, str, int | None], list[dict]]
    selector: Callable[[str, str], Any]
    warnings: Callable[[str, datetime], dict[tuple[str, str], int]]
    warnings_selector: Callable[[str | None], Any]
    about: Callable[[dict], tuple[str, str, str]]
    window: str = "the last hour"        # what warnings() counts, in words
    window_seconds: int = 3600


_timeline: list[Timeline] = []


def register_timeline(timeline: Timeline) -> Timeline:
    _timeline[:] = [timeline]
    return timeline


def timeline() -> Timeline | None:
    return _timeline[0] if _timeline else None


# A detail page's other views: /<plural>/<namespace>/<name>/<tab>/, URL name "<detail_view>-<tab>"
# (web/history_views.py); their websockets say tab=<tab>.
DETAIL_TABS = ("history", "fields")


def page_route_names() -> set[str]:
    """The URL names of every list and detail page (and the lists' column menus, the detail pages'
    other views)."""
    return {name for web in _by_kind.values()
            for name in (web.plural, f"{web.plural}-columns", web.detail_view,
                         *(f"{web.detail_view}-{tab}" for tab in DETAIL_TABS))}

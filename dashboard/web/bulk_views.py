"""Row and bulk actions on the list pages: POST the selected rows to /<plural>/bulk/ (a
confirmation page listing exactly what will change), POST again with confirm=1 to do it, then
an Undo where the API allows it (KindWeb.bulk_actions' `undo`; a delete is undone by creating
the saved objects again, with a new uid and resourceVersion). Works without JS; CSRF as every
form. Each object goes through its own do_* action or store.delete, so one failure (gone,
refused, conflict) is reported for that object and the others still happen.

The undo state is the session's, one at a time, and bounded (MAX_SELECTED objects,
undo.MAX_UNDO_BYTES of saved objects: beyond that no undo is offered, and the page says so).
"""
from __future__ import annotations

import json

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from dashboard.access import clusters
from dashboard.kube import context, store
from dashboard.kube.codec import decode_object
from dashboard.kube.errors import ApiError

from .cluster_scope import in_cluster
from .edit_views import editor_view, forbidden
from .kinds import BulkAction, KindWeb
from .scope import may_create_somewhere
from .undo import SESSION_KEY, keep_undo
from .queries import last_deletion

MAX_SELECTED = 200
DELETE = BulkAction("delete", "Delete", "deleted", perform=None, undo="recreate",
                    note="Undo creates them again from the saved objects, with a new uid and resourceVersion.")
# Server-owned metadata a re-created object must not carry (the store assigns it anew).
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
                  "deletionTimestamp", "deletionGracePeriodSeconds")


def _action(info: KindWeb, name: str) -> BulkAction | None:
    return DELETE if name == "delete" else next((a for a in info.bulk_actions if a.name == name), None)


def _verb(action: BulkAction) -> str:
    return "delete" if action is DELETE else action.verb


def _selected(request) -> list[tuple[str, str]]:
    out = []
    for value in request.POST.getlist("selected"):
        namespace, _, name = value.partition("/")
        if namespace and name and (namespace, name) not in out:
            out.append((namespace, name))
    return out


def _read_only(request, principal, info: KindWeb):
    """403 first for whoever may change nothing here (the list shows them no checkboxes)."""
    if may_create_somewhere(principal, "", info.kind):
        return None
    return forbidden(request, principal, info, f"Your role ({principal.role}) may not change {info.list_noun}.")


def _back(info: KindWeb, request):
    nxt = request.POST.get("next", "")
    return redirect(nxt if nxt.startswith(info.list_url) else in_cluster(info.list_url))


def _apply(info: KindWeb, action: BulkAction, namespace: str, name: str, principal, through) -> dict:
    """Deletes need the object saved first (for the undo). through: a followed cluster's writer
    (the request context's write_through: store's)."""
    if action is DELETE:
        saved = store.get(info.resource, namespace, name)
        store.delete(info.resource, namespace, name, uid=saved["metadata"].get("uid"), through=through)
        return saved
    action.perform(namespace, name, principal, through)
    return {}


def _recreate(info: KindWeb, namespace: str, name: str, saved: dict, through) -> dict:
    obj = json.loads(json.dumps(saved))
    for key in _SERVER_FIELDS:
        obj["metadata"].pop(key, None)
    obj.pop("status", None)
    if info.recreate is not None:
        obj = info.recreate(obj)
    obj, _ = decode_object(info.resource, obj, "Strict")
    return store.create(info.resource, namespace, obj, through=through).object


@require_POST
@editor_view
def bulk(request, principal, info: KindWeb):
    if refused := _read_only(request, principal, info):
        return refused
    action = _action(info, request.POST.get("action", ""))
    if action is None:
        messages.error(request, "Choose an action for the selected rows.")
        return _back(info, request)
    selected = _selected(request)
    if not selected:
        messages.error(request, f"Select the {info.list_noun} to {action.label.lower()} first.")
        return _back(info, request)
    if len(selected) > MAX_SELECTED:
        messages.error(request, f"At most {MAX_SELECTED} {info.list_noun} at once; {len(selected)} were selected.")
        return _back(info, request)
    denied = sorted({ns for ns, _ in selected if not principal.can(_verb(action), ns, info.kind)})
    if denied:
        return forbidden(request, principal, info, f"Your role ({principal.role}) may not {action.label.lower()} "
                         f"{info.list_noun} in namespace {', '.join('“%s”' % ns for ns in denied)}.")
    if request.POST.get("confirm") != "1":
        return render(request, "web/bulk_confirm.html", {
            "principal": principal, "active": info.plural, "info": info, "action": action,
            "selected": [f"{ns}/{name}" for ns, name in selected], "next": request.POST.get("next", "")})
    done, failed, saved = [], [], []
    through = context.of(request).write_through
    for ns, name in selected:
        try:
            obj = _apply(info, action, ns, name, principal, through)
        except ApiError as err:
            failed.append(f"{ns}/{name}: {'it no longer exists' if err.code == 404 else err.message}")
            continue
        done.append(f"{ns}/{name}")
        saved.append([ns, name, obj])
    _report(request, info, action, done, failed)
    request.session.pop(SESSION_KEY, None)
    undo = _action(info, action.undo) if action.undo != "recreate" else DELETE
    if done and action.undo:
        if undo is None or not keep_undo(request, info, action.name, saved):
            messages.info(request, "Too much to keep for an undo: this cannot be undone here.")
    return _back(info, request)


def _report(request, info, action, done, failed, prefix=""):
    if done:
        messages.success(request, f"{prefix}{info.counted(len(done))} {action.done}: {', '.join(done)}.")
    for line in failed:
        messages.error(request, f"{prefix}Not {action.done}: {line}")


@require_POST
@editor_view
def undo(request, principal, info: KindWeb):
    if refused := _read_only(request, principal, info):
        return refused
    state = request.session.get(SESSION_KEY)
    if not state or state.get("id") != request.POST.get("undo") or state.get("kind") != info.kind \
            or state.get("cluster", clusters.LOCAL) != clusters.current():
        messages.error(request, "Nothing to undo (only the last bulk action can be undone, once).")
        return _back(info, request)
    request.session.pop(SESSION_KEY)
    first = _action(info, state["action"])
    through = context.of(request).write_through
    done, failed = [], []
    for ns, name, obj in state["objects"]:
        try:
            if first is DELETE:
                if not principal.can("create", ns, info.kind):
                    raise ApiError(403, "Forbidden", f"your role may not create {info.list_noun} in “{ns}”.")
                _recreate(info, ns, name, obj, through)
            else:
                _action(info, first.undo).perform(ns, name, principal, through)
        except ApiError as err:
            failed.append(f"{ns}/{name}: {err.message}")
            continue
        done.append(f"{ns}/{name}")
    if first is DELETE:
        if done:
            messages.success(request, f"Undone: {info.kind} created again (new uid and resourceVersion): "
                             f"{', '.join(done)}.")
        for line in failed:
            messages.error(request, f"Not created again: {line}")
    else:
        _report(request, info, _action(info, first.undo), done, failed, prefix="Undone: ")
    return _back(info, request)


@require_POST
@editor_view
def restore(request, principal, info: KindWeb, namespace: str, name: str):
    """A deleted object's page's "Create it again": the object as the revision log last knew
    it, created anew (new uid), as the list's Undo of a delete does."""
    if refused := _read_only(request, principal, info):
        return refused
    if not principal.can("create", namespace, info.kind):
        return forbidden(request, principal, info, f"Your role ({principal.role}) may not create "
                                                   f"{info.list_noun} in “{namespace}”.")
    url = in_cluster(info.detail_url(namespace, name))
    found = last_deletion(info, namespace, name)
    if found is None:
        messages.info(request, f"{info.kind} {namespace}/{name} is not deleted: nothing to create again.")
        return redirect(url)
    try:
        _recreate(info, namespace, name, found[0], context.of(request).write_through)
    except ApiError as err:
        messages.error(request, f"Not created again: {err.message}")
        return redirect(url)
    messages.success(request, f"{info.kind} {namespace}/{name} created again (new uid and resourceVersion).")
    return redirect(url)

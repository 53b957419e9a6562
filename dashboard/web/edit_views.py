"""The write side of the pages: create, edit (form and YAML), delete, and one-click actions.

Every write goes through kube.codec.decode_object (Strict) and the store, exactly like an API
request, and every view asks Principal.can() for the object's namespace first (403 page
otherwise). An edit (form or YAML) sends only what the person changed since the page was
loaded (forms/conflict.py: the loaded values travel with the page), as a patch onto the object
as it is now, conditional on those fields only: someone else's change to the same fields
meanwhile is refused (409) and answered with a page that shows them and offers to reapply;
changes to other fields (a Lease's renewals) are kept. Successful saves redirect to the
object's page (POST/redirect/GET) with a message.

The one-click actions (each kind's KindWeb.actions) call the kind app's do_* actions: patches
that change one thing on the current object inside the store's write transaction, so they need
no resourceVersion and cannot overwrite anything else; an action refuses (409) when the object
no longer is what the user saw.

The kind comes from the URL's first segment (its plural), looked up in web.kinds: the page
declaration (KindWeb) is the `info` every view and template gets.
"""
from __future__ import annotations

import copy
import difflib
import functools
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_http_methods

from dashboard.access import clusters
from dashboard.access.principals import Principal
from dashboard.follow import writes
from dashboard.kube import context, revlog, store
from dashboard.kube.errors import STALE_OBJECT, ApiError, conflict
from dashboard.kube.meta import now as utcnow
from dashboard.kube.patch import merge_patch
from dashboard.kube.registry import Resource
from dashboard.kube.codec import check_type_meta, decode_object

from . import forms as f
from . import kinds
from .cluster_scope import followed, in_cluster
from .kinds import KindWeb
from .present import detail_url, object_yaml, present
from .scope import form_namespaces, is_new_namespace, may_create_somewhere
from .share import page_principal
from .undo import keep_undo


# ---------------------------------------------------------------------------------------------
# Access


def _page(request, template: str, ctx: dict, status: int = 200) -> HttpResponse:
    return render(request, template, ctx, status=status)


def forbidden(request, principal: Principal | None, info: KindWeb | None, message: str) -> HttpResponse:
    ctx = {"principal": principal, "active": info.plural if info else "", "title": "Not allowed", "message": message}
    return _page(request, "web/error.html", ctx, status=403)


def editor_view(view):
    """Signed-in users only: a GET from a signed-out visitor goes to the login page, any
    other method is refused (a write never follows a login redirect). Resolves the kind.
    In a followed cluster that takes this user's writes, the request's context holds its
    writer (write_through), which the views hand to the store (`through`)."""

    @functools.wraps(view)
    def wrapper(request, plural: str, *args, **kwargs):
        info = kinds.by_plural(plural)
        if info is None:
            raise Http404("no such kind")
        principal = page_principal(request)
        if principal is None:
            if request.method == "GET":
                return redirect_to_login(request.get_full_path())
            return forbidden(request, None, info, "Sign in to change objects.")
        if principal.is_share:
            # A shared view is read-only on every path (the share middleware refuses these
            # routes already; this is the second lock).
            return forbidden(request, principal, info, "A shared view is read-only.")
        if clusters.is_local():
            return view(request, principal, info, *args, **kwargs)
        # A followed cluster's objects are copies of another cluster's: its write mode says
        # whether (and as whom) the writes go through to it (follow/writes.py); otherwise the
        # store refuses them too (405), refused here first, in words, before any form.
        cluster = followed(clusters.current())
        why = writes.mode_refusal(cluster, principal) if cluster is not None else "This cluster is not followed."
        if why is not None:
            read_only = cluster is None or cluster.writes == cluster.READ_ONLY
            return _page(request, "web/error.html", {"principal": principal, "active": info.plural,
                         "title": "Read-only" if read_only else "Not allowed", "message": why},
                         status=405 if read_only else 403)
        context.of(request).write_through = writes.Writer(cluster, principal)
        return view(request, principal, info, *args, **kwargs)

    return wrapper


def needs(verb: str):
    """An object view (after editor_view) for principals who may `verb` the kind's objects in
    the namespace; the others get the denial page."""

    def decorate(view):
        @functools.wraps(view)
        def wrapper(request, principal, info: KindWeb, namespace: str, name: str, **kwargs):
            if not principal.can(verb, namespace, info.kind):
                return _denied(request, principal, info, verb, namespace)
            return view(request, principal, info, namespace, name, **kwargs)

        return wrapper

    return decorate


def _denied(request, principal, info, verb: str, namespace: str) -> HttpResponse:
    """The denial page; namespace "": a create page opened without one (no namespace allows it)."""
    what = {"create": "create", "update": "edit", "patch": "change", "delete": "delete"}.get(verb, verb)
    if not namespace:
        message = f"Your role ({principal.role}) may not {what} {info.title.lower()}."
    elif principal.namespaces_here and namespace not in principal.namespaces_here:
        message = f"You have no access to namespace “{namespace}”."
    else:
        message = f"Your role ({principal.role}) may not {what} {info.title.lower()} in namespace “{namespace}”."
    return forbidden(request, principal, info, message)


def _load(info: KindWeb, namespace: str, name: str) -> dict:
    try:
        return store.get(info.resource, namespace, name)
    except ApiError as err:
        if err.code == 404:
            raise Http404(f"{info.kind} {namespace}/{name} not found")
        raise


def _base_revision(info: KindWeb, namespace: str, name: str, rv: str) -> dict | None:
    """The object as it was at revision rv (what the form was loaded from), if still logged."""
    if not rv.isdigit():
        return None
    return revlog.object_at(info.kind, namespace, name, int(rv))


def _context(request, principal, info: KindWeb, **extra) -> dict:
    ctx = {"principal": principal, "active": info.plural, "info": info}
    ctx.update(extra)
    return ctx


def _status_for(err: ApiError) -> int:
    return err.code if 400 <= err.code < 500 else 400


# ---------------------------------------------------------------------------------------------
# Writes (always decoded as the API decodes a request body)


def _decoded(res: Resource, obj: dict) -> dict:
    obj, _warnings = decode_object(res, obj, "Strict")
    return obj


def save_changes(res: Resource, namespace: str, name: str, changes, *, dry_run: bool = False,
                 through=None) -> store.Result:
    """Patch the object with what a person changed: changes(current) -> (a JSON merge patch,
    the fields someone else changed differently since the page was loaded). Computed on the
    object as the write finds it (inside the store's update, again on each try), so the
    precondition is on those fields only; 409 naming them when there are any."""

    def build(current: dict) -> dict:
        patch, clashes = changes(current)
        if clashes:
            raise conflict(res.group, res.plural, name, "someone else changed the same fields since you loaded them: "
                           + ", ".join(clashes))
        new = merge_patch(copy.deepcopy(current), patch)
        new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return _decoded(res, new)

    return store.update(res, namespace, name, build, dry_run=dry_run, through=through)


def save_edit(res: Resource, namespace: str, name: str, rv: str, change, dry_run: bool = False,
              through=None) -> store.Result:
    """Replace the object with change(current), only if it is still at revision rv (through: a
    followed cluster's writer, store.update's): a page that does not say what it loaded."""

    def build(current: dict) -> dict:
        if current["metadata"].get("resourceVersion") != rv:
            # Refuse before building: a stale form must not be judged against newer data.
            raise conflict(res.group, res.plural, name, STALE_OBJECT)
        new = change(current)
        new.setdefault("metadata", {})["resourceVersion"] = rv
        return _decoded(res, new)

    return store.update(res, namespace, name, build, dry_run=dry_run, through=through)


def _saved(request, info: KindWeb, obj: dict, verb: str, changed: bool = True) -> HttpResponse:
    m = obj["metadata"]
    if changed:
        messages.success(request, f"{info.kind} {m['namespace']}/{m['name']} {verb}.")
    else:
        messages.info(request, f"No changes: {info.kind} {m['namespace']}/{m['name']} was already like this.")
    return redirect(in_cluster(detail_url(info.kind, m["namespace"], m["name"])))


# ---------------------------------------------------------------------------------------------
# Create


def _form_page(request, principal, info, form, *, status=200, **extra) -> HttpResponse:
    ctx = _context(request, principal, info, form=form, namespaces=form_namespaces(principal), **extra)
    return _page(request, "web/edit/form.html", ctx, status=status)


NEW_NAMESPACE = "new_namespace"   # posted by the question's button: the namespace the person confirmed


def new_namespace_question(request, principal: Principal, namespace: str) -> dict:
    """Before a create brings a namespace into use (no object of any kind is in it yet: a typo
    such as "pyaments" would otherwise silently make one), the form asks. {"ask": the question's
    facts, or None} and {"confirmed": the namespace already confirmed, which the page posts again
    while it is shown with errors}: templates/web/edit/_new_namespace.html."""
    if not is_new_namespace(namespace):
        return {}
    if request.POST.get(NEW_NAMESPACE) == namespace:
        return {"confirmed_namespace": namespace}
    similar = difflib.get_close_matches(namespace, form_namespaces(principal), n=3, cutoff=0.6)
    return {"new_namespace": {"name": namespace, "similar": similar}}


@require_http_methods(["GET", "POST"])
@editor_view
def create(request, principal: Principal, info: KindWeb):
    if request.GET.get("as") == "yaml":
        return create_yaml(request, principal, info)
    namespace = (request.GET.get("namespace") or "").strip()
    if not may_create_somewhere(principal, namespace, info.kind):
        return _denied(request, principal, info, "create", namespace)
    form_cls = info.form
    options = {"mode": "create", "namespaces": form_namespaces(principal), "limited": bool(principal.namespaces_here)}
    back = info.list_url + (f"?{urlencode({'namespace': namespace})}" if namespace else "")   # (Cancel)
    page = {"heading": f"New {info.noun}", "submit_label": f"Create {info.noun}", "cancel_url": back,
            "yaml_url": f"{info.list_url}new/?as=yaml" + (f"&namespace={namespace}" if namespace else "")}
    if request.method == "GET":
        initial = {"namespace": namespace or (principal.namespaces_here[0] if principal.namespaces_here else "default"),
                   **info.create_initial}
        return _form_page(request, principal, info, form_cls(initial=initial, **options), **page)

    data = request.POST.copy()
    restructured = _restructure(form_cls, data)
    if restructured is not None:
        return _form_page(request, principal, info, form_cls(initial=restructured, **options), **page)
    through = context.of(request).write_through
    form = form_cls(data, **options)
    if not form.is_valid():
        namespace = str(form.cleaned_data.get("namespace") or "").strip()
        if principal.can("create", namespace or "default", info.kind):
            form.add_api_errors_too(lambda: store.create(
                info.resource, namespace, _decoded(info.resource, form.new_object()), dry_run=True, through=through))
            page.update(new_namespace_question(request, principal, namespace))   # asked in the same round
        return _form_page(request, principal, info, form, status=400, **page)
    namespace = str(form.cleaned_data.get("namespace") or "").strip()
    if namespace and not principal.can("create", namespace, info.kind):
        form.add_error("namespace", f"You may not create objects in namespace “{namespace}”.")
        return _form_page(request, principal, info, form, status=403, **page)
    page.update(new_namespace_question(request, principal, namespace))
    try:
        # In a namespace not in use yet: asked first (a dry run says now what else would refuse it).
        result = store.create(info.resource, namespace, _decoded(info.resource, form.new_object()),
                              dry_run="new_namespace" in page, through=through)
        if "new_namespace" in page:
            return _form_page(request, principal, info, form, **page)
    except ApiError as err:
        form.add_api_error(err)
        return _form_page(request, principal, info, form, status=_status_for(err), **page)
    return _saved(request, info, result.object, "created")


def _restructure(form_cls, data) -> dict | None:
    """Buttons that add or remove a repeated section (a form's restructure()) re-render the
    form with the new structure instead of saving."""
    action = data.get("action", "save")
    if action == "save" or not hasattr(form_cls, "restructure"):
        return None
    return form_cls.restructure({k: data.get(k) for k in data}, action)


# ---------------------------------------------------------------------------------------------
# Edit (form)


@require_http_methods(["GET", "POST"])
@editor_view
@needs("update")
def edit(request, principal: Principal, info: KindWeb, namespace: str, name: str):
    current = _load(info, namespace, name)
    form_cls = info.form
    url = detail_url(info.kind, namespace, name)
    page = {"heading": f"Edit {info.noun} {name}", "submit_label": "Save changes", "cancel_url": url,
            "obj_url": url, "namespace": namespace, "name": name, "yaml_url": url + "yaml/"}
    readonly = form_cls.readonly_section(current)   # what cannot change: shown, not offered
    if readonly:
        page["readonly"] = readonly

    if request.method == "GET":
        rv = current["metadata"]["resourceVersion"]
        loaded = form_cls.data_from_object(current)
        form = form_cls(initial=loaded, mode="edit")
        return _form_page(request, principal, info, form, rv=rv, loaded=f.loaded_text(loaded), **page)

    rv = request.POST.get("resourceVersion", "")
    loaded = _loaded_data(request, info, namespace, name, rv)
    # Shown again (errors, a section added), the page keeps what it was loaded with.
    page.update(rv=rv, loaded=f.loaded_text(loaded) if loaded is not None else "")
    data = request.POST.copy()
    restructured = _restructure(form_cls, data)
    if restructured is not None:
        return _form_page(request, principal, info, form_cls(initial=restructured, mode="edit"), **page)
    through = context.of(request).write_through
    form = form_cls(data, mode="edit")

    def save(dry_run: bool = False) -> store.Result:
        if loaded is None:   # a page that did not say what it loaded: the whole form, at its version
            return save_edit(info.resource, namespace, name, rv, form.apply, dry_run=dry_run, through=through)
        return save_changes(info.resource, namespace, name, lambda current: _form_changes(form, loaded, current, rv),
                            dry_run=dry_run, through=through)

    if not form.is_valid():
        form.add_api_errors_too(lambda: save(dry_run=True))
        return _form_page(request, principal, info, form, status=400, **page)
    try:
        result = save()
    except ApiError as err:
        return _refused_save(err, info, form, None, "the form",
                             lambda: _conflict_page(request, principal, info, form, namespace, name, rv, loaded),
                             lambda status: _form_page(request, principal, info, form, status=status, **page))
    return _saved(request, info, result.object, "saved", result.changed)


def _loaded_data(request, info: KindWeb, namespace: str, name: str, rv: str) -> dict | None:
    """The edit form's values as it was loaded: posted with it, else those of the revision it
    names while the log still has it; None when neither is known."""
    loaded = f.posted_loaded(request.POST)
    if loaded is None and (base := _base_revision(info, namespace, name, rv)) is not None:
        loaded = info.form.data_from_object(base)
    return loaded


def _form_changes(form, loaded: dict, current: dict, rv: str) -> tuple[dict, list[str]]:
    """forms.form_changes, or, when the loaded values make no valid form, all of the form's
    values if the object is still at the loaded version (else a conflict on every field)."""
    changes = f.form_changes(form, loaded, current)
    if changes is not None:
        return changes
    if current["metadata"].get("resourceVersion") != rv:
        return {}, [label for _key, label, _names in form.comparable()]
    return f.merge_diff(current, form.apply(copy.deepcopy(current))), []


def _refused_save(err: ApiError, info: KindWeb, form, field, opened: str, conflict, again) -> HttpResponse:
    """An edit the store refused: the conflict page (409: changed meanwhile), or the form again
    (`again(status)`) saying it was deleted meanwhile (404) or showing the error by its fields."""
    if err.code == 409 and err.reason == "Conflict":
        return conflict()
    if err.code == 404:
        form.add_error(field, f"This {info.noun} was deleted after you opened {opened}; nothing was saved.")
    else:
        form.add_api_error(err)
    return again(_status_for(err))


def _conflict_page(request, principal, info, form, namespace, name, rv, loaded) -> HttpResponse:
    current = _load(info, namespace, name)
    posted = {k: request.POST.get(k) for k in request.POST
              if k not in ("csrfmiddlewaretoken", "resourceVersion", "action", f.LOADED)}
    rows, merged = f.conflict_view(form, posted, loaded, current)
    url = detail_url(info.kind, namespace, name)
    ctx = _context(request, principal, info, rows=rows, hidden=sorted(merged.items()), namespace=namespace, name=name,
                   loaded_rv=rv, current_rv=current["metadata"]["resourceVersion"], base_known=loaded is not None,
                   action_url=in_cluster(url + "edit/"), discard_url=in_cluster(url + "edit/"), obj_url=url)
    return _page(request, "web/edit/conflict.html", ctx, status=409)


# ---------------------------------------------------------------------------------------------
# The YAML editor (kubectl edit: what the person changed in the text, as a patch)


def _yaml_page(request, principal, info, form, *, status=200, **extra) -> HttpResponse:
    ctx = _context(request, principal, info, form=form, field=form["yaml"], **extra)
    return _page(request, "web/edit/yaml.html", ctx, status=status)


@require_http_methods(["GET", "POST"])
@editor_view
@needs("update")
def edit_yaml(request, principal: Principal, info: KindWeb, namespace: str, name: str):
    current = _load(info, namespace, name)
    url = detail_url(info.kind, namespace, name)
    page = {"heading": f"Edit {info.noun} {name} as YAML", "submit_label": "Save", "cancel_url": url,
            "obj_url": url, "namespace": namespace, "name": name, "form_url": url + "edit/"}
    if request.method == "GET":
        text = object_yaml(current)
        form = f.YamlForm(initial={"yaml": text})
        return _yaml_page(request, principal, info, form, rv=current["metadata"]["resourceVersion"],
                          original=text, **page)

    rv = request.POST.get("resourceVersion", "")
    # The text as loaded, posted back with the edit, so that a page shown again (errors) still
    # reviews the changes against what was loaded (the editor's diff before save).
    page["original"] = request.POST.get("original", "")
    form = f.YamlForm(request.POST)
    if not form.is_valid():
        f.note_limits_hit(form, context.of(request))
        return _yaml_page(request, principal, info, form, rv=rv, status=400, **page)
    res = info.resource
    original = _original_object(res, page["original"]) or _base_revision(info, namespace, name, rv)
    try:
        edited = dict(form.parsed)
        check_type_meta(res, edited)
        edited = _decoded(res, edited)
        if original is not None:
            # What the person changed in the text, onto the object as it is now (renewals of
            # other fields meanwhile are kept); whatever resourceVersion the text says.
            result = save_changes(res, namespace, name, functools.partial(f.yaml_changes, original, edited),
                                  through=context.of(request).write_through)
        else:
            # Loaded text unknown: the whole object, only at the version the editor was loaded
            # at (kubectl edit sends the resourceVersion it fetched), never forced.
            edited.setdefault("metadata", {})["resourceVersion"] = rv
            result = store.update(res, namespace, name, edited, through=context.of(request).write_through)
    except ApiError as err:
        return _refused_save(err, info, form, "yaml", "the editor",
                             lambda: _yaml_conflict(request, principal, info, form, namespace, name, rv, original),
                             lambda status: _yaml_page(request, principal, info, form, rv=rv, status=status, **page))
    return _saved(request, info, result.object, "saved", result.changed)


def _original_object(res: Resource, text: str) -> dict | None:
    """The object as the editor loaded it (its posted original text), decoded like the edit."""
    try:
        return _decoded(res, f.load_yaml(text)) if text else None
    except (f.ValidationError, ApiError):
        return None


def _yaml_conflict(request, principal, info, form, namespace, name, rv, base) -> HttpResponse:
    current = _load(info, namespace, name)
    yours = _decoded(info.resource, dict(form.parsed))
    rows = f.yaml_rows(yours, base, current)
    merged = f.reapply_yaml(yours, base, current)
    url = detail_url(info.kind, namespace, name)
    # Reapplying diffs the merged text against the current object (its original).
    hidden = [("yaml", object_yaml(merged)), ("original", object_yaml(current))]
    ctx = _context(request, principal, info, rows=rows, hidden=hidden, namespace=namespace,
                   name=name, loaded_rv=rv, current_rv=current["metadata"]["resourceVersion"],
                   base_known=base is not None, action_url=in_cluster(url + "yaml/"), discard_url=in_cluster(url + "yaml/"),
                   obj_url=url,
                   yaml_mode=True)
    return _page(request, "web/edit/conflict.html", ctx, status=409)


def create_yaml(request, principal: Principal, info: KindWeb):
    namespace = (request.GET.get("namespace") or "").strip()
    if not may_create_somewhere(principal, namespace, info.kind):
        return _denied(request, principal, info, "create", namespace)
    back = info.list_url + (f"?{urlencode({'namespace': namespace})}" if namespace else "")   # (Cancel)
    page = {"heading": f"New {info.noun} from YAML", "submit_label": f"Create {info.noun}",
            "cancel_url": back, "form_url": f"{info.list_url}new/" + (f"?{urlencode({'namespace': namespace})}" if namespace else "")}
    res = info.resource
    if request.method == "GET":
        default_ns = namespace or (principal.namespaces_here[0] if principal.namespaces_here else "default")
        skeleton = {"apiVersion": res.api_version, "kind": res.kind,
                    "metadata": {"name": "", "namespace": default_ns}, **info.yaml_skeleton}
        return _yaml_page(request, principal, info, f.YamlForm(initial={"yaml": object_yaml(skeleton)}), **page)
    form = f.YamlForm(request.POST)
    if not form.is_valid():
        f.note_limits_hit(form, context.of(request))
        return _yaml_page(request, principal, info, form, status=400, **page)
    obj = dict(form.parsed)
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    target = str(meta.get("namespace") or "default")
    if not principal.can("create", target, info.kind):
        form.add_error("yaml", f"You may not create objects in namespace “{target}”.")
        return _yaml_page(request, principal, info, form, status=403, **page)
    page.update(new_namespace_question(request, principal, target))
    try:
        check_type_meta(res, obj)
        # In a namespace not in use yet: asked first (a dry run says now what else would refuse it).
        result = store.create(res, target, _decoded(res, obj), dry_run="new_namespace" in page,
                              through=context.of(request).write_through)
        if "new_namespace" in page:
            return _yaml_page(request, principal, info, form, **page)
    except ApiError as err:
        form.add_api_error(err)
        return _yaml_page(request, principal, info, form, status=_status_for(err), **page)
    return _saved(request, info, result.object, "created")


# ---------------------------------------------------------------------------------------------
# Delete


@require_http_methods(["GET", "POST"])
@editor_view
@needs("delete")
def delete(request, principal: Principal, info: KindWeb, namespace: str, name: str):
    url = detail_url(info.kind, namespace, name)
    list_url = in_cluster(f"{info.list_url}?namespace={namespace}")
    if request.method == "GET":
        current = _load(info, namespace, name)
        ctx = _context(request, principal, info, namespace=namespace, name=name, obj_url=url,
                       uid=current["metadata"].get("uid", ""), item=present(info.kind, current, utcnow()),
                       can_undo=principal.can("create", namespace, info.kind))
        return _page(request, "web/edit/delete.html", ctx)
    try:
        saved = store.get(info.resource, namespace, name)     # for the list page's Undo
        # The uid precondition: delete the object the user saw, not one recreated since.
        result = store.delete(info.resource, namespace, name, uid=request.POST.get("uid") or None,
                              through=context.of(request).write_through)
    except ApiError as err:
        if err.code == 404:
            messages.info(request, f"{info.kind} {namespace}/{name} was already deleted.")
            return redirect(list_url)
        messages.error(request, f"Not deleted: {err.message}")
        return redirect(in_cluster(url))
    if not result.deleted:
        messages.info(request, f"{info.kind} {namespace}/{name} is being deleted (waiting for its finalizers).")
        return redirect(in_cluster(url))
    if principal.can("create", namespace, info.kind) and keep_undo(request, info, "delete", [[namespace, name, saved]]):
        messages.success(request, f"{info.kind} {namespace}/{name} deleted. Undo below creates it again.")
    else:
        messages.success(request, f"{info.kind} {namespace}/{name} deleted.")
    return redirect(list_url)


# ---------------------------------------------------------------------------------------------
# One-click actions (the kind's KindWeb.actions, each calling a do_* action of its app)


@editor_view
def run_action(request, principal: Principal, info: KindWeb, namespace: str, name: str, *, action: str):
    act = info.action(action)
    if request.method != "POST" and not (request.method == "GET" and act.preview is not None):
        return HttpResponseNotAllowed(["POST"])
    if not principal.can(act.verb, namespace, info.kind):
        return _denied(request, principal, info, act.verb, namespace)
    if request.method == "GET":
        return _action_preview(request, principal, info, act, namespace, name)
    try:
        result, done = act.perform(request.POST, namespace, name, principal, context.of(request).write_through)
    except ApiError as err:
        if err.code == 404:
            raise Http404(f"{info.kind} {namespace}/{name} not found")
        causes = (err.details or {}).get("causes") or []
        text = "; ".join(f"{c.get('field')}: {f.plain(c.get('message', ''))}" for c in causes) or err.message
        messages.error(request, f"Not changed: {text}")
        return redirect(in_cluster(detail_url(info.kind, namespace, name)))
    if result.changed:
        messages.success(request, done)
    else:
        messages.info(request, "Nothing to change.")
    if act.verb == "create":   # (the new object's page)
        return redirect(in_cluster(detail_url(info.kind, namespace, result.object["metadata"]["name"])))
    return redirect(in_cluster(detail_url(info.kind, namespace, name)))


def _action_preview(request, principal: Principal, info: KindWeb, act: kinds.Action, namespace: str, name: str):
    """An action's confirmation page: the object it will create, as YAML, and the button."""
    try:
        obj = act.preview(namespace, name)
    except ApiError as err:
        if err.code == 404:
            raise Http404(f"{info.kind} {namespace}/{name} not found")
        messages.error(request, f"Not possible: {err.message}")
        return redirect(in_cluster(detail_url(info.kind, namespace, name)))
    ctx = {"principal": principal, "active": info.plural, "info": info, "action": act, "namespace": namespace,
           "name": name, "yaml": object_yaml(obj), "obj": obj, "url": detail_url(info.kind, namespace, name),
           "fields": dict(act.preview_fields(obj)) if act.preview_fields else {}}
    return _page(request, "web/edit/action_confirm.html", ctx)


# ---------------------------------------------------------------------------------------------
# The detail pages' action panels, refreshed by htmx after each live update


@require_http_methods(["GET"])
@editor_view
@needs("update")
def actions(request, principal: Principal, info: KindWeb, namespace: str, name: str):
    # The common toolbar, or the panel of a kind's action that has no toolbar button (a
    # partial of the kind's detail template named after the action).
    part = request.GET.get("part", "toolbar")
    action = info.action(part)
    if part == "toolbar":
        template = "web/edit/_actions.html#toolbar"
    elif action is not None and not action.toolbar:
        template = f"{info.detail_template}#{part}"
    else:
        raise Http404("no such part")
    try:
        ctx = {"item": present(info.kind, _load(info, namespace, name), utcnow())}
    except Http404:
        # Deleted while the page was open (the live push said so): the buttons, disabled.
        ctx = {"item": {"kind": info.kind, "url": detail_url(info.kind, namespace, name)}, "gone": True}
    html = render_to_string(template, {**ctx, "can_edit": True}, request=request)
    return HttpResponse(html)


__all__ = ["create", "edit", "edit_yaml", "delete", "run_action", "actions", "save_edit"]

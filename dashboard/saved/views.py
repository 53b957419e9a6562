"""The saved views pages: save the page's view, list and manage them (/views/), open one
(/views/<slug>/), make one the default of its list; and the pin toggle (/pins/)."""
from __future__ import annotations

from urllib.parse import urlencode

from django.http import Http404, HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from dashboard.web.share import page_principal, user_required
from dashboard.web.views import base_context

from . import pins, saving
from .models import DefaultView, SavedView


def _owned(request, slug: str) -> SavedView:
    """A view the signed-in user may manage (owner or admin), else 404 (never says whose)."""
    view = SavedView.objects.filter(slug=slug).first()
    if view is None or not saving.may_manage(page_principal(request), request.user, view):
        raise Http404("no such view")
    return view


def _shared_fields(request) -> tuple[str, list[str]] | None:
    """(shared, groups) from a form; groups limited to the user's own (None: not valid)."""
    shared = request.POST.get("shared", SavedView.PERSONAL)
    if shared not in dict(SavedView.SHARED_CHOICES):
        return None
    mine = saving.user_groups(request.user, page_principal(request))
    groups = sorted({g for g in request.POST.getlist("groups") if g in mine}) if shared == SavedView.GROUPS else []
    if shared == SavedView.GROUPS and not groups:
        return None
    return shared, groups


@user_required
@require_safe
def views_page(request):
    principal = page_principal(request)
    ctx = base_context(request, principal, "views")
    seen = saving.visible_views(request.user, principal)
    defaults = dict(DefaultView.objects.filter(user=request.user).values_list("path", "view_id"))
    titles = saving.list_paths()
    sections = []
    if principal.is_full_admin:   # (an admin manages everyone's views: rename, delete)
        shown = {v.pk for rows in seen.values() for v in rows}
        seen["others"] = [v for v in SavedView.objects.select_related("owner") if v.pk not in shown]
    for key, title in (("mine", "My views"), ("groups", "My groups’ views"), ("everyone", "Everyone’s views"),
                       ("others", "Other people’s views (you manage them as an admin)")):
        if key not in seen:
            continue
        rows = [{"view": v, "page": titles.get(v.path, v.path), "is_default": defaults.get(v.path) == v.pk,
                 "manage": saving.may_manage(principal, request.user, v),
                 "share": saving.share_address(principal, v),
                 "pinned": pins.pins_of(request.user, {"view": v}).exists()} for v in seen[key]]
        sections.append({"key": key, "title": title, "rows": rows})
    ctx.update(sections=sections, groups=sorted(saving.user_groups(request.user, principal)),
               shared_choices=SavedView.SHARED_CHOICES, saved=request.GET.get("saved", ""),
               error=request.GET.get("error", ""))
    return render(request, "saved/views.html", ctx)


@user_required
@require_POST
def save(request):
    address = saving.page_address(request.POST.get("url", ""))
    name = (request.POST.get("name") or "").strip()[:100]
    shared = _shared_fields(request)
    if address is None or not name or shared is None:
        why = ("Give the view a name." if not name else
               "Choose at least one of your groups to share it with." if shared is None else
               "Only a list or the Overview can be saved as a view.")
        return redirect("/views/?" + urlencode({"error": why}))
    view = SavedView.objects.create(owner=request.user, name=name, slug=SavedView.free_slug(name),
                                    path=address[0], query=address[1], shared=shared[0], groups=shared[1])
    return redirect("/views/?" + urlencode({"saved": view.slug}))


@user_required
@require_safe
def open_view(request, slug: str):
    """Redirect to the saved address, when the viewer may see what it shows: a shared view is
    an address, never a grant (the page opened checks the viewer's rights again)."""
    principal = page_principal(request)
    view = saving.find_visible(request.user, principal, slug)
    if view is None:
        raise Http404("no such view")
    why = saving.view_refusal(principal, view)
    if why:
        ctx = base_context(request, principal, "views")
        ctx.update(title="Not allowed", message=why)
        return render(request, "web/error.html", ctx, status=403)
    return redirect(view.url)


@user_required
@require_POST
def change(request, slug: str):
    """Rename and re-share (owner or admin)."""
    view = _owned(request, slug)
    name = (request.POST.get("name") or "").strip()[:100]
    shared = _shared_fields(request) if "shared" in request.POST else (view.shared, view.groups)
    if not name or shared is None:
        return redirect("/views/?" + urlencode({"error": "Give the view a name." if not name else
                                                "Choose at least one of your groups to share it with."}))
    view.name, (view.shared, view.groups) = name, shared
    view.save()
    return redirect("/views/?" + urlencode({"saved": view.slug}))


@user_required
@require_POST
def delete(request, slug: str):
    _owned(request, slug).delete()
    return redirect("/views/")


@user_required
@require_POST
def make_default(request, slug: str):
    """Make the view the user's default for its list, or (`off`) stop it being."""
    view = saving.find_visible(request.user, page_principal(request), slug)
    if view is None:
        raise Http404("no such view")
    if request.POST.get("off"):
        DefaultView.objects.filter(user=request.user, path=view.path, view=view).delete()
    else:
        DefaultView.objects.update_or_create(user=request.user, path=view.path, defaults={"view": view})
    return redirect(request.POST.get("next") if request.POST.get("next", "").startswith("/views/") else "/views/")


@user_required
@require_safe
def palette_data(request):
    """The command palette's suggestions (static/saved/palette.js fetches them when it opens)."""
    from .templatetags.saved import palette_suggestions   # noqa: PLC0415 (one place for what it suggests)
    resp = JsonResponse(palette_suggestions(request.user, page_principal(request)))
    resp["Cache-Control"] = "no-store"
    return resp


@user_required
@require_POST
def pin(request):
    """Pin or unpin the object or saved view at `url`. Scripts (palette.js) get JSON; a form
    goes back to the page."""
    url = request.POST.get("url", "")
    found = pins.target(url)
    if found is None:
        return HttpResponseBadRequest("Only an object’s page or a saved view can be pinned.")
    if "view" in found and not found["view"].visible_to(request.user, saving.user_groups(request.user)):
        raise Http404("no such view")
    pinned = pins.toggle(request.user, found)
    if request.headers.get("Accept", "").startswith("application/json"):
        return JsonResponse({"pinned": pinned})
    back = request.POST.get("next", "")
    return redirect(back if back.startswith("/") and not back.startswith("//") else url)

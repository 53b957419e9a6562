"""Share link pages: create (from a list page), list, revoke; open (/s/<token>/) and leave."""
from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from dashboard.kube.errors import ApiError
from dashboard.kube.selectors import parse_label_selector

from dashboard.access import clusters
from dashboard.access.authentication import touch_last_used
from dashboard.access.models import Role, ShareLink
from dashboard.access.principals import principal_for

from . import kinds, share


class ShareForm(forms.Form):
    kind = forms.ChoiceField(choices=[(k, k) for k in kinds.kind_names()], widget=forms.HiddenInput)
    namespace = forms.CharField(required=False, max_length=253, widget=forms.HiddenInput)
    labelSelector = forms.CharField(required=False, max_length=1000, widget=forms.HiddenInput)
    # The name search: not a limit of the link (the visitor may clear it) but where it opens,
    # so it travels in the link's address (/s/<token>/?q=…), not in the link's scope.
    q = forms.CharField(required=False, max_length=253, widget=forms.HiddenInput)
    state = forms.CharField(required=False, max_length=60, widget=forms.HiddenInput)
    sort = forms.CharField(required=False, max_length=60, widget=forms.HiddenInput)     # (and the
    limit = forms.CharField(required=False, max_length=10, widget=forms.HiddenInput)    # rest of
    page = forms.CharField(required=False, max_length=10, widget=forms.HiddenInput)     # the view)
    columns = forms.CharField(required=False, max_length=1000, widget=forms.HiddenInput)   # (web/columns.py)
    at = forms.CharField(required=False, max_length=40, widget=forms.HiddenInput)       # (?at=: as of then)
    label = forms.CharField(max_length=100, help_text="Who or what the link is for, e.g. “on-call team”.")
    expiry = forms.ChoiceField(choices=[(k, v[0]) for k, v in share.EXPIRY_CHOICES.items()],
                               initial=share.DEFAULT_EXPIRY, widget=forms.RadioSelect)

    def clean_namespace(self):
        return self.cleaned_data["namespace"].strip()

    def clean_labelSelector(self):  # noqa: N802 (the page's query parameter name)
        text = self.cleaned_data["labelSelector"].strip()
        try:
            parse_label_selector(text)
        except ApiError as exc:
            raise forms.ValidationError(f"Label selector: {exc.message}")
        return text


def describe(kind: str, namespaces: tuple[str, ...], label_selector: str, q: str = "", cluster: str = "") -> str:
    """A link's scope in words (also the default label); its cluster unless it is the local one."""
    where = ((f"namespace {namespaces[0]}" if len(namespaces) == 1 else "namespaces " + ", ".join(namespaces))
             if namespaces else "all namespaces")
    if cluster and cluster != clusters.LOCAL:
        where += f" of cluster {cluster}"
    web = kinds.by_kind(kind)
    return (f"{web.title if web else kind} in {where}" + (f" matching {label_selector}" if label_selector else "")
            + (f", names containing “{q}”" if q else ""))


def _context(request, **extra) -> dict:
    return {"principal": principal_for(request.user), "active": "share", **extra}


def _no_store(response):
    # Pages that show a secret once must not be kept by the browser or a proxy.
    response["Cache-Control"] = "no-store"
    return response


@share.user_required
@require_GET
def share_list(request):
    principal = principal_for(request.user)
    now = timezone.now()
    rows = [{"link": link, "state": link.state(now),
             "scope": describe(link.kind, link.scope_namespaces(), link.label_selector, cluster=link.cluster),
             "can_revoke": principal.is_full_admin or link.creator_id == request.user.pk}
            for link in share.visible_links(principal, request.user)]
    return render(request, "web/share/list.html", _context(request, rows=rows, all_links=principal.is_full_admin))


@share.user_required
@require_http_methods(["GET", "POST"])
def share_new(request):
    principal = principal_for(request.user)
    if request.method == "GET":
        form = ShareForm(initial={"kind": request.GET.get("kind", ""), "namespace": request.GET.get("namespace", ""),
                                  "labelSelector": request.GET.get("labelSelector", ""),
                                  **{p: request.GET.get(p, "") for p in share.VIEW_PARAMS},
                                  "expiry": share.DEFAULT_EXPIRY})
        kind, namespace = request.GET.get("kind", ""), request.GET.get("namespace", "")
        if kinds.by_kind(kind) is None:
            if principal.role not in (Role.ADMIN, Role.EDITOR):   # (not told of a button they lack)
                return render(request, "web/share/error.html", _context(
                    request, title="Not allowed", message="Your role may not share views."), status=403)
            raise Http404("Open a list page and use its “Share this view” button.")
        selector, q = request.GET.get("labelSelector", ""), request.GET.get("q", "").strip()
        shown = share.shared_namespaces(principal, namespace, kind) or ()
        form.initial["label"] = describe(kind, shown, selector, q, clusters.current())[:100]
    else:
        form = ShareForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            kind, namespace, selector, q = data["kind"], data["namespace"], data["labelSelector"], data["q"].strip()
        else:
            kind, namespace, selector, q = (request.POST.get("kind", ""), request.POST.get("namespace", ""),
                                            request.POST.get("labelSelector", ""), request.POST.get("q", "").strip())
    # Only editors and admins share, and only what they may see themselves: a namespace-limited
    # one's "All namespaces" is their own namespaces.
    shown = share.shared_namespaces(principal, namespace, kind) if kinds.by_kind(kind) else None
    if shown is None:
        return render(request, "web/share/error.html", _context(
            request, title="Not allowed", message="Your role may not share this view."), status=403)
    # The link shows the cluster of the page it is made from (the request runs within it).
    ctx = _context(request, form=form, scope=describe(kind, shown, selector, q, clusters.current()), kind=kind)
    if request.method == "GET" or not form.is_valid():
        return render(request, "web/share/new.html", ctx, status=200 if request.method == "GET" else 400)
    data = form.cleaned_data
    link, token = share.create_link(request.user, kind=kind, namespaces=shown, label_selector=selector,
                                    label=data["label"], expiry=data["expiry"])
    view = urlencode({p: data[p].strip() for p in share.VIEW_PARAMS if data[p].strip()})
    url = request.build_absolute_uri(f"/s/{token}/" + (f"?{view}" if view else ""))
    return _no_store(render(request, "web/share/created.html", _context(request, link=link, url=url,
                                                                        scope=ctx["scope"])))


@share.user_required
@require_POST
def share_revoke(request, link_id: int):
    principal = principal_for(request.user)
    link = get_object_or_404(ShareLink, pk=link_id)
    if not (principal.is_full_admin or link.creator_id == request.user.pk):
        # Don't confirm that someone else's link exists.
        raise Http404("No such share link.")
    share.revoke(link)
    messages.success(request, f"Revoked “{link.label}”: it stopped working and its open pages were closed.")
    return redirect("share_list")


@require_GET
def share_open(request, token: str):
    """The link itself: remember it in this session, then show its view."""
    link = share.link_by_token(token)
    if link is None:
        return share.stopped_page(request, "gone")
    link, why = share.usable_link(link.pk)
    if why:
        return share.stopped_page(request, why)
    if request.session.session_key:
        request.session.cycle_key()   # a fresh session id for the new capability
    request.session[share.SESSION_KEY] = link.pk
    touch_last_used(ShareLink, link)
    if not request.user.is_authenticated:
        request.session.set_expiry(link.expires)
    # Redirect: the token leaves the address bar (and any Referer) at once.
    return redirect(share.page_url(link, {p: request.GET.get(p, "").strip() for p in share.VIEW_PARAMS}))


@require_POST
def share_leave(request):
    request.session.pop(share.SESSION_KEY, None)
    return redirect("/")

"""/people/groups/: the identity provider's groups and the roles they give (GroupBinding), for
admins without limits; and /accounts/whoami/: who you are, your groups, where each right comes
from. Self-contained (its own URLs and templates) beside the /people/ pages for users."""
from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from dashboard.access.bindings import bind, unbind
from dashboard.access.models import GroupBinding, Profile, Role
from dashboard.access.principals import principal_for

from .share import forbidden, user_required
from .views import base_context


def _names(value: str) -> list[str]:
    return [v for v in (part.strip() for part in value.replace(",", " ").split()) if v]


class BindingForm(forms.Form):
    group = forms.CharField(max_length=256, help_text="The group's name as the identity provider sends it.")
    role = forms.ChoiceField(choices=Role.choices, initial=Role.VIEWER)   # the least, unless chosen
    namespaces = forms.CharField(max_length=2000, required=False, help_text="Empty: every namespace.")
    clusters = forms.CharField(max_length=2000, required=False, help_text="Empty: every cluster.")


def _admin(request):
    principal = principal_for(request.user)
    return principal if principal.is_full_admin else None


@user_required
@require_http_methods(["GET", "POST"])
def groups(request):
    principal = _admin(request)
    if principal is None:
        return forbidden(request, "Only an admin without namespace or cluster limits manages group bindings.")
    form = BindingForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            binding = bind(data["group"], data["role"], _names(data["namespaces"]), _names(data["clusters"]))
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Group {binding.group} is now bound to {binding.role}.")
            return redirect("group_bindings")
    members: dict[str, int] = {}
    for groups_of in Profile.objects.exclude(groups=[]).values_list("groups", flat=True):
        for group in groups_of or ():
            members[group] = members.get(group, 0) + 1
    rows = [(b, members.get(b.group, 0)) for b in GroupBinding.objects.all()]
    ctx = base_context(request, principal, "people")   # a tab of the People pages
    ctx.update(form=form, rows=rows, people_tab="groups")
    return render(request, "web/groups/list.html", ctx, status=400 if form.errors else 200)


@user_required
@require_POST
def group_unbind(request, binding_id: int):
    if _admin(request) is None:
        return forbidden(request, "Only an admin without namespace or cluster limits manages group bindings.")
    binding = GroupBinding.objects.filter(pk=binding_id).first()
    if binding is not None and unbind(binding.group):
        messages.success(request, f"Group {binding.group} no longer has a role.")
    return redirect("group_bindings")


@user_required
@require_GET
def whoami(request):
    principal = principal_for(request.user)
    ctx = base_context(request, principal, "whoami")
    ctx.update(grants=principal.grants, idp_groups=principal.idp_groups)
    return render(request, "web/groups/whoami.html", ctx)

"""The people pages (/people/): who may use kubedash, with which role and limits, their tokens.

For admins without limits only, as Django's admin is (admin_site.py): whoever may set a role may
give anyone, themselves included, any role, so a namespace- or cluster-limited admin could lift
its own limits through a second account; it is refused here (403) as there. Every change goes
through access/people.py, whose saves end or re-check the user's open pages and watches at once.
Django's admin (/admin/) stays for emergencies.
"""
from __future__ import annotations

from functools import wraps

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model, password_validation
from django.db.models import Count, Max, Q
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from dashboard.access import clusters as access_clusters
from dashboard.access import people
from dashboard.access.models import ApiToken, Role
from dashboard.access.principals import principal_for
from dashboard.follow.models import Cluster
from dashboard.kube.validation import is_dns1123_label

from . import kinds
from .share import user_required

User = get_user_model()

ROLE_HELP = {Role.ADMIN: "everything, and (without limits) people, clusters, every token and link",
             Role.EDITOR: "read, create, change and delete objects; share views",
             Role.VIEWER: "read only"}


def existing_namespaces() -> list[str]:
    """Every namespace that holds an object (Events too) in any cluster (the local store and followed ones)."""
    seen: set[str] = set()
    for web in (*kinds.registered(), *kinds.feeds()):
        seen.update(web.resource.model.everywhere.values_list("namespace", flat=True).distinct())
    seen.discard("")
    return sorted(seen)


def existing_clusters() -> list[str]:
    return [access_clusters.LOCAL, *Cluster.objects.order_by("name").values_list("name", flat=True)]


def full_admin_required(view):
    """The people pages serve admins without limits; anyone else signed in gets a 403 page."""
    @user_required
    @wraps(view)
    def wrapper(request, *args, **kwargs):
        principal = principal_for(request.user)
        if not principal.is_full_admin:
            return render(request, "web/error.html", {
                "principal": principal, "title": "Not allowed",
                "message": "Only an admin without namespace or cluster limits manages people."}, status=403)
        return view(request, *args, **kwargs)
    return wrapper


# ---------------------------------------------------------------------------------------------
# Forms


class GrantForm(forms.Form):
    """A role and its limits: namespaces picked from those that exist (plus any typed in) and
    clusters from those that exist; none picked means every one."""

    role = forms.ChoiceField(choices=[(r.value, f"{r.value} — {ROLE_HELP[r]}") for r in Role],
                             widget=forms.RadioSelect)
    namespaces = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="Namespaces",
        help_text="None ticked and none typed: every namespace.")
    other_namespaces = forms.CharField(
        required=False, max_length=2000, label="Other namespaces",
        help_text="Namespaces with no objects yet, comma-separated (e.g. “team-c, team-d”).")
    clusters = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple, label="Clusters",
                                         help_text="None ticked: every cluster (“local” is kubedash’s own objects).")

    def __init__(self, *args, grant=None, **kwargs):
        super().__init__(*args, **kwargs)
        grant = grant or {}
        namespaces = set(existing_namespaces()) | set(grant.get("namespaces", ()))
        self.fields["namespaces"].choices = [(n, n) for n in sorted(namespaces)]
        clusters = dict.fromkeys([*existing_clusters(), *grant.get("clusters", ())])
        self.fields["clusters"].choices = [(c, c) for c in clusters]

    def clean_other_namespaces(self):
        names = [n.strip() for n in self.cleaned_data["other_namespaces"].split(",") if n.strip()]
        for name in names:
            problems = is_dns1123_label(name)
            if problems:
                raise forms.ValidationError(f"“{name}” is not a namespace name: {problems[0]}.")
        return names

    def grant(self) -> tuple[str, list[str], list[str]]:
        data = self.cleaned_data
        return data["role"], sorted(set(data["namespaces"]) | set(data["other_namespaces"])), sorted(data["clusters"])


class PersonForm(GrantForm):
    username = forms.CharField(max_length=150, help_text="Letters, digits and @ . + - _ only.")
    password = forms.CharField(label="Initial password", strip=False, widget=forms.PasswordInput(
        attrs={"autocomplete": "new-password"}), help_text="Tell it to them; they sign in with it.")
    field_order = ["username", "password", "role", "namespaces", "other_namespaces", "clusters"]

    def clean_username(self):
        name = self.cleaned_data["username"].strip()
        try:
            User.username_validator(name)
        except forms.ValidationError:
            raise forms.ValidationError("Use only letters, digits and @ . + - _.") from None
        if User.objects.filter(username=name).exists():
            raise forms.ValidationError(f"“{name}” already exists: open them in the list above.")
        return name

    def clean(self):
        data = super().clean()
        if data.get("password") and data.get("username"):
            try:
                password_validation.validate_password(data["password"], User(username=data["username"]))
            except forms.ValidationError as exc:
                self.add_error("password", exc)
        return data


# ---------------------------------------------------------------------------------------------
# Pages


def _context(request, **extra) -> dict:
    return {"principal": principal_for(request.user), "active": "people", "people_tab": "users", **extra}


def _live_tokens(prefix: str = "") -> Q:
    """Tokens that still authenticate (not revoked, not expired)."""
    return Q(**{f"{prefix}revoked": False}) & (Q(**{f"{prefix}expires__isnull": True})
                                               | Q(**{f"{prefix}expires__gt": timezone.now()}))


def _rows():
    users = (User.objects.select_related("kube_profile").order_by("username")
             .annotate(tokens=Count("api_tokens", filter=_live_tokens("api_tokens__")),
                       token_seen=Max("api_tokens__last_used")))
    rows = []
    for user in users:
        seen = [t for t in (user.last_login, user.token_seen) if t is not None]
        rows.append({"user": user, "principal": principal_for(user), "last_seen": max(seen) if seen else None})
    return rows


@full_admin_required
@require_http_methods(["GET", "POST"])
def people_list(request):
    """Everyone, and the form that adds a person."""
    form = PersonForm(request.POST if request.method == "POST" else None, initial={"role": Role.VIEWER})
    if request.method == "POST" and form.is_valid():
        role, namespaces, clusters = form.grant()
        user = people.add_person(form.cleaned_data["username"], form.cleaned_data["password"], role, namespaces,
                                 clusters)
        messages.success(request, f"Added {user.get_username()} ({role}). They can sign in now.")
        return redirect("person", username=user.get_username())
    return render(request, "web/people/list.html", _context(request, rows=_rows(), form=form),
                  status=400 if request.method == "POST" else 200)


def _person_page(request, user, form, status=200):
    tokens = ApiToken.objects.filter(_live_tokens(), user=user).order_by("-created")
    return render(request, "web/people/person.html", _context(
        request, person=user, person_principal=principal_for(user), form=form, tokens=tokens,
        is_me=user.pk == request.user.pk), status=status)


@full_admin_required
@require_http_methods(["GET", "POST"])
def person(request, username: str):
    """One person: their role and limits (a save re-checks their open pages and watches)."""
    user = get_object_or_404(User.objects.select_related("kube_profile"), username=username)
    mine = principal_for(user)
    grant = {"namespaces": mine.namespaces, "clusters": mine.clusters}
    if request.method == "GET":
        form = GrantForm(grant=grant, initial={"role": mine.role, "namespaces": list(mine.namespaces),
                                               "clusters": list(mine.clusters)})
        return _person_page(request, user, form)
    form = GrantForm(request.POST, grant=grant)
    if form.is_valid():
        role, namespaces, clusters = form.grant()
        why = people.self_change_refusal(request.user, user, role, namespaces, clusters)
        if why:
            form.add_error(None, why)
        else:
            changed = people.set_grant(user, role, namespaces, clusters)
            messages.success(request, f"Saved: {username} is now {role}"
                             + (f" in {', '.join(namespaces)}" if namespaces else "")
                             + (f" on {', '.join(clusters)}" if clusters else "")
                             + (". Their open pages and watches follow at once." if changed else " (unchanged)."))
            return redirect("person", username=username)
    return _person_page(request, user, form, status=400)


@full_admin_required
@require_POST
def person_sign_out(request, username: str):
    user = get_object_or_404(User, username=username)
    people.sign_out_everywhere(user)
    messages.success(request, f"Signed {username} out everywhere: every browser session and open page of theirs "
                              "has ended (API tokens keep working: revoke them below).")
    if user.pk == request.user.pk:
        return redirect("login")
    return redirect("person", username=username)


@full_admin_required
@require_POST
def person_active(request, username: str):
    """Deactivate (or reactivate) an account."""
    user = get_object_or_404(User, username=username)
    if request.POST.get("active") == "1":
        people.reactivate(user)
        messages.success(request, f"Reactivated {username}: they can sign in again.")
    elif user.pk == request.user.pk:
        messages.error(request, "You cannot deactivate yourself: ask another admin.")
    else:
        people.deactivate(user)
        messages.success(request, f"Deactivated {username}: their sessions, open pages, watches and tokens "
                                  "stopped working.")
    return redirect("person", username=username)


@full_admin_required
@require_POST
def person_token_revoke(request, username: str, token_id: int):
    token = get_object_or_404(ApiToken, pk=token_id, user__username=username, revoked=False)
    people.revoke_token(token)
    messages.success(request, f"Revoked token “{token.name or token.pk}” of {username}.")
    return redirect("person", username=username)

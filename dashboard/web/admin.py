"""The user admin (Django's, /admin/): a user's role and limits edited with the user.

Namespaces and clusters are lists (empty: all); a user limited to clusters sees only those on
the pages and the API (access/principals.py, Principal.sees_cluster). Only admins without limits
enter (admin_site.py); is_staff and is_superuser are shown, not edited: they follow the role
(access/signals.py).
"""
from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from dashboard.access.models import Profile


class _Names(forms.CharField):
    """A JSON list of names as one comma-separated field."""

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list) else (value or "")

    def to_python(self, value):
        return [n.strip() for n in (value or "").split(",") if n.strip()]


class ProfileForm(forms.ModelForm):
    namespaces = _Names(required=False, help_text="Comma-separated; empty: every namespace.")
    clusters = _Names(required=False, help_text="Comma-separated (“local” is kubedash’s own objects); "
                                                "empty: every cluster.")

    class Meta:
        model = Profile
        fields = ["role", "namespaces", "clusters"]


class ProfileInline(admin.StackedInline):
    model = Profile
    form = ProfileForm
    can_delete = False
    verbose_name_plural = "kubedash access"


User = get_user_model()
if admin.site.is_registered(User):
    admin.site.unregister(User)


@admin.register(User)
class KubedashUserAdmin(UserAdmin):
    inlines = [ProfileInline]
    readonly_fields = ("is_staff", "is_superuser", "last_login", "date_joined")
    # Django's groups and permissions grant nothing here: rights are the kubedash access below.
    fieldsets = tuple((name, {**opts, "fields": tuple(f for f in opts["fields"]
                                                     if f not in ("groups", "user_permissions"))})
                      for name, opts in UserAdmin.fieldsets)
    list_filter = ("is_active", "kube_profile__role")

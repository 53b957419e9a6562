"""Saved views (a list's or the Overview's canonical URL under a name), a person's default view
per list, and pins (an object, or a saved view, starred for the Overview's Pinned panel).

A saved view stores the page's address as it is (its path and canonical query string, whatever
parameters it has), so a parameter the lists learn later is kept without this app knowing it.
Opening one never widens access: it is only an address, and the page it opens applies the
viewer's own rights (dashboard/saved/views.py open_view).
"""
from __future__ import annotations

from urllib.parse import parse_qsl

from django.conf import settings
from django.db import models
from django.utils.text import slugify


RESERVED_SLUGS = ("save", "palette")   # /views/save/, /views/palette/: not views


class SavedView(models.Model):
    PERSONAL, GROUPS, EVERYONE = "personal", "groups", "everyone"
    SHARED_CHOICES = ((PERSONAL, "Only me"), (GROUPS, "My groups"), (EVERYONE, "Everyone"))

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views")
    name = models.CharField(max_length=100)
    slug = models.SlugField(max_length=120, unique=True)
    path = models.CharField(max_length=200)                # "/leases/", "/" (the Overview)
    query = models.TextField(blank=True, default="")       # canonical, without "?"
    shared = models.CharField(max_length=10, choices=SHARED_CHOICES, default=PERSONAL)
    groups = models.JSONField(default=list, blank=True)    # group names, for shared == GROUPS
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name", "slug")

    def __str__(self) -> str:
        return self.name

    @property
    def url(self) -> str:
        return self.path + (f"?{self.query}" if self.query else "")

    @property
    def params(self) -> dict[str, str]:
        return dict(parse_qsl(self.query))

    @property
    def open_url(self) -> str:
        return f"/views/{self.slug}/"

    def visible_to(self, user, groups: set[str]) -> bool:
        return (self.owner_id == user.pk or self.shared == self.EVERYONE
                or (self.shared == self.GROUPS and bool(groups.intersection(self.groups or ()))))

    @classmethod
    def free_slug(cls, name: str, exclude_pk: int | None = None) -> str:
        base = slugify(name)[:100] or "view"
        slug, n = base, 1
        while slug in RESERVED_SLUGS or cls.objects.filter(slug=slug).exclude(pk=exclude_pk).exists():
            n += 1
            slug = f"{base}-{n}"
        return slug


class DefaultView(models.Model):
    """The view a user lands on when they open a list's bare address (`/leases/`)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="default_views")
    path = models.CharField(max_length=200)
    view = models.ForeignKey(SavedView, on_delete=models.CASCADE, related_name="defaults")

    class Meta:
        constraints = [models.UniqueConstraint(fields=("user", "path"), name="saved_one_default_per_list")]


class Pin(models.Model):
    """A starred object (cluster, kind, namespace, name) or a starred saved view."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="pins")
    cluster = models.CharField(max_length=63, default="local")
    kind = models.CharField(max_length=63, blank=True, default="")
    namespace = models.CharField(max_length=253, blank=True, default="")
    name = models.CharField(max_length=253, blank=True, default="")
    view = models.ForeignKey(SavedView, null=True, blank=True, on_delete=models.CASCADE, related_name="pins")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("created", "id")

"""manage.py views export [--user U] [--output FILE] / manage.py views import FILE

Saved views as YAML: a list of {name, slug, owner, url, shared, groups} (and `default: true` for
a view that is its owner's default of its list). Import creates or updates by slug (the owner
must exist); it never deletes."""
from __future__ import annotations

import sys

import yaml
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils.text import slugify

from dashboard.saved import saving
from dashboard.saved.models import DefaultView, SavedView


def export_views(username: str | None = None) -> list[dict]:
    views = SavedView.objects.select_related("owner").order_by("owner__username", "slug")
    if username:
        views = views.filter(owner__username=username)
    defaults = set(DefaultView.objects.values_list("user_id", "view_id"))
    return [{"name": v.name, "slug": v.slug, "owner": v.owner.username, "url": v.url, "shared": v.shared,
             "groups": list(v.groups or []), **({"default": True} if (v.owner_id, v.pk) in defaults else {})}
            for v in views]


def import_views(items) -> tuple[int, int]:
    """(created, updated); CommandError for the first entry that is not a saved view."""
    if not isinstance(items, list):
        raise CommandError("expected a YAML list of saved views")
    users = get_user_model().objects
    created = updated = 0
    with transaction.atomic():
        for n, item in enumerate(items, 1):
            if not isinstance(item, dict):
                raise CommandError(f"entry {n}: not a mapping")
            owner = users.filter(username=item.get("owner", "")).first()
            address = saving.page_address(str(item.get("url", "")))
            name = str(item.get("name") or "").strip()[:100]
            shared = item.get("shared", SavedView.PERSONAL)
            if owner is None:
                raise CommandError(f"entry {n}: no user {item.get('owner')!r}")
            if address is None or not name or shared not in dict(SavedView.SHARED_CHOICES):
                raise CommandError(f"entry {n}: needs a name, a list's url and shared one of personal, groups, everyone")
            slug = slugify(str(item.get("slug") or ""))[:120] or SavedView.free_slug(name)
            fields = {"owner": owner, "name": name, "path": address[0], "query": address[1], "shared": shared,
                      "groups": [str(g) for g in item.get("groups") or []]}
            view, new = SavedView.objects.update_or_create(slug=slug, defaults=fields)
            created, updated = created + new, updated + (not new)
            if item.get("default"):
                DefaultView.objects.update_or_create(user=owner, path=view.path, defaults={"view": view})
    return created, updated


class Command(BaseCommand):
    help = "Export or import saved views as YAML."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        out = sub.add_parser("export", help="write saved views as YAML")
        out.add_argument("--user", help="only this user's views")
        out.add_argument("--output", "-o", help="a file (default: standard output)")
        into = sub.add_parser("import", help="create or update saved views from a YAML file ('-': standard input)")
        into.add_argument("file")

    def handle(self, *args, action, **options):
        if action == "export":
            text = yaml.safe_dump(export_views(options.get("user")), sort_keys=False, allow_unicode=True)
            if options.get("output"):
                with open(options["output"], "w", encoding="utf-8") as f:
                    f.write(text)
            else:
                self.stdout.write(text, ending="")
            return
        path = options["file"]
        try:
            text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
            items = yaml.safe_load(text)
        except (OSError, yaml.YAMLError) as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        created, updated = import_views(items or [])
        self.stdout.write(f"{created} created, {updated} updated\n")

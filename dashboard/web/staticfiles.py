"""Static files (htmx, live.js, the stylesheet): compressed and cache-busted once collected.

`manage.py collectstatic` writes them into STATIC_ROOT (DATA_DIR/staticfiles) under hashed
names (app.3f2c….css), each with a gzip (and, with `brotli` installed, a Brotli) copy; the
pages link the hashed names, and WhiteNoise serves them compressed with a year's caching
(`immutable`): a changed file is a new name, so a browser never keeps a stale one.

Before anything was collected (a fresh clone, the tests), the same code links the plain
names and serves them from the finders (`static/`), so nothing needs a collect step to work.

- StaticStorage: WhiteNoise's CompressedManifestStaticFilesStorage that falls back to the
  plain name for a file the manifest does not know (not collected yet, or added since).
- StaticFilesMiddleware: WhiteNoise's middleware, quiet when STATIC_ROOT does not exist yet.
- CollectedFinder: finds collected (hashed) names in STATIC_ROOT, for a server that serves
  static files through Django's finders (ASGIStaticFilesHandler) rather than WhiteNoise.
"""
from __future__ import annotations

import os

from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage
from whitenoise.middleware import WhiteNoiseMiddleware
from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False

    def stored_name(self, name: str) -> str:
        if not self.hashed_files:
            return name   # nothing collected: the finders serve the plain names
        try:
            return super().stored_name(name)
        except ValueError:
            return name   # added since the last collect: its plain name still works


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    def add_files(self, root, prefix=None):
        if root == self.static_root and not os.path.isdir(root):
            return   # not collected yet: served from the finders (WHITENOISE_USE_FINDERS)
        super().add_files(root, prefix)


class CollectedFinder(BaseFinder):
    """STATIC_ROOT's files by name. It lists nothing, so collectstatic never copies
    STATIC_ROOT into itself."""

    def find(self, path, find_all=False, **kwargs):
        find_all = find_all or kwargs.get("all", False)   # (Django < 5.2 says `all`)
        root = settings.STATIC_ROOT
        if not root:
            return [] if find_all else None
        storage = FileSystemStorage(location=root)
        found = storage.path(path) if storage.exists(path) else None
        if find_all:
            return [found] if found else []
        return found

    def list(self, ignore_patterns):
        return []

    def check(self, **kwargs):
        return []

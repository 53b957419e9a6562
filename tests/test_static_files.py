"""Static files: plain names from the finders before anything is collected; after
`collectstatic`, hashed names served compressed with a year's caching (WhiteNoise)."""
from __future__ import annotations

import gzip
import re

import pytest
from django.core.management import call_command
from django.test import Client, override_settings


def page_assets(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="(/static/[^"]+)"', html)


@pytest.fixture
def viewer(db):
    from dashboard.access.tokens import ensure_user

    c = Client()
    c.force_login(ensure_user("static-viewer", "viewer"))
    return c


def test_plain_names_before_collecting(viewer, tmp_path):
    with override_settings(STATIC_ROOT=tmp_path / "not-collected"):
        html = viewer.get("/leases/").content.decode()
        assert "/static/kubedash/live.js" in page_assets(html)
        r = Client().get("/static/kubedash/live.js")
        assert r.status_code == 200 and b"kubedash live.js" in b"".join(r.streaming_content)


def test_collected_files_are_hashed_compressed_and_cached_for_good(viewer, tmp_path):
    root = tmp_path / "staticfiles"
    with override_settings(STATIC_ROOT=root):
        call_command("collectstatic", "--noinput", verbosity=0)
        assert (root / "staticfiles.json").exists()
        html = viewer.get("/leases/").content.decode()
        assets = page_assets(html)
        live = next(a for a in assets if a.startswith("/static/kubedash/live."))
        assert re.fullmatch(r"/static/kubedash/live\.[0-9a-f]{12}\.js", live)
        assert any(re.fullmatch(r"/static/vendor/htmx\.min\.[0-9a-f]{12}\.js", a) for a in assets)
        r = Client().get(live, HTTP_ACCEPT_ENCODING="gzip")
        assert r.status_code == 200
        assert r["Content-Encoding"] == "gzip"
        assert "immutable" in r["Cache-Control"] and "max-age=315360000" in r["Cache-Control"]
        body = gzip.decompress(b"".join(r.streaming_content))
        assert b"kubedash live.js" in body
        # An unhashed name still works (short caching), e.g. for a page rendered before a collect.
        plain = Client().get("/static/kubedash/live.js")
        assert plain.status_code == 200 and "immutable" not in plain.get("Cache-Control", "")

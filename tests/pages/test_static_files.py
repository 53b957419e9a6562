"""Static files: plain names from the finders before anything is collected; after
`collectstatic`, hashed names served compressed with a year's caching (WhiteNoise)."""
from __future__ import annotations

import gzip
import re

import pytest
from django.core.management import call_command
from django.test import Client, override_settings

from conftest import ROOT


def page_assets(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="(/static/[^"]+)"', html)


@pytest.fixture
def viewer(login):
    return login("viewer", "static-viewer")


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


# --- page HTML on the wire (dashboard/web/compression.py) -------------------------------------

def test_pages_are_gzipped_for_browsers_that_accept_it(viewer):
    from dashboard.coordination.models import Lease  # noqa: F401  (the kind's table exists)

    plain = viewer.get("/leases/")
    assert plain.status_code == 200 and "Content-Encoding" not in plain
    zipped = viewer.get("/leases/", HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    assert zipped.status_code == 200 and zipped["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in zipped["Vary"]
    html = gzip.decompress(zipped.content).decode()
    # The same page (the CSRF token and server time differ per response).
    assert "<h1>" in html and html.count("<tr") == plain.content.decode().count("<tr")


def test_streams_are_not_gzipped(viewer):
    """A watch (here through a browser session) must flow event by event: gzip would buffer it."""
    r = viewer.get("/apis/coordination.k8s.io/v1/leases?watch=true&timeoutSeconds=1",
                   HTTP_ACCEPT_ENCODING="gzip")
    assert r.status_code == 200 and r.streaming and "Content-Encoding" not in r


def test_row_rules_use_no_sibling_combinators():
    """A rule like `tr + tr > *` or `* + *` makes Blink restyle every row of a table when one
    row is pushed into it (1,000 rows: 35 ms a push, 24 fps; bench/pages.py). The sheet spaces
    and borders rows without them."""
    css = (ROOT / "static/kubedash/app.css").read_text()
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    selectors = [s.strip() for block in re.findall(r"([^{}]+)\{", css) for s in block.split(",")]
    sibling = [s for s in selectors if re.search(r"[+~]", s) and not s.startswith("@")]
    offending = [s for s in sibling if re.search(r"(^|[\s>+~])(\*|tr|tbody|\.card|article)(\s*[+~])", s)
                 or re.search(r"[+~]\s*\*", s)]
    assert offending == [], offending

"""Issue 14's page defects, through the Django test client: share links keep the name search,
the kubeconfig download points at the real HTTPS port, one-time secrets come with a Copy
button, suspended jobs, tab titles, the 404 page's header."""
from __future__ import annotations

import re
from html import unescape

import pytest
import yaml
from django.test import Client

from dashboard.kube import store
from dashboard.kube.registry import by_kind
from manifests import job, lease


@pytest.fixture
def login(db):
    from dashboard.access.tokens import ensure_user

    def make(role="editor", username=None):
        user = ensure_user(username or f"dash-{role}", role)
        c = Client()
        c.force_login(user)
        return c

    return make


def text(resp) -> str:
    return resp.content.decode()


def title(resp) -> str:
    return unescape(re.search(r"<title>(.*?)</title>", text(resp), re.S).group(1))


def test_share_this_view_keeps_the_name_search(login):
    store.create(by_kind("Lease"), "team-a", lease("web-1", ns="team-a"))
    editor = login("editor")
    page = text(editor.get("/leases/?namespace=team-a&q=web"))
    assert 'href="/share/new/?kind=Lease&amp;namespace=team-a&amp;q=web"' in page
    form = editor.get("/share/new/?kind=Lease&namespace=team-a&q=web")
    assert 'name="q" value="web"' in text(form) and "names containing “web”" in text(form)
    r = editor.post("/share/new/", {"kind": "Lease", "namespace": "team-a", "labelSelector": "", "q": "web",
                                    "label": "web leases", "expiry": "1d"})
    assert r.status_code == 200
    url = re.search(r'value="(http://[^"]+/s/[^"]+)"', text(r)).group(1)
    path = unescape(url).split("testserver", 1)[1]
    assert path.endswith("/?q=web")
    opened = Client().get(path)
    assert opened.status_code == 302 and opened["Location"] == "/leases/?namespace=team-a&q=web"


def test_one_time_secrets_have_a_copy_button(login):
    r = login("editor").post("/tokens/", {"name": "ci"})
    html = text(r)
    assert re.search(r'<input id="token-value"[^>]*readonly[^>]*class="mono"', html)
    assert '<button type="button" class="primary" data-copy="token-value">Copy</button>' in html
    assert 'id="token-value-copied" role="status"' in html


def test_kubeconfig_points_at_the_tls_port_serve_listens_on(login, monkeypatch):
    client = login("viewer")
    monkeypatch.setenv("KUBEDASH_TLS_PORT", "9555")
    page = text(client.get("/tokens/", HTTP_HOST="localhost:8000"))
    assert 'value="https://localhost:9555"' in page
    monkeypatch.delenv("KUBEDASH_TLS_PORT")
    assert 'value="https://localhost:8443"' in text(client.get("/tokens/", HTTP_HOST="localhost:8000"))

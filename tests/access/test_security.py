"""Security: CSRF on every form, no XSS through object data, no write for viewers and share
links on any path, tokens never shown or logged after creation, security headers, and
secure cookies over HTTPS."""
from __future__ import annotations

import hashlib
import logging
import re
from html.parser import HTMLParser

import pytest
import yaml
from asgiref.sync import sync_to_async
from django.test import Client

from conftest import Api
from manifests import LEASES, endpoints, job, lease
from page_helpers import open_socket

# CI runs this module again on PostgreSQL (.ci/run selects it by the marker).
pytestmark = pytest.mark.portable

XSS = "<script>alert(1)</script>"
XSS_IMG = '"><img src=x onerror=alert(1)>'


def put(kind: str, obj: dict) -> dict:
    from dashboard.kube import registry, store

    return store.create(registry.by_kind(kind), obj["metadata"]["namespace"], obj).object


def current_rv() -> int:
    from dashboard.kube import store

    return store.current_revision()


@pytest.fixture
def objects(transactional_db):
    """One object of each kind named x1 in default, carrying HTML in every free-text field."""
    put("Lease", lease("x1", holder=XSS_IMG, annotations={"note": XSS}, labels={"app": "web"}))
    put("Endpoints", endpoints("x1", annotations={"note": XSS}))
    obj = job("x1")
    obj["metadata"]["annotations"] = {"note": XSS}
    obj["spec"]["template"]["spec"]["containers"][0]["command"] = ["sh", "-c", XSS]
    put("Job", obj)


# ---------------------------------------------------------------------------------------------
# Route discovery: every named page route, with sample arguments


def web_routes(samples=None):
    """(name, concrete path) for every named non-API route the root URLconf serves (the
    admin only through its login form). A route with a choice converter (e.g. leases|
    endpoints|jobs) yields one path per choice; each path is checked to resolve to its route,
    so no route is skipped silently."""
    from django.urls import URLPattern, URLResolver, get_resolver, resolve

    samples = {"namespace": "default", "name": "x1", **(samples or {})}
    out = set()

    def walk(resolver, prefix, converters):
        for entry in resolver.url_patterns:
            convs = {**converters, **getattr(entry.pattern, "converters", {})}
            if isinstance(entry, URLResolver):
                if entry.namespace == "admin":
                    out.add(("admin:login", "/" + prefix + str(entry.pattern) + "login/"))
                    continue
                walk(entry, prefix + str(entry.pattern), convs)
            elif isinstance(entry, URLPattern) and entry.name:
                for path in fill(prefix + str(entry.pattern), convs, samples):
                    match = resolve(path)
                    assert match.url_name == entry.name.split(":")[-1], (entry.name, path, match.url_name)
                    out.add((entry.name, path))

    walk(get_resolver(), "", {})
    return sorted(out)


def fill(route: str, converters: dict, samples: dict) -> list[str]:
    """Concrete paths for a route: every <converter:name> gets a value its regex accepts."""
    paths = ["/" + route]
    for m in re.finditer(r"<(?:(\w+):)?(\w+)>", route):
        regex = converters[m.group(2)].regex
        if re.fullmatch(r"\w+(\|\w+)+", regex):
            values = regex.split("|")                       # a choice: try every one
        else:
            candidates = [samples.get(m.group(2)), "1", "x1"]
            values = [next(v for v in candidates if v and re.fullmatch(regex, v))]
        paths = [p.replace(m.group(0), v, 1) for p in paths for v in values]
    return paths


# The forms this module knows must exist; edit forms are found by discovery as they appear.
KNOWN_FORMS = {"login", "logout", "share_new", "share_revoke", "share_leave", "tokens", "token_revoke",
               "token_kubeconfig", "admin:login"}
# Routes that change no cluster state (a viewer may use them: their own tokens, sessions).
ACCOUNT_ROUTES = KNOWN_FORMS | {"share_open", "share_list"} | {
    # a person's own saved views and pins (dashboard/saved): addresses and bookmarks, no cluster state
    "saved-views", "saved-save", "saved-palette", "saved-open", "saved-change", "saved-delete", "saved-default",
    "pin",
    # a person's own notification rules (evaluated with their own rights) and read marks; channels
    # stay admin-only and are checked here
    "notification_rule_add", "notification_rule_mute", "notification_rule_remove", "notifications_read"}


# ---------------------------------------------------------------------------------------------
# CSRF


# Routes no browser form posts to, so no CSRF token: the identity provider's server-to-server
# back-channel logout, authenticated by its signed logout token (tests/access/test_oidc_sessions.py).
CSRF_EXEMPT = {"oidc_backchannel_logout"}


def test_every_form_route_requires_csrf(objects, login):
    routes = [(name, path) for name, path in web_routes() if name not in CSRF_EXEMPT]
    names = {name for name, _ in routes}
    assert KNOWN_FORMS <= names, KNOWN_FORMS - names
    admin = login("admin", enforce_csrf_checks=True)
    anonymous = Client(enforce_csrf_checks=True)
    before = current_rv()
    for name, path in routes:
        for client in (admin, anonymous):
            r = client.post(path, {"name": "x", "label": "x", "expiry": "1d", "kind": "Lease"})
            assert r.status_code == 403, (name, path, r.status_code)
            assert b"CSRF" in r.content, (name, path)
    assert current_rv() == before


def test_forms_work_with_the_token(objects, login):
    """The same forms pass once the token is sent: the 403s above are CSRF, not breakage."""
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("dora", password="a-long-pass-phrase")
    c = Client(enforce_csrf_checks=True)
    c.get("/accounts/login/")
    token = c.cookies["csrftoken"].value
    r = c.post("/accounts/login/", {"username": "dora", "password": "a-long-pass-phrase",
                                    "csrfmiddlewaretoken": token})
    assert r.status_code == 302
    admin = login("admin", enforce_csrf_checks=True)
    admin.get("/tokens/")
    token = admin.cookies["csrftoken"].value
    assert admin.post("/tokens/", {"name": "ci", "csrfmiddlewaretoken": token}).status_code == 200


def test_session_api_writes_require_csrf(objects, login):
    admin = login("admin", enforce_csrf_checks=True)
    r = admin.post(LEASES, lease("l2"), content_type="application/json")
    assert r.status_code == 403 and "CSRF" in r.json()["message"]
    admin.get("/leases/")
    token = admin.cookies["csrftoken"].value
    assert admin.post(LEASES, lease("l2"), content_type="application/json", HTTP_X_CSRFTOKEN=token).status_code == 201


# ---------------------------------------------------------------------------------------------
# Escaping


@pytest.mark.parametrize("path", ["/leases/", "/endpoints/", "/jobs/", "/leases/default/x1/",
                                  "/endpoints/default/x1/", "/jobs/default/x1/", "/"])
def test_object_data_is_escaped(objects, login, path):
    html = login("admin").get(path).content.decode()
    assert XSS not in html and "<img src=x" not in html
    if path.count("/") > 2:   # detail pages show the annotation (YAML) and the holder
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    if path.startswith("/leases/"):
        assert "&lt;img src=x onerror=alert(1)&gt;" in html


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_pushed_fragments_are_escaped(objects, login):
    c = await sync_to_async(login)("viewer")
    rv = await sync_to_async(current_rv)()
    comm, ok, _ = await open_socket(c, f"view=leases&rv={rv}")
    assert ok
    await sync_to_async(set_holder)("x1", "<b>bold</b><script>x()</script>")
    html = await comm.receive_from(timeout=5)
    assert "<script>x()" not in html and "&lt;script&gt;x()&lt;/script&gt;" in html
    await comm.disconnect()


def test_user_text_is_escaped_on_share_and_token_pages(objects, login):
    admin = login("admin")
    r = admin.post("/share/new/", {"kind": "Lease", "namespace": "default", "label": XSS, "expiry": "1h"})
    assert r.status_code == 200 and XSS not in r.content.decode()
    assert XSS not in admin.get("/share/").content.decode()
    r = admin.post("/tokens/", {"name": XSS})
    assert r.status_code == 200 and XSS not in r.content.decode()
    page = admin.get("/tokens/").content.decode()
    assert XSS not in page and "&lt;script&gt;" in page
    # A selector is validated before it is stored or echoed.
    r = admin.get("/leases/?labelSelector=" + XSS)
    assert XSS not in r.content.decode()


def test_pages_have_no_inline_scripts_or_handlers(objects, login):
    """The Content-Security-Policy forbids inline scripts: no page may rely on one."""
    admin = login("admin")
    for path in ["/", "/leases/", "/endpoints/", "/jobs/", "/leases/default/x1/", "/jobs/default/x1/",
                 "/endpoints/default/x1/", "/share/", "/tokens/", "/share/new/?kind=Lease&namespace=default",
                 "/accounts/login/"]:
        html = (admin if path != "/accounts/login/" else Client()).get(path).content.decode()
        scan = TagScan()
        scan.feed(html)
        assert not scan.problems, (path, scan.problems)


class TagScan(HTMLParser):
    """Inline scripts, event-handler attributes and javascript: URLs in real markup."""

    def __init__(self):
        super().__init__()
        self.problems = []

    def handle_starttag(self, tag, attrs):
        names = dict(attrs)
        if tag == "script" and not names.get("src"):
            self.problems.append("inline <script>")
        for name, value in attrs:
            if name.startswith("on"):
                self.problems.append(f"<{tag} {name}=>")
            url = (value or "").strip().lower()
            if name in ("href", "src", "action", "formaction") and url.startswith("javascript:"):
                self.problems.append(f"<{tag} {name}=javascript:>")


# ---------------------------------------------------------------------------------------------
# No writes for viewers and share links, on any path


def set_holder(name, holder, ns="default"):
    from dashboard.kube import registry, store

    def change(obj):
        obj["spec"]["holderIdentity"] = holder
        return obj
    store.update(registry.by_kind("Lease"), ns, name, change, is_patch=True)


def api_writes(api: Api) -> list:
    return [api.post(LEASES, lease("new")), api.put(f"{LEASES}/x1", lease("x1", holder="me")),
            api.patch(f"{LEASES}/x1", {"spec": {"holderIdentity": "me"}}), api.delete(f"{LEASES}/x1"),
            api.delete(LEASES), api.post("/apis/batch/v1/namespaces/default/jobs", job("j2")),
            api.delete("/api/v1/namespaces/default/endpoints/x1")]


def test_viewer_cannot_write_through_the_api(objects, make_api, login):
    before = current_rv()
    assert all(r.status_code == 403 for r in api_writes(make_api("viewer")))
    session = Api(login("viewer"), None)   # the browser session (CSRF not enforced here)
    assert all(r.status_code == 403 for r in api_writes(session))
    assert current_rv() == before


def test_viewer_cannot_write_through_a_form(objects, login):
    """Every route that could change the cluster (edit forms included, as they appear)
    refuses a viewer, and the store's revision does not move."""
    viewer = login("viewer")
    before = current_rv()
    for name, path in web_routes():
        if name in ACCOUNT_ROUTES:
            continue
        for data in ({}, {"name": "x1", "namespace": "default", "holderIdentity": "me", "yaml": "x: 1"}):
            r = viewer.post(path, data)
            assert r.status_code in (403, 404, 405), (name, path, r.status_code)
    assert current_rv() == before


def make_share(admin) -> str:
    r = admin.post("/share/new/", {"kind": "Lease", "namespace": "default", "label": "t", "expiry": "1h"})
    return re.search(r"/s/([A-Za-z0-9_-]{40,})/", r.content.decode()).group(1)


def test_share_link_cannot_write_anywhere(objects, login):
    token = make_share(login("admin"))
    c = Client()
    c.get(f"/s/{token}/")
    before = current_rv()
    assert all(r.status_code in (401, 403) for r in api_writes(Api(c, None)))
    for name, path in web_routes():
        if name in ("share_open", "share_leave", "login", "logout"):
            continue
        r = c.post(path, {"name": "x1", "namespace": "default", "holderIdentity": "me"})
        assert r.status_code in (403, 405) or (name == "overview" and r.status_code == 302), (name, path, r.status_code)
    assert current_rv() == before


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_websocket_messages_are_ignored(objects, login):
    viewer = await sync_to_async(login)("viewer")
    token = await sync_to_async(make_share)(await sync_to_async(login)("admin"))
    shared = Client()
    await sync_to_async(shared.get)(f"/s/{token}/")
    before = await sync_to_async(current_rv)()
    for client in (viewer, shared):
        comm, ok, _ = await open_socket(client, f"view=leases&namespace=default&rv={before}")
        assert ok
        for message in ('{"verb": "delete", "namespace": "default", "name": "x1"}',
                        '{"HEADERS": {"HX-Request": "true"}, "holderIdentity": "me"}', "x" * 10000):
            await comm.send_to(text_data=message)
        await comm.send_to(bytes_data=b"\x00\x01")
        # A page sends nothing but its heartbeat's PONG (issue 29): the first frame closes it.
        out = await comm.receive_output(timeout=5)
        assert out == {"type": "websocket.close", "code": 4008}, out
    assert await sync_to_async(current_rv)() == before


# ---------------------------------------------------------------------------------------------
# Tokens are shown once, never stored, listed or logged


def test_tokens_never_appear_after_creation(objects, login, caplog):
    from django.db import connection

    from dashboard.access.models import ApiToken

    caplog.set_level(logging.DEBUG)
    admin = login("admin")
    created = admin.post("/tokens/", {"name": "ci"})
    token = re.search(r'id="token-value"[^>]*value="([^"]+)"', created.content.decode()).group(1)
    assert created["Cache-Control"] == "no-store"
    share_token = make_share(admin)
    # Use both, well and badly.
    api = Client()
    assert api.get(LEASES, HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    assert api.get(LEASES, HTTP_AUTHORIZATION=f"Bearer {token}x").status_code == 401
    shared = Client()
    shared.get(f"/s/{share_token}/")
    shared.get("/leases/")
    shared.get("/tokens/")
    assert Client().get(f"/s/{share_token}x/").status_code == 404
    row = ApiToken.objects.get(name="ci")
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    pages = [admin.get(p).content.decode() for p in ("/tokens/", "/share/", "/leases/", "/")]
    for secret in (token, share_token):
        assert not [p for p in pages if secret in p]
        assert secret not in caplog.text
    with connection.cursor() as cursor:
        for table in ("access_apitoken", "access_sharelink", "django_session"):
            cursor.execute(f"SELECT * FROM {table}")   # noqa: S608 (fixed names)
            assert not [v for r in cursor.fetchall() for v in r if token in str(v) or share_token in str(v)]


def test_kubeconfig_download_carries_a_new_token(objects, login):
    from dashboard.access.models import ApiToken

    viewer = login("viewer")
    page = viewer.get("/tokens/").content.decode()
    assert 'value="https://testserver:8443"' in page
    r = viewer.post("/tokens/kubeconfig/", {"name": "laptop", "server": "https://127.0.0.1:8443",
                                            "namespace": "default"})
    assert r.status_code == 200 and r["Content-Disposition"].startswith("attachment")
    assert r["Cache-Control"] == "no-store"
    config = yaml.safe_load(r.content)
    token = config["users"][0]["user"]["token"]
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:8443"
    assert config["clusters"][0]["cluster"]["certificate-authority-data"]
    assert ApiToken.objects.get(name="laptop").token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in viewer.get("/tokens/").content.decode()
    # The token acts as its owner: a viewer reads, never writes.
    api = Api(Client(), token)
    assert api.get(LEASES).status_code == 200 and api.post(LEASES, lease("z")).status_code == 403
    assert viewer.post("/tokens/kubeconfig/", {"name": "x", "server": "http://127.0.0.1:8000"}).status_code == 400


def test_token_revoke_and_ownership(objects, login):
    from dashboard.access.models import ApiToken

    alice, bob, admin = login("viewer", "alice"), login("editor", "bob"), login("admin")
    alice.post("/tokens/", {"name": "alice-token"})
    bob.post("/tokens/", {"name": "bob-token"})
    a, b = ApiToken.objects.get(name="alice-token"), ApiToken.objects.get(name="bob-token")
    assert "bob-token" not in alice.get("/tokens/").content.decode()
    assert "bob-token" in admin.get("/tokens/").content.decode()
    assert alice.post(f"/tokens/{b.pk}/revoke/").status_code == 404
    assert alice.post(f"/tokens/{a.pk}/revoke/").status_code == 302
    assert admin.post(f"/tokens/{b.pk}/revoke/").status_code == 302
    assert ApiToken.objects.filter(revoked=False, name__in=["alice-token", "bob-token"]).count() == 0


def test_api_token_last_used_is_cheap(objects, make_api):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from dashboard.access.authentication import BearerTokenAuthentication
    from dashboard.access.models import ApiToken

    api = make_api("viewer")
    request = type("R", (), {"META": {"HTTP_AUTHORIZATION": f"Bearer {api.token}"}})()
    with CaptureQueriesContext(connection) as first:
        BearerTokenAuthentication().authenticate(request)
    assert ApiToken.objects.get().last_used is not None
    assert [q for q in first.captured_queries if q["sql"].startswith("UPDATE")]
    with CaptureQueriesContext(connection) as again:
        BearerTokenAuthentication().authenticate(request)
    assert len(again.captured_queries) == 1   # the lookup only: no write within the minute


# ---------------------------------------------------------------------------------------------
# Headers and cookies


def test_security_headers_on_pages(objects, login):
    for r in (login("viewer").get("/leases/"), Client().get("/accounts/login/")):
        assert r["X-Frame-Options"] == "DENY"
        assert r["X-Content-Type-Options"] == "nosniff"
        assert r["Referrer-Policy"] == "same-origin"
        csp = dict(part.strip().split(" ", 1) for part in r["Content-Security-Policy"].split(";"))
        assert csp["script-src"] == "'self'"
        assert csp["frame-ancestors"] == "'none'" and csp["object-src"] == "'none'"
        assert "'self'" in csp["connect-src"] and "ws://testserver" in csp["connect-src"]
        assert "unsafe" not in csp["default-src"]


def test_security_headers_on_the_api(objects, make_api):
    r = make_api("viewer").get(LEASES)
    assert r.status_code == 200
    assert r["X-Content-Type-Options"] == "nosniff"
    assert r["X-Frame-Options"] == "DENY"
    assert Client().get(LEASES)["X-Content-Type-Options"] == "nosniff"   # the 401 too


@pytest.mark.parametrize("secure", [True, False])
def test_session_cookie_secure_only_over_https(objects, secure):
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("erin", password="a-long-pass-phrase")
    c = Client()
    c.get("/accounts/login/", secure=secure)
    r = c.post("/accounts/login/", {"username": "erin", "password": "a-long-pass-phrase"}, secure=secure)
    assert r.status_code == 302
    session = r.cookies["sessionid"]
    assert session["httponly"] is True
    assert bool(session["secure"]) is secure
    assert bool(r.cookies["csrftoken"]["secure"]) is secure

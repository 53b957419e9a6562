"""The pages as a browser uses them, for tests in any folder that drive them through Django's test
client: the fields a form posts, the errors it shows, a share link made and opened, and a live
page's websocket (the consumer itself, or the whole ASGI stack with a signed-in session); and
against a real server (conftest's LiveServer): a signed-in session (SignedIn) and the page's
websocket (LiveSocket).
"""
from __future__ import annotations

import asyncio
import re
import time
from html import unescape

import requests
import websocket

from channels.testing import WebsocketCommunicator
from django.test import Client

from dashboard.kube import store
from dashboard.kube.registry import by_kind
from dashboard.web.consumers import BEAT, LiveConsumer
from manifests import lease

# ---------------------------------------------------------------------------------------------
# Forms


def text(resp) -> str:
    return resp.content.decode()


def form_fields(html: str) -> dict:
    """Every field a browser would post for the page's (last) POST form, as rendered."""
    body = re.findall(r'<form method="post"[^>]*>(.*?)</form>', html, re.S)[-1]
    data = {}
    for m in re.finditer(r'<input([^>]*)>', body):
        attrs = dict(re.findall(r'(\w[\w-]*)="([^"]*)"', m.group(1)))
        if "name" not in attrs:
            continue
        if attrs.get("type") == "checkbox":
            if "checked" in m.group(1):
                data[attrs["name"]] = attrs.get("value", "on")
            continue
        data[attrs["name"]] = unescape(attrs.get("value", ""))
    for m in re.finditer(r'<textarea[^>]*name="([^"]+)"[^>]*>\n?(.*?)</textarea>', body, re.S):
        data[m.group(1)] = unescape(m.group(2))
    for m in re.finditer(r'<select[^>]*name="([^"]+)"[^>]*>(.*?)</select>', body, re.S):
        chosen = re.search(r'<option value="([^"]*)"[^>]*selected', m.group(2))
        data[m.group(1)] = unescape(chosen.group(1)) if chosen else ""
    return data


def form_data(resp) -> dict:
    """What a browser would post to save the page's (last) POST form (the test client needs no CSRF token)."""
    data = form_fields(text(resp))
    data.pop("csrfmiddlewaretoken", None)
    data["action"] = "save"
    return data


def field_errors(resp, field: str) -> str:
    """The error list rendered for one field (what aria-describedby points at)."""
    html = text(resp)
    m = re.search(rf'<ul class="field-errors" id="id_{re.escape(field)}_error">(.*?)</ul>', html, re.S)
    return unescape(re.sub(r"<[^>]+>", " ", m.group(1))) if m else ""


def fresh_lease(name="l1", ns="default", holder="node-a", duration=15, **spec):
    """A Lease written to the store, for a form to edit."""
    obj = lease(name=name, holder=holder, duration=duration, ns=ns)
    obj["spec"].update(acquireTime="2026-11-22T02:00:00.000000Z", leaseTransitions=2, **spec)
    return store.create(by_kind("Lease"), ns, obj).object


# ---------------------------------------------------------------------------------------------
# Share links

SHARE_TOKEN = re.compile(r"/s/([A-Za-z0-9_-]{40,})/")
SHARE_SCOPE = {"kind": "Lease", "namespace": "team-a", "labelSelector": "app=web"}


def create_link(client, expiry="1d", label="for the on-call team", **scope) -> tuple:
    """POST the share form (SHARE_SCOPE unless scope says otherwise); returns (response, token or None)."""
    data = {**SHARE_SCOPE, **scope, "label": label, "expiry": expiry}
    r = client.post("/share/new/", data)
    found = SHARE_TOKEN.search(r.content.decode())
    return r, (found.group(1) if found else None)


def visitor(token: str) -> Client:
    """A fresh browser (no login) that opened a link of SHARE_SCOPE."""
    c = Client()
    r = c.get(f"/s/{token}/")
    assert r.status_code == 302 and r["Location"] == "/leases/?namespace=team-a"
    return c


# ---------------------------------------------------------------------------------------------
# A live page's websocket


async def connect(user, query: str):
    """The live consumer alone, as `user`: (communicator, connected, close code)."""
    comm = WebsocketCommunicator(LiveConsumer.as_asgi(), f"/ws/live/?{query}")
    comm.scope["user"] = user
    connected, code = await comm.connect(timeout=10)
    return comm, connected, code


async def open_socket(client, query: str):
    """A live page's websocket through the real ASGI stack, carrying a Django test Client's
    session cookie: (communicator, connected, close code)."""
    from dashboard.server.asgi import application   # (it builds the server's lanes: only where a test needs them)

    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    headers = [(b"origin", b"http://localhost"), (b"host", b"localhost"), (b"cookie", cookie)]
    comm = WebsocketCommunicator(application, f"/ws/live/?{query}", headers=headers)
    connected, code = await comm.connect(timeout=5)
    return comm, connected, code


async def pushed_until(comm, needle: str, timeout: float = 15.0) -> list[str]:
    """The messages pushed up to and including the first that contains `needle` (the heartbeat's
    beats are not pushes: skipped)."""
    seen = []
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        left = deadline - asyncio.get_running_loop().time()
        assert left > 0, f"no message with {needle!r}; got {seen!r}"
        html = await comm.receive_from(timeout=left)
        if html == BEAT:
            continue
        seen.append(html)
        if needle in html:
            return seen


async def receive_until(comm, needle: str, timeout: float = 15.0) -> str:
    """The first message that contains `needle` (pushes of other revisions may come first)."""
    return (await pushed_until(comm, needle, timeout))[-1]


async def push_with(comm, needle: str, timeout: float = 15.0) -> str:
    """The push that carries `needle`, from that message to the one carrying the page's revision
    (id="live-rv"); earlier pushes are skipped."""
    pushed = (await pushed_until(comm, needle, timeout))[-1]
    if 'id="live-rv"' not in pushed:
        pushed += "".join(await pushed_until(comm, 'id="live-rv"', timeout))
    return pushed


async def next_push(comm, timeout: float = 15.0) -> str:
    """A list page's next push, whole: its messages up to the one carrying the page's revision
    (id="live-rv"), joined."""
    return "".join(await pushed_until(comm, 'id="live-rv"', timeout))


# ---------------------------------------------------------------------------------------------
# Against a real server


class SignedIn:
    """A browser's session on a live server (conftest.LiveServer), signed in through the login
    form: get() a page; socket() opens that page's live websocket (its ws-connect address)."""

    def __init__(self, server, username: str, password: str):
        self.server, self.http = server, requests.Session()
        self.http.get(server.http_url + "/accounts/login/", timeout=30)
        r = self.http.post(server.http_url + "/accounts/login/", timeout=30, allow_redirects=False, data={
            "username": username, "password": password, "csrfmiddlewaretoken": self.http.cookies["csrftoken"]})
        assert r.status_code == 302, r.text[-2000:]

    def get(self, path: str, **kw) -> requests.Response:
        return self.http.get(self.server.http_url + path, timeout=30, **kw)

    def socket(self, page: requests.Response) -> "LiveSocket":
        found = re.search(r'ws-connect="([^"]+)"', page.text)
        assert found, "the page is not live"
        cookie = "; ".join(f"{k}={v}" for k, v in self.http.cookies.items())
        return LiveSocket(self.server, unescape(found.group(1)), cookie)


class LiveSocket:
    """A live page's websocket on a live server: the pushes it got (the heartbeat answered as
    live.js does), waited for by what they contain."""

    def __init__(self, server, path: str, cookie: str):
        port = server.http_port
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", cookie=cookie,
                                              origin=f"http://127.0.0.1:{port}", timeout=30)
        self.texts: list[str] = []

    def wait_for(self, needle: str, timeout: float = 30.0) -> str:
        """The first push since the last wait_for that contains `needle` (pushes before it are consumed)."""
        end = time.monotonic() + timeout
        while True:
            for i, text in enumerate(self.texts):
                if needle in text:
                    del self.texts[:i + 1]
                    return text
            left = end - time.monotonic()
            assert left > 0, f"no push containing {needle!r}; got {self.texts!r}"
            self.ws.settimeout(left)
            try:
                data = self.ws.recv()
            except websocket.WebSocketTimeoutException:
                continue
            if data == BEAT:
                self.ws.send("pong")
            else:
                self.texts.append(data)

    def close(self) -> None:
        self.ws.close()

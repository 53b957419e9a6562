"""Access ends the moment it is taken away, across processes (issue 11, items 1, 3, 5).

Two `manage.py serve` processes share one database (SQLite without Redis, or PostgreSQL with
Redis). A page websocket or an API watch is opened on server B; the access behind it is taken
away through server A (logout, token revoke, share-link revoke) or by a third process (a
`manage.py shell` changing a user, as an admin would), and B's channel must end within
CLOSE_BUDGET of the commit: pages with close code 4401 ("signed out") or 4403 (no longer
allowed), watches with a final ERROR event carrying a 401 Status. The hub's safety poll is
30 s here, so only the access-change notice can explain an end that quick.

With Redis stopped (a redis-server of this module's own, never the machine's), revocations
still succeed, the notices still reach the other process through the database, pages keep
their sockets, and /readyz stays ready (the API does not need Redis).
"""
from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import time

import pytest
import requests
import websocket

import pg_support
from chromium import TRACK_SOCKETS, WAIT_MS, log_in
from conftest import free_port, served_pair

# The requirement: closed within 1 s of the change - on a machine that is not
# oversubscribed. A shared box running several suites at once (load average well above its
# cores) stretches every step alike, so the budget stretches by that oversubscription.
CLOSE_BUDGET = 1.0
POLL_SECONDS = 30   # the hub's safety poll: only the access-change notice explains a quicker end


def _budget() -> float:
    return CLOSE_BUDGET * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
WAIT = 15.0             # how long to wait for anything at all (a busy machine), not a budget
PASSWORD = "revoke-" + secrets.token_urlsafe(12)


# ---------------------------------------------------------------------------------------------
# Servers


def _change(pair, code: str) -> float:
    """Run a change in a third process (as an admin would); the time (epoch s) just after it committed."""
    out = pair.a.manage("shell", "-c", code + "\nimport time; print('COMMITTED', time.time())")
    return float(re.search(r"COMMITTED ([\d.]+)", out).group(1))


def _pair(tmp_path_factory, backend: str, **env):
    return served_pair(tmp_path_factory, backend, KUBEDASH_WATCH_POLL_SECONDS=str(POLL_SECONDS), **env)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def pair(request, tmp_path_factory):
    with _pair(tmp_path_factory, request.param) as p:
        yield p


# ---------------------------------------------------------------------------------------------
# Clients: a browser-less session and a page websocket


class Browser:
    """A signed-in browser session (cookies, CSRF) against one server at a time."""

    def __init__(self):
        self.http = requests.Session()

    def log_in(self, server, username: str, password: str = PASSWORD) -> "Browser":
        base = server.http_url
        self.http.get(base + "/accounts/login/", timeout=WAIT)
        r = self.http.post(base + "/accounts/login/", timeout=WAIT, allow_redirects=False, data={
            "username": username, "password": password, "csrfmiddlewaretoken": self.http.cookies["csrftoken"]})
        assert r.status_code == 302, r.text[-2000:]
        return self

    def open_share(self, server, token: str) -> "Browser":
        r = self.http.get(f"{server.http_url}/s/{token}/", timeout=WAIT)
        assert r.status_code == 200, r.status_code
        return self

    def post(self, server, path: str, data: dict | None = None):
        if "csrftoken" not in self.http.cookies:
            self.http.get(server.http_url + "/accounts/login/", timeout=WAIT)
        return self.http.post(server.http_url + path, timeout=WAIT, allow_redirects=False,
                              data={"csrfmiddlewaretoken": self.http.cookies["csrftoken"], **(data or {})})

    def get(self, server, path: str):
        return self.http.get(server.http_url + path, timeout=WAIT, allow_redirects=False)

    def socket(self, server, query: str) -> "Page":
        return Page(server, query, "; ".join(f"{k}={v}" for k, v in self.http.cookies.items()))


class Page:
    """A live page's websocket; reads what the server pushes and how it ends."""

    def __init__(self, server, query: str, cookie: str):
        port = server.http_url.rsplit(":", 1)[1]
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}/ws/live/?{query}", cookie=cookie,
                                              origin=f"http://127.0.0.1:{port}", timeout=WAIT)
        self.namespace = dict(p.split("=", 1) for p in query.split("&")).get("namespace")
        self.texts: list[str] = []
        self.code: int | None = None
        self.closed_at: float | None = None

    def _frame(self, timeout: float):
        self.ws.settimeout(timeout)
        frame = self.ws.recv_frame()    # raw: no automatic close reply to a peer already gone
        opcode, data = frame.opcode, frame.data
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            self.code = int.from_bytes(data[:2], "big") if len(data) >= 2 else 1005
            self.closed_at = time.time()
            return None
        if opcode == websocket.ABNF.OPCODE_TEXT:
            if data == b"beat":   # the heartbeat, answered as live.js does
                self.ws.send("pong")
                return opcode
            self.texts.append(data.decode())
        return opcode

    def wait_closed(self, timeout: float = WAIT) -> int:
        end = time.monotonic() + timeout
        while self.code is None:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("the page's websocket is still open")
            try:
                self._frame(left)
            except (websocket.WebSocketConnectionClosedException, ConnectionError):
                self.code, self.closed_at = 1006, time.time()
        return self.code

    def wait_text(self, needle: str, timeout: float = WAIT) -> str:
        end = time.monotonic() + timeout
        while True:
            for text in self.texts:
                if needle in text:
                    return text
            left = end - time.monotonic()
            assert left > 0 and self.code is None, f"no push containing {needle!r} (closed: {self.code})"
            try:
                self._frame(left)
            except websocket.WebSocketTimeoutException:
                pass

    def close(self):
        self.ws.close()


def _users(pair, *specs) -> None:
    """Create users (name, role, namespaces) with PASSWORD."""
    lines = ["from dashboard.access.tokens import ensure_user", "from dashboard.access.models import Profile"]
    for name, role, namespaces in specs:
        lines += [f"u = ensure_user({name!r}, {role!r})", f"u.set_password({PASSWORD!r})", "u.save()",
                  f"Profile.objects.filter(user=u).update(namespaces={list(namespaces)!r})"]
    pair.a.manage("shell", "-c", "\n".join(lines))


def _name(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(3)}"


def _lease(pair, ns: str, name: str, holder: str = "x") -> None:
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name, "namespace": ns},
            "spec": {"holderIdentity": holder}}
    status, _, out = pair.a.request("POST", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", body)
    assert status == 201, out


def _pushed(pair, ns: str, *pages: Page) -> None:
    """The pages are open and live: a new lease in ns reaches each (a positive signal, where a
    quiet moment would prove nothing). Pages of one namespace find the lease's name; the overview
    and the all-namespaces lists find a new namespace's name."""
    name = _name("probe")
    _lease(pair, ns, name)
    for page in pages:
        page.wait_text(name if page.namespace else ns)


def _within_budget(page: Page, changed_at: float) -> float:
    page.wait_closed()
    took = page.closed_at - changed_at
    print(f"MEASURED page closed {took:.3f}s after the change")
    assert took <= _budget(), f"closed {took:.2f}s after the change (load {os.getloadavg()[0]:.1f})"
    return took


# ---------------------------------------------------------------------------------------------
# Page websockets


def test_logout_in_another_tab_closes_every_session_of_the_user(pair):
    user = _name("alice")
    _users(pair, (user, "viewer", ()))
    tab = Browser().log_in(pair.a, user)          # the tab that logs out
    other = Browser().log_in(pair.a, user)        # another browser of the same user
    pages = [tab.socket(pair.b, "view=leases"), other.socket(pair.b, "view=leases"),
             other.socket(pair.a, "view=overview")]
    _pushed(pair, _name("ns"), *pages)
    r = tab.post(pair.a, "/accounts/logout/")
    changed_at = time.time()
    assert r.status_code == 302
    for page in pages:
        _within_budget(page, changed_at)
        assert page.code == 4401                                   # live.js: "You have been signed out"
        assert "You have been signed out" in page.texts[-1]        # the page's data is replaced
    # The other browser's session ended too (kube's "sign out everywhere"): pages send it to
    # the login form, and a new socket is told it is signed out.
    r = other.get(pair.b, "/leases/")
    assert r.status_code == 302 and "/accounts/login/" in r.headers["Location"]
    assert other.socket(pair.b, "view=leases").wait_closed() == 4401   # a reconnect is told too
    # Signing in again works, and opens live pages again.
    fresh = Browser().log_in(pair.b, user).socket(pair.a, "view=leases")
    _pushed(pair, _name("ns"), fresh)
    fresh.close()


def test_deactivation_closes_the_page(pair):
    user = _name("dora")
    _users(pair, (user, "viewer", ()))
    page = Browser().log_in(pair.a, user).socket(pair.b, "view=leases")
    _pushed(pair, _name("ns"), page)
    changed_at = _change(pair,
        f"from django.contrib.auth.models import User\nu = User.objects.get(username={user!r})\n"
        "u.is_active = False\nu.save()")
    _within_budget(page, changed_at)
    assert page.code == 4401


@pytest.mark.slow
def test_session_expiry_closes_the_page(pair):
    user = _name("sam")
    _users(pair, (user, "viewer", ()))
    browser = Browser().log_in(pair.a, user)
    # The session ends at a fixed moment a few seconds from now (as SESSION_COOKIE_AGE or
    # set_expiry would make it end); the open page must close then, with nothing else changing.
    expires_at = float(pair.a.manage("shell", "-c",
        "from datetime import datetime, timedelta, timezone\n"
        "from django.contrib.sessions.backends.db import SessionStore\n"
        f"s = SessionStore({browser.http.cookies['sessionid']!r})\n"
        "s.set_expiry(datetime.now(timezone.utc) + timedelta(seconds=4))\n"
        "s.save()\n"
        "print(s.get_expiry_date().timestamp())").split()[-1])
    page = browser.socket(pair.b, "view=leases")
    _pushed(pair, _name("ns"), page)
    _within_budget(page, expires_at)
    assert page.code == 4401
    assert browser.get(pair.a, "/leases/").status_code == 302     # the pages agree: signed out


def test_namespace_removed_closes_its_pages_and_narrows_the_others(pair):
    user, keep, lose = _name("nina"), _name("keep"), _name("lose")
    _users(pair, (user, "editor", (keep, lose)))
    _lease(pair, keep, "kept")
    _lease(pair, lose, "secret")
    browser = Browser().log_in(pair.a, user)
    lost_page = browser.socket(pair.b, f"view=leases&namespace={lose}")
    all_page = browser.socket(pair.b, "view=leases")
    # (nothing asserted about the first pushes: a page opened without rv gets a refresh)
    _pushed(pair, lose, lost_page, all_page)
    all_page.texts.clear()
    changed_at = _change(pair,
        "from dashboard.access.models import Profile\n"
        f"p = Profile.objects.get(user__username={user!r})\np.namespaces = [{keep!r}]\np.save()")
    _within_budget(lost_page, changed_at)
    assert lost_page.code == 4403
    assert "no longer have access" in lost_page.texts[-1]
    # Still allowed to view the all-namespaces page: it stays open, re-rendered without the
    # namespace it lost, and no longer pushed what happens there.
    refresh = all_page.wait_text("kept")
    assert "secret" not in refresh
    all_page.texts.clear()   # (still open: the write to "kept" below reaches it)
    status, _, _ = pair.a.request("PATCH", f"/apis/coordination.k8s.io/v1/namespaces/{lose}/leases/secret",
                                  b'{"spec":{"holderIdentity":"hidden-holder"}}',
                                  content_type="application/merge-patch+json")
    assert status == 200
    status, _, _ = pair.a.request("PATCH", f"/apis/coordination.k8s.io/v1/namespaces/{keep}/leases/kept",
                                  b'{"spec":{"holderIdentity":"seen-holder"}}',
                                  content_type="application/merge-patch+json")
    assert status == 200
    all_page.wait_text("seen-holder")
    assert not any("hidden-holder" in t for t in all_page.texts)


def test_role_downgrade_that_still_allows_viewing_keeps_the_page(pair):
    user, ns = _name("eddy"), _name("ns")
    _users(pair, (user, "editor", ()))
    _lease(pair, ns, "one")
    page = Browser().log_in(pair.a, user).socket(pair.b, f"view=leases&namespace={ns}")
    _pushed(pair, ns, page)
    page.texts.clear()
    _change(pair, "from dashboard.access.models import Profile\n"
                  f"Profile.objects.filter(user__username={user!r}).update(role='viewer')\n"
                  "from dashboard.access.signals import record\n"
                  f"from django.contrib.auth.models import User\nrecord('user:%d' % User.objects.get(username={user!r}).pk)")
    # Re-checked (the page is re-rendered for the viewer it now is), and kept: still pushed to.
    page.wait_text('hx-swap-oob="innerHTML:#items"')
    _lease(pair, ns, "two")
    page.wait_text("two")
    assert page.code is None


# ---------------------------------------------------------------------------------------------
# API watches


def _token(pair, user: str, expires_in: float | None = None) -> tuple[str, int, float | None]:
    """(token, its id, its expiry as epoch seconds) for a viewer `user` with PASSWORD."""
    out = pair.a.manage("shell", "-c",
        "from datetime import timedelta\nfrom django.utils import timezone\n"
        "from dashboard.access.tokens import ensure_user, new_secret\n"
        "from dashboard.access.models import ApiToken, hash_token\n"
        f"u = ensure_user({user!r}, 'viewer')\nu.set_password({PASSWORD!r})\nu.save()\n"
        "t = new_secret()\n"
        f"e = None if {expires_in!r} is None else timezone.now() + timedelta(seconds={expires_in!r})\n"
        "row = ApiToken.objects.create(user=u, name='w', token_hash=hash_token(t), expires=e)\n"
        "print('TOKEN', t, row.pk, e.timestamp() if e else '-')")
    _, token, pk, expires = re.search(r"TOKEN (\S+) (\d+) (\S+)", out).group(0).split()
    return token, int(pk), None if expires == "-" else float(expires)


def _final_error(stream) -> tuple[dict, float]:
    """Read the watch to its end: (the last event, when it arrived)."""
    last, arrived = None, None
    while True:
        ev = stream.next(timeout=WAIT)
        if ev is None:
            return last, arrived
        last, arrived = ev, time.time()


def _assert_unauthorized(event: dict) -> None:
    assert event["type"] == "ERROR", event
    status = event["object"]
    assert (status["kind"], status["status"], status["code"], status["reason"]) == \
           ("Status", "Failure", 401, "Unauthorized"), status


def test_revoked_token_ends_its_watch_with_a_401_event(pair):
    user = _name("tess")
    token, pk, _ = _token(pair, user)
    stream = pair.b.watch("/apis/coordination.k8s.io/v1/leases?watch=true", token=token)
    assert stream.status == 200
    owner = Browser().log_in(pair.a, user)
    r = owner.post(pair.a, f"/tokens/{pk}/revoke/")
    changed_at = time.time()
    assert r.status_code == 302
    event, arrived = _final_error(stream)
    _assert_unauthorized(event)
    print(f"MEASURED watch ended {arrived - changed_at:.3f}s after the revoke")
    assert arrived - changed_at <= _budget(), f"ended {arrived - changed_at:.2f}s after the revoke"
    assert pair.b.request("GET", "/apis/coordination.k8s.io/v1/leases", token=token)[0] == 401


def test_expired_token_ends_its_watch_with_a_401_event(pair):
    token, _, expires = _token(pair, _name("exp"), expires_in=3)
    stream = pair.b.watch("/apis/coordination.k8s.io/v1/leases?watch=true", token=token)
    assert stream.status == 200
    event, arrived = _final_error(stream)
    _assert_unauthorized(event)
    print(f"MEASURED watch ended {arrived - expires:.3f}s after the expiry")
    assert expires <= arrived <= expires + _budget(), f"ended {arrived - expires:+.2f}s from the expiry"


def test_deactivated_users_token_watch_ends(pair):
    user = _name("del")
    token, _, _ = _token(pair, user)
    stream = pair.b.watch("/api/v1/endpoints?watch=true", token=token)
    assert stream.status == 200
    changed_at = _change(pair, f"from django.contrib.auth.models import User\nUser.objects.filter(username={user!r}).delete()")
    event, arrived = _final_error(stream)
    _assert_unauthorized(event)
    assert arrived - changed_at <= _budget()


# ---------------------------------------------------------------------------------------------
# Redis down: degraded, not an error


@pytest.fixture
def own_redis(tmp_path):
    """A redis-server of this test's own (stopping the machine's would hit everyone else)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pg_support.unavailable("redis-server is not installed")
    port = free_port()

    class Redis:
        url = f"redis://127.0.0.1:{port}/0"
        proc = None

        def start(self):
            self.proc = subprocess.Popen([binary, "--port", str(port), "--save", "", "--appendonly", "no",
                                          "--dir", str(tmp_path)], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + WAIT
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        return
                except OSError:
                    assert time.monotonic() < deadline, "redis-server did not start"
                    time.sleep(0.1)

        def stop(self):
            if self.proc is not None and self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)

    redis = Redis()
    redis.start()
    yield redis
    redis.stop()


@pytest.mark.slow
@pytest.mark.postgres
def test_redis_down_is_degraded_not_an_error(tmp_path_factory, own_redis):
    with _pair(tmp_path_factory, "postgres", REDIS_URL=own_redis.url) as pair:
        assert pair.a.request("GET", "/readyz", token="-")[0] == 200
        status, headers, body = pair.a.request("GET", "/readyz?verbose", token="-")
        assert status == 200
        assert body.decode().splitlines() == ["[+]ping ok", "[+]database ok", "[+]migrations ok", "readyz check passed"]

        editor, viewer, ns = _name("ed"), _name("vi"), _name("ns")
        api_token, token_pk, _ = _token(pair, editor)     # (before the logins: it sets a password)
        _users(pair, (editor, "editor", ()), (viewer, "viewer", (ns,)))
        _lease(pair, ns, "l1")
        owner = Browser().log_in(pair.a, editor)
        r = owner.post(pair.a, "/share/new/", {"kind": "Lease", "namespace": ns, "label": "oncall", "expiry": "1d"})
        assert r.status_code == 200, r.status_code
        token = re.search(r"/s/([A-Za-z0-9_-]{20,})/", r.text).group(1)
        link_id = int(pair.a.manage("shell", "-c", "from dashboard.access.models import ShareLink\n"
                                    "print(ShareLink.objects.latest('created').pk)").split()[-1])
        shared = Browser().open_share(pair.b, token).socket(pair.b, f"view=leases&namespace={ns}")
        viewing = Browser().log_in(pair.a, viewer).socket(pair.b, f"view=leases&namespace={ns}")
        unaffected = Browser().log_in(pair.a, editor).socket(pair.b, f"view=leases&namespace={ns}")
        _pushed(pair, ns, shared, viewing, unaffected)
        watch = pair.b.watch(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases?watch=true", token=api_token)
        assert watch.status == 200

        own_redis.stop()
        # Still ready: the API needs only the database (a Redis outage must not take every pod
        # out of the Service); wake-ups fall back to polling the log.
        assert pair.a.request("GET", "/readyz", token="-")[:3:2] == (200, b"ok")
        assert pair.a.request("GET", "/readyz/redis", token="-")[0] == 404
        assert pair.a.request("GET", "/livez", token="-")[:3:2] == (200, b"ok")

        # Revoking and changing a role succeed (no 500), and reach server B through the database.
        r = owner.post(pair.a, f"/tokens/{token_pk}/revoke/")
        changed_at = time.time()
        assert r.status_code == 302, r.text[-2000:]
        event, arrived = _final_error(watch)
        _assert_unauthorized(event)
        assert arrived - changed_at <= _budget()
        r = owner.post(pair.a, f"/share/{link_id}/revoke/")
        changed_at = time.time()
        assert r.status_code == 302, r.text[-2000:]
        assert _within_budget(shared, changed_at) is not None and shared.code == 4403
        changed_at = _change(pair, "from dashboard.access.models import Profile\n"
                                   f"p = Profile.objects.get(user__username={viewer!r})\np.namespaces = ['elsewhere']\np.save()")
        _within_budget(viewing, changed_at)
        assert viewing.code == 4403
        # Pages that keep their access keep their sockets, and stay live.
        _lease(pair, ns, "while-down")
        unaffected.wait_text("while-down")
        # New pages open as well.
        late = Browser().log_in(pair.b, editor).socket(pair.b, f"view=leases&namespace={ns}")
        _pushed(pair, ns, late)

        own_redis.start()
        for page in (unaffected, late):
            assert page.code is None


# ---------------------------------------------------------------------------------------------
# The browser shows it


@pytest.mark.slow
def test_browser_shows_the_signed_out_banner(chromium, kube_server):
    from playwright.sync_api import expect

    user = _name("brw")
    kube_server.manage("shell", "-c", (
        "from dashboard.access.tokens import ensure_user\n"
        f"u = ensure_user({user!r}, 'viewer')\nu.set_password({PASSWORD!r})\nu.save()\n"))
    expect.set_options(timeout=WAIT_MS)
    base = kube_server.http_url
    ctx = chromium.new_context(viewport={"width": 1280, "height": 900})
    ctx.add_init_script(TRACK_SOCKETS)
    errors: list[str] = []
    ctx.on("page", lambda pg: pg.on("pageerror", lambda exc: errors.append(str(exc))))
    try:
        first = ctx.new_page()
        log_in(first, base, user, PASSWORD)
        first.goto(base + "/leases/")
        expect(first.locator("#live-status")).to_have_text("Live")
        second = ctx.new_page()                    # another tab of the same browser
        second.goto(base + "/")
        second.get_by_role("button", name="Log out").click()
        second.wait_for_url(re.compile(r".*/accounts/login/.*"))
        banner = first.locator("#signed-out-banner")
        expect(banner).to_contain_text("You have been signed out — sign in again")
        expect(banner.get_by_role("link", name="sign in again")).to_have_attribute(
            "href", "/accounts/login/?next=%2Fleases%2F")
        expect(first.locator("#live-status")).to_have_text("Signed out")
        expect(first.locator("main h1")).to_have_text("Signed out")   # the data is gone too
        assert first.locator("#items tr").count() == 0
        # It does not keep trying: no attempt to connect once its socket closed, by the time
        # the page's own timers have run past the longest retry delay (1 s, live.js's cap; the
        # page runs its timers in order, so a retry scheduled by the close would have come first).
        attempts = first.evaluate("""() => new Promise(done => {
            const before = window.__kdSockets.length, closed = window.__kdSockets.every(s => s.readyState === 3);
            let connecting = 0;
            document.addEventListener('htmx:wsConnecting', () => connecting++);
            setTimeout(() => done({before, closed, opened: window.__kdSockets.length - before, connecting}), 1500);
        })""")
        assert attempts["before"] >= 1, attempts   # (the page's socket was counted)
        assert {k: attempts[k] for k in ("closed", "opened", "connecting")} == \
            {"closed": True, "opened": 0, "connecting": 0}, attempts
        expect(first.locator("#live-status")).to_have_text("Signed out")
    finally:
        ctx.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


def test_kubectl_watch_ends_with_unauthorized(kube_server, tmp_path):
    """What kubectl shows for the final 401 event of `get -w`: the Status as a row, then it exits."""
    import queue
    import threading

    from conftest import require_kubectl

    kubectl = require_kubectl()
    user, ns = _name("kc"), _name("kc-ns")
    config = kube_server.kubeconfig(tmp_path / "kubeconfig", user, "viewer")
    proc = subprocess.Popen([kubectl, "--kubeconfig", str(config), "get", "leases", "-n", ns, "--watch-only"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
    reader.start()
    out = []
    try:
        # The watch is open once a write shows up in kubectl's output.
        path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "probe"}, "spec": {}}
        assert kube_server.request("POST", path, body)[0] == 201
        deadline = time.monotonic() + WAIT
        tries = 0
        while not any("probe" in line for line in out):
            assert time.monotonic() < deadline, out
            try:
                out.append(lines.get(timeout=0.5))
            except queue.Empty:
                # (each a real change: a watch that opened after the last one sees the next)
                tries += 1
                kube_server.request("PATCH", path + "/probe", b'{"spec":{"holderIdentity":"%d"}}' % tries,
                                    content_type="application/merge-patch+json")
        kube_server.manage("shell", "-c", (
            "from dashboard.access.models import ApiToken\n"
            f"for t in ApiToken.objects.filter(user__username={user!r}):\n"
            "    t.revoked = True\n    t.save()\n"))
        proc.wait(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(WAIT)   # everything kubectl printed is in the queue
    while not lines.empty():
        out.append(lines.get())
    assert re.search(r"Failure\s+Unauthorized\s+Unauthorized", "".join(out)), out

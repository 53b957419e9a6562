"""Changes made on the people page end access everywhere at once (issue 41, item 10), as the
admin paths of test_revocation.py do: a served kubedash, an admin's browser session posting the
people forms, and the user's open page websockets and API watches, which must close (pages: 4403
no longer allowed, 4401 signed out) or end with an ERROR event. Each waits for the end it
expects (a positive signal), never for a quiet moment."""
from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from access.test_revocation import PASSWORD, Browser, _final_error, _lease, _name, _pushed, _users


@pytest.fixture(scope="module")
def server(kube_server):
    """The served kubedash, in the shape test_revocation's helpers take (`.a`), with an admin."""
    pair = SimpleNamespace(a=kube_server, b=kube_server)
    admin = _name("people-admin")
    _users(pair, (admin, "admin", ()))
    pair.admin = Browser().log_in(kube_server, admin)
    return pair


def _token(browser: Browser, server) -> str:
    """A new API token of the browser's user, made on their own tokens page (shown once there)."""
    r = browser.post(server.a, "/tokens/", {"name": _name("w")})
    return re.search(r'id="token-value" type="text" readonly value="([A-Za-z0-9_-]{40,})"', r.text).group(1)


def _error_code(event: dict) -> int:
    assert event["type"] == "ERROR", event
    return event["object"]["code"]


def test_narrowing_limits_on_the_people_page_closes_pages_and_watches_outside_them(server):
    user, keep, lose = _name("nina"), _name("keep"), _name("lose")
    _users(server, (user, "editor", (keep, lose)))
    _lease(server, keep, "kept")
    _lease(server, lose, "secret")
    browser = Browser().log_in(server.a, user)
    token = _token(browser, server)
    lost_page = browser.socket(server.a, f"view=leases&namespace={lose}")
    all_page = browser.socket(server.a, "view=leases")
    _pushed(server, lose, lost_page, all_page)
    stream = server.a.watch(f"/apis/coordination.k8s.io/v1/namespaces/{lose}/leases?watch=true", token=token)
    assert stream.status == 200
    all_page.texts.clear()

    r = server.admin.post(server.a, f"/people/{user}/", {"role": "editor", "namespaces": [keep]})
    assert r.status_code == 302, r.text[-2000:]

    assert lost_page.wait_closed() == 4403
    assert "no longer have access" in lost_page.texts[-1]
    event, _ = _final_error(stream)
    assert _error_code(event) == 403
    # The all-namespaces page may still be seen: re-rendered without the namespace it lost.
    refresh = all_page.wait_text("kept")
    assert "secret" not in refresh and all_page.code is None
    status, _, _ = server.a.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{lose}/leases", token=token)
    assert status == 403


def test_demoting_to_viewer_keeps_reading_pages_and_ends_nothing_it_may_still_see(server):
    user, ns = _name("eddy"), _name("ns")
    _users(server, (user, "editor", ()))
    _lease(server, ns, "one")
    page = Browser().log_in(server.a, user).socket(server.a, f"view=leases&namespace={ns}")
    _pushed(server, ns, page)
    page.texts.clear()
    assert server.admin.post(server.a, f"/people/{user}/", {"role": "viewer"}).status_code == 302
    page.wait_text('hx-swap-oob="innerHTML:#items"')   # re-checked and re-rendered for the viewer
    _lease(server, ns, "two")
    page.wait_text("two")
    assert page.code is None
    # ...and the viewer's pages no longer offer writes.
    assert "New Lease" not in Browser().log_in(server.a, user).get(server.a, f"/leases/?namespace={ns}").text


def test_sign_out_everywhere_closes_every_session_and_socket_of_the_user(server):
    user = _name("sofia")
    _users(server, (user, "viewer", ()))
    one, two = Browser().log_in(server.a, user), Browser().log_in(server.a, user)
    token = _token(one, server)
    pages = [one.socket(server.a, "view=leases"), two.socket(server.a, "view=overview")]
    _pushed(server, _name("ns"), *pages)

    assert server.admin.post(server.a, f"/people/{user}/sign-out/").status_code == 302

    for page in pages:
        assert page.wait_closed() == 4401
        assert "You have been signed out" in page.texts[-1]
    for browser in (one, two):
        r = browser.get(server.a, "/leases/")
        assert r.status_code == 302 and "/accounts/login/" in r.headers["Location"]
    # API tokens are not sessions: they keep working until revoked (the page says so).
    assert server.a.request("GET", "/apis/coordination.k8s.io/v1/leases", token=token)[0] == 200
    assert Browser().log_in(server.a, user).get(server.a, "/leases/").status_code == 200   # may sign in again


def test_deactivating_and_revoking_a_token_on_the_people_page_end_their_watches(server):
    user = _name("dan")
    _users(server, (user, "viewer", ()))
    browser = Browser().log_in(server.a, user)
    token, kept = _token(browser, server), _token(browser, server)
    page = browser.socket(server.a, "view=leases")
    _pushed(server, _name("ns"), page)
    listed = server.admin.get(server.a, f"/people/{user}/").text   # (the newest token first)
    token_id = re.findall(rf"/people/{user}/tokens/(\d+)/revoke/", listed)[-1]
    revoked = server.a.watch("/apis/coordination.k8s.io/v1/leases?watch=true", token=token)
    assert revoked.status == 200
    assert server.admin.post(server.a, f"/people/{user}/tokens/{token_id}/revoke/").status_code == 302
    event, _ = _final_error(revoked)
    assert _error_code(event) == 401
    assert page.code is None   # (a token is not the session)

    watch = server.a.watch("/api/v1/endpoints?watch=true", token=kept)
    assert watch.status == 200
    assert server.admin.post(server.a, f"/people/{user}/active/").status_code == 302
    assert page.wait_closed() == 4401
    event, _ = _final_error(watch)
    assert _error_code(event) == 401
    assert server.a.request("GET", "/api/v1/endpoints", token=kept)[0] == 401
    r = Browser().post(server.a, "/accounts/login/", {"username": user, "password": PASSWORD})
    assert r.status_code == 200 and "sessionid" not in r.cookies   # the form again: cannot sign in

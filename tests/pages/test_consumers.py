"""The live pages' websocket (Channels WebsocketCommunicator against the real consumer, the
real watch hub and the real database): the right fragment for a write, nothing for writes
outside the view, order of new rows, deletes, and convergence after a reconnect."""
from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from manifests import lease
from page_helpers import connect, next_push, pushed_until, receive_until

# CI runs this module again on PostgreSQL (.ci/run selects it by the marker).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio, pytest.mark.portable]


def _write(fn, *args, **kw):
    return sync_to_async(fn)(*args, **kw)


@pytest.fixture
def store_ops():
    from dashboard.coordination.resource import LEASES
    from dashboard.kube import store

    class Ops:
        def create(self, name, ns="default", **meta):
            return store.create(LEASES, ns, lease(name, ns=ns, **meta)).object

        def patch(self, name, ns="default", holder="x", labels=None):
            def change(obj):
                obj["spec"]["holderIdentity"] = holder
                if labels is not None:
                    obj["metadata"]["labels"] = labels
                return obj
            return store.update(LEASES, ns, name, change, is_patch=True).object

        def delete(self, name, ns="default"):
            return store.delete(LEASES, ns, name)

        def rv(self):
            return store.current_revision()

    return Ops()


@pytest.fixture
def user(transactional_db):
    from dashboard.access.tokens import ensure_user
    return ensure_user("page-viewer", "viewer")


async def _caught_up(comm, store_ops) -> tuple[int, list[str]]:
    """(the revision now, the messages of a reconnected page's catch-up up to it); then a later
    write's push must be the next message: nothing else came after the catch-up."""
    now = await _write(store_ops.rv)
    messages = await pushed_until(comm, f'id="live-rv" data-rv="{now}"')
    await _write(store_ops.create, "later")
    assert "lease-default--later" in await next_push(comm)
    return now, messages


async def test_write_pushes_the_row_fragment(user, store_ops):
    await _write(store_ops.create, "a")
    rv = await _write(store_ops.rv)
    comm, ok, _ = await connect(user, f"view=leases&rv={rv}")
    assert ok
    await _write(store_ops.patch, "a", holder="new-holder")
    html = await comm.receive_from(timeout=5)   # the first message: the page was current, no refresh
    assert 'id="lease-default--a"' in html and 'hx-swap-oob="true"' in html and "new-holder" in html
    # The heading counts of the whole view follow (the lease's expiry moved), with the page's
    # revision (it moves with each push), in a message after the rows.
    more = await comm.receive_from(timeout=5)
    assert '<dl id="list-totals"' in more and "<strong>1 lease</strong>" in more
    assert '<span id="live-rv" data-rv="' in more
    await comm.disconnect()


async def test_nothing_for_writes_outside_the_view(user, store_ops):
    rv = await _write(store_ops.rv)
    comm, ok, _ = await connect(user, f"view=leases&namespace=team-a&rv={rv}")
    assert ok
    await _write(store_ops.create, "elsewhere", ns="team-b")
    await _write(store_ops.create, "here", ns="team-a")
    html = await comm.receive_from(timeout=5)   # (a push of the earlier write would come first)
    assert "lease-team-a--here" in html and "elsewhere" not in html
    await comm.disconnect()


async def test_the_name_search_pushes_what_the_page_lists_whatever_the_case(user, store_ops):
    """The page's name search ignores case (test_pages: ?q=AMM lists "gamma"); so do its pushes."""
    rv = await _write(store_ops.rv)
    comm, ok, _ = await connect(user, f"view=leases&q=AMM&rv={rv}")
    assert ok
    await _write(store_ops.create, "other")
    await _write(store_ops.create, "gamma")
    html = await comm.receive_from(timeout=5)   # (a push of the earlier write would come first)
    assert "lease-default--gamma" in html and "lease-default--other" not in html
    await comm.disconnect()


async def test_new_rows_land_in_order_and_deletes_remove(user, store_ops):
    await _write(store_ops.create, "b")
    await _write(store_ops.create, "d")
    rv = await _write(store_ops.rv)
    comm, ok, _ = await connect(user, f"view=leases&rv={rv}")
    await _write(store_ops.create, "c")
    html = await comm.receive_from(timeout=5)
    assert '<tbody hx-swap-oob="afterend:#lease-default--b">' in html and "lease-default--c" in html
    await _write(store_ops.create, "a")
    html = await comm.receive_from(timeout=5)
    assert '<tbody hx-swap-oob="afterbegin:#items">' in html
    await _write(store_ops.delete, "d")
    html = await comm.receive_from(timeout=5)
    assert '<div id="lease-default--d" hx-swap-oob="delete"></div>' in html
    await comm.disconnect()


async def test_label_selector_view_follows_transitions(user, store_ops):
    await _write(store_ops.create, "a", labels={"role": "leader"})
    rv = await _write(store_ops.rv)
    comm, ok, _ = await connect(user, f"view=leases&labelSelector=role%3Dleader&rv={rv}")
    await _write(store_ops.patch, "a", labels={"role": "standby"})
    html = await comm.receive_from(timeout=5)
    assert 'hx-swap-oob="delete"' in html
    assert 'id="items-empty"' in html  # the page shows its empty state again


async def test_reconnect_with_an_old_revision_gets_the_changes(user, store_ops):
    await _write(store_ops.create, "a")
    await _write(store_ops.create, "c")
    await _write(store_ops.create, "untouched")
    old = await _write(store_ops.rv)
    await _write(store_ops.create, "b")           # happened while the page was disconnected
    await _write(store_ops.patch, "a", holder="moved")
    await _write(store_ops.delete, "c")
    comm, ok, _ = await connect(user, f"view=leases&rv={old}")
    now, messages = await _caught_up(comm, store_ops)
    html = "".join(messages)
    # Just what changed, as one coalesced push would have sent it (rows changed in place in a
    # message of their own, then the rest), then the revision: no full re-render.
    assert len(messages) <= 3, messages
    assert 'innerHTML:#items' not in html and "lease-default--untouched" not in html
    assert 'hx-swap-oob="afterend:#lease-default--a"><tr id="lease-default--b"' in html   # b, after a
    assert 'id="lease-default--b"' in html
    assert "moved" in html
    assert '<div id="lease-default--c" hx-swap-oob="delete">' in html
    assert f'data-rv="{now}"' in html
    await comm.disconnect()


async def test_reconnect_with_a_compacted_revision_refreshes_the_page(user, store_ops, monkeypatch):
    from dashboard.web import live

    await _write(store_ops.create, "a")
    old = await _write(store_ops.rv)
    await _write(store_ops.create, "b")
    real = live.snapshot

    def compacted(spec, principal, at=0, **kw):
        if at:
            from dashboard.kube.errors import ApiError
            raise ApiError(410, "Expired", "too old resource version")   # as the store says it
        return real(spec, principal, at, **kw)

    monkeypatch.setattr(live, "snapshot", compacted)
    comm, ok, _ = await connect(user, f"view=leases&rv={old}")
    html = await comm.receive_from(timeout=5)
    assert '<tbody hx-swap-oob="innerHTML:#items">' in html and "lease-default--b" in html
    await comm.disconnect()


async def test_many_writes_while_away_are_caught_up_as_changes_not_a_refresh(user, store_ops):
    """600 writes to two objects of a five-row page while its socket was down (more than a
    page has rows, more than the old 500-event limit): the reconnect brings those two rows,
    in one push, not the page's rows all over again."""
    for name in ("a", "b", "c", "d", "e"):
        await _write(store_ops.create, name)
    old = await _write(store_ops.rv)
    for i in range(300):
        await _write(store_ops.patch, "b", holder=f"b-{i}")
        await _write(store_ops.patch, "d", holder=f"d-{i}")
    comm, ok, _ = await connect(user, f"view=leases&rv={old}")
    now, messages = await _caught_up(comm, store_ops)
    html = "".join(messages)
    assert "innerHTML:#items" not in html
    assert "b-299" in html and "d-299" in html and "b-298" not in html
    for untouched in ("a", "c", "e"):
        assert f'id="lease-default--{untouched}"' not in html
    assert len(messages) <= 2, messages
    assert f'data-rv="{now}"' in html
    await comm.disconnect()


async def test_detail_view_gets_its_detail_fragment(user, store_ops):
    await _write(store_ops.create, "a")
    rv = await _write(store_ops.rv)
    comm, ok, _ = await connect(user, f"view=lease&namespace=default&name=a&rv={rv}")
    await _write(store_ops.create, "other")
    await _write(store_ops.patch, "a", holder="detail-holder")
    html = await comm.receive_from(timeout=5)   # nothing for "other" before it, nor with it
    assert 'id="detail"' in html and "detail-holder" in html and html.count('id="detail"') == 1
    await _write(store_ops.delete, "a")
    assert "deleted" in await comm.receive_from(timeout=5)
    await comm.disconnect()


async def test_lease_detail_pushes_its_holder_history_and_when_it_was_deleted(user, store_ops):
    """A Lease's detail page: a new holder's push carries the holder history too (the timeline
    says the new holder is holding now, not the old one); its deletion's push says when, as the
    page a reload shows does (issue 41)."""
    from datetime import UTC, datetime

    from dashboard.coordination.resource import LEASES
    from dashboard.kube import store

    def renewed_by(holder):
        def change(obj):
            obj["spec"].update(holderIdentity=holder, renewTime=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
            return obj
        return change

    await _write(store_ops.create, "hist")
    await _write(store.update, LEASES, "default", "hist", renewed_by("node-a"), is_patch=True)
    rv = await _write(store_ops.rv)
    comm, ok, _ = await connect(user, f"view=lease&namespace=default&name=hist&rv={rv}")
    assert ok
    await _write(store.update, LEASES, "default", "hist", renewed_by("second-holder"), is_patch=True)
    html = await receive_until(comm, "second-holder")
    history = html.split('<section id="history"')[1].split("</section>")[0]
    assert 'hx-swap-oob="true"' in history[:200]
    holding = [row for row in history.split("<tr")[1:] if "holding" in row]
    assert len(holding) == 1 and "second-holder" in holding[0] and "node-a" not in holding[0], holding
    assert "node-a" in history   # the earlier span stays, ended
    await _write(store_ops.delete, "hist")
    notice = await receive_until(comm, "was deleted")
    assert "This lease was deleted <time datetime=" in notice and "data-ago-since" in notice and "data-abs" in notice
    await comm.disconnect()


async def test_anonymous_and_out_of_scope_sockets_are_refused(transactional_db, store_ops):
    from django.contrib.auth.models import AnonymousUser

    from dashboard.access.tokens import ensure_user
    from dashboard.access.models import Profile

    comm, ok, _ = await connect(AnonymousUser(), "view=leases")
    # Not signed in: accepted only to be closed with 4401 (live.js: "signed out", a sign-in link).
    assert ok and (await comm.receive_output(timeout=5)) == {"type": "websocket.close", "code": 4401}
    limited = await sync_to_async(ensure_user)("limited", "viewer")
    await sync_to_async(Profile.objects.filter(user=limited).update)(namespaces=["team-a"])
    limited = await sync_to_async(lambda: type(limited).objects.select_related("kube_profile").get(pk=limited.pk))()
    comm, ok, code = await connect(limited, "view=leases&namespace=team-b")
    assert not ok and code == 4403
    comm, ok, _ = await connect(limited, "view=leases&namespace=team-a")
    assert ok
    await comm.disconnect()


async def test_bad_view_is_refused(user):
    comm, ok, code = await connect(user, "view=nope")
    assert not ok and code == 4400


async def test_overview_recounts_namespaces(user, store_ops):
    await _write(store_ops.create, "a", ns="ov-a")
    rv = await _write(store_ops.rv)
    comm, ok, _ = await connect(user, f"view=overview&rv={rv}")
    assert ok
    await _write(store_ops.create, "b", ns="ov-b")       # a namespace the page has not seen
    html = await comm.receive_from(timeout=5)
    assert 'hx-swap-oob="innerHTML:#namespaces"' in html and 'id="ns-ov-a"' in html and 'id="ns-ov-b"' in html
    await comm.disconnect()


async def test_overview_pushes_the_cards_its_page_shows(store_ops, transactional_db):
    """A namespace-limited viewer's Overview has a card for each of their namespaces, an empty
    one too (views.overview); its pushes keep every one of them."""
    from dashboard.access.models import Profile
    from dashboard.access.tokens import ensure_user

    limited = await sync_to_async(ensure_user)("ov-limited", "viewer")
    await sync_to_async(Profile.objects.filter(user=limited).update)(namespaces=["ov-a", "ov-empty"])
    limited = await sync_to_async(lambda: type(limited).objects.select_related("kube_profile").get(pk=limited.pk))()
    await _write(store_ops.create, "a", ns="ov-a")
    rv = await _write(store_ops.rv)
    comm, ok, _ = await connect(limited, f"view=overview&rv={rv}")
    assert ok
    await _write(store_ops.create, "b", ns="ov-a")
    html = await comm.receive_from(timeout=5)
    assert 'hx-swap-oob="innerHTML:#namespaces"' in html and 'id="ns-ov-a"' in html and 'id="ns-ov-empty"' in html
    await comm.disconnect()


async def test_endpoints_cards_insert_with_a_div(user, transactional_db):
    from dashboard.core.resource import ENDPOINTS
    from dashboard.kube import store
    from manifests import endpoints

    rv = await _write(store.current_revision)
    comm, ok, _ = await connect(user, f"view=endpoints&rv={rv}")
    await _write(store.create, ENDPOINTS, "default", endpoints("web", not_ready=("10.0.0.9",)))
    html = await comm.receive_from(timeout=5)
    assert '<div hx-swap-oob="afterbegin:#items">' in html and "10.0.0.9" in html
    await comm.disconnect()


async def test_endpoints_rollup_follows_a_card(user, transactional_db):
    from dashboard.core.resource import ENDPOINTS
    from dashboard.kube import store
    from manifests import endpoints

    await _write(store.create, ENDPOINTS, "default", endpoints("web", ips=("10.0.0.1", "10.0.0.2")))
    rv = await _write(store.current_revision)
    comm, ok, _ = await connect(user, f"view=endpoints&rv={rv}")
    assert ok

    def lose_one(obj):
        subset = obj["subsets"][0]
        subset["addresses"] = [{"ip": "10.0.0.1"}]
        subset["notReadyAddresses"] = [{"ip": "10.0.0.2"}, {"ip": "10.0.0.3"}]
        return obj

    await _write(store.update, ENDPOINTS, "default", "web", lose_one, is_patch=True)
    html = await comm.receive_from(timeout=5)
    assert 'id="endpoints-default--web"' in html                 # the card itself
    # The roll-up table is replaced alongside the card, with the new not-ready count.
    assert '<section class="rollup" id="rollup"' in html and 'hx-swap-oob="true"' in html
    rollup = html[html.index('id="rollup"'):]
    rollup = rollup[:rollup.index("</section>")]
    assert '<span class="badge bad">2 not ready</span>' in rollup
    await comm.disconnect()


async def test_a_push_into_a_socket_that_closed_meanwhile_is_dropped_quietly(user, store_ops, monkeypatch, caplog):
    """The client leaves while its push is being rendered (the consumer hears of it only after
    the render: Channels handles the disconnect on the same sync thread). Daphne refuses the
    late send; the push is dropped quietly: no "Task exception was never retrieved"."""
    import asyncio
    import gc
    import logging
    import threading

    from dashboard.web import live
    from dashboard.web.consumers import LiveConsumer

    rendering, release = threading.Event(), threading.Event()
    real = live.render_changes

    def slow_render(*args, **kw):
        rendering.set()
        release.wait(10)
        return real(*args, **kw)

    gone = asyncio.Event()
    tried = []
    real_send = LiveConsumer.send

    async def send(self, *args, **kw):
        if gone.is_set():   # as Daphne does once the client has closed
            tried.append(kw.get("text_data"))
            raise RuntimeError("Unexpected ASGI message 'websocket.send', after sending 'websocket.close'")
        return await real_send(self, *args, **kw)

    flushed = asyncio.Event()   # the push's task is over and its outcome was retrieved
    real_flushed = LiveConsumer._flushed

    def flushed_spy(self, task):
        real_flushed(self, task)
        flushed.set()

    monkeypatch.setattr(live, "render_changes", slow_render)
    monkeypatch.setattr(LiveConsumer, "send", send)
    monkeypatch.setattr(LiveConsumer, "_flushed", flushed_spy)
    await _write(store_ops.create, "a")
    rv = await _write(store_ops.rv)
    comm, ok, _ = await connect(user, f"view=leases&rv={rv}")
    assert ok
    await _write(store_ops.patch, "a", holder="mid-push")
    assert await asyncio.get_running_loop().run_in_executor(None, rendering.wait, 10)
    with caplog.at_level(logging.DEBUG):
        gone.set()
        release.set()
        deadline = asyncio.get_running_loop().time() + 5
        while not tried and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
        assert tried, "the push was not attempted"
        await asyncio.wait_for(flushed.wait(), 5)
        await comm.disconnect()
        gc.collect()   # (a task whose exception nobody retrieved says so when collected)
    problems = [r.getMessage() for r in caplog.records
                if "never retrieved" in r.getMessage() or "push failed" in r.getMessage()]
    assert problems == []


async def test_a_busy_page_gets_a_few_pushes_a_second_with_every_change(user, store_ops):
    """Writes at ~50/s to objects on a page: the page gets at most one push per
    PUSH_INTERVAL_SECONDS (each push is a layout of the whole list in the browser), each
    carrying the newest state of every object changed meanwhile; nothing is lost."""
    import asyncio
    import re
    import time

    from dashboard.web.consumers import PUSH_INTERVAL_SECONDS

    names = [f"w{i}" for i in range(5)]
    for name in names:
        await _write(store_ops.create, name)
    rv = await _write(store_ops.rv)
    comm, ok, _ = await connect(user, f"view=leases&rv={rv}")
    assert ok
    seconds, writes = 1.5, 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        await _write(store_ops.patch, names[writes % len(names)], holder=f"h-{writes}")
        writes += 1
        await asyncio.sleep(0.02)
    last = {names[i % len(names)]: f"h-{i}" for i in range(writes)}
    _, messages = await _caught_up(comm, store_ops)
    elapsed = time.monotonic() - started
    pushes, seen = 0, {}
    for html in messages:
        pushes += 'id="live-rv"' in html     # one revision marker per push
        for name, holder in re.findall(r'id="lease-default--(w\d)".*?<span class="mono">(h-\d+)', html, re.S):
            seen[name] = holder
    assert writes >= 30
    assert seen == last, "a change was lost"
    assert pushes <= elapsed / PUSH_INTERVAL_SECONDS + 2, (pushes, writes)
    await comm.disconnect()


async def test_a_frame_from_the_client_closes_the_socket(user, store_ops):
    """Issue 29: pages send nothing, so a frame is not a page's (a flood of them starved the
    API): closed with 4008 on the first, and nothing is pushed to it after."""
    witness, ok, _ = await connect(user, "view=leases&namespace=default")   # another page, left open
    assert ok
    comm, ok, _ = await connect(user, "view=leases&namespace=default")
    assert ok
    await comm.send_to(text_data='{"HEADERS": {"HX-Request": "true"}}')
    out = await comm.receive_output(timeout=5)
    assert out == {"type": "websocket.close", "code": 4008}
    await _write(store_ops.create, "after-close")
    assert "lease-default--after-close" in await next_push(witness)
    # A later write's push to the open page comes at least a push interval after that one: by
    # then a push of "after-close" to the closed page would be there too. None is.
    await _write(store_ops.create, "later")
    assert "lease-default--later" in await next_push(witness)
    assert await comm.receive_nothing(timeout=0)
    await witness.disconnect()


async def test_each_user_has_a_budget_of_sockets(user, store_ops, monkeypatch, transactional_db):
    from dashboard.access.tokens import ensure_user
    from dashboard.access import budgets

    monkeypatch.setattr(budgets, "_connects", budgets.Budget(rate=0.001, burst=3))
    opened = []
    for _ in range(3):
        comm, ok, _ = await connect(user, "view=leases&namespace=default")
        assert ok
        opened.append(comm)
    comm, ok, _ = await connect(user, "view=leases&namespace=default")
    assert ok   # accepted, to say why:
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4429}
    other = await sync_to_async(ensure_user)("someone-else", "viewer")
    comm, ok, _ = await connect(other, "view=leases&namespace=default")   # others are not affected:
    assert ok
    await _write(store_ops.create, "for-someone-else")
    assert "lease-default--for-someone-else" in await next_push(comm)   # open, and pushed to
    # A stray frame costs its sender more than a connection.
    await comm.send_to(text_data="x")
    assert (await comm.receive_output(timeout=5))["code"] == 4008
    comm, ok, _ = await connect(other, "view=leases&namespace=default")
    assert (await comm.receive_output(timeout=5))["code"] == 4429
    for comm in opened:
        await comm.disconnect()


async def test_heartbeat_beats_and_a_silent_client_is_closed(user, store_ops, settings):
    """The server beats every KUBEDASH_LIVE_HEARTBEAT_SECONDS (live.js answers each); a client
    that answers nothing for SILENT_BEATS beats is closed with 4408 (reconnect and catch up)."""
    from dashboard.web.consumers import BEAT, CLOSE_BEHIND, PONG, SILENT_BEATS

    settings.KUBEDASH_LIVE_HEARTBEAT_SECONDS = 0.2
    rv = await _write(store_ops.rv)
    comm, ok, _ = await connect(user, f"view=leases&rv={rv}")
    assert ok
    # A client that answers stays open through many beats.
    for _ in range(2 * SILENT_BEATS):
        assert await comm.receive_from(timeout=5) == BEAT
        await comm.send_to(text_data=PONG)
    # Then it stops answering: a few more beats, then the server closes it.
    got = []
    while True:
        out = await comm.receive_output(timeout=5)
        if out["type"] == "websocket.close":
            break
        got.append(out["text"])
    assert out["code"] == CLOSE_BEHIND
    assert got and set(got) == {BEAT} and len(got) <= SILENT_BEATS + 1, got

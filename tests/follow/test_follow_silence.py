"""A followed cluster that goes silent (issue 41): a second kubedash is the upstream, followed
through a TCP proxy of the test's own that can stop moving bytes while keeping every connection
open (what a network partition, or a SIGSTOPped proxy, leaves: no FIN, no RST). A Lease is
renewed upstream every second. Paused, the follower hears nothing within its silence deadline:
prod is stale on its pages, the Overview, a share link, `follow list` and /metrics, and the Lease
is shown held as of the last word, never "expired" as a guess; resumed, prod is live again."""
from __future__ import annotations

import asyncio
import http.client
import re
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chromium import held_lease, leases_path, now_micro
from conftest import FOLLOWER_ENV, eventually, log_in_form, sample, scrape, served, server_env

SILENCE = 6   # the follower's KUBEDASH_FOLLOW_SILENCE_SECONDS (its watches end every 3 s)


class PausableProxy:
    """A TCP forwarder on 127.0.0.1 in a thread of its own. pause(): connections stay open (and
    new ones are accepted) but no byte moves either way; resume(): bytes move again."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.loop = asyncio.new_event_loop()
        self.flowing = asyncio.Event()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="pausable-proxy", daemon=True)
        self.port = 0

    def __enter__(self):
        self.thread.start()
        assert self.ready.wait(10), "the proxy did not start"
        return self

    def __exit__(self, *exc):
        self.loop.call_soon_threadsafe(self.flowing.set)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def pause(self) -> None:
        self.loop.call_soon_threadsafe(self.flowing.clear)

    def resume(self) -> None:
        self.loop.call_soon_threadsafe(self.flowing.set)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.flowing.set()
        server = self.loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    async def _client(self, reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True)

    async def _pipe(self, reader, writer):
        try:
            while True:
                await self.flowing.wait()
                data = await reader.read(65536)
                if not data:
                    break
                await self.flowing.wait()   # (read while flowing, paused since: held, as a stopped process would)
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()


class Renewer:
    """Renews a Lease upstream every second (directly, not through the proxy), as its holder would."""

    def __init__(self, server, ns: str, name: str):
        self.server, self.ns, self.name = server, ns, name
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)

    def _run(self) -> None:
        while not self.stop.wait(1):
            self.server.request("PATCH", leases_path(self.ns, self.name), {"spec": {"renewTime": now_micro()}},
                                content_type="application/merge-patch+json")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    with served(tmp_path_factory.mktemp("silent-upstream")) as up:
        status, _, body = up.request("POST", leases_path("team"), held_lease("team", "api-leader", "api-1", duration=5))
        assert status == 201, body
        yield up


def page(server, cookie: str, path: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    conn.request("GET", path, headers={"Cookie": cookie})
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    assert resp.status == 200, (path, resp.status, text[:300])
    return text


def share_page(server, token: str) -> str:
    """A share link opened by someone without an account: its redirect, then its page."""
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    conn.request("GET", f"/s/{token}/")
    resp = conn.getresponse()
    resp.read()
    cookie = "; ".join(v.split(";")[0] for k, v in resp.getheaders() if k.lower() == "set-cookie")
    location = resp.getheader("Location")
    conn.close()
    assert resp.status == 302 and location, resp.status
    return page(server, cookie, location)


def banner(text: str) -> str:
    return text.split('id="cluster-banner"')[1].split("</div>")[0]


def lease_state(text: str) -> str:
    row = text.split('id="lease-team--api-leader"')[1]
    return re.search(r"data-state-label>([^<]*)<", row).group(1)


def prod_state(server) -> str:
    line = next(x for x in server.manage("follow", "list").splitlines() if x.startswith("prod "))
    return line.split()[5]


@pytest.mark.slow
def test_a_silent_cluster_is_stale_everywhere_and_its_leases_are_not_guessed_expired(upstream, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("silent-follower")
    env = server_env(data_dir, **FOLLOWER_ENV, KUBEDASH_FOLLOW_SILENCE_SECONDS=str(SILENCE))
    with PausableProxy(upstream.tls_port) as proxy, Renewer(upstream, "team", "api-leader"), \
            served(data_dir, env=env) as here:
        kubeconfig = upstream.kubeconfig(data_dir / "prod.kubeconfig", "follower", "viewer")
        text = kubeconfig.read_text().replace(f":{upstream.tls_port}", f":{proxy.port}")
        Path(kubeconfig).write_text(text)
        here.manage("follow", "add", "prod", "--kubeconfig", str(kubeconfig))
        here.manage("shell", "-c", "from dashboard.access.tokens import ensure_user\n"
                                   "u = ensure_user('silence-admin', 'admin'); u.set_password('pw-silence-1'); u.save()")
        token = here.manage("shell", "-c", (
            "from dashboard.access.tokens import ensure_user\n"
            "from dashboard.web.share import create_link\n"
            "link, token = create_link(ensure_user('silence-sharer', 'editor'), kind='Lease', namespace='team',\n"
            "                          label_selector='', label='prod leaders', expiry='1h', cluster='prod')\n"
            "print(token)\n")).strip().splitlines()[-1]
        conn = http.client.HTTPConnection("127.0.0.1", here.http_port, timeout=30)
        cookie = log_in_form(conn, here.http_url, "silence-admin", "pw-silence-1")
        conn.close()
        leases = "/leases/?namespace=team&cluster=prod"

        def current() -> bool:
            text = page(here, cookie, leases)
            return ("api-leader" in text and "cluster-stale" not in banner(text) and lease_state(text) == "held"
                    and sample(scrape(here), "kubedash_follow_live", cluster="prod") == 1)

        eventually(current, 60, "prod to be followed, live, with api-leader held")
        assert sample(scrape(here), "kubedash_follow_stale", cluster="prod") == 0
        assert prod_state(here) == "live"

        proxy.pause()
        paused = time.monotonic()
        # Within the silence deadline (and the follower's next report), prod is stale ...
        eventually(lambda: sample(scrape(here), "kubedash_follow_stale", cluster="prod") == 1, 4 * SILENCE,
                   "/metrics to say prod is stale")
        print(f"stale {time.monotonic() - paused:.1f}s after the pause (silence deadline {SILENCE}s)")
        # ... and once api-leader's copy is past its 5 s duration in real time, it must still be
        # shown held, as of the last word, while upstream it is held indeed (renewed each second).
        status, _, copy = here.request("GET", f"/clusters/prod{leases_path('team', 'api-leader')}")
        assert status == 200, copy
        expiry = datetime.fromisoformat(copy["spec"]["renewTime"].replace("Z", "+00:00")) + timedelta(seconds=5)
        eventually(lambda: datetime.now(UTC) > expiry + timedelta(seconds=1), 30, "the copy's expiry to pass")
        status, _, direct = upstream.request("GET", leases_path("team", "api-leader"))
        assert status == 200 and direct["spec"]["holderIdentity"] == "api-1"
        text = page(here, cookie, leases)
        assert "Not live: no word from prod since" in banner(text), banner(text)
        assert "as of then" in banner(text)
        assert lease_state(text) == "held", "a lease nobody could see was shown expired"
        detail = page(here, cookie, "/leases/team/api-leader/?cluster=prod")
        assert "Not live: no word from prod since" in banner(detail)
        assert re.search(r"data-state-label>held<", detail), "the detail page guessed the lease expired"
        overview = page(here, cookie, "/")
        row = overview.split('id="cluster-prod"')[1].split("</tr>")[0]
        assert row.startswith(' class="is-stale"') and "not live: no word since" in row, row[:400]
        shared = share_page(here, token)
        assert "Not live: no word from prod since" in banner(shared) and lease_state(shared) == "held"
        metrics = scrape(here)
        assert sample(metrics, "kubedash_follow_stale", cluster="prod") == 1
        assert sample(metrics, "kubedash_follow_live", cluster="prod") == 0
        assert prod_state(here) == "stale"
        listed = here.manage("follow", "list")
        assert "no word from the API server" in listed or "stopped answering" in listed or \
            "connection" in listed, listed

        proxy.resume()
        resumed = time.monotonic()
        eventually(current, 90, "prod to be live again after the proxy resumed")
        print(f"live again {time.monotonic() - resumed:.1f}s after the proxy resumed")
        assert sample(scrape(here), "kubedash_follow_stale", cluster="prod") == 0
        assert prod_state(here) == "live"

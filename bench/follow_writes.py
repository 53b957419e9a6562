"""Editing a followed cluster: "Save" -> the mirrored page shows the change, p50 / p99.

Two kubedash servers on this machine: the upstream, and the server under test, which follows it
as "prod" (its maintenance leader runs the real follower) in own-credentials mode; the page user
stored a kubeconfig of an upstream editor. Each round loads a Lease's edit form (as a browser:
session cookie, CSRF token), changes the holder, posts the form and follows the redirect to the
object's page: measured from just before the POST until that page (on ?cluster=prod) shows the
new holder. That is the write through to the upstream, its answer mirrored into the copy, the
redirect and the render.

Ceiling: the same rounds on a local Lease of the server under test (the same form, the same
page, no upstream).

Usage: .venv/bin/python bench/follow_writes.py [--rounds 200]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from html import unescape
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine, pct, request  # noqa: E402
from pages import USER, Http, Server, lease_body, log_in  # noqa: E402

LEASES = "/apis/coordination.k8s.io/v1/namespaces/bench/leases"


def form_fields(html: str) -> dict:
    body = re.findall(r'<form method="post"[^>]*>(.*?)</form>', html, re.S)[-1]
    data = {}
    for m in re.finditer(r"<input([^>]*)>", body):
        attrs = dict(re.findall(r'(\w[\w-]*)="([^"]*)"', m.group(1)))
        if "name" in attrs and attrs.get("type") != "checkbox":
            data[attrs["name"]] = unescape(attrs.get("value", ""))
    for m in re.finditer(r'<textarea[^>]*name="([^"]+)"[^>]*>\n?(.*?)</textarea>', body, re.S):
        data[m.group(1)] = unescape(m.group(2))
    return data


def rounds(port: int, cookie: str, suffix: str, n: int, tag: str) -> list[float]:
    client = Http(port, cookie=cookie)
    edit, page = f"/leases/bench/w/edit/{suffix}", f"/leases/bench/w/{suffix}"
    out = []
    for i in range(n):
        status, _, html = client.call("GET", edit)
        assert status == 200, (status, html[:500])
        data = form_fields(html.decode())
        holder = f"{tag}-{i}"
        data["holder"] = holder
        started = time.perf_counter()
        status, headers, body = client.call("POST", edit, urlencode(data), "application/x-www-form-urlencoded")
        assert status == 302, (status, body[:2000])
        while True:
            status, _, html = client.call("GET", headers["location"])
            if status == 200 and holder.encode() in html:
                break
            if time.perf_counter() - started > 30:
                raise SystemExit(f"{page}: the change never showed")
        out.append(time.perf_counter() - started)
    client.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as up_dir, tempfile.TemporaryDirectory() as here_dir:
        up, here = Server(Path(up_dir)), Server(Path(here_dir))
        here.env.update(KUBEDASH_MAINTENANCE="1", KUBEDASH_MAINTENANCE_RETRY_PERIOD="0.5")
        try:
            up.start()
            here.start()
            for server in (up, here):
                status, body = request(server.port, "POST", LEASES, json.dumps(lease_body("w", "bench", "start")).encode(),
                                       {"Authorization": f"Bearer {server.token}", "Content-Type": "application/json"})
                assert status == 201, body
            follower, mine = Path(here_dir) / "follower.kubeconfig", Path(here_dir) / "mine.kubeconfig"
            for path, user, role in ((follower, "follower", "viewer"), (mine, "bench-editor", "editor")):
                up.manage("kubeconfig", user, "--role", role, "--server", f"https://127.0.0.1:{up.tls_port}",
                          "--output", str(path))
            here.manage("follow", "add", "prod", "--kubeconfig", str(follower), "--writes", "own-credentials")
            here.manage("shell", "-c", (
                "from pathlib import Path\nfrom django.contrib.auth.models import User\n"
                "from dashboard.access.models import Profile\nfrom dashboard.follow import following\n"
                "from dashboard.follow.models import Cluster\n"
                f"Profile.objects.filter(user__username={USER!r}).update(role='editor')\n"
                f"following.save_user_credentials(Cluster.objects.get(name='prod'), User.objects.get(username={USER!r}),"
                f" Path({str(mine)!r}).read_text())\n"))
            deadline = time.monotonic() + 60
            while "live" not in here.manage("follow", "list"):
                if time.monotonic() > deadline:
                    raise SystemExit("prod never became live:\n" + here.log_tail())
                time.sleep(0.5)
            cookie = log_in(here.port)
            rounds(here.port, cookie, "", 10, "warm")
            rounds(here.port, cookie, "?cluster=prod", 10, "warm")
            load = os.getloadavg()[0]
            local = sorted(rounds(here.port, cookie, "", args.rounds, "local"))
            prod = sorted(rounds(here.port, cookie, "?cluster=prod", args.rounds, "prod"))
            load_after = os.getloadavg()[0]
        finally:
            for server in (here, up):
                server.stop()
    print(f"machine: {machine()}; load average (1 min) {load:.1f} before, {load_after:.1f} after")
    print(f"{args.rounds} saves each: Save -> the page shows the change")
    for name, values in (("local Lease (ceiling)", local), ("followed Lease (prod)", prod)):
        print(f"  {name:24} p50 {pct(values, 50) * 1000:7.1f} ms   p99 {pct(values, 99) * 1000:7.1f} ms")
    print(f"  ratio followed / local:  p50 {pct(prod, 50) / pct(local, 50):.2f}x   "
          f"p99 {pct(prod, 99) / pct(local, 99):.2f}x")


if __name__ == "__main__":
    main()

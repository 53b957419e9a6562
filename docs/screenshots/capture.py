"""Capture the page screenshots in this folder from a running kubedash with some objects.

    .venv/bin/python docs/screenshots/capture.py http://127.0.0.1:8000 USER PASSWORD [--assume-live]

Needs Playwright for Python and Debian's Chromium (/usr/bin/chromium). --assume-live shows the
header's websocket state as "Live" for a server without the live consumer (the page gets a
WebSocket stand-in that opens and stays quiet, so the real wsOpen path runs).
"""
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

OUT = Path(__file__).resolve().parent
SHOTS = [  # (file, path, viewport width, height)
    ("overview.png", "/", 1280, 900),
    ("leases.png", "/leases/", 1280, 900),
    ("endpoints.png", "/endpoints/", 1280, 900),
    ("jobs.png", "/jobs/", 1280, 900),
    ("lease-detail.png", "/leases/demo/kube-controller-manager/", 1280, 900),
    ("leases-phone.png", "/leases/", 375, 812),
    ("overview-phone.png", "/", 375, 812),
    ("jobs-phone.png", "/jobs/", 375, 812),
]

QUIET_SOCKET = """
window.WebSocket = class {
  constructor(url) { this.url = url; this.readyState = 0;
                     setTimeout(() => { this.readyState = 1; this.onopen && this.onopen({type: "open"}); }, 50); }
  addEventListener() {}
  send() {}
  close() {}
};
"""


def main(base: str, user: str, password: str, assume_live: bool) -> None:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                     args=["--no-sandbox", "--disable-background-networking"])
        for name, path, width, height in SHOTS:
            ctx = browser.new_context(viewport={"width": width, "height": height},
                                      device_scale_factor=2 if width < 600 else 1)
            if assume_live:
                ctx.add_init_script(QUIET_SOCKET)
            page = ctx.new_page()
            page.goto(base + "/accounts/login/")
            page.fill("#id_username", user)
            page.fill("#id_password", password)
            page.click("button[type=submit]")
            page.wait_for_url(base + "/")
            page.goto(base + path)
            page.wait_for_timeout(1200)          # live.js has ticked
            page.screenshot(path=str(OUT / name), full_page=True)
            ctx.close()
        browser.close()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(args[0].rstrip("/"), args[1], args[2], "--assume-live" in sys.argv)

"""Delivery to real receivers on 127.0.0.1: a signed webhook that fails first (delivered once,
retries keep the id), email through Apprise's mailto:// to an SMTP server, the delivery log."""
import pytest

from conftest import eventually
from manifests import lease, write

from .receivers import Webhook, query

pytestmark = pytest.mark.slow


def test_webhook_failing_first_then_accepting_gets_each_message_once_signed(server):
    secret = b"s3cret"
    with Webhook(fail_first=2, secret=secret) as hook:
        server.manage("notify", "channel", "add", "hook", hook.url, "--secret", secret.decode())
        server.manage("notify", "rule", "add", "leader-moved", "--when", "lease-holder-changed", "--to", "hook",
                      "--namespace", "default", "--owner", "live-admin")
        write(server, "POST", "Lease", "default", "moved", lease("moved", holder="a"))
        # (the rule is loaded and its first sight of the lease remembered before the change)
        eventually(lambda: query(server, MEMOS, ("moved",)), what="the lease remembered")
        write(server, "PATCH", "Lease", "default", "moved", {"spec": {"holderIdentity": "b"}})
        eventually(lambda: hook.received, what="the message accepted")
        message = hook.received[0]
        assert message["state"] == "firing" and message["rule"] == "leader-moved"
        assert message["kind"] == "Lease" and message["name"] == "moved"
        assert message["details"] == {"from": "a", "to": "b"}
        assert message["url"].startswith("/leases/default/moved/")
        # Three tries (500, 500, 200), one id; nothing after the accepted one.
        assert len(hook.tries) == 3 and hook.bad_signatures == 0
        ids = {__import__("json").loads(body)["id"] for _, body in hook.tries}
        assert ids == {message["id"]}
        out = server.manage("notify", "list")
        assert "delivered attempts=3 http-5xx" in " ".join(out.split()), out
        # A second message (the next change) is the sentinel: the first was not sent again.
        write(server, "PATCH", "Lease", "default", "moved", {"spec": {"holderIdentity": "c"}})
        eventually(lambda: len(hook.received) == 2, what="the second message")
        assert hook.ids()[0] == message["id"] and hook.ids()[1] != message["id"]
        assert len(hook.tries) == 4


MEMOS = "SELECT memo FROM notifications_episode WHERE name = ?"

"""Delivery to real receivers on 127.0.0.1: a signed webhook that fails first (delivered once,
retries keep the id), email through Apprise's mailto:// to an SMTP server, the delivery log."""
import http.client
import subprocess
import sys
from urllib.parse import urlencode

import pytest

from conftest import ROOT, eventually, free_port, log_in_form, running
from manifests import job, lease, write

from .conftest import notify, notify_server
from .receivers import Mailbox, Webhook, query

pytestmark = pytest.mark.slow
NOW = "2026-01-01T00:00:00Z"


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
        out = server.manage("notify", "rule", "remove", "leader-moved")
        assert "rule leader-moved removed" in out
        assert "leader-moved" not in server.manage("notify", "list").split("DELIVERIES")[0]


MEMOS = "SELECT memo FROM notifications_episode WHERE name = ?"


def test_email_through_an_apprise_mailto_url(server):
    with Mailbox() as box:
        notify(server, f"channel add mail {box.url()}",
               "rule add job-broke --when job-failed --to mail --namespace mailed")
        write(server, "POST", "Job", "mailed", "nightly", job("nightly", ns="mailed"))
        code, _, out = server.request("PATCH", "/apis/batch/v1/namespaces/mailed/jobs/nightly/status", {"status": {
            "startTime": NOW, "conditions": [
                {"type": "FailureTarget", "status": "True", "reason": "DeadlineExceeded", "lastTransitionTime": NOW},
                {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "lastTransitionTime": NOW}]}},
            content_type="application/merge-patch+json")
        assert code == 200, out
        eventually(lambda: box.messages, what="the email")
        mail = box.messages[0]
        assert mail["To"] == "ops@example.com" and mail["From"].endswith("kubedash@example.com")
        assert mail["Subject"] == "[FIRING] job-broke: Job mailed/nightly"
        text = next(part.get_payload(decode=True).decode() for part in mail.walk()
                    if part.get_content_type() == "text/plain")
        assert "failed (DeadlineExceeded)" in text and "/jobs/mailed/nightly/" in text
        # The page and `notify list` show the channel masked: the scheme only.
        listed = server.manage("notify", "list")
        assert "mailto://…" in listed and str(box.port) not in listed


def test_a_channel_over_its_rate_gets_a_digest_and_a_test_message(tmp_path):
    # 3 messages a window (a minute; here 10 s). The receiver is down while six changes are
    # decided (their tries refused, retried): when it is up, more wait than there are slots, so
    # they go as a digest.
    s = notify_server(tmp_path, KUBEDASH_NOTIFY_PER_MINUTE="3", KUBEDASH_NOTIFY_RATE_WINDOW_SECONDS="10")
    port = free_port()
    with running(s):
        _ = s.admin_token
        notify(s, f"channel add limited http://127.0.0.1:{port}/hook",
               "rule add moves --when lease-holder-changed --to limited --namespace busy")
        for i in range(6):
            write(s, "POST", "Lease", "busy", f"l{i}", lease(f"l{i}", ns="busy", holder="a"))
        eventually(lambda: len(query(s, MEMOS_IN, ("busy",))) == 6, what="the leases remembered")
        for i in range(6):
            write(s, "PATCH", "Lease", "busy", f"l{i}", {"spec": {"holderIdentity": "b"}})
        # Six decided, and everything waiting tried and refused: each alone, or (when the engine
        # decided them in one batch, as it does under load) already folded into a refused digest.
        eventually(lambda: query(s, "SELECT COUNT(*) FROM notifications_outbox WHERE message_id NOT LIKE 'digest-%'")
                   [0][0] == 6 and query(s, "SELECT COUNT(*) FROM notifications_outbox WHERE status = 'pending' "
                                            "AND last_error <> 'refused'")[0][0] == 0
                   and query(s, "SELECT COUNT(*) FROM notifications_outbox WHERE last_error = 'refused'")[0][0] >= 1,
                   what="six messages decided, every waiting one refused")
        with Webhook(port=port) as hook:
            def covered():
                ids = [m["id"] for m in hook.received if not m.get("digest")]
                ids += [inner["id"] for m in hook.received if m.get("digest") for inner in m["messages"]]
                return ids if len(ids) >= 6 else None

            ids = eventually(covered, what="every change delivered, alone or in a digest")
            assert len(ids) == len(set(ids)) == 6, ids
            assert any(m.get("digest") for m in hook.received)
            notify(s, "channel test limited")
            eventually(lambda: any(m["state"] == "test" for m in hook.received), what="the test message")
            test = next(m for m in hook.received if m["state"] == "test")
            assert test["id"].startswith("test-") and "sent by manage.py notify" in test["summary"]
        sent = sorted(t for (t,) in query(s, "SELECT julianday(delivered_at) FROM notifications_outbox "
                                             "WHERE status = 'delivered'"))
        assert len(sent) == len(hook.received)
        assert all(later - first > 10 / 86400 for first, later in zip(sent, sent[3:])), "over 3 in a window"


def test_destinations_at_kubedash_itself_or_its_database_are_refused(server, tmp_path):
    # The command cannot know the server's own ports (it listens on none): the sender, which
    # does, refuses to send there, and says so in the log.
    notify(server, f"channel add itself http://127.0.0.1:{server.http_port}/hook",
           "rule add to-itself --when lease-holder-changed --to itself --namespace loop")
    write(server, "POST", "Lease", "loop", "l", lease("l", ns="loop", holder="a"))
    eventually(lambda: query(server, MEMOS_IN, ("loop",)), what="the lease remembered")
    write(server, "PATCH", "Lease", "loop", "l", {"spec": {"holderIdentity": "b"}})
    eventually(lambda: query(server, "SELECT status, last_error, attempts FROM notifications_outbox o JOIN "
                                     "notifications_channel c ON c.id = o.channel_id WHERE c.name = 'itself'")
               == [("failed", "destination", 1)], what="the message refused")
    # The database's port (PostgreSQL's, Redis's by default) is refused when the channel is added.
    for port in (5432, 6379):
        out = subprocess.run([sys.executable, "manage.py", "notify", "channel", "add", f"db{port}",
                              f"http://127.0.0.1:{port}/"], env=server.env, cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 1 and "kubedash's database or Redis" in out.stderr, out.stderr
    # Link-local and metadata addresses too, unless allowed.
    out = subprocess.run([sys.executable, "manage.py", "notify", "channel", "add", "meta",
                          "http://169.254.169.254/latest/"], env=server.env, cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 1 and "link-local or cloud metadata" in out.stderr, out.stderr
    assert "127.0.0.1" not in query(server, "SELECT shown FROM notifications_channel WHERE name = 'itself'")[0][0]


MEMOS_IN = "SELECT memo FROM notifications_episode WHERE namespace = ?"


def test_the_page_refuses_a_channel_at_kubedash_itself(server):
    """Added on the page (served by a process that listens), kubedash's own ports are refused at once."""
    server.manage("shell", "-c", "from dashboard.access.tokens import ensure_user\n"
                                 "u = ensure_user('page-admin', 'admin')\nu.set_password('page-password-1')\nu.save()\n")
    conn = http.client.HTTPConnection(server.host, server.http_port, timeout=30)
    cookie = log_in_form(conn, server.http_url, "page-admin", "page-password-1")
    csrf = cookie.split("csrftoken=")[1].split(";")[0]
    for port in (server.http_port, server.tls_port):
        form = urlencode({"csrfmiddlewaretoken": csrf, "channel-name": f"self-{port}",
                          "channel-url": f"http://127.0.0.1:{port}/hook"})
        conn.request("POST", "/notifications/channels/", body=form, headers={
            "Content-Type": "application/x-www-form-urlencoded", "Cookie": cookie, "Origin": server.http_url,
            "Referer": server.http_url + "/notifications/"})
        resp = conn.getresponse()
        page = resp.read().decode()
        assert resp.status == 400 and "kubedash itself" in page, (resp.status, page[-2000:])
    conn.close()
    assert not query(server, "SELECT name FROM notifications_channel WHERE name LIKE 'self-%'")

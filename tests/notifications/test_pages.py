"""/notifications/ through Django's test client: only admins add channels, URLs and secrets never
shown again (masked), destinations checked, rules made with the owner's rights, muting."""
import pytest

from datetime import timedelta

from django.utils import timezone

from dashboard.follow.secrets import decrypt
from dashboard.notifications.actions import purge_old
from dashboard.notifications.models import Channel, Notification, Outbox, Rule

pytestmark = pytest.mark.django_db

SLACK = "slack://T0000/B0000/XXXXSECRETXXXX"


def add_channel(client, name, url, secret=""):
    return client.post("/notifications/channels/", {"channel-name": name, "channel-url": url, "channel-secret": secret})


def test_only_admins_add_channels_and_urls_are_never_shown_again(login):
    viewer = login("viewer", "plain-viewer")
    assert add_channel(viewer, "ops", SLACK).status_code == 403
    assert not Channel.objects.exists()
    admin = login("admin", "chief")
    response = add_channel(admin, "ops", SLACK)
    assert response.status_code == 302
    channel = Channel.objects.get(name="ops")
    assert decrypt(channel.url).decode() == SLACK and SLACK.encode() not in bytes(channel.url)
    for client in (admin, viewer):
        page = client.get("/notifications/").content.decode()
        assert "slack://…" in page and "XXXXSECRET" not in page and "T0000" not in page
    assert 'aria-label="Send a test to ops"' in admin.get("/notifications/").content.decode()
    assert "Send a test" not in viewer.get("/notifications/").content.decode()


def test_channel_destinations_and_urls_are_checked(login):
    admin = login("admin", "chief")
    for url, words in (("http://127.0.0.1:5432/", "database or Redis"),
                       ("http://169.254.169.254/latest/meta-data", "link-local or cloud metadata"),
                       ("nosuchscheme://x", "not a URL Apprise understands"),
                       ("slack://T/B/C", "")):
        response = add_channel(admin, "c" + str(abs(hash(url)) % 1000), url)
        if words:
            assert response.status_code == 400 and words in response.content.decode(), url
    signed = add_channel(admin, "signed-slack", SLACK, secret="x")
    assert signed.status_code == 400 and "signs webhook" in signed.content.decode()


def test_rules_are_made_with_the_owners_rights_and_muted(login):
    limited = login("viewer", "team-a", namespaces=["team-a"])
    form = {"rule-name": "theirs", "rule-kind": "job-failed", "rule-namespace": "team-b", "rule-cluster": "local"}
    response = limited.post("/notifications/rules/", form)
    assert response.status_code == 400 and "not among this user" in response.content.decode()
    response = limited.post("/notifications/rules/", {**form, "rule-name": "ours", "rule-namespace": "team-a"})
    assert response.status_code == 302
    rule = Rule.objects.get(name="ours")
    assert rule.owner.username == "team-a" and rule.namespace == "team-a"
    bad = limited.post("/notifications/rules/", {**form, "rule-name": "slow", "rule-kind": "job-stalled",
                                                 "rule-namespace": "team-a"})
    assert bad.status_code == 400 and "needs --for" in bad.content.decode()
    # Someone else's rule: neither muted nor removed by them.
    other = login("viewer", "someone-else")
    assert other.post("/notifications/rules/ours/mute/", {"minutes": "60"}).status_code == 403
    assert limited.post("/notifications/rules/ours/mute/", {"minutes": "60"}).status_code == 302
    rule.refresh_from_db()
    assert rule.muted()
    assert "until" in limited.get("/notifications/").content.decode()
    assert limited.post("/notifications/rules/ours/remove/").status_code == 302
    assert not Rule.objects.filter(name="ours").exists()


def test_the_delivery_log_and_read_notifications_are_kept_for_a_while(login):
    admin = login("admin", "chief")
    add_channel(admin, "ops", SLACK)
    channel = Channel.objects.get(name="ops")
    old, recent = timezone.now() - timedelta(days=8), timezone.now() - timedelta(days=1)
    for i, (status, created) in enumerate([("delivered", old), ("failed", old), ("pending", old),
                                           ("delivered", recent)]):
        Outbox.objects.create(message_id=f"m{i}", channel=channel, payload={}, status=status, created=created)
    user = Rule._meta.get_field("owner").related_model.objects.get(username="chief")
    Notification.objects.create(user=user, message_id="n1", payload={}, read_at=timezone.now() - timedelta(days=31))
    Notification.objects.create(user=user, message_id="n2", payload={})
    assert purge_old() == 3
    assert sorted(Outbox.objects.values_list("message_id", flat=True)) == ["m2", "m3"]   # waiting, and recent
    assert list(Notification.objects.values_list("message_id", flat=True)) == ["n2"]


def test_send_a_test_queues_one_message_for_the_leader(login):
    admin, viewer = login("admin", "chief"), login("viewer", "plain-viewer")
    add_channel(admin, "ops", SLACK)
    assert viewer.post("/notifications/channels/ops/test/").status_code == 403
    assert admin.post("/notifications/channels/ops/test/").status_code == 302
    (row,) = Outbox.objects.all()
    assert row.message_id.startswith("test-") and row.status == "pending" and row.payload["state"] == "test"
    assert "sent by chief" in row.payload["summary"]
    assert row.message_id in admin.get("/notifications/").content.decode()   # in the delivery log

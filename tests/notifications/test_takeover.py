"""Exactly once across a leader's death: two processes of one deployment, the leader killed (-9)
between a decision and its delivery, and a change committed while no one leads; the survivor takes
over and sends each message once."""
import pytest
from cryptography.fernet import Fernet

from conftest import eventually, free_port, running, served_pair
from manifests import lease, write

from .conftest import NOTIFY_ENV, notify, notify_server
from .receivers import Webhook, query

pytestmark = pytest.mark.slow
POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)   # (with Redis: the processes' doorbell)


def leader(pair):
    leading = [s for s in pair if "notifications: this process evaluates" in s.log()]
    return leading[0] if len(leading) == 1 else None


@pytest.mark.parametrize("backend", ["sqlite", POSTGRES])
def test_a_leader_killed_between_decision_and_delivery_loses_and_repeats_nothing(tmp_path_factory, backend):
    port = free_port()   # the receiver: down until the leader is dead
    # (One key in every process: the channels' URLs are encrypted with it. On PostgreSQL each
    # process has a data dir of its own, where each would otherwise make a key of its own.)
    key = Fernet.generate_key().decode()
    with served_pair(tmp_path_factory, backend, **NOTIFY_ENV, KUBEDASH_CREDENTIALS_KEY=key) as pair:
        a = eventually(lambda: leader(pair), what="a leader")
        b = pair.b if a is pair.a else pair.a
        notify(a, f"channel add down http://127.0.0.1:{port}/hook",
               "rule add moved --when lease-holder-changed --to down --namespace ha")
        for name in ("l0", "l1"):
            write(b, "POST", "Lease", "ha", name, lease(name, ns="ha", holder="a"))
        eventually(lambda: len(pair.query("SELECT memo FROM notifications_episode")) == 2, what="leases remembered")
        write(b, "PATCH", "Lease", "ha", "l0", {"spec": {"holderIdentity": "b"}})
        # Decided (its outbox row written), not delivered: the receiver refuses connections.
        eventually(lambda: pair.query("SELECT attempts FROM notifications_outbox WHERE last_error = 'refused'"),
                   what="the decision, its delivery failing")
        a.kill()
        # Committed while nobody leads: no process evaluates it until the takeover.
        write(b, "PATCH", "Lease", "ha", "l1", {"spec": {"holderIdentity": "b"}})
        with Webhook(port=port) as hook:
            eventually(lambda: len(hook.received) >= 2, timeout=60, what="both messages after the takeover")
            assert "notifications: this process evaluates" in b.log()
            # The sentinel: one more change, decided and sent by the new leader.
            write(b, "PATCH", "Lease", "ha", "l0", {"spec": {"holderIdentity": "c"}})
            eventually(lambda: len(hook.received) >= 3, what="the sentinel")
            got = sorted((m["name"], m["details"]["from"], m["details"]["to"]) for m in hook.received)
            assert got == [("l0", "a", "b"), ("l0", "b", "c"), ("l1", "a", "b")]
            assert len(set(hook.ids())) == 3 == len(hook.tries)
            assert pair.query("SELECT status, COUNT(*) FROM notifications_outbox GROUP BY status") == [("delivered", 3)]


def test_killed_while_a_receiver_holds_the_answer_the_message_is_sent_again_with_its_id(tmp_path):
    """The documented window: a process killed after the receiver got a message and before it was
    marked delivered sends it again after the restart, with the same id (receivers dedupe by it)."""
    server = notify_server(tmp_path)
    with Webhook(hold_first=True) as hook:
        with running(server):
            _ = server.admin_token
            notify(server, f"channel add held {hook.url}",
                   "rule add held-moves --when lease-holder-changed --to held --namespace held")
            write(server, "POST", "Lease", "held", "l", lease("l", ns="held", holder="a"))
            eventually(lambda: query(server, "SELECT memo FROM notifications_episode"), what="the lease remembered")
            write(server, "PATCH", "Lease", "held", "l", {"spec": {"holderIdentity": "b"}})
            assert hook.held.wait(30), "the message never reached the receiver"
            server.kill()   # the receiver has it; the outbox does not know
        assert query(server, "SELECT status, attempts FROM notifications_outbox") == [("pending", 0)]
        with running(server):
            eventually(lambda: len(hook.received) == 2, timeout=60, what="the message sent again")
            first, again = hook.received
            assert first == again   # the same body: the same id, the receiver's to drop
            eventually(lambda: query(server, "SELECT status, attempts FROM notifications_outbox")
                       == [("delivered", 1)], what="marked delivered")

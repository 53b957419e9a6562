"""A commit in another process fires a rule at once: the leader's engine is rung by its own
process's watch-hub follower (kube/notify.listen_for_growth), resting (nobody watches there),
on SQLite (data_version), on PostgreSQL with Redis (publish/subscribe) and with Redis down (the
follower looks at the revision counter), not by a poll.

Every other way the engine could come to read the log is pushed past the waits: its rule
reload and safety poll (60 s), and the leader's own Lease renewal, a commit in its process that
rings it (retry period 60 s)."""
import pytest
from cryptography.fernet import Fernet

from conftest import eventually, free_port, sample, scrape, served_pair
from manifests import lease, write

from .conftest import NOTIFY_ENV, notify
from .receivers import Webhook

pytestmark = pytest.mark.slow
POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)
SLOW = dict(KUBEDASH_NOTIFY_RULES_RELOAD_SECONDS="60", KUBEDASH_WATCH_POLL_SECONDS="60",
            KUBEDASH_MAINTENANCE_RETRY_PERIOD="60", KUBEDASH_MAINTENANCE_RENEW_DEADLINE="200",
            KUBEDASH_MAINTENANCE_LEASE_SECONDS="300")
ARRIVAL = 20   # s: each message's generous bound on a loaded machine, far inside the 60 s above


def leader(pair):
    leading = [s for s in pair if "notifications: this process evaluates" in s.log()]
    return leading[0] if len(leading) == 1 else None


@pytest.mark.parametrize("backend, redis", [("sqlite", "none"), (POSTGRES, "up"), (POSTGRES, "down")])
def test_a_commit_in_another_process_fires_a_rule_at_once(tmp_path_factory, backend, redis):
    env = {**NOTIFY_ENV, **SLOW, "KUBEDASH_CREDENTIALS_KEY": Fernet.generate_key().decode()}
    if redis == "down":
        env["REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"   # (nothing listens there)
    with Webhook() as hook:
        # The rule is there before either process starts: the leader's engine loads it at once.
        def prepare(a):
            _ = a.admin_token   # (live-admin: the rule's owner)
            notify(a, f"channel add hook {hook.url}", "rule add moved --when lease-holder-changed --to hook "
                                                       "--namespace ring")

        with served_pair(tmp_path_factory, backend, prepare=prepare, **env) as pair:
            a = eventually(lambda: leader(pair), what="a leader")
            b = pair.b if a is pair.a else pair.a
            eventually(lambda: sample(scrape(a), "kubedash_notify_rules") == 1, what="the rule loaded")
            write(b, "POST", "Lease", "ring", "l", lease("l", ns="ring", holder="h0"))
            eventually(lambda: pair.query("SELECT memo FROM notifications_episode"), timeout=ARRIVAL,
                       what="the lease, written by the other process, seen by the engine")
            for n in range(1, 4):
                write(b, "PATCH", "Lease", "ring", "l", {"spec": {"holderIdentity": f"h{n}"}})
                eventually(lambda n=n: len(hook.received) == n, timeout=ARRIVAL,
                           what=f"the message for holder h{n}, committed by the other process")
            assert [(m["details"]["from"], m["details"]["to"]) for m in hook.received] == [
                ("h0", "h1"), ("h1", "h2"), ("h2", "h3")]
            metrics = scrape(a)
            # Rung while its hub rested: nobody watches in the leader's process.
            assert sample(metrics, "kubedash_watch_follower_running") == 0
            if redis == "down":
                assert sample(metrics, "kubedash_redis_errors_total", operation="subscribe") >= 1

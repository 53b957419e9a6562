"""Each rule kind firing and resolving on a real server, from the commits it decides on: --for and
--below, flapping within --for as one episode, a limited owner told nothing of other namespaces.
One webhook receives everything; each test works in a namespace of its own (its rule's scope)."""
import time
from datetime import datetime, timezone

import pytest

from conftest import eventually, sample, scrape
from manifests import endpoints, job, lease, micro, write

from .conftest import notify
from .receivers import Webhook

pytestmark = pytest.mark.slow
NOW = "2026-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def hook(server):
    with Webhook() as hook:
        notify(server, f"channel add rules-hook {hook.url}")
        yield hook


def states(hook, rule):
    return [state for state, _ in hook.states(rule)]


def wait_states(hook, rule, expected):
    eventually(lambda: len(states(hook, rule)) >= len(expected), what=f"{rule}: {expected}")
    assert states(hook, rule) == expected


def status(server, ns, name, body):
    code, _, out = server.request("PATCH", f"/apis/batch/v1/namespaces/{ns}/jobs/{name}/status", {"status": body},
                                  content_type="application/merge-patch+json")
    assert code == 200, out


def event(server, ns, name, reason, type_="Warning", about="crash"):
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    code, _, out = server.request("POST", f"/api/v1/namespaces/{ns}/events", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"kind": "Job", "namespace": ns, "name": about}, "type": type_, "reason": reason,
        "message": f"{reason} happened", "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        "source": {"component": "test"}})
    assert code == 201, out


def test_lease_unheld_fires_after_expiry_plus_for_and_resolves_when_held(server, hook):
    notify(server, "rule add unheld --when lease-unheld --for 1 --to rules-hook --namespace unheld")
    renewed = micro(datetime.now(timezone.utc))
    write(server, "POST", "Lease", "unheld", "l1", {**lease("l1", ns="unheld", holder="a", duration=1),
                                                     "spec": {"holderIdentity": "a", "leaseDurationSeconds": 1,
                                                              "renewTime": renewed}})
    # No write after this one: the expiry (1 s) and then --for (1 s) are the engine's timers.
    wait_states(hook, "unheld", ["firing"])
    message = hook.received[-1]
    assert message["name"] == "l1" and message["namespace"] == "unheld" and "expired" in message["summary"]
    write(server, "PATCH", "Lease", "unheld", "l1", {"spec": {"holderIdentity": "b", "leaseDurationSeconds": 3600,
                                                              "renewTime": micro(datetime.now(timezone.utc))}})
    wait_states(hook, "unheld", ["firing", "resolved"])
    fired, resolved = [m for m in hook.received if m["rule"] == "unheld"]
    assert fired["id"] != resolved["id"] and fired["id"].rsplit("-", 2)[0] == resolved["id"].rsplit("-", 2)[0]


def test_a_held_leases_renewals_decide_nothing_until_they_stop(server, hook):
    # Renewals of a held lease are skipped by the engine (their content, as the rules read it,
    # only moves the expiry later); past the first expiry they were renewed beyond, the lease is
    # still held (the timer set then reads it again). A holder change is the barrier: every
    # renewal before it was evaluated when its message is out.
    notify(server, "rule add renewed-unheld --when lease-unheld --to rules-hook --namespace renewed",
           "rule add renewed-moved --when lease-holder-changed --to rules-hook --namespace renewed")

    def renew(holder):
        write(server, "PATCH", "Lease", "renewed", "l1", {"spec": {"holderIdentity": holder,
                                                                   "renewTime": micro(datetime.now(timezone.utc))}})

    write(server, "POST", "Lease", "renewed", "l1", {**lease("l1", ns="renewed", holder="a", duration=5),
                                                      "spec": {"holderIdentity": "a", "leaseDurationSeconds": 5,
                                                               "renewTime": micro(datetime.now(timezone.utc))}})
    started = time.monotonic()
    while time.monotonic() - started < 7:   # past the first expiry (5 s)
        renew("a")
        time.sleep(0.5)
    renew("b")
    wait_states(hook, "renewed-moved", ["firing"])
    assert states(hook, "renewed-unheld") == []
    # Its renewals stop: it expires (5 s), fires once; renewed again, it resolves.
    wait_states(hook, "renewed-unheld", ["firing"])
    renew("b")
    wait_states(hook, "renewed-unheld", ["firing", "resolved"])
    assert states(hook, "renewed-moved") == ["firing"]


def test_job_failed_fires_and_resolves_when_the_job_goes(server, hook):
    notify(server, "rule add failed --when job-failed --to rules-hook --namespace jobfail")
    write(server, "POST", "Job", "jobfail", "crash", job("crash", ns="jobfail"))
    status(server, "jobfail", "crash", {"startTime": NOW, "failed": 7, "conditions": [
        {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": NOW},
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": NOW}]})
    wait_states(hook, "failed", ["firing"])
    assert hook.received[-1]["details"]["reason"] == "BackoffLimitExceeded"
    write(server, "DELETE", "Job", "jobfail", "crash")
    wait_states(hook, "failed", ["firing", "resolved"])


def test_job_succeeded_fires_once(server, hook):
    notify(server, "rule add succeeded --when job-succeeded --to rules-hook --namespace jobok")
    write(server, "POST", "Job", "jobok", "done", job("done", ns="jobok", completions=1))
    status(server, "jobok", "done", {"startTime": NOW, "completionTime": NOW, "succeeded": 1, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": NOW},
        {"type": "Complete", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": NOW}]})
    wait_states(hook, "succeeded", ["firing"])
    # Written again (its labels): the same fact, no second message; a second Job is the sentinel.
    write(server, "PATCH", "Job", "jobok", "done", {"metadata": {"labels": {"seen": "yes"}}})
    write(server, "POST", "Job", "jobok", "done2", job("done2", ns="jobok", completions=1))
    status(server, "jobok", "done2", {"startTime": NOW, "completionTime": NOW, "succeeded": 1, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": NOW},
        {"type": "Complete", "status": "True", "reason": "CompletionsReached", "lastTransitionTime": NOW}]})
    eventually(lambda: len(states(hook, "succeeded")) == 2, what="the second job's message")
    assert [n for _, n in hook.states("succeeded")] == ["done", "done2"]


def test_job_stalled_fires_without_progress_and_resolves_on_progress(server, hook):
    notify(server, "rule add stalled --when job-stalled --for 1 --to rules-hook --namespace jobstall")
    write(server, "POST", "Job", "jobstall", "slow", job("slow", ns="jobstall", completions=3))
    status(server, "jobstall", "slow", {"startTime": NOW, "active": 1})
    wait_states(hook, "stalled", ["firing"])
    status(server, "jobstall", "slow", {"succeeded": 1})
    wait_states(hook, "stalled", ["firing", "resolved"])


def test_endpoints_below_for_flapping_within_for_is_one_episode(server, hook):
    notify(server, "rule add notready --when endpoints-not-ready --below 50 --for 3 --to rules-hook "
                   "--namespace eps")
    ips, down = ("10.0.0.1",), ("10.0.0.2", "10.0.0.3", "10.0.0.4")
    write(server, "POST", "Endpoints", "eps", "web", endpoints("web", ns="eps", ips=ips, not_ready=down))
    wait_states(hook, "notready", ["firing"])
    assert hook.received[-1]["details"] == {"ready": 1, "total": 4, "percent": 25.0}
    # Flapping, each state shorter than --for: the episode stays open, nothing is sent...
    for _ in range(3):
        _put(server, endpoints("web", ns="eps", ips=ips + down))
        _put(server, endpoints("web", ns="eps", ips=ips, not_ready=down))
    # ...until it stays good for --for: one resolution.
    _put(server, endpoints("web", ns="eps", ips=ips + down))
    wait_states(hook, "notready", ["firing", "resolved"])
    # Bad for less than --for, then good: no episode at all. The sentinel: a second object's episode.
    _put(server, endpoints("web", ns="eps", ips=ips, not_ready=down))
    _put(server, endpoints("web", ns="eps", ips=ips + down))
    write(server, "POST", "Endpoints", "eps", "empty", endpoints("empty", ns="eps", ips=(), not_ready=("10.0.0.9",)))
    eventually(lambda: len(states(hook, "notready")) == 3, what="the sentinel's episode")
    assert hook.states("notready") == [("firing", "web"), ("resolved", "web"), ("firing", "empty")]


def _put(server, obj):
    code, _, out = server.request("PUT", f"/api/v1/namespaces/{obj['metadata']['namespace']}/endpoints/"
                                         f"{obj['metadata']['name']}", obj)
    assert code == 200, out


def test_warning_event_with_reason(server, hook):
    notify(server, "rule add warnings --when warning-event --reason ^Back --to rules-hook --namespace evs")
    event(server, "evs", "e1", "Unhealthy")             # not matching --reason
    event(server, "evs", "e2", "Started", type_="Normal")  # not a warning
    event(server, "evs", "e3", "BackOff")                # the sentinel: after the other two
    wait_states(hook, "warnings", ["firing"])
    message = hook.received[-1]
    assert message["name"] == "e3" and message["details"]["reason"] == "BackOff"
    assert message["details"]["object"] == {"kind": "Job", "name": "crash"}
    assert len(states(hook, "warnings")) == 1


def test_a_namespace_limited_owner_is_not_told_of_other_namespaces(server, hook):
    server.manage("shell", "-c", "from dashboard.access.tokens import ensure_user; "
                                 "u = ensure_user('team-a-viewer', 'viewer'); p = u.kube_profile; "
                                 "p.namespaces = ['team-a']; p.save()")
    notify(server, "rule add team-a-moves --when lease-holder-changed --to rules-hook --owner team-a-viewer")
    for ns in ("team-b", "team-a"):
        write(server, "POST", "Lease", ns, "leader", lease("leader", ns=ns, holder="x"))
    eventually(lambda: _remembered(server, "team-a"), what="team-a's lease remembered")
    write(server, "PATCH", "Lease", "team-b", "leader", {"spec": {"holderIdentity": "y"}})
    write(server, "PATCH", "Lease", "team-a", "leader", {"spec": {"holderIdentity": "y"}})   # the sentinel
    eventually(lambda: hook.states("team-a-moves"), what="team-a's change")
    assert [m["namespace"] for m in hook.received if m["rule"] == "team-a-moves"] == ["team-a"]
    assert not _remembered(server, "team-b")


def _remembered(server, ns):
    from .receivers import query
    return query(server, "SELECT e.memo FROM notifications_episode e JOIN notifications_rule r ON r.id = e.rule_id "
                         "WHERE r.name = 'team-a-moves' AND e.namespace = ?", (ns,))


def test_metrics_count_decisions_and_deliveries(server, hook):
    text = scrape(server)
    assert sample(text, "kubedash_notify_decisions_total", state="firing") >= 1
    assert sample(text, "kubedash_notify_deliveries_total", scheme="webhook") >= 1
    assert sample(text, "kubedash_notify_outbox_oldest_seconds") >= 0
    assert sample(text, "kubedash_notify_rules") >= 1

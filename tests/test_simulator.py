"""The demo simulator against a live server: it drives the API as a client, every write is
accepted, and what it leaves behind (and the history a watch replays) looks like a cluster
at work: leases renewed and changing hands, endpoints flapping, jobs progressing."""
from __future__ import annotations

import re
import subprocess
import sys
import uuid

import pytest

from conftest import ROOT

from dashboard.web.simulator import format_indexes, micro_time, parse_indexes, parse_time

LEASES = "/apis/coordination.k8s.io/v1"
CORE = "/api/v1"
BATCH = "/apis/batch/v1"


# -- pure helpers -------------------------------------------------------------------------

def test_index_lists_round_trip():
    assert format_indexes([]) == ""
    assert format_indexes([5, 0, 1, 2, 3]) == "0-3,5"
    assert format_indexes([1, 3, 4, 7]) == "1,3-4,7"
    assert parse_indexes("0-3,5") == {0, 1, 2, 3, 5}
    assert parse_indexes("") == set()
    assert parse_indexes(format_indexes(range(0, 20, 3))) == set(range(0, 20, 3))


def test_micro_time_has_six_digits_and_parses_back():
    text = micro_time(1_800_000_000.123456)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", text)
    assert abs(parse_time(text) - 1_800_000_000.123456) < 1e-5


# -- against the live server ----------------------------------------------------------------

def watch_history(server, path: str, kind: str, rv: str, namespaces: set[str]) -> list[dict]:
    """Every event for `kind` in `namespaces` since resourceVersion rv, replayed from the
    revision log. (The kind is checked too: other tests' namespaces share the server.)"""
    events = []
    with server.watch(f"{path}?watch=true&resourceVersion={rv}&timeoutSeconds=3") as w:
        assert w.status == 200
        while (event := w.next(timeout=15)) is not None:
            obj = event["object"]
            if obj.get("kind") == kind and obj["metadata"].get("namespace") in namespaces:
                events.append(event)
    return events


@pytest.fixture(scope="module")
def run(kube_server):
    """One simulator run (speed 5 for 12 s: a minute of cluster life) in fresh namespaces.
    A minute is enough for the flapping `batch-operator` lease to change hands."""
    tag = uuid.uuid4().hex[:6]
    namespaces = [f"sim-{tag}-a", f"sim-{tag}-b", f"sim-{tag}-c"]
    # A write of our own marks where the run starts in the revision log (a list of an empty
    # store would say resourceVersion "0", which a watch reads as "from now").
    status, _, before = kube_server.request("POST", f"{LEASES}/namespaces/sim-{tag}-marker/leases",
                                            {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                             "metadata": {"name": "start"}, "spec": {}})
    assert status == 201, before
    token = kube_server.token("simulator-test", "editor")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "simulate", "--server", kube_server.http_url,
         f"--token={token}", "--namespaces", ",".join(namespaces),   # "=": a token may start with "-"
         "--duration", "12", "--speed", "5", "--seed", "1"],
        env=kube_server.env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    return {"proc": proc, "namespaces": namespaces, "rv": before["metadata"]["resourceVersion"]}


def items(server, path):
    status, _, body = server.request("GET", path)
    assert status == 200, body
    return body["items"]


def test_simulator_runs_without_errors(run):
    proc = run["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = re.search(r"simulator summary: writes=(\d+) conflicts=(\d+) errors=(\d+) reads=(\d+)", proc.stdout)
    assert summary, proc.stdout + proc.stderr
    writes, conflicts, errors, reads = map(int, summary.groups())
    # Every write accepted; 409s (losing a race for a lease) are normal and counted apart.
    assert errors == 0, proc.stdout + proc.stderr
    # Paced: 5-20 writes/s at speed 1, so about 25-100/s at speed 5 for 12 s.
    assert 150 <= writes <= 1500, proc.stdout
    assert reads > 0


def test_leases_are_held_renewed_and_change_hands(kube_server, run):
    ns = set(run["namespaces"])
    leases = [o for n in run["namespaces"] for o in items(kube_server, f"{LEASES}/namespaces/{n}/leases")]
    assert {o["metadata"]["name"] for o in leases} == {
        "kube-scheduler", "kube-controller-manager", "payments-api-leader", "batch-operator"}
    for lease in leases:
        spec = lease["spec"]
        assert spec["leaseDurationSeconds"] >= 1
        assert re.fullmatch(r".+\.\d{6}Z", spec["renewTime"])

    history = watch_history(kube_server, f"{LEASES}/leases", "Lease", run["rv"], ns)
    by_lease: dict[str, list[dict]] = {}
    for event in history:
        by_lease.setdefault(event["object"]["metadata"]["name"], []).append(event["object"]["spec"])
    # Every lease was held by someone; holders renewed (renewTime moved forward while held;
    # a holder that crashes early may leave a lease with few renewals, so: most of them).
    renewed = 0
    for name, specs in by_lease.items():
        held = [s for s in specs if s.get("holderIdentity")]
        assert held, name
        renewals = sorted({parse_time(s["renewTime"]) for s in held})
        renewed += len(renewals) >= 3
    assert renewed >= 3, by_lease
    # Some lease changed hands (a takeover after a crash, or after a release).
    assert any(s.get("leaseTransitions", 0) > 0 for specs in by_lease.values() for s in specs)
    holders = {name: {s.get("holderIdentity") for s in specs if s.get("holderIdentity")}
               for name, specs in by_lease.items()}
    assert any(len(h) > 1 for h in holders.values()), holders


def test_endpoints_flip_between_ready_and_not_ready(kube_server, run):
    ns = set(run["namespaces"])
    objects = [o for n in run["namespaces"] for o in items(kube_server, f"{CORE}/namespaces/{n}/endpoints")]
    assert {o["metadata"]["name"] for o in objects} == {"web", "payments", "search", "ledger-db"}
    for obj in objects:
        subsets = obj["subsets"]
        count = sum(len(s.get("addresses", [])) + len(s.get("notReadyAddresses", [])) for s in subsets)
        assert 3 <= count <= 8
        assert all(1 <= len(s.get("ports", [])) <= 3 for s in subsets)
    web = next(o for o in objects if o["metadata"]["name"] == "web")
    some = (web["subsets"][0].get("addresses") or web["subsets"][0]["notReadyAddresses"])[0]
    assert some["targetRef"]["kind"] == "Pod" and some["nodeName"]

    # Over the run, some address was seen both ready and not ready.
    seen: dict[tuple[str, str], set[bool]] = {}
    for event in watch_history(kube_server, f"{CORE}/endpoints", "Endpoints", run["rv"], ns):
        obj = event["object"]
        for subset in obj.get("subsets") or []:
            for ready, key in ((True, "addresses"), (False, "notReadyAddresses")):
                for address in subset.get(key) or []:
                    seen.setdefault((obj["metadata"]["name"], address["ip"]), set()).add(ready)
    assert any(states == {True, False} for states in seen.values()), seen


def test_jobs_progress(kube_server, run):
    ns = set(run["namespaces"])
    jobs = [o for n in run["namespaces"] for o in items(kube_server, f"{BATCH}/namespaces/{n}/jobs")]
    assert 1 <= len(jobs) <= 12
    history = watch_history(kube_server, f"{BATCH}/jobs", "Job", run["rv"], ns)
    statuses = [e["object"].get("status") or {} for e in history]
    specs = [e["object"]["spec"] for e in history]
    assert any(s.get("startTime") for s in statuses)
    assert any((s.get("succeeded") or 0) > 0 for s in statuses)
    assert any((s.get("ready") or 0) > 0 for s in statuses)
    assert {"Indexed", "NonIndexed"} <= {s["completionMode"] for s in specs}
    for event in history:
        obj = event["object"]
        status, spec = obj.get("status") or {}, obj["spec"]
        assert (status.get("ready") or 0) <= (status.get("active") or 0)
        if spec["completionMode"] == "Indexed" and status.get("completedIndexes"):
            assert len(parse_indexes(status["completedIndexes"])) == status["succeeded"]

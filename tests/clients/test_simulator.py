"""The demo simulator against a live server: it drives the API as a client, every write is
accepted, and what it leaves behind (and the history a watch replays) looks like a cluster
at work: leases renewed and changing hands, endpoints flapping, jobs progressing."""
from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
import time
import uuid

import pytest

from conftest import ROOT

from dashboard.demo.client import Client, Response, Stats
from dashboard.demo.jobs import format_indexes, parse_indexes, parse_time
from dashboard.demo.leases import micro_time
from dashboard.demo.cluster import Simulation

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


# -- against an in-memory API: determinism, and a long run checked by the kinds' own rules ----

class FakeApi(Client):
    """Just enough of the API for the simulator: objects by path, resourceVersion conflicts,
    generateName, /status, merge-patch of spec, and each kind's own validation (status rules
    of Jobs included). Every request is logged."""

    def __init__(self):
        super().__init__("http://fake", "token", Stats(log=lambda line: None))
        self.objects: dict[str, dict] = {}
        self.rv = 0
        self.log: list[tuple] = []

    def raw(self, method, path, body=None, content_type="application/json"):
        from dashboard.batch import strategy as jobs
        from dashboard.coordination import strategy as leases
        from dashboard.core import strategy as endpoints
        from dashboard.events import strategy as events

        path, _, _query = path.partition("?")
        self.log.append((method, re.sub(r"\.[0-9a-f]{14,}$", "._", path), _without_times(body)))
        body = copy.deepcopy(body)
        subresource = "status" if path.endswith("/status") else ""
        path = path.removesuffix("/status")
        plurals = {"leases": leases, "endpoints": endpoints, "jobs": jobs, "events": events}
        parts = path.strip("/").split("/")
        collection = parts[-1] in plurals          # .../namespaces/NS/PLURAL[/NAME]
        strategy = plurals[parts[-1] if collection else parts[-2]]
        if method == "GET" and collection:
            prefix = path + "/"
            return Response(200, {"items": [copy.deepcopy(o) for k, o in self.objects.items() if k.startswith(prefix)]})
        if method == "POST":
            meta = body["metadata"]
            if not meta.get("name"):
                self.rv += 1
                meta["name"] = f"{meta['generateName']}{self.rv:05d}"
            path = f"{path}/{meta['name']}"
            if path in self.objects:
                return Response(409, {"reason": "AlreadyExists"})
            return self._store(path, body, strategy, None, 201)
        current = self.objects.get(path)
        if method == "GET":
            return Response(200, copy.deepcopy(current)) if current else Response(404, {"reason": "NotFound"})
        if method == "DELETE":
            return Response(200, {"status": "Success"}) if self.objects.pop(path, None) else Response(404, {})
        if method == "PATCH":
            if current is None:
                return Response(404, {"reason": "NotFound"})
            new = copy.deepcopy(current)
            if "spec" in body:
                new["spec"].update(body["spec"])
            else:
                new.update(body)      # (an Event's count and lastTimestamp)
            return self._store(path, new, strategy, current, 200)
        # PUT
        if current is None:
            if subresource or strategy is jobs:
                return Response(404, {"reason": "NotFound"})
            return self._store(path, body, strategy, None, 201)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            return Response(409, {"reason": "Conflict"})
        if subresource:
            new = copy.deepcopy(current)
            new["status"] = body.get("status") or {}
            strategy.normalize(new)
            causes = strategy.validate_status_update(new, current)
            if causes:
                return Response(422, {"reason": "Invalid", "message": repr(causes)})
            return self._store(path, new, None, current, 200)
        return self._store(path, body, strategy, current, 200)

    def _store(self, path, obj, strategy, old, status):
        obj["metadata"]["uid"] = old["metadata"]["uid"] if old else f"uid-{self.rv + 1}"
        if strategy is not None:
            strategy.default(obj)
            if old is None and hasattr(strategy, "prepare_for_create"):
                strategy.prepare_for_create(obj)
            causes = strategy.validate(obj)
            if causes:
                return Response(422, {"reason": "Invalid", "message": repr(causes)})
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[path] = obj
        return Response(status, copy.deepcopy(obj))


def _without_times(body):
    """A request minus what depends on the wall clock (timestamps, resourceVersions, Event
    names: <object>.<nanoseconds in hex>)."""
    text = json.dumps(body, sort_keys=True) if body is not None else ""
    text = re.sub(r'\.[0-9a-f]{14,}"', '._"', text)
    return re.sub(r'"(\d{4}-[^"]*Z|\d+)"', '"_"', text)


def fake_run(seed: int, speed: float, seconds: float, story_seconds: float | None = None) -> FakeApi:
    """Run for `seconds`; with story_seconds, until that much cluster life has passed (the
    timeline pauses its story when this loaded machine stalls it), for at most `seconds`."""
    api = FakeApi()
    sim = Simulation(api, ["demo", "payments", "batch"], speed=speed, seed=seed)
    sim.setup()
    if story_seconds is None:
        sim.run(duration=seconds)
        return api
    deadline = time.monotonic() + seconds
    while sim.now * speed < story_seconds and time.monotonic() < deadline:
        sim.run(duration=0.25)
    return api


def test_a_seed_replays_the_same_story():
    first, second = fake_run(7, 100, 1.5), fake_run(7, 100, 1.5)
    common = min(len(first.log), len(second.log))
    assert common > 300
    assert first.log[:common] == second.log[:common]
    other = fake_run(8, 100, 1.5)
    assert other.log[:common] != first.log[:common]


def test_a_long_run_keeps_to_the_rules():
    """Ten minutes of cluster life (two seconds, or more on a loaded machine): every write passes
    the kinds' validation (Job status transitions and Events included), and the number of Jobs
    stays bounded."""
    api = fake_run(3, 300, 60.0, story_seconds=600)
    stats = api.stats
    assert stats.errors == 0, stats.by_kind
    assert stats.writes > 1000
    jobs = [o for k, o in api.objects.items() if "/jobs/" in k]
    assert 1 <= len(jobs) <= 12
    deleted = {p for m, p, _ in api.log if m == "DELETE"}
    assert deleted, "finished jobs are cleaned up"
    reasons = {c["reason"] for m, p, b in api.log if p.endswith("/status") and b
               for c in json.loads(b).get("status", {}).get("conditions", [])}
    # Every ending was taken, each through the interim condition the status rules require.
    assert {"CompletionsReached", "BackoffLimitExceeded", "FailedIndexes", "JobSuspended", "JobResumed"} <= reasons
    # ... and recorded as the job controller, the kubelets and the electors would (client-go's recorder).
    recorded = {json.loads(b)["reason"] for m, p, b in api.log if m == "POST" and p.endswith("/events")}
    assert {"SuccessfulCreate", "Completed", "BackoffLimitExceeded", "FailedIndexes", "Suspended", "Resumed",
            "Unhealthy", "LeaderElection"} <= recorded
    assert any(m == "PATCH" and p.split("/")[-2] == "events" for m, p, _ in api.log), "correlated: count + 1"


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
        # The simulator's User-Agent names its field manager, so History can say who wrote.
        assert {m["manager"] for m in lease["metadata"]["managedFields"]} == {"kubedash-simulator"}

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

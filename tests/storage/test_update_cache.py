"""PostgreSQL's update cache (dashboard/kube/storage/objcache.py) through two real server processes.

Each process computes a PUT that names the resourceVersion it holds from its cached object, not
from a read; the conditional write checks the typed row still holds that revision. Two processes
on one database change the object behind each other's back, so each one's cache goes stale: no
answer may come from a stale entry (no false 409, no false "unchanged", no lost write, no write
to a re-created object of the same name). /metrics shows the cache was used (hits) and went
stale (stale), so these tests do exercise it.
"""
from __future__ import annotations

import re
import uuid

import pytest

from conftest import served_pair
from manifests import collection, make, write

pytestmark = pytest.mark.postgres   # two processes on a PostgreSQL database (and Redis)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    with served_pair(tmp_path_factory, "postgres", KUBEDASH_WATCH_POLL_SECONDS="30") as servers:
        yield servers


def put(server, obj: dict, label: str | None = None, **query):
    """PUT obj back with one more label (None: as it is); (status, answer)."""
    body = {**obj, "metadata": {**obj["metadata"]}}
    if label:
        body["metadata"]["labels"] = {**(obj["metadata"].get("labels") or {}), label: "x"}
    m = body["metadata"]
    path = collection("Lease", m["namespace"]) + f"/{m['name']}"
    if query:
        path += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    status, _, out = server.request("PUT", path, body)
    return status, out


def get(server, ns: str, name: str) -> dict:
    status, _, out = server.request("GET", collection("Lease", ns) + f"/{name}")
    assert status == 200, out
    return out


def cache_counts(server) -> dict[str, float]:
    status, _, text = server.request("GET", "/metrics")
    assert status == 200
    text = text.decode() if isinstance(text, bytes) else str(text)
    found = re.findall(r'^kubedash_update_cache_total\{outcome="(\w+)"\} (\S+)$', text, re.M)
    return {outcome: float(value) for outcome, value in found}


def rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])


def test_two_processes_renewing_in_turns_lose_no_write(pair):
    """Two processes' clients renew one Lease in turns, each PUTting the object it last got back:
    a PUT with the current resourceVersion succeeds (computed from the cache when the process
    wrote or read it last), a PUT with an older one is 409 (the other process wrote since: the
    cached try finds the object changed), and the final object carries every accepted write."""
    a, b = pair.a, pair.b
    before = {s: cache_counts(s) for s in (a, b)}
    ns, name = f"turns-{uuid.uuid4().hex[:6]}", "held"
    current = write(a, "POST", "Lease", ns, name, make("Lease", ns, name))
    last = {a: current, b: get(b, ns, name)}
    accepted, writes = set(), 0
    for turn in range(8):
        for label, server, other in (("a", a, b), ("b", b, a)):
            mine = last[server]
            tag = f"{label}{turn}"
            status, out = put(server, mine, tag)
            if rv(mine) == rv(current):
                assert status == 200, out
            else:   # the other process wrote since this client's object: its cache is stale
                assert status == 409, out
                assert out["reason"] == "Conflict", out
                # This client gets the current object: every other turn from the other
                # process's answer, else by a GET through its own process; then renews again.
                mine = last[other] if turn % 2 else get(server, ns, name)
                assert rv(mine) == rv(current)
                status, out = put(server, mine, tag)
                assert status == 200, out
            assert rv(out) > rv(current)
            accepted.add(tag)
            writes += 1
            current = last[server] = out
            # The same process renews again at once: computed from the object it just wrote.
            status, out = put(server, current, tag + "-again")
            assert status == 200, out
            accepted.add(tag + "-again")
            writes += 1
            current = last[server] = out
    final = get(a, ns, name)
    assert final == get(b, ns, name)
    assert accepted <= set(final["metadata"]["labels"]), "a write was lost"
    assert rv(final) == rv(current)
    rows = pair.query("SELECT type FROM kube_revision WHERE kind = 'Lease' AND namespace = %s AND name = %s",
                      (ns, name))
    assert [t for (t,) in rows] == ["ADDED"] + ["MODIFIED"] * writes
    for server in (a, b):   # both processes computed from their cache, and both found it stale
        after = cache_counts(server)
        assert after.get("hit", 0) - before[server].get("hit", 0) >= 8, after
        assert after.get("stale", 0) - before[server].get("stale", 0) >= 4, after


def test_stale_cache_gives_no_false_unchanged(pair):
    """b holds the object it wrote; a changes it. The same body PUT again through b (identical
    to b's cached object: a no-op against the cache) is 409, not "unchanged"; with the current
    resourceVersion an identical PUT is the real no-op (200, resourceVersion kept)."""
    a, b = pair.a, pair.b
    ns, name = f"noop-{uuid.uuid4().hex[:6]}", "held"
    write(a, "POST", "Lease", ns, name, make("Lease", ns, name))
    status, held = put(b, get(b, ns, name), "b")
    assert status == 200, held
    status, changed = put(a, get(a, ns, name), "a")
    assert status == 200, changed
    status, out = put(b, held)
    assert status == 409, out
    assert get(b, ns, name) == changed
    status, out = put(b, changed)   # b's cache is at changed's revision now (the 409's read)
    assert status == 200 and out == changed, out


def test_recreated_object_is_not_written_with_an_old_resource_version(pair):
    """b writes a Lease (and caches it); a deletes it and creates another of the same name.
    b's client PUTs with the old resourceVersion: 409, and the new object is untouched."""
    a, b = pair.a, pair.b
    ns, name = f"again-{uuid.uuid4().hex[:6]}", "held"
    write(a, "POST", "Lease", ns, name, make("Lease", ns, name))
    status, held = put(b, get(b, ns, name), "old")
    assert status == 200, held
    write(a, "DELETE", "Lease", ns, name)
    recreated = write(a, "POST", "Lease", ns, name, make("Lease", ns, name))
    assert recreated["metadata"]["uid"] != held["metadata"]["uid"]
    for body in (held, {**held, "metadata": {k: v for k, v in held["metadata"].items() if k != "uid"}}):
        status, out = put(b, body, "stale-write")
        assert status == 409, out
    assert get(b, ns, name) == recreated
    status, out = put(b, recreated, "new")   # and the new object renews through b
    assert status == 200, out


def test_dry_run_neither_uses_nor_fills_the_cache(pair):
    """A dry-run PUT answers from the object as stored and changes nothing: the next real PUT
    with the same resourceVersion is accepted; one with the dry run's answer is too (it keeps
    the resourceVersion)."""
    a = pair.a
    ns, name = f"dry-{uuid.uuid4().hex[:6]}", "held"
    write(a, "POST", "Lease", ns, name, make("Lease", ns, name))
    status, held = put(a, get(a, ns, name), "one")
    assert status == 200, held
    status, dry = put(a, held, "dry", dryRun="All")
    assert status == 200 and dry["metadata"]["labels"].get("dry") == "x", dry
    assert get(a, ns, name) == held
    status, out = put(a, held, "two")
    assert status == 200 and "dry" not in out["metadata"]["labels"], out

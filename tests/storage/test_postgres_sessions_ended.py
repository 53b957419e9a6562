"""Writes whose PostgreSQL session is ended under them (a failover, a restart, an operator's
pg_terminate_backend), issue 43: every write, a create as much as an update, a patch, a /status
write or a delete, is answered as it succeeded or 503 ServiceUnavailable with Retry-After (which
client-go retries), never 500; nothing is half-written (a 503'd create exists whole or not at
all); and the next request gets a new connection."""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from conftest import served_pair
from manifests import collection, make

pytestmark = [pytest.mark.postgres, pytest.mark.slow]   # sessions terminated for ~30 s

WANTED_503 = 8          # ended sessions met by writes before the writers stop
DEADLINE_SECONDS = 120  # (a bound on the test, not a timing requirement)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    with served_pair(tmp_path_factory, "postgres", KUBEDASH_WATCH_POLL_SECONDS="30") as servers:
        yield servers


def test_writes_whose_sessions_are_ended_answer_503_with_retry_after_never_500(pair):
    server = pair.a
    ns = "ended-" + uuid.uuid4().hex[:6]
    jobs = collection("Job", ns)
    stop = threading.Event()
    answers: list[tuple[str, str, int, dict, object]] = []   # (verb, name, status, headers, body)
    lock = threading.Lock()

    def answer(verb: str, name: str, method: str, path: str, body=None, ctype="application/json"):
        status, headers, out = server.request(method, path, body, content_type=ctype)
        with lock:
            answers.append((verb, name, status, headers, out))
        return status

    def writer(tag: str) -> None:
        i = 0
        while not stop.is_set():
            name = f"{tag}-{i}"
            i += 1
            if answer("create", name, "POST", jobs, make("Job", ns, name)) != 201:
                continue
            one = f"{jobs}/{name}"
            answer("patch", name, "PATCH", one, {"metadata": {"labels": {"step": "patched"}}},
                   "application/merge-patch+json")
            answer("status", name, "PATCH", one + "/status", {"status": {"active": 1}}, "application/merge-patch+json")
            if i % 2:
                answer("delete", name, "DELETE", one)

    def ended() -> int:
        with lock:
            return sum(1 for a in answers if a[2] != 200 and a[2] != 201)

    writers = [threading.Thread(target=writer, args=(f"w{n}",)) for n in range(4)]
    for thread in writers:
        thread.start()
    deadline = time.monotonic() + DEADLINE_SECONDS
    try:
        while ended() < WANTED_503 and time.monotonic() < deadline:
            # Every session of the servers' (client backends: not PostgreSQL's own workers), mid-write or idle.
            pair.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                       "AND pid <> pg_backend_pid() AND backend_type = 'client backend'", (pair.dbname,))
            time.sleep(0.05)   # (the writers get going on their new connections in between)
    finally:
        stop.set()
        for thread in writers:
            thread.join(60)

    wrong = [(verb, name, status, body) for verb, name, status, _, body in answers if status not in (200, 201, 503)]
    assert not wrong, wrong[:5]
    refused = [(verb, name, headers, body) for verb, name, status, headers, body in answers if status == 503]
    assert len(refused) >= WANTED_503, f"only {len(refused)} writes met an ended session in {DEADLINE_SECONDS} s"
    for verb, name, headers, body in refused:
        assert headers.get("Retry-After") == "1", (verb, name, headers)
        assert body["kind"] == "Status" and body["reason"] == "ServiceUnavailable", (verb, name, body)
        assert "may or may not have been applied" in body["message"], body
    assert {verb for verb, *_ in refused} & {"create"}, f"no create met an ended session: {refused[:5]}"

    # Nothing half-written: every object answered is there as a whole (a GET and the list agree,
    # its spec as sent); a 503'd create is there whole or not at all.
    status, _, listed = server.request("GET", jobs)
    assert status == 200, listed
    in_list = {item["metadata"]["name"]: item for item in listed["items"]}
    outcome: dict[str, set] = {}
    for verb, name, status, _, _ in answers:
        outcome.setdefault(name, set()).add((verb, status))
    for name, seen in outcome.items():
        status, _, got = server.request("GET", f"{jobs}/{name}")
        assert status in (200, 404), (name, status, got)
        assert (status == 200) == (name in in_list), (name, seen)
        if ("create", 201) in seen and ("delete", 200) not in seen and ("delete", 503) not in seen:
            assert status == 200, (name, seen)
        if ("delete", 200) in seen or ("create", 201) not in seen and ("create", 503) not in seen:
            assert status == 404, (name, seen)
        if status == 200:
            assert got["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox", got
            assert got["metadata"]["uid"] and got["metadata"]["resourceVersion"], got
    # The next requests get new connections.
    after = make("Job", ns, "after")
    status, _, out = server.request("POST", jobs, after)
    assert status == 201, out
    assert "unexpected error serving" not in server.log(), server.log()[-3000:]

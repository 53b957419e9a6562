"""Following a hostile or broken "cluster" (issue 29): a stub upstream on 127.0.0.1 (a tiny
http.server in this test) answers with secrets, internal bodies and malformed objects, and a
live `manage.py serve` (maintenance on: its follower runs) follows it. Nothing upstream says,
nothing a stored kubeconfig holds, reaches a message, a page's banner, the log or a metric; a
follower refuses kubedash's own listeners; objects that cannot be stored are skipped, named,
and the rest served; watches under /clusters/<name>/ re-check access in that cluster."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from conftest import FOLLOWER_ENV, eventually, served, server_env
from followed import mirror

LEASES = "/apis/coordination.k8s.io/v1"
SECRET_BODY = "INTERNAL-SECRET-7f3a: db password is hunter2"
TOKEN = "tok-SECRET-9b1c"


def lease(name: str, uid: str, rv: int, **meta) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "team", "uid": uid, "resourceVersion": str(rv),
                         "creationTimestamp": "2026-01-02T03:04:05Z", **meta},
            "spec": {"holderIdentity": f"holder-{name}", "leaseDurationSeconds": 15}}


GOOD = [lease(f"good-{i}", f"u-{i}", 10 + i) for i in range(5)]
BAD = [
    lease("bad-time", "u-bt", 20, creationTimestamp="not-a-time"),
    {**lease("ignored", "u-nn", 21), "metadata": {"namespace": "team", "uid": "u-nn", "resourceVersion": "21"}},
    {**lease("bad-type", "u-ty", 22), "spec": {"leaseDurationSeconds": "fifteen"}},
    lease("Bad_Name", "u-bn", 23),
]


class Stub(BaseHTTPRequestHandler):
    """Per path prefix /<mode>/...: `leaky` answers every request 500 with an internal body,
    `mixed` serves good and malformed Leases (and holds its watches open), `ok` empty lists."""

    protocol_version = "HTTP/1.1"
    seen: list = []

    def log_message(self, *args):
        pass

    def _send(self, code: int, body: bytes, ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        Stub.seen.append((self.path, self.headers.get("Authorization", "")))
        mode, _, rest = self.path.lstrip("/").partition("/")
        url = urlsplit("/" + rest)
        if mode == "leaky":
            return self._send(500, f"<html>{SECRET_BODY}</html>".encode(), "text/html")
        if "watch=true" in (url.query or ""):
            # A watch that stays open and quiet (a bookmark would need a resourceVersion).
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not self.server.stopping:
                time.sleep(0.2)
            return
        items = GOOD + BAD if (mode == "mixed" and url.path.endswith("/leases")) else []
        self._send(200, json.dumps({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "100"},
                                    "items": items}).encode())


@pytest.fixture(scope="module")
def stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    server.daemon_threads = True
    server.stopping = False
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.stopping = True
    server.shutdown()


@pytest.fixture(scope="module")
def here(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("hostile")
    with served(data_dir, env=server_env(data_dir, **FOLLOWER_ENV)) as server:
        yield server


def kubeconfig(server: str, token: str = TOKEN) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                       "clusters": [{"name": "c", "cluster": {"server": server}}],
                       "users": [{"name": "u", "user": {"token": token}}],
                       "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]})


def follow(here, name: str, server: str, token: str = TOKEN, raw: bool = False) -> None:
    """Follow `server` as `name`; raw: store the kubeconfig as given, as a row written before
    this issue's checks would be (the follower must cope with such rows too)."""
    path = here.data_dir / f"{name}.kubeconfig"
    path.write_text(kubeconfig(server, token))
    if not raw:
        here.manage("follow", "add", name, "--kubeconfig", str(path))
        return
    here.manage("shell", "-c", (
        "import json; from dashboard.follow import secrets; from dashboard.follow.models import Cluster; "
        f"c = json.loads(open({str(path)!r}).read()); "
        f"Cluster.objects.create(name={name!r}, server={server!r}, context='c', "
        "credentials=secrets.encrypt(json.dumps(c).encode()))"))


def row(here, name: str) -> dict:
    out = here.manage("shell", "-c", (
        "import json; from dashboard.follow.models import Cluster; "
        f"c = Cluster.objects.filter(name={name!r}).values('state', 'message', 'server').first(); "
        "print(json.dumps(c))"))
    return json.loads(out.strip().splitlines()[-1])


def log_text(here) -> str:
    return here.log()


@pytest.mark.slow
def test_upstream_bodies_never_reach_messages_logs_or_metrics(here, stub):
    follow(here, "leaky", f"{stub}/leaky")
    got = eventually(lambda: (r := row(here, "leaky")) and r["message"] and r, what="a failure reported")
    assert "HTTP 500 Internal Server Error" in got["message"] and "(at 20" in got["message"], got
    status, _, metrics = here.request("GET", "/metrics")
    for text in (got["message"], log_text(here), metrics.decode() if isinstance(metrics, bytes) else str(metrics)):
        assert "INTERNAL-SECRET" not in text and "hunter2" not in text and TOKEN not in text
    # The page every viewer of the cluster sees (its stale banner) says the same.
    assert got["state"] in ("stale", "syncing")


def test_a_stored_token_the_http_library_rejects_never_shows(here, stub):
    """A token ending in a line break (taken before tokens were checked) made the HTTP library
    raise "Invalid header value b'Bearer <token>\\n'", shown on every page of the cluster."""
    follow(here, "badtoken", f"{stub}/ok", token=TOKEN + "\n", raw=True)
    got = eventually(lambda: (r := row(here, "badtoken")) and r["message"] and r, what="a failure reported")
    assert "not a valid bearer token" in got["message"], got
    assert TOKEN not in got["message"] and TOKEN not in log_text(here)
    assert not any(TOKEN in auth for path, auth in Stub.seen if path.startswith("/ok")), "the bad token was sent"


def test_a_password_in_a_stored_server_url_is_neither_used_nor_logged(here, stub):
    server = stub.replace("http://", "http://admin:pw-SECRET-4d2e@") + "/ok"
    follow(here, "userinfo", server, raw=True)
    got = eventually(lambda: (r := row(here, "userinfo")) and r["message"] and r, what="a failure reported")
    assert "must not hold a user name or password" in got["message"], got
    assert "pw-SECRET" not in got["message"] and "pw-SECRET" not in log_text(here)


def test_kubedashs_own_listener_is_not_followed(here):
    follow(here, "itself", f"http://127.0.0.1:{here.http_port}")
    got = eventually(lambda: (r := row(here, "itself")) and r["message"] and r, what="a refusal reported")
    assert "kubedash itself" in got["message"], got
    status, _, body = here.request("GET", f"/clusters/itself{LEASES}/leases")
    assert status == 200 and body["items"] == []


def test_malformed_objects_are_skipped_named_and_the_rest_served(here, stub):
    follow(here, "mixed", f"{stub}/mixed")

    def served_names():
        status, _, body = here.request("GET", f"/clusters/mixed{LEASES}/namespaces/team/leases")
        return status == 200 and sorted(i["metadata"]["name"] for i in body["items"])

    assert eventually(lambda: served_names() == [f"good-{i}" for i in range(5)], what="the good leases served")
    got = eventually(lambda: (r := row(here, "mixed")) and r["state"] == "live" and r["message"] and r,
                     what="live, with the skipped objects named")
    assert "skipped" in got["message"] and "team/" in got["message"], got
    log = log_text(here)
    lines = [line for line in log.splitlines() if "follow mixed: skipped lease" in line]
    for name, why in (("team/bad-time", "metadata.creationTimestamp: not a time"),
                      ("team/bad-type", "does not match the Lease schema (json: cannot unmarshal string"),
                      ("team/Bad_Name", "metadata.name: FieldValueInvalid"),
                      ("an object without a name", "no metadata.name")):
        assert any(f"skipped lease {name}: " in line and why in line for line in lines), (name, lines)
    assert "Traceback" not in log
    status, _, metrics = here.request("GET", "/metrics")
    assert 'kubedash_follow_skipped_total{cluster="mixed"} 4.0' in metrics.decode()


def _set_clusters(here, username: str, clusters: list[str], namespaces: list[str] | None = None) -> None:
    here.manage("shell", "-c", (
        "from dashboard.access.models import Profile; "
        f"p = Profile.objects.get(user__username={username!r}); p.clusters = {clusters!r}; "
        + (f"p.namespaces = {namespaces!r}; " if namespaces is not None else "") + "p.save()"))


@pytest.mark.slow
def test_watches_recheck_access_in_their_own_cluster(here, stub):
    """Like page sockets: a watch of /clusters/mixed/ ends when its viewer loses mixed (it went on,
    checked as if local), and a notice about a viewer limited to mixed no longer ends it."""
    follow_path = f"/clusters/mixed{LEASES}/namespaces/team/leases?watch=true"
    if row(here, "mixed") is None:
        follow(here, "mixed", f"{stub}/mixed")
    token = here.token("w-all", "viewer")
    with here.watch(follow_path, token=token) as stream:
        assert stream.status == 200
        _set_clusters(here, "w-all", ["local"])
        event = eventually(lambda: (ev := stream.next(timeout=20)) and ev["type"] == "ERROR" and ev,
                           what="the watch to end")
        assert event["object"]["code"] == 403, event
    token = here.token("w-mixed", "viewer")
    _set_clusters(here, "w-mixed", ["mixed"])
    # A witness, a watch of another namespace the same notice takes away: its end says the
    # notice's re-checks ran. Then a later change to mixed's copy: the kept watch gets it, and no
    # ERROR before it.
    witness_path = follow_path.replace("/namespaces/team/", "/namespaces/elsewhere/")
    with here.watch(follow_path, token=token) as stream, here.watch(witness_path, token=token) as witness:
        assert stream.status == 200 and witness.status == 200
        _set_clusters(here, "w-mixed", ["mixed", "other"], namespaces=["team"])   # a notice: re-checked
        event = eventually(lambda: (ev := witness.next(timeout=20)) and ev["type"] == "ERROR" and ev,
                           what="the witness watch to end")
        assert event["object"]["code"] == 403, event
        mirror(here, "mixed", "team", [["later", "h", 99]])
        while True:
            ev = stream.next(timeout=20)
            assert ev is not None and ev["type"] != "ERROR", ev   # (still allowed: not ended)
            if ev["object"]["metadata"]["name"] == "later":
                break

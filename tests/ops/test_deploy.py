"""The deployment artifacts, exercised for real: the proxy config, the image's commands, the
compose file and the Kubernetes manifests.

- Proxy: Debian's nginx runs deploy/nginx/kubedash.conf.template (rendered the way the nginx
  image renders it: only the ${KUBEDASH_*} placeholders) in front of two `manage.py serve`
  processes on PostgreSQL + Redis, with TLS from a CA made here. Through it: `kubectl get -w`
  sees writes taken by either upstream, a watch event is streamed as it happens, a page's
  websocket gets its pushed fragment, and a list of thousands of objects arrives whole.
- Image: the lock installs into a fresh venv, collectstatic works there, and the Dockerfile's
  CMD and HEALTHCHECK (taken from the Dockerfile) start and answer as a non-root user.
- Kubernetes: every manifest validates against the 1.32 schemas (kubernetes-validate, strict),
  and the manifests agree with each other (selectors, ports, names).

nginx, PostgreSQL and Redis are the machine's (.ci/run installs nginx): without them these tests
skip on a developer machine and fail in CI.
"""
from __future__ import annotations

import http.client
import json
import os
import queue
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest
import yaml

from conftest import ROOT, LiveServer, free_port, log_in_form, require_kubectl, served_pair
from manifests import lease

TEMPLATE = ROOT / "deploy" / "nginx" / "kubedash.conf.template"
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "docker-compose.yml"
K8S = ROOT / "deploy" / "kubernetes"
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
WAIT = 30.0          # generous: the machine is shared; every wait polls for its condition
LONG_LIST = 3000


def _missing(what: str):
    if os.environ.get("CI"):
        pytest.fail(f"{what} (required in CI: .ci/run installs it)", pytrace=False)
    pytest.skip(what)


def render(text: str, values: dict[str, str]) -> str:
    """What the nginx image's envsubst step does with our variables: every ${NAME} replaced.
    A placeholder without a value is an error here (envsubst would leave it for nginx to choke on)."""
    unknown = set(PLACEHOLDER.findall(text)) - set(values)
    assert not unknown, f"the template uses placeholders the test does not know: {sorted(unknown)}"
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def leases_path(ns: str, name: str = "") -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases" + (f"/{name}" if name else "")


# ---------------------------------------------------------------------------------------------
# The stack: PostgreSQL + Redis, two app processes, nginx in front


class Proxy:
    def __init__(self, http_port: int, https_port: int, ca: str, upstreams: list[LiveServer], token: str):
        self.http_port, self.https_port, self.ca, self.upstreams, self.token = (
            http_port, https_port, ca, upstreams, token)
        self.base = f"https://127.0.0.1:{https_port}"

    def tls_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca)

    def https(self, timeout: float = WAIT) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.https_port, timeout=timeout, context=self.tls_context())

    def kubeconfig(self, path: Path) -> Path:
        """What docs/OPERATIONS.md says to run: `manage.py kubeconfig` on the data dir holding the
        proxy's CA (compose: the migrate step's /data), pointing at the proxy."""
        env = dict(self.upstreams[0].env, KUBEDASH_DATA_DIR=str(self.tls_data_dir))
        subprocess.run([sys.executable, str(ROOT / "manage.py"), "kubeconfig", "deploy-kubectl", "--role", "admin",
                        "--server", self.base, "--output", str(path)], env=env, cwd=ROOT, check=True,
                       capture_output=True)
        return path


def _wait_port(port: int, proc, what: str, log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                text = log.read_text(errors="replace")[-3000:] if log.exists() else ""
                raise RuntimeError(f"{what} did not start: {text}")
            time.sleep(0.2)


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _nginx_main_conf(prefix: Path, site: Path) -> str:
    """The harness around the site file: what the nginx image's /etc/nginx/nginx.conf provides
    (events, the http block that includes conf.d), with paths in a scratch directory."""
    return f"""
daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log info;
events {{ worker_connections 1024; }}
http {{
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    include {site};
}}
"""


def _upstream_servers(ports: list[int]) -> str:
    """KUBEDASH_UPSTREAM_SERVERS as docker-compose.yml sets it (its options: max_fails=0), one
    line per app here instead of compose's one name for every replica."""
    shipped = yaml.safe_load(COMPOSE.read_text())["services"]["nginx"]["environment"]["KUBEDASH_UPSTREAM_SERVERS"]
    assert shipped.count("app:8000") == 1
    return " ".join(shipped.replace("app:8000", f"127.0.0.1:{port}") for port in ports)


def _start_proxy(nginx_bin: str, work: Path, ports: list[int]):
    """Debian's nginx on the shipped template in front of the apps: (proc, http port, https port, tls)."""
    # The proxy's TLS: a CA and serving certificate made here (the app's own CA code).
    from dashboard.access.tls import ensure_tls

    tls = ensure_tls(work / "proxy-data")
    prefix = work / "nginx"
    prefix.mkdir()
    http_port, https_port = free_port(), free_port()
    site = prefix / "kubedash.conf"
    site.write_text(render(TEMPLATE.read_text(), {
        "KUBEDASH_UPSTREAM_SERVERS": _upstream_servers(ports),
        "KUBEDASH_HTTP_PORT": str(http_port), "KUBEDASH_HTTPS_PORT": str(https_port),
        "KUBEDASH_HTTPS_PUBLIC_PORT": str(https_port),
        "KUBEDASH_TLS_CERT": str(tls.server_cert), "KUBEDASH_TLS_KEY": str(tls.server_key)}))
    main = prefix / "nginx.conf"
    main.write_text(_nginx_main_conf(prefix, site))
    base = [nginx_bin, "-p", str(prefix), "-e", str(prefix / "error.log"), "-c", str(main)]
    check = subprocess.run([*base, "-t"], capture_output=True, text=True)
    assert check.returncode == 0, f"nginx rejects the config: {check.stderr}"
    proc = subprocess.Popen(base, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_port(https_port, proc, "nginx", prefix / "error.log")
    return proc, http_port, https_port, tls


@pytest.fixture(scope="module")
def nginx_bin() -> str:
    path = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if path is None:
        _missing("nginx is not installed (apt-get install nginx)")
    return path


@pytest.fixture(scope="module")
def stack(nginx_bin, tmp_path_factory):
    with _two_apps_behind_nginx(nginx_bin, tmp_path_factory) as proxy:
        yield proxy


@contextmanager
def _two_apps_behind_nginx(nginx_bin: str, tmp_path_factory):
    """Two `serve --no-tls --proxy-headers` processes on one PostgreSQL database and Redis
    (conftest.served_pair), nginx in front: yields its Proxy."""
    work = tmp_path_factory.mktemp("kubedash-deploy")
    # No bookmarks: the only bytes on an idle watch are its events, so an event that arrives was
    # not pushed out by later traffic.
    with served_pair(tmp_path_factory, "postgres", "--proxy-headers", tls=False,
                     KUBEDASH_WATCH_BOOKMARK_SECONDS="3600") as upstreams:
        proc, http_port, https_port, tls = _start_proxy(nginx_bin, work, [u.http_port for u in upstreams])
        try:
            proxy = Proxy(http_port, https_port, str(tls.ca_cert), list(upstreams), upstreams.a.admin_token)
            proxy.tls_data_dir = work / "proxy-data"
            proxy.nginx_log = work / "nginx" / "error.log"
            yield proxy
        finally:
            _stop(proc)


def _ns() -> str:
    return f"deploy-{uuid.uuid4().hex[:8]}"


def _create(server: LiveServer, ns: str, name: str) -> dict:
    status, _, body = server.request("POST", leases_path(ns), lease(name, ns=ns))
    assert status == 201, body
    return body


class Lines:
    """A subprocess's stdout, line by line, read on a thread (waits poll a queue)."""

    def __init__(self, proc):
        self.proc, self.lines = proc, queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def wait_for(self, wanted: set[str], timeout: float = WAIT) -> None:
        seen, deadline = set(), time.monotonic() + timeout
        while not wanted <= seen:
            try:
                seen.add(self.lines.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                pytest.fail(f"waited {timeout}s for {sorted(wanted - seen)}; saw {sorted(seen)}")


# ---------------------------------------------------------------------------------------------
# Through the proxy


@pytest.mark.postgres
def test_kubectl_watch_over_proxy_tls_sees_writes_from_both_upstreams(stack, tmp_path):
    kubectl = require_kubectl()
    a, b = stack.upstreams
    ns = _ns()
    _create(a, ns, "before")
    config = stack.kubeconfig(tmp_path / "kubeconfig")
    proc = subprocess.Popen([kubectl, "--kubeconfig", str(config), "get", "leases", "-n", ns, "-w", "-o", "name"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = Lines(proc)
        out.wait_for({"lease.coordination.k8s.io/before"})
        # kubectl's watch is on one upstream: one of these two writes came through the other.
        _create(a, ns, "via-a")
        _create(b, ns, "via-b")
        out.wait_for({"lease.coordination.k8s.io/via-a", "lease.coordination.k8s.io/via-b"})
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=10)
    assert "certificate" not in err.lower(), err


@pytest.mark.postgres
def test_watch_event_is_streamed_through_the_proxy_as_it_happens(stack):
    a, b = stack.upstreams
    ns = _ns()
    for upstream in (a, b):   # one watch lands on each upstream (nginx round-robins new connections)
        conn = stack.https()
        status, _, body = upstream.request("GET", leases_path(ns))
        rv = body["metadata"]["resourceVersion"]
        conn.request("GET", f"{leases_path(ns)}?watch=true&resourceVersion={rv}",
                     headers={"Authorization": f"Bearer {stack.token}"})
        resp = conn.getresponse()
        assert resp.status == 200
        name = f"now-{upstream.label}"
        sent = time.monotonic()
        _create(a, ns, name)
        # Nothing else is written to this stream (no bookmarks): a buffering proxy would hold
        # this one small event until its read timeout. Unbuffered, it arrives at once.
        conn.sock.settimeout(WAIT)
        event = orjson.loads(resp.readline())
        elapsed = time.monotonic() - sent
        conn.close()
        assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == name
        print(f"watch event through the proxy after {elapsed * 1000:.0f} ms")
        assert elapsed < 5.0, f"the event took {elapsed:.1f}s: the proxy held it"


class Renewer(threading.Thread):
    """A leader-election client through the proxy: its own Lease, renewed with PUT (the last
    resourceVersion it got) over one kept-alive connection, as fast as it is answered. Any
    answer but 200 and any broken connection is a failed request."""

    def __init__(self, proxy: Proxy, ns: str, name: str):
        super().__init__(daemon=True)
        self.proxy, self.path = proxy, leases_path(ns, name)
        self.obj = _create(proxy.upstreams[0], ns, name)
        self.ok, self.failed = 0, []
        self.stop = threading.Event()

    def run(self):
        conn = self.proxy.https()
        headers = {"Authorization": f"Bearer {self.proxy.token}", "Content-Type": "application/json"}
        while not self.stop.is_set():
            self.obj["spec"]["renewTime"] = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
            try:
                conn.request("PUT", self.path, body=orjson.dumps(self.obj), headers=headers)
                resp = conn.getresponse()
                body = resp.read()
            except (OSError, http.client.HTTPException) as err:
                self.failed.append(repr(err))
                conn.close()
                continue
            if resp.status == 200:
                self.obj, self.ok = orjson.loads(body), self.ok + 1
            else:
                self.failed.append((resp.status, body[:300]))


@pytest.mark.slow
@pytest.mark.postgres
def test_rolling_restart_through_the_proxy_loses_no_request(nginx_bin, tmp_path_factory):
    """Each app restarted in turn (SIGTERM, drained, started again on its port) while 4 clients
    renew their Leases through the shipped nginx config: not one request fails."""
    renewers: list[Renewer] = []
    with _two_apps_behind_nginx(nginx_bin, tmp_path_factory) as proxy:
        try:
            ns = _ns()
            renewers = [Renewer(proxy, ns, f"leader-{i}") for i in range(4)]
            for r in renewers:
                r.start()

            def progress(more: int) -> None:
                start = sum(r.ok for r in renewers)
                deadline = time.monotonic() + 2 * WAIT
                while sum(r.ok for r in renewers) < start + more:
                    assert time.monotonic() < deadline, "the renewals stalled"
                    time.sleep(0.1)

            progress(40)
            for app in proxy.upstreams:
                app.proc.send_signal(signal.SIGTERM)
                assert app.proc.wait(60) == 0
                progress(40)          # all through the other app meanwhile
                app.start()           # again, on its port
                deadline = time.monotonic() + 2 * WAIT
                while app.request("GET", "/readyz", token="-")[0] != 200:
                    assert time.monotonic() < deadline, "the restarted app did not become ready"
                    time.sleep(0.2)
                progress(40)
            for r in renewers:
                r.stop.set()
            for r in renewers:
                r.join(WAIT)
            total = sum(r.ok for r in renewers)
            failed = [f for r in renewers for f in r.failed]
            assert failed == [], f"{len(failed)} of {total + len(failed)} requests failed: {failed[:5]}"
            assert total >= 160
            print(f"rolling restart: {total} renewals, 0 failed")
        finally:
            for r in renewers:
                r.stop.set()


@pytest.mark.postgres
def test_plain_http_redirects_to_https_which_sends_hsts(stack):
    """Port 80: health checks, and a redirect for everything else (a login form or a token never
    goes in clear); HTTPS answers with Strict-Transport-Security."""
    conn = http.client.HTTPConnection("127.0.0.1", stack.http_port, timeout=WAIT)
    for path in ("/livez", "/readyz"):
        conn.request("GET", path)
        resp = conn.getresponse()
        assert (resp.status, resp.read()) == (200, b"ok"), path
    for path in ("/accounts/login/?next=/leases/", "/apis/coordination.k8s.io/v1/leases"):
        conn.request("GET", path, headers={"Host": "kubedash.example:8000"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 308 and resp.getheader("Location") == f"https://kubedash.example:{stack.https_port}{path}"
    conn.close()
    conn = stack.https()
    conn.request("GET", "/accounts/login/")
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 200 and resp.getheader("Strict-Transport-Security") == "max-age=31536000"
    conn.close()


def _log_in(stack, username: str, password: str) -> str:
    """The login form over the proxy's HTTPS, as a browser submits it; returns the Cookie header."""
    conn = stack.https()
    try:
        return log_in_form(conn, stack.base, username, password, secure=True)
    finally:
        conn.close()


@pytest.mark.postgres
def test_page_websocket_through_the_proxy_gets_pushed_fragments(stack):
    import websocket  # websocket-client, which the kubernetes client depends on

    a, b = stack.upstreams
    a.manage("shell", "-c", (
        "from dashboard.access.tokens import ensure_user\n"
        "u = ensure_user('deploy-viewer', 'admin')\n"
        "u.set_password('deploy-password-not-secret')\n"
        "u.save()\n"))
    cookie = _log_in(stack, "deploy-viewer", "deploy-password-not-secret")
    ns = _ns()
    conn = stack.https()
    conn.request("GET", f"/leases/?namespace={ns}", headers={"Cookie": cookie})
    resp = conn.getresponse()
    html = resp.read().decode()
    conn.close()
    assert resp.status == 200
    ws_url = re.search(r'ws-connect="([^"]+)"', html).group(1).replace("&amp;", "&")
    ws = websocket.create_connection(f"wss://127.0.0.1:{stack.https_port}{ws_url}", timeout=WAIT,
                                     sslopt={"ca_certs": stack.ca}, origin=stack.base, header=[f"Cookie: {cookie}"])
    try:
        for upstream in (a, b):   # whichever upstream holds the socket, one write came through the other
            name = f"pushed-{upstream.label}"
            _create(upstream, ns, name)
            deadline = time.monotonic() + WAIT
            while True:
                assert time.monotonic() < deadline, f"no fragment for {name} pushed through the proxy"
                message = ws.recv()
                if name in message:
                    break
    finally:
        ws.close()


@pytest.mark.slow
@pytest.mark.postgres
def test_a_long_list_arrives_whole_through_the_proxy(stack, tmp_path):
    a, _ = stack.upstreams
    ns = _ns()
    # Written in-process (the store, one transaction each), not over HTTP: it is the read under test.
    a.manage("shell", "-c", (
        "from dashboard.coordination.resource import LEASES\n"
        "from dashboard.kube import store\n"
        f"for i in range({LONG_LIST}):\n"
        f"    store.create(LEASES, {ns!r}, {{'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',\n"
        f"        'metadata': {{'name': f'bulk-{{i:05d}}', 'namespace': {ns!r}, 'labels': {{'pad': 'x' * 60}}}},\n"
        "        'spec': {'holderIdentity': 'holder-' + 'y' * 100, 'leaseDurationSeconds': 15}})\n"))
    conn = stack.https(timeout=120)
    conn.request("GET", leases_path(ns), headers={"Authorization": f"Bearer {stack.token}"})
    resp = conn.getresponse()
    raw = resp.read()
    conn.close()
    assert resp.status == 200, raw[:500]
    names = [item["metadata"]["name"] for item in orjson.loads(raw)["items"]]
    assert names == [f"bulk-{i:05d}" for i in range(LONG_LIST)]
    assert len(raw) > 1_000_000, len(raw)   # more than any proxy buffer holds in memory

    # kubectl in one unpaged request over HTTP/2 through the proxy.
    kubectl = require_kubectl()
    out = subprocess.run([kubectl, "--kubeconfig", str(stack.kubeconfig(tmp_path / "kubeconfig")), "get", "leases",
                          "-n", ns, "--chunk-size=0", "-o", "name"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.split()) == LONG_LIST


# ---------------------------------------------------------------------------------------------
# The image: the Dockerfile's own commands, run here (no Docker engine on this machine)

IMAGE_PATHS = re.compile(r"(?<![\w./$-])/(opt|app|tmp|data|proxy-tls)(?=[/\s'\"\\:;,)\]]|$)")


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, pending = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") and not pending:
            continue
        if line.lstrip().startswith("#"):
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        if pending.strip():
            word, _, rest = pending.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
        pending = ""
    return out


def stages() -> list[list[tuple[str, str]]]:
    result: list[list[tuple[str, str]]] = []
    for word, rest in dockerfile_instructions():
        if word == "FROM":
            result.append([])
        if result:
            result[-1].append((word, rest))
    return result


def parse_env(rest: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in re.findall(r'\S+=(?:"[^"]*"|\S+)', rest))


class ImageRoot:
    """The image's filesystem, mapped into a scratch directory: /opt/venv -> ROOT/opt/venv..."""

    def __init__(self, root: Path):
        self.root = root

    def map(self, text: str) -> str:
        return IMAGE_PATHS.sub(lambda m: f"{self.root}/{m.group(1)}", text)

    def env(self, image_env: dict[str, str]) -> dict[str, str]:
        env = {"PATH": f"{self.root}/bin:/usr/bin:/bin", "HOME": str(self.root / "data"),
               "LANG": "C.UTF-8"}
        for key, value in image_env.items():
            env[key] = os.path.expandvars(self.map(value.strip('"')).replace("$PATH", env["PATH"]))
        return env


def as_non_root(argv: list[str]) -> list[str]:
    """Run as nobody when the tests run as root (CI); otherwise we are not root already."""
    if os.geteuid() != 0:
        return argv
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]


@pytest.fixture(scope="module")
def image():
    """The build stage run for real: a fresh venv from the lock, the COPYs, collectstatic."""
    build, runtime = stages()[0], stages()[-1]
    root = Path(tempfile.mkdtemp(prefix="kubedash-image-", dir="/tmp"))
    root.chmod(0o755)   # nobody must reach the venv and the app
    img = ImageRoot(root)
    # The image's `python`: a 3.11 the non-root user can run (this machine's own interpreter
    # may live under root's home). Debian's python3 is one.
    system = Path("/usr/bin/python3")
    ok = system.exists() and subprocess.run([system, "-c", "import sys, venv, ensurepip; "
                                             "sys.exit(sys.version_info < (3, 11))"]).returncode == 0
    (root / "bin").mkdir()
    (root / "bin" / "python").symlink_to(system if ok else Path(sys.executable))
    try:
        env = img.env({})
        env.update(PIP_DISABLE_PIP_VERSION_CHECK="1")
        workdir = root
        for word, rest in build[1:]:
            if word == "ENV":
                env.update(img.env(parse_env(rest)))
                env["PATH"] = img.env({})["PATH"] if "PATH" not in parse_env(rest) else env["PATH"]
            elif word == "WORKDIR":
                workdir = Path(img.map(rest))
                workdir.mkdir(parents=True, exist_ok=True)
            elif word == "COPY":
                *sources, dest = rest.split()
                target = Path(img.map(dest)) if dest.startswith("/") else workdir / dest
                for src in sources:
                    path = ROOT / src
                    to = target if len(sources) == 1 and not dest.endswith("/") else target / path.name
                    to.parent.mkdir(parents=True, exist_ok=True)
                    if path.is_dir():
                        shutil.copytree(path, to, ignore=shutil.ignore_patterns("__pycache__"))
                    else:
                        shutil.copy(path, to)
            elif word == "RUN":
                result = subprocess.run(["sh", "-c", img.map(rest)], cwd=workdir, env=env,
                                        capture_output=True, text=True, timeout=900)
                assert result.returncode == 0, f"RUN {rest}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        runtime_env: dict[str, str] = {}
        for word, rest in runtime:
            if word == "ENV":
                runtime_env.update(parse_env(rest))
        # What the runtime stage's RUN does as root (the user, its writable directories).
        for directory in ("data", "tmp/prometheus", "proxy-tls"):   # (proxy-tls: compose's volume)
            (root / directory).mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                os.chown(root / directory, 65534, 65534)
        yield img, img.env(runtime_env), dict(runtime)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_dockerfile_is_multi_stage_non_root_with_a_livez_healthcheck():
    all_stages = stages()
    assert len(all_stages) >= 2, "build and runtime stages"
    runtime = dict(all_stages[-1])
    uid = runtime["USER"].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric non-root USER (runAsNonRoot can check it)"
    assert "/livez" in runtime["HEALTHCHECK"]
    assert "manage.py serve" in runtime["CMD"] and "--workers" in runtime["CMD"]
    assert any(w == "COPY" and "--from=" in r for w, r in all_stages[-1]), "the runtime copies from the build"
    build_runs = " ".join(r for w, r in all_stages[0] if w == "RUN")
    assert "--require-hashes -r" in build_runs and "requirements.lock" in build_runs
    assert "collectstatic" in build_runs


def test_lock_pins_every_dependency_of_pyproject():
    """requirements.lock was compiled from the current pyproject.toml: every declared dependency
    is pinned there at a version its specifier allows (a stale lock fails here)."""
    import tomllib

    from packaging.requirements import Requirement

    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)", (ROOT / "requirements.lock").read_text(), re.M))
    pins = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in pins.items()}
    for spec in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        req = Requirement(spec)
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        assert name in pins, f"{req.name} is not in requirements.lock: refresh it (docs/OPERATIONS.md)"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"requirements.lock pins {req.name}=={pins[name]}, pyproject wants {req.specifier}: refresh it"


@pytest.mark.slow
def test_image_commands_run_as_non_root_and_answer_livez(image):
    img, env, runtime = image
    app = img.root / "app"
    collected = list((app / "staticfiles").glob("kubedash/live.*.js"))
    assert collected, "collectstatic wrote hashed files into the image"

    # The compose migrate step's command (compose's ${VAR:-default} taken at its default).
    compose = yaml.safe_load(COMPOSE.read_text())
    migrate = [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", part) for part in compose["services"]["migrate"]["command"]]
    out = subprocess.run(as_non_root([img.map(p) for p in migrate]), cwd=app, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (img.root / "data" / "tls" / "server.crt").exists()
    # What nginx gets (compose's proxytls volume): the certificate and its key, not the CA key.
    assert sorted(p.name for p in (img.root / "proxy-tls").iterdir()) == ["ca.crt", "server.crt", "server.key"]

    port = free_port()
    cmd = [img.map(p).replace("8000", str(port)) for p in json.loads(runtime["CMD"])]
    log = img.root / "tmp" / "serve.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(as_non_root(cmd), cwd=app, env=env, stdout=fh, stderr=subprocess.STDOUT)
    try:
        _wait_port(port, proc, "the image's CMD", log)
        check = json.loads(runtime["HEALTHCHECK"].split("CMD", 1)[1])
        deadline = time.monotonic() + WAIT
        while True:
            result = subprocess.run(as_non_root([p.replace("8000", str(port)) for p in check]), cwd=app, env=env,
                                    capture_output=True, text=True, timeout=WAIT)
            if result.returncode == 0:
                break
            assert time.monotonic() < deadline, f"HEALTHCHECK fails: {result.stderr[-2000:]}"
            time.sleep(0.5)
        # The pages link the collected (hashed) static files and the server sends them.
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
        conn.request("GET", "/accounts/login/")
        html = conn.getresponse().read().decode()
        asset = re.search(r'src="(/static/kubedash/live\.[0-9a-f]+\.js)"', html)
        assert asset, "the login page links the hashed live.js"
        conn.request("GET", asset.group(1))
        resp = conn.getresponse()
        resp.read()
        conn.close()
        assert resp.status == 200
        # Workers really are the non-root user.
        if os.geteuid() == 0:
            children = subprocess.run(["ps", "-o", "uid=", "--ppid", str(proc.pid)], capture_output=True, text=True)
            uids = {int(u) for u in children.stdout.split()} | {os.stat(f"/proc/{proc.pid}").st_uid}
            assert uids == {65534}, uids
    finally:
        _stop(proc)


@pytest.mark.slow
def test_image_entry_points_come_up_ready_on_empty_writable_paths(image, tmp_path):
    """A read-only root with an empty tmpfs (compose's `read_only: true` + `tmpfs: /tmp`, the
    kustomize emptyDirs): /tmp and /data start empty, the non-root user can write nothing else,
    and the database is the Secret's DATABASE_URL, migrated beforehand (the init container).
    The image's CMD and plain daphne on settings.ASGI_APPLICATION both come up *ready*."""
    img, env, runtime = image
    app = img.root / "app"
    db_dir = img.root / "external-db"   # the non-root user's database, outside the writable paths
    db_dir.mkdir(exist_ok=True)
    db_dir.chmod(0o777)
    env = {**env, "DATABASE_URL": f"sqlite:///{db_dir}/kubedash.sqlite3", "DJANGO_SECRET_KEY": "s" * 50,
           "KUBEDASH_CREDENTIALS_KEY": "8JmX7bq5LqD1hY4m0zW2sKq3fT9vN6cR1pA8eU5yG0o="}
    python = img.map("/opt/venv/bin/python")
    out = subprocess.run(as_non_root([python, "manage.py", "migrate", "--noinput", "-v0"]), cwd=app, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    metrics_dir = Path(env["PROMETHEUS_MULTIPROC_DIR"])
    assert metrics_dir.is_relative_to(img.root / "tmp"), "the image keeps its metrics on /tmp"
    entry_points = {
        "CMD": [img.map(p) for p in json.loads(runtime["CMD"])],
        "daphne": [python, "-m", "daphne", "-b", "127.0.0.1", "-p", "8000", "dashboard.server.asgi:application"],
    }
    for name, argv in entry_points.items():
        for writable in (img.root / "tmp", img.root / "data"):   # an empty tmpfs, an empty volume
            shutil.rmtree(writable)
            writable.mkdir()
            if os.geteuid() == 0:
                os.chown(writable, 65534, 65534)
        port = free_port()
        log = db_dir / f"{name}.log"
        with open(log, "wb") as fh:
            proc = subprocess.Popen(as_non_root([p.replace("8000", str(port)) for p in argv]), cwd=app, env=env,
                                    stdout=fh, stderr=subprocess.STDOUT)
        try:
            _wait_port(port, proc, name, log)
            deadline = time.monotonic() + WAIT
            while True:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
                conn.request("GET", "/readyz?verbose")
                resp = conn.getresponse()
                body = resp.read().decode()
                conn.close()
                if resp.status == 200:
                    break
                assert proc.poll() is None and time.monotonic() < deadline, f"{name}: {body}\n{log.read_text()[-3000:]}"
                time.sleep(0.3)
            assert "[+]migrations ok" in body
            assert any(metrics_dir.glob("*.db")), f"{name}: the metrics went to the multiprocess directory"
            assert "Traceback" not in log.read_text(errors="replace"), log.read_text()[-3000:]
        finally:
            _stop(proc)


# ---------------------------------------------------------------------------------------------
# docker-compose.yml


def _compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_compose_runs_the_tested_proxy_config_in_front_of_replicas():
    services = _compose()["services"]
    nginx = services["nginx"]
    mounts = {m.split(":")[0]: m.split(":")[1] for m in nginx["volumes"]}
    assert mounts["./deploy/nginx/kubedash.conf.template"] == "/etc/nginx/templates/default.conf.template"
    # nginx reads the serving certificate only: not the data volume (CA key, secret and
    # credentials keys); the migrate step and the certs service copy it there.
    assert set(mounts) == {"./deploy/nginx/kubedash.conf.template", "proxytls"}
    assert "proxy_tls" in " ".join(services["migrate"]["command"]) and "proxy_tls" in " ".join(services["certs"]["command"])
    assert "nginx -s reload" in " ".join(nginx["command"]) and "/docker-entrypoint.sh nginx" in " ".join(nginx["command"])
    # Every placeholder of the template gets a value from the service's environment.
    assert set(PLACEHOLDER.findall(TEMPLATE.read_text())) <= set(nginx["environment"])
    assert services["app"]["deploy"]["replicas"] >= 2
    assert services["app"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert "migrate" in " ".join(services["migrate"]["command"])
    for name in ("db", "redis", "nginx"):
        assert services[name]["healthcheck"]["test"], f"{name} has no health check"
    declared = set(_compose()["volumes"])
    for service in services.values():
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            assert source.startswith("./") or source in declared, f"volume {source} is not a named volume"
    # Secrets come from the environment (.env), never from the file.
    text = COMPOSE.read_text()
    assert "${POSTGRES_PASSWORD:?" in text and "${DJANGO_SECRET_KEY:?" in text


def test_alert_rules_load_in_prometheus_and_wait_before_firing():
    rules = ROOT / "deploy" / "prometheus" / "kubedash-rules.yml"
    promtool = shutil.which("promtool")
    if promtool is None:
        _missing("promtool is not installed (apt-get install prometheus)")
    out = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    for group in yaml.safe_load(rules.read_text())["groups"]:
        for rule in group["rules"]:
            assert rule.get("for"), f"{rule['alert']} fires on a single bad scrape: give it a for:"
    documented = (ROOT / "docs" / "OPERATIONS.md").read_text()
    assert "deploy/prometheus/kubedash-rules.yml" in documented


def test_compose_config_validates_with_debian_docker_compose():
    tool = shutil.which("docker-compose")
    if tool is None:
        _missing("docker-compose is not installed (apt-get install docker-compose)")
    out = subprocess.run([tool, "--env-file", str(ROOT / ".env.example"), "-f", str(COMPOSE), "config", "-q"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    # Without the secrets it refuses, naming what to set.
    empty = Path(tempfile.mkdtemp()) / "empty.env"
    empty.write_text("")
    out = subprocess.run([tool, "--env-file", str(empty), "-f", str(COMPOSE), "config", "-q"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={k: v for k, v in os.environ.items() if k not in ("POSTGRES_PASSWORD", "DJANGO_SECRET_KEY")})
    shutil.rmtree(empty.parent)
    assert out.returncode != 0 and "set POSTGRES_PASSWORD in .env" in out.stderr


# ---------------------------------------------------------------------------------------------
# deploy/kubernetes


def k8s_documents() -> list[tuple[str, dict]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs.extend((path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc)
    return docs


def by_kind(kind: str) -> list[dict]:
    return [doc for _, doc in k8s_documents() if doc["kind"] == kind]


def one(kind: str) -> dict:
    found = by_kind(kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


@pytest.mark.parametrize("name,doc", k8s_documents(), ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_manifest_validates_against_the_1_32_schema(name, doc):
    import kubernetes_validate

    try:
        kubernetes_validate.validate(doc, "1.32", strict=True)
    except kubernetes_validate.ValidationError as err:
        pytest.fail(f"{name}: {err.message} at {'.'.join(map(str, err.path))}")


def test_kustomization_lists_every_manifest_and_renders():
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == files
    kubectl = require_kubectl()
    out = subprocess.run([kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    import kubernetes_validate

    rendered = [doc for doc in yaml.safe_load_all(out.stdout) if doc]
    assert len(rendered) == len(k8s_documents())
    for doc in rendered:
        kubernetes_validate.validate(doc, "1.32", strict=True)
        assert doc["metadata"].get("namespace", "kubedash") == "kubedash"


def _matches(selector: dict, labels: dict) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_manifests_agree_with_each_other_and_the_image():
    deployment, service, pdb, ingress = one("Deployment"), one("Service"), one("PodDisruptionBudget"), one("Ingress")
    config, secret, account = one("ConfigMap"), one("Secret"), one("ServiceAccount")
    pod = deployment["spec"]["template"]
    labels, spec = pod["metadata"]["labels"], pod["spec"]
    [container] = spec["containers"]

    assert deployment["spec"]["replicas"] >= 2
    assert _matches(deployment["spec"]["selector"]["matchLabels"], labels)
    assert _matches(service["spec"]["selector"], labels)
    assert _matches(pdb["spec"]["selector"]["matchLabels"], labels)

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    cmd = dict(stages()[-1])["CMD"]
    assert all(str(port) in cmd for port in ports.values()), "the container port is the one the image serves on"
    for svc_port in service["spec"]["ports"]:
        assert svc_port["targetPort"] in ports or svc_port["targetPort"] in ports.values()
    probes = {name: container[name] for name in ("livenessProbe", "readinessProbe", "startupProbe") if name in container}
    assert probes["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert probes["readinessProbe"]["httpGet"]["path"] == "/readyz"
    for probe in probes.values():
        assert probe["httpGet"]["port"] in ports or probe["httpGet"]["port"] in ports.values()

    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == service["metadata"]["name"]
    assert backend["port"].get("name") in {p["name"] for p in service["spec"]["ports"]} or \
        backend["port"].get("number") in {p["port"] for p in service["spec"]["ports"]}
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    # Request bodies buffered, as the nginx template's (a request a stopping pod refused goes to another).
    assert annotations["nginx.ingress.kubernetes.io/proxy-request-buffering"] == "on"
    assert annotations["nginx.ingress.kubernetes.io/proxy-next-upstream"] == "error timeout"
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600

    uid = int(dict(stages()[-1])["USER"].split(":")[0])
    for pod_spec, containers in ((spec, spec["containers"] + spec["initContainers"]),):
        assert pod_spec["securityContext"]["runAsNonRoot"] is True
        assert pod_spec["securityContext"]["runAsUser"] == uid
        assert pod_spec["serviceAccountName"] == account["metadata"]["name"]
        for c in containers:
            assert c["resources"]["requests"] and c["resources"]["limits"]
            refs = {(k, v["name"]) for ref in c["envFrom"] for k, v in ref.items()}
            assert refs == {("configMapRef", config["metadata"]["name"]), ("secretRef", secret["metadata"]["name"])}
            volumes = {v["name"]: v for v in pod_spec["volumes"]}
            for mount in c["volumeMounts"]:
                assert "emptyDir" in volumes[mount["name"]], mount
            if c["securityContext"].get("readOnlyRootFilesystem"):
                writable = {m["mountPath"] for m in c["volumeMounts"]}
                assert {"/data", "/tmp"} <= writable, "settings write DATA_DIR; Python needs /tmp"

    env = {**config["data"], **secret["stringData"]}
    assert {"DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY"} <= set(secret["stringData"])
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert env["PROMETHEUS_MULTIPROC_DIR"] in mounts, "the multiprocess metrics dir is an emptyDir"
    # SIGTERM: preStop sleep, then the supervisor gives its workers STOP_GRACE_SECONDS, in which
    # each drains for KUBEDASH_SHUTDOWN_GRACE_SECONDS; all before the kubelet's SIGKILL.
    from dashboard.server.workers import STOP_GRACE_SECONDS

    pre_stop = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert float(env["KUBEDASH_SHUTDOWN_GRACE_SECONDS"]) < STOP_GRACE_SECONDS
    assert pre_stop + STOP_GRACE_SECONDS < spec["terminationGracePeriodSeconds"]
    assert env["KUBEDASH_WORKERS"].isdigit()
    # The schema before the server: every pod's init container migrates (one at a time, a lock:
    # dashboard/server/management/commands/migrate.py); no Job racing the rollout.
    memory = container["resources"]["requests"]["memory"]
    # A pod's measured RSS: ~605 MB, 630 MB at its peak, with the workers' heavy children (577 /
    # 601 MiB; bench/heavy_memory.py, docs/OPERATIONS.md).
    assert memory.endswith("Mi") and int(memory[:-2]) >= 601, "below a pod's measured RSS (~630 MB at its peak)"
    [init] = spec["initContainers"]
    assert init["command"][-2:] == ["migrate", "--noinput"] and init["image"] == container["image"]
    assert not by_kind("Job"), "a migrate Job would race the Deployment's rollout"
    assert env["PROMETHEUS_MULTIPROC_DIR"] in {m["mountPath"] for m in init["volumeMounts"]}

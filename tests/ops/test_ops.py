"""The operational shell: TLS material, kubeconfig / issue_token / start commands, serve."""
from __future__ import annotations

import base64
import datetime as dt
import http.server
import io
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.x509 import verification

from conftest import LiveServer, eventually, require_kubectl
from dashboard.access.tls import covered_hosts, ensure_tls


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _verify(paths, name: x509.GeneralName) -> None:
    """Chain check with cryptography's WebPKI-style verifier (raises if it does not verify)."""
    store = verification.Store([_load(paths.ca_cert)])
    verifier = verification.PolicyBuilder().store(store).build_server_verifier(name)
    verifier.verify(_load(paths.server_cert), [])


# --- TLS ---------------------------------------------------------------------------------

def test_tls_generated_once_and_reused(tmp_path):
    first = ensure_tls(tmp_path)
    files = {p: p.read_bytes() for p in (first.ca_cert, first.server_cert, first.server_key)}
    second = ensure_tls(tmp_path)
    assert second == first
    assert {p: p.read_bytes() for p in files} == files          # nothing regenerated
    assert first.ca_cert.parent == tmp_path / "tls"
    assert (first.server_key.stat().st_mode & 0o777) == 0o600
    assert ((tmp_path / "tls" / "ca.key").stat().st_mode & 0o777) == 0o600


def test_tls_chain_and_sans(tmp_path):
    paths = ensure_tls(tmp_path)
    ca, leaf = _load(paths.ca_cert), _load(paths.server_cert)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert covered_hosts(leaf) >= {"localhost", "127.0.0.1", "::1"}
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in eku
    assert ca.not_valid_after_utc - ca.not_valid_before_utc > dt.timedelta(days=3600)
    for name in (x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                 x509.IPAddress(ipaddress.ip_address("::1"))):
        _verify(paths, name)
    with pytest.raises(verification.VerificationError):
        _verify(paths, x509.DNSName("example.com"))


def test_tls_openssl_verify(tmp_path):
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    paths = ensure_tls(tmp_path)
    for check in (["-verify_hostname", "localhost"], ["-verify_ip", "127.0.0.1"], ["-verify_ip", "::1"]):
        out = subprocess.run([openssl, "verify", "-CAfile", str(paths.ca_cert), "-purpose", "sslserver",
                              *check, str(paths.server_cert)], capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr


def test_tls_server_cert_renewed_not_ca(tmp_path):
    paths = ensure_tls(tmp_path)
    ca, leaf = paths.ca_cert.read_bytes(), paths.server_cert.read_bytes()
    # Near the serving certificate's expiry: a new one, signed by the same CA.
    ensure_tls(tmp_path, now=dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=360))
    assert paths.ca_cert.read_bytes() == ca
    assert paths.server_cert.read_bytes() != leaf
    # Missing: regenerated too, still the same CA.
    paths.server_cert.unlink()
    ensure_tls(tmp_path)
    assert paths.ca_cert.read_bytes() == ca
    _verify(paths, x509.DNSName("localhost"))


def test_tls_extra_host_added_and_kept(tmp_path):
    paths = ensure_tls(tmp_path, ["kubedash.example", "10.1.2.3"])
    assert covered_hosts(_load(paths.server_cert)) >= {"kubedash.example", "10.1.2.3", "localhost"}
    before = paths.server_cert.read_bytes()
    ensure_tls(tmp_path, ["10.1.2.3"])          # already covered: reused
    assert paths.server_cert.read_bytes() == before
    ensure_tls(tmp_path, ["other.example"])     # a new name: added, the old ones kept
    assert covered_hosts(_load(paths.server_cert)) >= {"kubedash.example", "10.1.2.3", "other.example"}


class _VersionHandler(http.server.BaseHTTPRequestHandler):
    token = ""

    def do_GET(self):  # noqa: N802 (http.server's naming)
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            self.send_response(401)
            self.end_headers()
            return
        body = json.dumps({"major": "1", "minor": "32", "gitVersion": "v1.32.0"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_kubectl_trusts_the_certificate_and_sends_the_token(tmp_path, host):
    """kubectl (Go TLS) accepts the CA and serving cert from a generated kubeconfig."""
    kubectl = require_kubectl()
    from dashboard.access.own_kubeconfig import build_kubeconfig, write_kubeconfig

    paths = ensure_tls(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(paths.server_cert, paths.server_key)
    handler = type("Handler", (_VersionHandler,), {"token": "s3cret-token"})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        config = build_kubeconfig(f"https://{host}:{server.server_address[1]}",
                                  paths.ca_cert.read_bytes(), "alice", "s3cret-token")
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", config)
        out = subprocess.run([kubectl, "--kubeconfig", str(kubeconfig), "get", "--raw", "/version"],
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["gitVersion"] == "v1.32.0"
    finally:
        server.shutdown()
        server.server_close()


# --- kubeconfig helpers (no database) ----------------------------------------------------

def test_kubeconfig_file_shape(tmp_path):
    from dashboard.access.own_kubeconfig import build_kubeconfig, write_kubeconfig
    from dashboard.demo.management.commands.start import read_token

    path = write_kubeconfig(tmp_path / "kc", build_kubeconfig(
        "https://127.0.0.1:8443", b"PEM", "bob", "tok", namespace="team"))
    assert (path.stat().st_mode & 0o777) == 0o600
    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "kubedash"
    assert config["contexts"][0]["context"]["namespace"] == "team"
    assert read_token(path) == "tok"
    assert read_token(tmp_path / "missing") is None
    (tmp_path / "junk").write_text("{not: [yaml")
    assert read_token(tmp_path / "junk") is None


# --- commands (database) -----------------------------------------------------------------

@pytest.fixture
def data_dir(settings, tmp_path):
    settings.DATA_DIR = tmp_path / "data"
    settings.DATA_DIR.mkdir()
    return settings.DATA_DIR


def test_issue_token_prints_token_last(db, data_dir):
    from django.core.management import call_command

    from dashboard.access.tokens import token_works

    out = io.StringIO()
    call_command("issue_token", "carol", "--role", "viewer", "--name", "ci", stdout=out)
    token = out.getvalue().rstrip("\n").splitlines()[-1]
    assert token_works(token, "carol", "viewer")
    assert not token_works(token + "x", "carol", "viewer")


def test_kubeconfig_command(db, data_dir, tmp_path):
    from django.core.management import call_command

    from dashboard.access.tokens import token_works

    target = tmp_path / "alice.kubeconfig"
    out = io.StringIO()
    call_command("kubeconfig", "alice", "--role", "editor", "--namespace", "team-a",
                 "--output", str(target), stdout=out)
    assert str(target) in out.getvalue()
    assert (target.stat().st_mode & 0o777) == 0o600
    config = yaml.safe_load(target.read_text())
    cluster = config["clusters"][0]
    assert cluster["name"] == "kubedash" and config["current-context"] == "kubedash"
    assert cluster["cluster"]["server"] == "https://127.0.0.1:8443"
    ca_pem = (data_dir / "tls" / "ca.crt").read_bytes()
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]) == ca_pem
    context = config["contexts"][0]
    assert context["name"] == "kubedash" and context["context"]["namespace"] == "team-a"
    user = next(u for u in config["users"] if u["name"] == context["context"]["user"])
    assert token_works(user["user"]["token"], "alice", "editor")


def test_start_reuses_kubeconfig_token_and_password(db, data_dir, tmp_path):
    from dashboard.demo.management.commands.start import ensure_admin_kubeconfig, ensure_admin_password, read_token
    from dashboard.access.models import ApiToken

    path = tmp_path / "kubeconfig"
    assert ensure_admin_kubeconfig(path, "https://127.0.0.1:8443") is False
    token = read_token(path)
    assert ensure_admin_kubeconfig(path, "https://localhost:9443") is True
    assert read_token(path) == token and ApiToken.objects.count() == 1
    assert "https://localhost:9443" in path.read_text()
    ApiToken.objects.update(revoked=True)                 # a revoked token is replaced
    assert ensure_admin_kubeconfig(path, "https://127.0.0.1:8443") is False
    assert read_token(path) != token

    password = ensure_admin_password(data_dir)
    assert password and ((data_dir / "admin-password").stat().st_mode & 0o777) == 0o600
    assert ensure_admin_password(data_dir) == password    # kept across restarts
    from django.contrib.auth import authenticate
    assert authenticate(username="admin", password=password) is not None


# --- serve (a real process) --------------------------------------------------------------

def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _kubectl_reaches(tmp_path: Path, tls_port: int) -> None:
    """kubectl completes a TLS handshake with Daphne's listener: any HTTP status proves it."""
    kubectl = require_kubectl()
    from dashboard.access.own_kubeconfig import build_kubeconfig, write_kubeconfig

    ca_pem = (tmp_path / "tls" / "ca.crt").read_bytes()
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", build_kubeconfig(
        f"https://127.0.0.1:{tls_port}", ca_pem, "nobody", "not-a-real-token"))
    out = subprocess.run([kubectl, "--kubeconfig", str(kubeconfig), "get", "--raw", "/version", "-v=6"],
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    log = out.stdout + out.stderr
    assert re.search(rf"GET https://127\.0\.0\.1:{tls_port}/version \d{{3}} ", log), log


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, "ctrl-c"])
def test_serve_listens_on_both_ports_and_stops_on_signal(tmp_path, sig):
    """ctrl-c: SIGINT to the whole process group, as a terminal sends it (the supervisor, its
    workers and their heavy children all get it): every process ends, quietly, after the drain."""
    # (the environment as a terminal has it: no test settings; an unmigrated data dir)
    server = LiveServer(tmp_path, env=dict(os.environ, KUBEDASH_DATA_DIR=str(tmp_path), PYTHONUNBUFFERED="1"),
                        stdin=subprocess.DEVNULL, start_new_session=sig == "ctrl-c")
    try:
        server.start()
        # The HTTPS listener presents the certificate the local CA signed for 127.0.0.1.
        context = ssl.create_default_context(cafile=str(tmp_path / "tls" / "ca.crt"))
        with socket.create_connection(("127.0.0.1", server.tls_port), timeout=5) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                assert tls.version() in {"TLSv1.2", "TLSv1.3"}
        if sig == signal.SIGTERM:
            _kubectl_reaches(tmp_path, server.tls_port)
        if sig == "ctrl-c":
            os.killpg(server.proc.pid, signal.SIGINT)
        else:
            server.proc.send_signal(sig)
        server.proc.wait(30)
    finally:
        server.stop()
    log = server.log()
    assert server.proc.returncode == 0, log
    assert "KeyboardInterrupt" not in log and "ReactorNotRunning" not in log, log   # (a quiet end)
    if sig == "ctrl-c":   # (nothing of the group is left: its workers end too)
        eventually(lambda: not _group_alive(server.proc.pid), what="the process group to end")
    assert f"http://127.0.0.1:{server.http_port}" in log and f"https://127.0.0.1:{server.tls_port}" in log

"""Kubeconfig files: build one for a token (the cluster entry trusts the local CA, inline, so the
file works from any directory), write it 0600, find the token in one read back (`start` reads the
file, through kube/codec.py's YAML loader). Used by the `kubeconfig` and `start` commands and the
tokens page."""
from __future__ import annotations

import base64
import ipaddress
import os
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from django.conf import settings

from .tls import ensure_tls

NAME = "kubedash"   # the cluster and context name
DEFAULT_SERVER = "https://127.0.0.1:8443"
WILDCARDS = {"0.0.0.0", "::", ""}   # listen addresses that mean "every interface"


def client_host(host: str) -> str:
    """The address a local client should dial for a listen address (wildcards -> loopback)."""
    host = host.strip("[]")
    if host in WILDCARDS:
        return "::1" if host == "::" else "127.0.0.1"
    return host


def client_url(scheme: str, host: str, port: int) -> str:
    """The URL a local client dials for a listener (`serve`'s banner, `start`'s kubeconfig)."""
    host = client_host(host)
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass
    return f"{scheme}://{host}:{port}"


def build_kubeconfig(server: str, ca_pem: bytes, username: str, token: str,
                     namespace: str = "default") -> dict:
    user = f"{username}@{NAME}"   # distinct from other clusters' users when files are merged
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": NAME, "cluster": {
            "server": server,
            "certificate-authority-data": base64.b64encode(ca_pem).decode("ascii"),
        }}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": NAME, "context": {"cluster": NAME, "user": user,
                                                 "namespace": namespace}}],
        "current-context": NAME,
        "preferences": {},
    }


def oidc_provider_for_api() -> tuple[str, str, str]:
    """(issuer URL, client id, issuer CA PEM) for kubelogin: the API's first JWT issuer
    (KUBEDASH_AUTHENTICATION_CONFIG, its first audience as the client id), else the dashboard's
    OpenID provider; ("", "", "") when neither is configured."""
    from . import jwt_authn   # noqa: PLC0415 (it imports models: not at settings time)

    for issuer in jwt_authn.issuers().values():
        return issuer.url, issuer.audiences[0], issuer.ca_pem
    oidc = settings.KUBEDASH_OIDC
    if oidc:
        ca = Path(oidc["ca_file"]).read_text() if oidc["ca_file"] else ""
        return oidc["issuer"], oidc["client_id"], ca
    return "", "", ""


def build_oidc_kubeconfig(server: str, ca_pem: bytes, issuer: str, client_id: str, namespace: str = "default",
                          issuer_ca_path: str = "") -> dict:
    """A kubeconfig whose user signs in with the identity provider through kubelogin
    (`kubectl oidc-login`, github.com/int128/kubelogin): an exec credential plugin that opens the
    browser, runs the code flow with PKCE, caches and refreshes the tokens, and hands kubectl the
    ID token, which the API checks (access/jwt_authn.py)."""
    args = ["oidc-login", "get-token", f"--oidc-issuer-url={issuer}", f"--oidc-client-id={client_id}",
            "--oidc-extra-scope=email", "--oidc-extra-scope=groups", "--oidc-extra-scope=offline_access"]
    if issuer_ca_path:
        args.append(f"--certificate-authority={issuer_ca_path}")
    config = build_kubeconfig(server, ca_pem, "oidc", "", namespace)
    config["users"][0]["user"] = {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": "kubectl", "args": args,
        "interactiveMode": "IfAvailable", "provideClusterInfo": False,
        "installHint": "kubelogin is needed: kubectl krew install oidc-login (or brew install kubelogin)"}}
    return config


def write_kubeconfig(path: str | os.PathLike, config: dict) -> Path:
    """Write the file with mode 0600 (it holds a credential), replacing any old one whole."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(config, f, default_flow_style=False, sort_keys=False)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def current_token(config) -> str | None:
    """The token of the current context's user in a kubeconfig (as parsed), or None if there is none."""
    try:
        current = config["current-context"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == current)
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        token = user.get("token")
    except (KeyError, TypeError, StopIteration, AttributeError):
        return None
    return token if isinstance(token, str) and token else None


def ca_pem_for(server: str) -> bytes:
    """The CA PEM, after making sure the serving certificate covers the server's host name."""
    host = urlsplit(server).hostname or ""
    return ensure_tls(settings.DATA_DIR, [host] if host else []).ca_cert.read_bytes()

"""`manage.py kubeconfig USERNAME --role ROLE`: write a kubeconfig with a new bearer token.

The cluster entry trusts the local CA (inline, so the file works from any directory) and
points at the HTTPS listener; the user entry carries a token issued for USERNAME.
"""
from __future__ import annotations

import base64
import os
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from dashboard.kube.tls import ensure_tls
from dashboard.web.auth import issue_token
from dashboard.web.models import Role

NAME = "kubedash"   # the cluster and context name
DEFAULT_SERVER = "https://127.0.0.1:8443"


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


def read_token(path: str | os.PathLike) -> str | None:
    """The token of the current context's user in a kubeconfig, or None if there is none."""
    try:
        config = yaml.safe_load(Path(path).read_text())
        current = config["current-context"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == current)
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        token = user.get("token")
    except (OSError, yaml.YAMLError, KeyError, TypeError, StopIteration, AttributeError):
        return None
    return token if isinstance(token, str) and token else None


def ca_pem_for(server: str) -> bytes:
    """The CA PEM, after making sure the serving certificate covers the server's host name."""
    host = urlsplit(server).hostname or ""
    return ensure_tls(settings.DATA_DIR, [host] if host else []).ca_cert.read_bytes()


class Command(BaseCommand):
    help = "Write a kubeconfig for USERNAME with a new bearer token and the local CA."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--server", default=DEFAULT_SERVER,
                            help=f"API server URL (default {DEFAULT_SERVER})")
        parser.add_argument("--output", "-o", default="kubeconfig",
                            help="file to write (default ./kubeconfig)")
        parser.add_argument("--namespace", default="default",
                            help="the context's namespace (default: default)")
        parser.add_argument("--name", default="kubeconfig", help="a label for the token")

    def handle(self, *args, **options):
        server = options["server"]
        if urlsplit(server).scheme != "https":
            # kubectl refuses to send a bearer token over plain HTTP.
            raise CommandError("--server must be an https:// URL")
        ca_pem = ca_pem_for(server)
        token = issue_token(options["username"], options["role"], name=options["name"])
        config = build_kubeconfig(server, ca_pem, options["username"], token, options["namespace"])
        path = write_kubeconfig(options["output"], config)
        self.stdout.write(f"Wrote {path} (user {options['username']}, role {options['role']}, "
                          f"server {server}).")
        self.stdout.write(f"Try: kubectl --kubeconfig {path} get leases -A")

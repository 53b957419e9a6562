"""A kubeconfig reduced to what following one cluster needs, and an API client from it.

reduce() keeps one context, its cluster and its user, with every file the kubeconfig names read
and inlined (certificate-authority -> certificate-authority-data, client-certificate / client-key
-> *-data, tokenFile -> token), so the result (stored encrypted, follow/secrets.py) works on any
machine and in any process. Only static credentials are accepted: a bearer token, a client
certificate and key, a username and password, or none. exec plugins and auth-providers run
programs or refresh tokens on the machine that reads the file; the follower runs unattended in
kubedash's process, so they are refused with a way out (a ServiceAccount token).

Files are read only when the caller names a base directory (`manage.py follow add --kubeconfig
PATH`: PATH's directory, like kubectl). Without one (a kubeconfig pasted or uploaded to the
page) a file reference is refused: the server must never read its own files on a form's word.
"""
from __future__ import annotations

import base64
import binascii
import copy
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from dashboard.kube import codec

from . import destination
from .keys import KeyFiles

MAX_FILE_BYTES = 1 << 20
MAX_SERVER, MAX_CONTEXT = 1000, 253   # Cluster.server, Cluster.context   # a certificate, key or token file larger than this is not one

EXEC_REFUSED = (
    "exec plugins are not supported: kubedash follows clusters with a token or client certificate; "
    "create a ServiceAccount token for it (kubectl create token; the steps are in docs/OPERATIONS.md, "
    "\"Following clusters: credentials\") and give kubedash a kubeconfig with that token"
)
AUTH_PROVIDER_REFUSED = EXEC_REFUSED.replace("exec plugins are", "auth-provider users (e.g. gcp, azure, oidc) are", 1)

# What is kept of a cluster entry and of a user entry (everything else is dropped).
CLUSTER_KEYS = ("server", "certificate-authority-data", "insecure-skip-tls-verify", "tls-server-name", "proxy-url")
USER_KEYS = ("token", "client-certificate-data", "client-key-data", "username", "password")
# file key -> data key, and whether the data key holds base64 (tokens are plain text).
FILE_KEYS = {
    "certificate-authority": ("certificate-authority-data", True),
    "client-certificate": ("client-certificate-data", True),
    "client-key": ("client-key-data", True),
    "tokenFile": ("token", False),
}


# A bearer token as HTTP carries it (RFC 6750's b64token; kube's tokens, JWTs): nothing that could
# end or split the Authorization header. Checked when the kubeconfig is taken, so a bad token is
# refused there, in words that never repeat it, instead of failing in the HTTP library later
# with the header (and the token) in its error text.
TOKEN_RE = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
TOKEN_REFUSED = ("the user's token is not a valid bearer token: it may hold only letters, digits and - . _ ~ + / "
                 "(then = signs), with no spaces or line breaks inside")


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used; `field` is the input the message is about
    ("kubeconfig" or "context"), so a form can show it next to that field. limits_hit: its YAML
    met a decoding limit no honest kubeconfig meets (codec.OverLimit: the server's tarpit)."""

    def __init__(self, message: str, field: str = "kubeconfig", limits_hit: bool = False):
        super().__init__(message)
        self.field = field
        self.limits_hit = limits_hit


@dataclass(frozen=True)
class Reduced:
    server: str
    context: str
    namespace_hint: str                       # the context's namespace ("" when it names none)
    config: dict = field(repr=False)          # the minimal kubeconfig: holds the credentials

    @property
    def auth(self) -> str:
        """How it authenticates, in words (for messages; never the secret itself)."""
        user = self.config["users"][0]["user"]
        if "token" in user:
            return "bearer token"
        if "client-certificate-data" in user:
            return "client certificate"
        if "username" in user:
            return "username and password"
        return "no credentials"


def _named(config: dict, section: str, name: str, what: str) -> dict:
    entries = config.get(section) or []
    if not isinstance(entries, list):
        raise KubeconfigError(f"the kubeconfig's {section} must be a list")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(what)
            if body is None:
                return {}
            if not isinstance(body, dict):
                raise KubeconfigError(f"{section[:-1]} {name!r} in the kubeconfig has no {what} mapping")
            return body
    raise KubeconfigError(f"the kubeconfig has no {section[:-1]} named {name!r} (used by the chosen context)")


def _names(config: dict, section: str) -> list[str]:
    entries = config.get(section) or []
    return [e["name"] for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)] \
        if isinstance(entries, list) else []


def _read(path_text: Any, key: str, base_dir: Path | None) -> bytes:
    if not isinstance(path_text, str) or not path_text:
        raise KubeconfigError(f"{key} must be a file path")
    if base_dir is None:
        data_key = FILE_KEYS[key][0]
        raise KubeconfigError(
            f"the kubeconfig refers to a file ({key}: {path_text}); a pasted or uploaded kubeconfig must hold "
            f"the data itself ({data_key}): make one with `kubectl config view --minify --flatten --raw`")
    path = Path(path_text).expanduser()
    if not path.is_absolute():
        path = Path(base_dir) / path
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise KubeconfigError(f"cannot read the {key} file {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise KubeconfigError(f"the {key} file {path} is larger than {MAX_FILE_BYTES} bytes")
    return data


def _inline(entry: dict, keys: tuple[str, ...], base_dir: Path | None) -> dict:
    """entry's kept keys, with its file references replaced by their data."""
    out = {}
    for file_key, (data_key, b64) in FILE_KEYS.items():
        if data_key in keys and file_key in entry and not entry.get(data_key):
            raw = _read(entry[file_key], file_key, base_dir)
            if b64:
                out[data_key] = base64.b64encode(raw).decode("ascii")
            else:
                out[data_key] = raw.decode("utf-8", "replace").strip()
    for key in keys:
        if key in entry and key not in out and entry[key] not in (None, ""):
            out[key] = copy.deepcopy(entry[key])
    for key, value in out.items():
        if key.endswith("-data"):
            if not isinstance(value, str):
                raise KubeconfigError(f"{key} must be base64 text")
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise KubeconfigError(f"{key} is not valid base64") from None
        elif key in ("token", "username", "password", "server", "tls-server-name", "proxy-url"):
            if not isinstance(value, str):
                raise KubeconfigError(f"{key} must be a string")
            if key != "token" and not value.isprintable():
                raise KubeconfigError(f"{key} must not hold line breaks or other control characters")
    if "token" in out:
        out["token"] = out["token"].strip()
        if not TOKEN_RE.fullmatch(out["token"]):
            raise KubeconfigError(TOKEN_REFUSED)
    return out


def reduce(text: str, context: str | None = None, base_dir: Path | None = None) -> Reduced:
    """The kubeconfig `text` reduced to `context` (default: its current-context); raises
    KubeconfigError (a ValueError) with a plain message when it cannot be followed."""
    try:
        config = codec.load_yaml(text)
    except codec.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1})" if where is not None else ""
        raise KubeconfigError(f"the kubeconfig is not valid YAML{at}: {getattr(exc, 'problem', None) or exc}",
                              limits_hit=isinstance(exc, codec.OverLimit)) from None
    if not isinstance(config, dict):
        raise KubeconfigError("the kubeconfig is not a kubeconfig: expected a mapping with clusters, users and contexts")

    available = _names(config, "contexts")
    listing = ", ".join(available) if available else "none"
    context = (context or "").strip() or None
    if context is None:
        context = config.get("current-context") or None
        if context is None:
            raise KubeconfigError(f"the kubeconfig has no current-context: choose a context ({listing})", "context")
        if not isinstance(context, str):
            raise KubeconfigError("the kubeconfig's current-context must be a string", "context")
    if context not in available:
        raise KubeconfigError(f"context {context!r} is not in the kubeconfig; its contexts: {listing}", "context")
    if len(context) > MAX_CONTEXT:
        raise KubeconfigError(f"the context's name is longer than {MAX_CONTEXT} characters", "context")
    ctx = _named(config, "contexts", context, "context")

    cluster_name = ctx.get("cluster")
    if not isinstance(cluster_name, str) or not cluster_name:
        raise KubeconfigError(f"context {context!r} names no cluster", "context")
    cluster = _named(config, "clusters", cluster_name, "cluster")
    user_name = ctx.get("user") or ""
    if not isinstance(user_name, str):
        raise KubeconfigError(f"context {context!r}: user must be a name")
    user = _named(config, "users", user_name, "user") if user_name else {}

    if user.get("exec"):
        raise KubeconfigError(EXEC_REFUSED)
    if user.get("auth-provider"):
        raise KubeconfigError(AUTH_PROVIDER_REFUSED)

    server = cluster.get("server")
    if not isinstance(server, str) or not server.strip():
        raise KubeconfigError(f"cluster {cluster_name!r} has no server address")
    server = server.strip().rstrip("/")
    if len(server) > MAX_SERVER:
        raise KubeconfigError(f"cluster {cluster_name!r}: the server URL is longer than {MAX_SERVER} characters")
    # (the URL is never repeated: it may hold a password)
    if why := destination.refusal(server):
        raise KubeconfigError(f"cluster {cluster_name!r}: {why}")
    proxy = cluster.get("proxy-url")
    if proxy not in (None, ""):
        if not settings.KUBEDASH_FOLLOW_ALLOW_PROXY:
            raise KubeconfigError(f"cluster {cluster_name!r}: proxy-url is not allowed here (an admin may allow it: "
                                  "KUBEDASH_FOLLOW_ALLOW_PROXY=1, docs/OPERATIONS.md)")
        if not isinstance(proxy, str) or (why := destination.refusal(proxy.strip(), "the proxy")):
            raise KubeconfigError(f"cluster {cluster_name!r}: {why or 'proxy-url must be a string'}")

    kept_cluster = _inline({**cluster, "server": server}, CLUSTER_KEYS, base_dir)
    if not isinstance(kept_cluster.get("insecure-skip-tls-verify", False), bool):
        raise KubeconfigError(f"cluster {cluster_name!r}: insecure-skip-tls-verify must be true or false")
    kept_user = _inline(user, USER_KEYS, base_dir)
    if ("client-certificate-data" in kept_user) != ("client-key-data" in kept_user):
        raise KubeconfigError(f"user {user_name!r} has a client certificate without its key (or a key without "
                              "its certificate): both are needed")
    if ("username" in kept_user) != ("password" in kept_user):
        raise KubeconfigError(f"user {user_name!r} needs both a username and a password")

    namespace = ctx.get("namespace") or ""
    if not isinstance(namespace, str):
        raise KubeconfigError(f"context {context!r}: namespace must be a string", "context")
    user_ref = user_name or "kubedash-anonymous"
    reduced = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": kept_cluster}],
        "users": [{"name": user_ref, "user": kept_user}],
        "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user_ref,
                                                    **({"namespace": namespace} if namespace else {})}}],
        "current-context": context,
    }
    return Reduced(server=server, context=context, namespace_hint=namespace, config=reduced)


def api_client(config: dict):
    """A kubernetes.client.ApiClient for a reduced kubeconfig (its only context). Built here, not
    by the client's kubeconfig loader, which writes decrypted keys to /tmp: the CA stays in
    memory and the client certificate and key go to in-memory files (follow/keys.py), removed
    by the client's close(). Raises KubeconfigError (what is wrong, never a secret)."""
    from kubernetes import client as kube_client  # noqa: PLC0415 (seconds to import; the pages import this module)

    class Client(kube_client.ApiClient):
        def close(self):
            super().close()
            keys.close()

    keys = KeyFiles()
    try:
        return Client(_configuration(config, keys, kube_client.Configuration))
    except BaseException:
        keys.close()
        raise


def _configuration(config: dict, keys: KeyFiles, Configuration):
    from kubernetes.utils.keepalive import tcp_keepalive_socket_options  # noqa: PLC0415 (as api_client's import)

    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    server = cluster["server"]
    if why := destination.url_refusal(server):
        raise KubeconfigError(why)
    configuration = Configuration(host=server)
    if server.startswith("https"):
        configuration.verify_ssl = not cluster.get("insecure-skip-tls-verify", False)
        if cluster.get("certificate-authority-data"):
            configuration.ca_cert_data = base64.b64decode(cluster["certificate-authority-data"]).decode("ascii", "replace")
        if cluster.get("tls-server-name"):
            configuration.tls_server_name = cluster["tls-server-name"]
        if user.get("client-certificate-data"):
            configuration.cert_file = keys.file(base64.b64decode(user["client-certificate-data"]))
            configuration.key_file = keys.file(base64.b64decode(user["client-key-data"]))
    if cluster.get("proxy-url"):
        if not settings.KUBEDASH_FOLLOW_ALLOW_PROXY:
            raise KubeconfigError("proxy-url is not allowed here (KUBEDASH_FOLLOW_ALLOW_PROXY)")
        configuration.proxy = cluster["proxy-url"]
    if user.get("token"):
        if not TOKEN_RE.fullmatch(user["token"]):
            raise KubeconfigError(TOKEN_REFUSED)
        configuration.api_key = {"BearerToken": f"Bearer {user['token']}"}
    elif user.get("username"):
        basic = base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode("ascii")
        configuration.api_key = {"BearerToken": f"Basic {basic}"}
    # No retries inside the client: the informers back off and resume themselves (and report
    # the failure), instead of urllib3 retrying each request three times, noisily.
    configuration.retries = 0
    # TCP keepalive (as client-go dials), probing an idle connection well within the silence
    # deadline: a peer gone without a FIN or RST (a partition, a dead host) fails the watch
    # with "connection lost" before the deadline says so (docs/FOLLOWING.md, "Silence").
    silence = settings.KUBEDASH_FOLLOW_SILENCE_SECONDS
    configuration.socket_options = tcp_keepalive_socket_options(
        idle=max(1, int(silence / 4)), interval=max(1, int(silence / 8)), count=3)
    return configuration

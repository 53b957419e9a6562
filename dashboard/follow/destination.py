"""Where a follower may connect: the cluster's API server, never kubedash itself or its backends.

A followed cluster's `server` is an admin's word, but what its follower then reads ends up on
pages (state, messages) and in timing: pointed at kubedash's own listeners, its database or
Redis, it would map and probe internal services. refusal() says why a server (or proxy) URL
is not followed, or None:
- a URL with user info (`https://user:pass@host`), a query or a fragment: credentials belong in
  the user entry, and `?` / `#` would steer the follower's requests to other paths;
- an address this process listens on (kubedash's own listeners, found from its sockets, so
  `serve`, workers and any port are covered), or the database's or Redis's (from the settings,
  and their default ports on any host).
It is checked when a cluster is added and before every connection the follower makes (a name
may resolve elsewhere later). Messages never repeat the URL (it may hold a secret).
"""
from __future__ import annotations

import ipaddress
import os
import socket
from urllib.parse import urlsplit

from django.conf import settings

from dashboard.kube import storage

BACKEND_PORTS = (5432, 6379)   # PostgreSQL's and Redis's default ports: never an API server


def shown(url: str) -> str:
    """The URL without user info, for logs and pages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an unreadable URL)"
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def url_refusal(url: str, what: str = "the server") -> str | None:
    """Why `url` cannot be followed as written (no lookups), or None."""
    try:
        parts = urlsplit(url)
        parts.port   # noqa: B018 (raises for a port that is not one)
    except ValueError:
        return f"{what} URL has an invalid port"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{what} must be an http:// or https:// URL"
    if "@" in parts.netloc:
        return f"{what} URL must not hold a user name or password (put credentials in the kubeconfig's user)"
    if parts.query or parts.fragment or "?" in url or "#" in url:
        return f"{what} URL must not have a query (?) or fragment (#)"
    return None


def _addresses(host: str, port: int) -> set[str]:
    try:
        return {info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        return set()


def _is_local(address: str) -> bool:
    """An address of this machine (binding to it works only then)."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    if ip.is_loopback or ip.is_unspecified:
        return True
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((address, 0))
        return True
    except OSError:
        return False


def own_listeners() -> set[int]:
    """The TCP ports this process listens on (Linux: its socket file descriptors)."""
    ports = set()
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        fds = []
    for name in fds:
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=int(name))
        except (OSError, ValueError):
            continue
        try:
            if sock.type == socket.SOCK_STREAM and sock.family in (socket.AF_INET, socket.AF_INET6) \
                    and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                ports.add(sock.getsockname()[1])
        except OSError:
            pass
        finally:
            sock.detach()   # not ours to close
    for name in ("KUBEDASH_TLS_PORT", "KUBEDASH_HTTP_PORT"):   # (set by serve: a heavy child holds no listener)
        configured = os.environ.get(name, "")
        if configured.isdigit():
            ports.add(int(configured))
    return ports


def _backends() -> set[tuple[str, int]]:
    """(address, port) of the database and Redis."""
    out = set()
    database = storage.backend().server_address()
    if database is not None:
        host, port = database
        out |= {(a, port) for a in _addresses(host, port)}
    redis_url = getattr(settings, "REDIS_URL", "")
    if redis_url:
        try:
            parts = urlsplit(redis_url)
            port = parts.port or 6379
        except ValueError:
            return out
        if parts.hostname:
            out |= {(a, port) for a in _addresses(parts.hostname, port)}
    return out


# Cloud metadata services outside 169.254.0.0/16 (AWS's IPv6 one, Alibaba's, ECS task metadata).
METADATA_ADDRESSES = frozenset({"fd00:ec2::254", "100.100.100.200"})
BACKEND, OWN, LINK_LOCAL = "backend", "own", "link-local"


def _link_local(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    return ip.is_link_local or str(ip) in METADATA_ADDRESSES


def address_refusal(host: str, port: int, *, link_local: bool = True) -> str | None:
    """Which of kubedash's own addresses host:port is (looked up): BACKEND (its database or
    Redis), OWN (one of its listeners), LINK_LOCAL (link-local or a metadata service, when
    `link_local` is False), or None. Callers word it (followed clusters, notification channels)."""
    addresses = _addresses(host, port)
    if port in BACKEND_PORTS or any((a, port) in _backends() for a in addresses):
        return BACKEND
    if port in own_listeners() and any(_is_local(a) for a in addresses):
        return OWN
    if not link_local and any(_link_local(a) for a in addresses | {host}):
        return LINK_LOCAL
    return None


def refusal(url: str, what: str = "the server") -> str | None:
    """Why the follower must not connect to `url`, or None (looks the name up)."""
    why = url_refusal(url, what)
    if why:
        return why
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    which = address_refusal(parts.hostname, port)
    if which == BACKEND:
        return f"{what} is kubedash's database or Redis port, not a Kubernetes API server"
    if which == OWN:
        return f"{what} is kubedash itself (one of its own listeners), not a followed cluster"
    return None

"""Sending the outbox: the maintenance leader's one sender.

Each due message is sent, then marked in the database (delivered, or its next try) before the
next one is taken, so a restart or a takeover resends at most the message that was on the wire
when the process died: delivery is at least once per try, and every try of a message carries
the same `id` (receivers dedupe by it; docs/OPERATIONS.md, "Notifications").

- webhook (http/https): the JSON body, `X-Kubedash-Signature: sha256=<HMAC-SHA256 of the body>`
  with the channel's secret; 2xx is delivered;
- anything else: an Apprise URL (Apprise does the services, kubedash the words);
- each try within TIMEOUT_SECONDS; failures retried with exponential backoff for RETRY_FOR_SECONDS,
  then failed (kept in the delivery log with its error, from ERRORS: never a receiver's words);
- at most PER_MINUTE messages a minute per channel: while more wait than the channel has slots
  left, everything waiting goes as one digest (the folded rows say which digest carried them);
- destinations are checked before every try (follow/destination.py: never kubedash's own
  listeners, its database or Redis, link-local or metadata addresses unless allowed).
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import socket
import threading
import urllib.error
import urllib.request
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import orjson
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.utils import timezone

from dashboard.follow import destination
from dashboard.follow.secrets import CredentialsError, decrypt
from dashboard.kube.outage import Outage

from . import conf, messages, metrics
from .models import Channel, Outbox

log = logging.getLogger(__name__)

# The delivery log's words for what went wrong (Outbox.last_error).
ERRORS = {
    "timeout": "no answer within the timeout",
    "refused": "the connection was refused",
    "unreachable": "the host could not be reached or resolved",
    "tls": "the TLS handshake failed",
    "http-4xx": "the receiver refused it (4xx)",
    "http-5xx": "the receiver failed (5xx)",
    "http-other": "the receiver answered neither 2xx, 4xx nor 5xx",
    "destination": "the destination is not allowed (kubedash's own address, its database or Redis, link-local)",
    "undecryptable": "the channel's URL cannot be decrypted with the configured key",
    "apprise": "the service did not accept it (Apprise)",
    "invalid-url": "the channel's URL is not one Apprise or the webhook understands",
    "channel-gone": "the channel was removed",
}
# No later try can do better: failed at once. (Not "undecryptable": a process with another
# KUBEDASH_CREDENTIALS_KEY may lead; the one with the right key then sends it.)
FINAL = ("invalid-url", "destination")
WEBHOOK_SCHEMES = ("http", "https")
# Ports Apprise's plain schemes use when the URL names none (for the destination check).
DEFAULT_PORTS = {"http": 80, "https": 443, "json": 80, "jsons": 443, "xml": 80, "xmls": 443, "form": 80,
                 "forms": 443, "mailto": 25, "mailtos": 587, "ntfy": 80, "ntfys": 443}


class DeliveryError(Exception):
    def __init__(self, code: str):
        super().__init__(code)
        self.code = code


def masked(url: str) -> str:
    """What the pages show of a channel's URL: its scheme, the rest masked."""
    scheme = url.partition("://")[0] if "://" in url else "?"
    return f"{scheme[:20]}://…"


def _apprise():
    import apprise  # noqa: PLC0415 (Apprise loads its plugins when imported: ~0.3 s, only where channels are used)

    return apprise


def _service(url: str):
    """The Apprise plugin for a URL, or None."""
    apprise = _apprise()
    bundle = apprise.Apprise()
    if not bundle.add(url):
        return None
    return bundle[0]


def url_refusal(url: str) -> str | None:
    """Why a channel URL cannot be used as written (no lookups), in words, or None."""
    parts = urlsplit(url)
    if not parts.scheme:
        return "the URL needs a scheme: https://… for a webhook, or an Apprise URL (slack://…, mailto://…)"
    if parts.scheme in WEBHOOK_SCHEMES:
        if not parts.hostname:
            return "a webhook URL needs a host"
        return None
    if _service(url) is None:
        return f'"{parts.scheme}://" is not a URL Apprise understands (see its list of services)'
    return None


def _destination(url: str) -> tuple[str, int] | None:
    """(host, port) a channel's URL connects to, when it names one (a service's own URLs, such as
    slack://, carry tokens, not addresses)."""
    parts = urlsplit(url)
    if parts.scheme in WEBHOOK_SCHEMES:
        return parts.hostname, parts.port or DEFAULT_PORTS[parts.scheme]
    service = _service(url)
    if service is None:
        return None
    host = getattr(service, "smtp_host", None) or getattr(service, "host", None)
    if not host:
        return None
    smtp = parse_qs(parts.query).get("smtp")
    port = getattr(service, "port", None) or DEFAULT_PORTS.get(parts.scheme, 443)
    if smtp:
        host = smtp[0]
    return host, int(port)


def destination_refusal(url: str) -> str | None:
    """Why a channel must not send to `url` (looked up now), in words, or None."""
    where = _destination(url)
    if where is None or not where[0]:
        return None
    which = destination.address_refusal(where[0], where[1], link_local=conf.ALLOW_LINK_LOCAL)
    return {destination.BACKEND: "it is kubedash's database or Redis",
            destination.OWN: "it is kubedash itself (one of its own listeners)",
            destination.LINK_LOCAL: "it is a link-local or cloud metadata address (KUBEDASH_NOTIFY_ALLOW_LINK_LOCAL=1 "
                                    "allows it)"}.get(which)


def signature(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def _webhook(url: str, secret: bytes | None, payload: dict) -> None:
    body = orjson.dumps(payload)
    headers = {"Content-Type": "application/json", "User-Agent": "kubedash-notifications"}
    if secret:
        headers["X-Kubedash-Signature"] = signature(secret, body)
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with _no_redirects().open(request, timeout=conf.TIMEOUT_SECONDS) as resp:
            resp.read(1024)
            code = resp.status
    except urllib.error.HTTPError as err:
        code = err.code
    except (TimeoutError, socket.timeout):
        raise DeliveryError("timeout") from None
    except urllib.error.URLError as err:
        reason = err.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            raise DeliveryError("timeout") from None
        if isinstance(reason, ConnectionRefusedError):
            raise DeliveryError("refused") from None
        if "SSL" in type(reason).__name__ or "CERTIFICATE" in str(reason).upper():
            raise DeliveryError("tls") from None
        raise DeliveryError("unreachable") from None
    except (ConnectionError, OSError):
        raise DeliveryError("unreachable") from None
    if 200 <= code < 300:
        return
    raise DeliveryError("http-4xx" if 400 <= code < 500 else "http-5xx" if code >= 500 else "http-other")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None   # a redirect could lead past the destination check: a 3xx is an answer (http-other)


def _no_redirects():
    return urllib.request.build_opener(_NoRedirect)


def _via_apprise(url: str, payload: dict) -> None:
    service = _service(url)
    if service is None:
        raise DeliveryError("invalid-url")
    for attr in ("socket_connect_timeout", "socket_read_timeout"):
        if hasattr(service, attr):
            setattr(service, attr, conf.TIMEOUT_SECONDS)
    try:
        ok = service.notify(body=messages.text(payload), title=messages.title(payload))
    except Exception:   # noqa: BLE001 - a plugin's own failure: our word for it, never its text
        ok = False
    if not ok:
        raise DeliveryError("apprise")


def send(channel: Channel, payload: dict) -> None:
    """One try; DeliveryError(code) when it did not go."""
    try:
        url = decrypt(channel.url).decode()
        secret = decrypt(channel.secret) if channel.secret else None
    except CredentialsError:
        raise DeliveryError("undecryptable") from None
    if destination_refusal(url):
        raise DeliveryError("destination")
    if urlsplit(url).scheme in WEBHOOK_SCHEMES:
        _webhook(url, secret, payload)
    else:
        _via_apprise(url, payload)


def backoff(attempts: int) -> timedelta:
    return timedelta(seconds=min(conf.BACKOFF_MAX_SECONDS, conf.BACKOFF_FIRST_SECONDS * 2 ** max(0, attempts - 1)))


class Sender:
    """The one sender (runs while this process leads maintenance)."""

    def __init__(self, leading=lambda: True):
        self.leading = leading
        self.doorbell = threading.Event()
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None
        self.health = Outage(log, "notifications: sending the outbox")

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="notifications-sender", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        self.doorbell.set()
        if self.thread is not None:
            self.thread.join(timeout=conf.TIMEOUT_SECONDS * 2 + 5)

    def ring(self) -> None:
        self.doorbell.set()

    def _run(self) -> None:
        close_old_connections()
        try:
            while not self.stopped.is_set():
                self.doorbell.wait(conf.SENDER_POLL_SECONDS)
                self.doorbell.clear()
                try:
                    while not self.stopped.is_set() and self.leading() and send_due():
                        pass
                    self.health.ok()
                except DatabaseError as err:
                    self.health.failed(err)
                    connection.close()
        finally:
            connection.close()


def _sent_in_window(channel_id: int, now) -> int:
    return Outbox.objects.filter(channel_id=channel_id, status=Outbox.DELIVERED, digest__isnull=True,
                                 delivered_at__gt=now - timedelta(seconds=conf.RATE_WINDOW_SECONDS)).count()


def send_due(now=None) -> bool:
    """Send the oldest due message (or its channel's digest); False when nothing was due.

    A channel sends at most PER_MINUTE messages a minute: while more are waiting than it has
    slots left, everything waiting goes as one digest (one slot)."""
    now = now or timezone.now()
    due = list(Outbox.objects.filter(status=Outbox.PENDING, next_attempt_at__lte=now)
               .select_related("channel").order_by("next_attempt_at", "id")[:50])
    for row in due:
        left = conf.PER_MINUTE - _sent_in_window(row.channel_id, now)
        if left <= 0:
            continue   # this channel's minute is full: its messages wait for a slot
        waiting = list(Outbox.objects.filter(channel_id=row.channel_id, status=Outbox.PENDING,
                                             next_attempt_at__lte=now, digest__isnull=True)
                       .exclude(message_id__startswith="digest-").order_by("created", "id")[:1000])
        if len(waiting) > left:
            row = _fold(row.channel, waiting, now)
        _try(row, now)
        return True
    return False


def _fold(channel: Channel, rows: list[Outbox], now) -> Outbox:
    """The channel's last slot this minute: everything waiting as one digest message."""
    with transaction.atomic():
        digest = Outbox.objects.create(
            message_id=f"digest-{rows[0].message_id}", channel=channel, created=now, next_attempt_at=now,
            payload={"id": f"digest-{rows[0].message_id}", "digest": True, "state": "digest",
                     "messages": [r.payload for r in rows]})
        Outbox.objects.filter(pk__in=[r.pk for r in rows]).update(status=Outbox.DIGESTED, digest=digest)
    metrics.DIGESTS.inc(len(rows))
    return digest


def _scheme(channel: Channel) -> str:
    """The metrics' label: "webhook", or the Apprise scheme."""
    try:
        scheme = urlsplit(decrypt(channel.url).decode()).scheme
    except CredentialsError:
        return "unknown"
    return "webhook" if scheme in WEBHOOK_SCHEMES else scheme[:16]


def _try(row: Outbox, now) -> None:
    try:
        send(row.channel, row.payload)
    except DeliveryError as err:
        row.attempts += 1
        row.last_error = err.code
        if now - row.created >= timedelta(seconds=conf.RETRY_FOR_SECONDS) or err.code in FINAL:
            row.status = Outbox.FAILED
            metrics.FAILURES.labels(err.code).inc()
            log.warning("notifications: gave up on %s to %s: %s", row.message_id, row.channel.name, err.code)
        else:
            row.next_attempt_at = timezone.now() + backoff(row.attempts)
            metrics.RETRIES.labels(err.code).inc()
            log.info("notifications: %s to %s failed (%s); try %d at %s", row.message_id, row.channel.name, err.code,
                     row.attempts + 1, row.next_attempt_at)
        row.save(update_fields=["attempts", "last_error", "status", "next_attempt_at"])
        return
    row.attempts += 1
    row.status, row.delivered_at = Outbox.DELIVERED, timezone.now()
    row.save(update_fields=["attempts", "status", "delivered_at"])
    metrics.DELIVERIES.labels(_scheme(row.channel)).inc()

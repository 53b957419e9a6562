"""Refusals that only a hostile client earns are answered slowly: a tarpit.

Refusing a YAML alias bomb takes well under a millisecond of decoding, but the request around
it (reading, routing, authenticating, answering) costs what a Lease renewal costs; a page
socket's refused handshake costs half that. A client that loops on such requests as fast as
it is answered therefore takes the server's CPU in proportion to its connections, whatever
the limits refuse (issue 29's benchmark: renewals fell to 0.39x under 4 bombing connections
and to 0.20x under 20 reconnecting sockets). So the refusal itself is held for
KUBEDASH_TARPIT_SECONDS before it is sent: a looping client gets one answer a connection per
interval, at the cost of a timer. No honest client meets these refusals: bodies nested 100
levels deep or expanding aliases beyond the limits, and handshakes over a session's budget of
sockets (a page opens one per load).

At most MAX_HELD refusals are held at once in a process (each holds a connection and a timer);
past that they are answered at once, so the tarpit's own memory stays bounded.
"""
from __future__ import annotations

import asyncio

from django.conf import settings
from prometheus_client import Counter
from twisted.internet.defer import Deferred

MAX_HELD = 1024

HELD = Counter("kubedash_tarpit_held_total", "Refusals of hostile input answered after the tarpit's delay",
               ["what"])

_held = 0   # refusals held now (the event loop's thread only)


def _take() -> bool:
    global _held
    if settings.KUBEDASH_TARPIT_SECONDS <= 0 or _held >= MAX_HELD:
        return False
    _held += 1
    return True


def _give() -> None:
    global _held
    _held -= 1


async def _wait(what: str) -> None:
    HELD.labels(what).inc()
    try:
        await asyncio.sleep(settings.KUBEDASH_TARPIT_SECONDS)
    finally:
        _give()


async def hold(what: str) -> None:
    """Wait out the tarpit before answering a refusal (dispatch.LanedHTTP)."""
    if _take():
        await _wait(what)


def deferred(what: str, refuse) -> Deferred | None:
    """A Deferred that calls refuse() (which raises) after the tarpit, for Twisted code (the
    websocket handshake; Daphne runs Twisted on asyncio's loop); None when the tarpit is full
    or off: refuse at once."""
    if not _take():
        return None

    async def later():
        await _wait(what)
        refuse()

    return Deferred.fromFuture(asyncio.ensure_future(later()))

"""The notifications' part of the maintenance leader (server/maintenance.py calls sync() every
second): while this process leads, one Engine (rules, from the hub's change stream) and one
Sender (the outbox); none otherwise. Exactly one process sends: the one holding the Lease."""
from __future__ import annotations

import asyncio
import logging

from .delivery import Sender
from .engine import Engine

log = logging.getLogger(__name__)


class Notifier:
    def __init__(self, loop: asyncio.AbstractEventLoop | None, leading=lambda: True):
        self.loop = loop   # the serving process's event loop: rules are evaluated only in a serving process
        self.leading = leading   # asked before every try: a process that stopped leading sends nothing more
        self.engine: Engine | None = None
        self.sender: Sender | None = None

    def sync(self, leading: bool) -> None:
        if leading and self.sender is None:
            self.sender = Sender(self.leading)
            self.sender.start()
            if self.loop is not None:
                self.engine = Engine(wake_sender=self.sender.ring, loop=self.loop)
                self.engine.start()
            log.warning("notifications: this process evaluates the rules and sends the outbox")
        elif not leading and self.sender is not None:
            self.stop()

    def stop(self) -> None:
        engine, sender, self.engine, self.sender = self.engine, self.sender, None, None
        if engine is not None:
            engine.stop()
        if sender is not None:
            sender.stop()

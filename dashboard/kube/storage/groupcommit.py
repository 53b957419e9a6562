"""Group commit for PostgreSQL's one-message updates (issue 42): the writes of one process that
wait for the revision lock at the same time go to the database as one message, one implicit
transaction, one WAL flush. Only with KUBEDASH_GROUP_COMMIT=1 (off by default: no gain could be
measured yet, docs/BENCHMARKS.md); else postgresql.py sends each update's message itself.

Each write is one conditional statement (postgresql.py's _record_update with its conditions:
the typed row still at the revision it was read at, the caller's token): it takes the next
revision and writes only if its own conditions hold, else writes nothing and answers no row.
So a message `lock; write 1; write 2; ...` gives each write its own answer, its own revision
(in statement order, dense: a write whose conditions fail takes none), and a write that fails
its own checks fails alone (its caller reads again, as after a lost race). The preconditions,
validation and the new object were computed by each caller before joining, outside the lock.

Leaders and followers: a writer that finds fewer than LEADERS leaders at work leads: it sends
its own write and whatever is queued (up to MOST) as one message on its own connection. Writers
arriving while LEADERS leaders are at work queue and wait (a greenlet on the loop awaits a
future, letting the loop serve others; a thread waits on an event). A leader answers each write
of its message, then hands the lead to the first writer still queued, whose message takes the
rest. Two leaders keep the database busy: one message holds the lock while the next waits for
it and the following group forms. Across processes the advisory lock is the queue.

If a batch's message raises (it rolled back whole), every write in it runs again alone on its
own connection: one write's error never becomes another's.
"""
from __future__ import annotations

import asyncio
import threading

from django.db import connection
from prometheus_client import Counter, Gauge

from ..postgresql.base import await_on_the_loop, on_the_loop

LEAD = object()    # a follower's turn to lead
ALONE = object()   # its batch failed: run alone

MOST = 64          # writes in one message at most
# Leaders at once: one message holding the lock (or flushing), one waiting for it, while the
# next group forms in the queue. With one, the lock idles from each commit until the next
# leader's greenlet or thread has run again and sent its message (docs/BENCHMARKS.md).
LEADERS = 2

COMMITS = Counter("kubedash_group_commit", "PostgreSQL one-message update commits (messages) and the writes "
                  "they carried (writes / messages: the mean group size)", ["what"])
WAITING = Gauge("kubedash_group_commit_waiting", "Updates queued behind this process's group-commit leader",
                multiprocess_mode="livesum")


class Pending:
    """One write waiting: its statement and params, then its answer (a row, None, LEAD, ALONE)."""

    __slots__ = ("sql", "params", "answer", "done", "event", "future", "loop")

    def __init__(self, sql: str, params: list):
        self.sql, self.params = sql, params
        self.answer, self.done = None, False
        self.event = self.future = self.loop = None


class GroupCommit:
    def __init__(self, lock_sql: str):
        self.lock_sql = lock_sql
        self.mutex = threading.Lock()
        self.queue: list[Pending] = []
        self.leaders = 0

    def run(self, sql: str, params: list):
        """sql's answer (its one row, or None), committed with whatever other writes wait."""
        me = Pending(sql, params)
        with self.mutex:
            lead = self.leaders < LEADERS
            if lead:
                self.leaders += 1
            else:
                self.queue.append(me)
        if not lead:
            WAITING.inc()
            try:
                answer = self._wait(me)
            finally:
                WAITING.dec()
            if answer is ALONE:
                return self._execute([me])[0]
            if answer is not LEAD:
                return answer
        return self._lead(me)

    def _lead(self, me: Pending):
        """Commit my write and those queued, answer each, hand the lead to the next queued."""
        try:
            with self.mutex:
                batch = [me, *self.queue[:MOST - 1]]
                del self.queue[:MOST - 1]
            try:
                answers = self._execute(batch)
            except BaseException as exc:
                for pending in batch[1:]:
                    self._answer(pending, ALONE)
                if len(batch) == 1 or not isinstance(exc, Exception):
                    raise
                return self._execute([me])[0]
            for pending, answer in zip(batch[1:], answers[1:]):
                self._answer(pending, answer)
            return answers[0]
        finally:
            with self.mutex:
                if self.queue:
                    heir = self.queue.pop(0)   # (its write leads its own batch)
                else:
                    heir = None
                    self.leaders -= 1
            if heir is not None:
                self._answer(heir, LEAD)

    def _execute(self, batch: list[Pending]) -> list:
        """One message: the lock, then each write; each write's row or None."""
        sql = "; ".join([self.lock_sql, *(p.sql for p in batch)])
        params = [value for p in batch for value in p.params]
        answers = []
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            for _ in batch:
                cursor.nextset()
                answers.append(cursor.fetchone())
        COMMITS.labels("messages").inc()
        COMMITS.labels("writes").inc(len(batch))
        return answers

    # -----------------------------------------------------------------------------------------
    # Waiting, on the loop or on a thread

    def _wait(self, me: Pending):
        if on_the_loop():
            return await_on_the_loop(self._wait_on_loop, me)
        with self.mutex:
            if me.done:
                return self._take(me)
            me.event = threading.Event()
        me.event.wait()
        return self._take(me)

    async def _wait_on_loop(self, me: Pending):
        with self.mutex:
            if me.done:
                return self._take(me)
            me.loop = asyncio.get_running_loop()
            me.future = me.loop.create_future()
        await me.future
        return self._take(me)

    @staticmethod
    def _take(me: Pending):
        return me.answer

    def _answer(self, pending: Pending, answer) -> None:
        with self.mutex:
            pending.answer, pending.done = answer, True
            event, future, loop = pending.event, pending.future, pending.loop
            pending.event = pending.future = pending.loop = None
        if event is not None:
            event.set()
        elif future is not None:
            loop.call_soon_threadsafe(_resolve, future)


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)

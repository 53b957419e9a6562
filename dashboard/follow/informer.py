"""Following a cluster: client-go's reflector, per kind, writing into kubedash's store.

For each followed cluster, one Reflector thread per kind lists the kind (in pages), then
watches from the list's resourceVersion with bookmarks, as client-go's reflector does:
- a watch that ends (its timeout, a dropped connection) resumes from the last resourceVersion
  seen (an event's or a bookmark's), after a back-off when it failed;
- a watch that hears nothing (no event, no bookmark) for KUBEDASH_FOLLOW_SILENCE_SECONDS is
  dead (a partition leaves a half-open connection: no FIN, no RST), and the cluster is stale
  from then on; it relists once the cluster answers again. Each watch asks to end after half
  that time (timeoutSeconds), so a healthy but quiet cluster still speaks often enough;
- 410 Gone (the upstream log was compacted past it) relists, and the relist is reconciled:
  objects gone upstream are deleted here, changed ones rewritten, the rest left alone.
The reflectors hand what they read, in order, to the cluster's one writer thread, which
applies it in batches (kube/mirror.py: one transaction for everything waiting), so a burst of
upstream writes costs a few transactions, and reports the cluster's state (Cluster.state,
heartbeat_at, heard_at, last_event_at) for the pages' stale banner.

HTTP, TLS and authentication are the official `kubernetes` client's (its ApiClient from the
stored kubeconfig); the paths are the kinds' generic API paths, so no kind is named here.
"""
from __future__ import annotations

import logging
import queue
import random
import socket
import threading
import time
from dataclasses import dataclass

import orjson
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection
from django.utils import timezone
from kubernetes.watch.watch import iter_resp_lines
from urllib3.exceptions import ReadTimeoutError
from prometheus_client import Counter, Gauge

from dashboard.kube import mirror, registry
from dashboard.kube.mirror import Mirrored

from . import admit, destination
from .failures import (Gone, NotAList, Refused, Silent, Upstream, collection_path,  # noqa: F401 (re-exported)
                       describe as _describe)
from .models import Cluster, FollowSpan

log = logging.getLogger(__name__)

PAGE_SIZE = 500               # objects per list request (client-go's default chunk size)
CONNECT_TIMEOUT_SECONDS = 5
LIST_TIMEOUT_SECONDS = 60     # a list page's read timeout


def silence_seconds() -> float:
    """No word (event, bookmark) on a watch for this long: the watch is dead and the cluster stale."""
    return settings.KUBEDASH_FOLLOW_SILENCE_SECONDS


def watch_seconds() -> int:
    """A watch's timeoutSeconds: half the silence deadline. Servers send a bookmark about once a
    minute (kube-apiserver; kubedash's KUBEDASH_WATCH_BOOKMARK_SECONDS) and one more before a
    watch's end (kube: 2 s before; kubedash: 1 s); a watch that ends is resumed at once. So a
    quiet, healthy cluster speaks at least every half deadline and is never taken for dead."""
    return max(1, int(silence_seconds() / 2))

BACKOFF_SECONDS = (0.5, 30.0)   # first and longest pause after a failure (doubling, jittered)
HEARTBEAT_SECONDS = 2.0       # how often a healthy follower says so (pages call >15 s stale)
BATCH = 1000                  # changes per store transaction, at most


CHANGES = Counter("kubedash_follow_changes_total", "Upstream changes a follower wrote into kubedash's store",
                  ["cluster"])
LIVE = Gauge("kubedash_follow_live", "1 while every kind of a followed cluster is being watched (the leader)",
             ["cluster"], multiprocess_mode="livemax")
SKIPPED = Counter("kubedash_follow_skipped_total", "Upstream objects a follower could not store (skipped, "
                  "reported by name on the Clusters page and in the log)", ["cluster"])
LAST_EVENT = Gauge("kubedash_follow_last_change_timestamp_seconds", "When a follower last wrote an upstream change",
                   ["cluster"], multiprocess_mode="livemax")
# (kubedash_follow_stale and kubedash_follow_heard_timestamp_seconds are read from the Cluster rows
# at scrape: server/metrics.py, so every process answers them, and a dead leader's clusters are stale.)


@dataclass
class Relisted:
    """A complete list of one kind (in its namespace; `only`: the part a field selector
    listed, as typed-column filters): reconcile the copy with it."""

    res: registry.Resource
    objects: list[dict]
    only: dict | None = None


@dataclass
class Skipped:
    """Upstream objects of one kind that cannot be stored: (namespace/name, why) each."""

    res: registry.Resource
    objects: list[tuple[str, str]]


@dataclass
class State:
    """A reflector's news for the cluster's status: watching (True), or failing (message)."""

    res: registry.Resource
    watching: bool
    message: str = ""
    selector: str = ""


class Reflector:
    """List then watch one kind of one cluster (see the module docstring); with a field
    selector, the part of the kind it selects (Resource.follow_selectors)."""

    def __init__(self, follower: "ClusterFollower", res: registry.Resource, selector: str = "",
                 only: dict | None = None):
        self.follower, self.res = follower, res
        self.selector, self.only = selector, only
        self.path = collection_path(res, follower.namespace)
        self.rv: str | None = None        # resume point; None: list first
        self.response = None              # the open watch, closed by stop()
        self.failures = 0
        self.heard: float | None = None   # the last word from upstream (monotonic), and its wall time:
        self.heard_at = None              # the copy of this kind is known as of then

    def hear(self) -> None:
        """Upstream spoke (a list, a watch's answer, an event, a bookmark): the copy is current now."""
        self.heard, self.heard_at = time.monotonic(), timezone.now()

    def run(self) -> None:
        stop = self.follower.stopped
        while not stop.is_set():
            try:
                if self.rv is None:
                    self.rv = self.relist()
                self.watch()
                self.failures = 0
            except Gone:
                log.info("follow %s: %s expired upstream at %s; relisting", self.follower.name, self.res.plural, self.rv)
                self.rv = None
                self.follower.put(State(self.res, False, f"relisting {self.res.plural}: the watch expired upstream",
                                        self.selector))
            except Exception as err:   # noqa: BLE001 - any failure: report, back off, resume
                if stop.is_set():
                    break
                if isinstance(err, Silent):
                    self.rv = None   # what was missed while silent: a list tells (and is reconciled)
                self.failures += 1
                message = f"{self.res.plural}: {_describe(err)}"
                log.warning("follow %s: %s", self.follower.name, message)
                self.follower.put(State(self.res, False, message, self.selector))
                low, high = BACKOFF_SECONDS
                stop.wait(min(high, low * 2 ** (self.failures - 1)) * (0.5 + random.random()))

    def _get(self, query: list, timeout):
        client = self.follower.client
        for url, what in ((client.configuration.host, "the server"), (client.configuration.proxy, "the proxy")):
            if url and (why := destination.refusal(url, what)):
                raise Refused(why)
        if self.selector:
            query = query + [("fieldSelector", self.selector)]
        method, url, headers, body, post = client.param_serialize(
            method="GET", resource_path=self.path, query_params=query,
            header_params={"Accept": "application/json"}, auth_settings=["BearerToken"])
        response = client.call_api(method, url, headers, body, post, _request_timeout=timeout).response
        if not 200 <= response.status < 300:
            raise _status_error(response.status, response.data)
        return response

    def relist(self) -> str:
        """List every object (in pages); hand the whole list to the writer; its resourceVersion."""
        objects, token, started, skipped = [], "", time.monotonic(), []
        while True:
            query = [("limit", PAGE_SIZE)] + ([("continue", token)] if token else [])
            page = orjson.loads(self._get(query, (CONNECT_TIMEOUT_SECONDS, LIST_TIMEOUT_SECONDS)).data)
            if not isinstance(page, dict) or not isinstance(page.get("items") or [], list):
                raise NotAList()
            objects.extend(self.admitted(page.get("items") or (), skipped))
            meta = page.get("metadata") or {}
            if not isinstance(meta, dict):
                raise NotAList()
            token = meta.get("continue") or ""
            if not token:
                log.info("follow %s: listed %d %s in %.2f s", self.follower.name, len(objects), self.res.plural,
                         time.monotonic() - started)
                self.follower.put(Skipped(self.res, skipped))   # (none: an earlier report is over)
                self.follower.put(Relisted(self.res, objects, self.only))
                self.hear()
                return str(meta.get("resourceVersion") or "0")

    def admitted(self, objects, skipped: list) -> list[dict]:
        """The objects that may be stored (follow/admit.py); the others added to `skipped`."""
        out = []
        for obj in objects:
            try:
                out.append(admit.admit(self.res, obj))
            except admit.Refused as why:
                skipped.append((admit.shown_key(obj), why.reason))
        return out

    def watch(self) -> None:
        silence = silence_seconds()
        query = [("watch", "true"), ("allowWatchBookmarks", "true"), ("resourceVersion", self.rv),
                 ("timeoutSeconds", watch_seconds())]
        # The read timeout is the silence deadline: no byte for that long ends the watch.
        try:
            response = self._get(query, (CONNECT_TIMEOUT_SECONDS, silence))
        except Exception as err:
            if _read_timeout(err):   # (not even the answer's headers)
                raise Silent(silence) from err
            raise
        self.response = response
        try:
            if self.follower.stopped.is_set():
                return
            self.hear()
            self.follower.put(State(self.res, True, "", self.selector))
            for line in _lines(response, silence):
                self.hear()
                if not line:
                    continue
                event = orjson.loads(line)
                if not isinstance(event, dict) or not isinstance(event.get("object") or {}, dict):
                    raise NotAList()
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    code = obj.get("code")
                    if code == 410:
                        raise Gone()
                    raise Upstream(code if isinstance(code, int) else 0)
                meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
                rv = meta.get("resourceVersion")
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    key = admit.key_of(obj)
                    if kind == "DELETED":
                        if key is not None:
                            self.follower.put(Mirrored(self.res, key[0], key[1], None, newer_only=True,
                                                       upstream_rv=str(rv or "")))
                    elif admitted := self.admitted([obj], skipped := []):
                        self.follower.put(Mirrored(self.res, key[0], key[1], admitted[0], newer_only=True))
                    else:
                        self.follower.put(Skipped(self.res, skipped))
                        if key is not None:
                            # What it is now cannot be stored: its last good copy must not pass for current.
                            self.follower.put(Mirrored(self.res, key[0], key[1], None))
                else:
                    self.follower.put(None)   # a bookmark: proof of life
                if isinstance(rv, str) and rv:
                    self.rv = rv
        finally:
            self.response = None
            response.release_conn()

    def stop(self) -> None:
        """Unblock a watch waiting for its next line (from another thread)."""
        response = self.response
        sock = getattr(getattr(response, "connection", None), "sock", None) if response is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _read_timeout(err: BaseException) -> bool:
    """A read that timed out (urllib3's, or wrapped in its MaxRetryError: the client retries nothing)."""
    return isinstance(err, (ReadTimeoutError, TimeoutError)) or isinstance(getattr(err, "reason", None),
                                                                         (ReadTimeoutError, TimeoutError))


def _lines(response, silence: float):
    """The watch's lines; Silent when none (nor any byte) came within the deadline."""
    try:
        yield from iter_resp_lines(response)
    except Exception as err:
        if _read_timeout(err):
            raise Silent(silence) from err
        raise


class ClusterFollower:
    """One followed cluster: a Reflector thread per kind and the writer thread."""

    def __init__(self, cluster: Cluster, client):
        self.name, self.namespace, self.row_id = cluster.name, cluster.namespace, cluster.pk
        self.client = client
        self.changes: queue.Queue = queue.Queue()
        self.stopped = threading.Event()
        self.reflectors = [Reflector(self, res, selector, only) for res in registry.all_resources()
                           for selector, only in (res.follow_selectors() if res.follow_selectors else [("", None)])]
        self.threads: list[threading.Thread] = []
        self.watching: dict[str, bool] = {}
        self.failure = ""
        self.skipped: dict[str, list[tuple[str, str]]] = {}   # plural -> objects not stored (the latest report)
        self.state = ""             # as last written to the Cluster row
        self.message = ""           # as last written to the Cluster row
        self.event_at = None        # the last change read (to write)
        self.heard_at = None        # the last word from the cluster, as last written
        self.written_at = 0.0       # when the row was last written (monotonic)
        self.span = None            # the FollowSpan open while the copy is live (its id)

    def start(self) -> None:
        self.threads = [threading.Thread(target=r.run, name=f"follow-{self.name}-{r.res.plural}{r.selector and '-'}"
                                                            f"{r.selector}", daemon=True)
                        for r in self.reflectors]
        self.threads.append(threading.Thread(target=self.write, name=f"follow-{self.name}", daemon=True))
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self.stopped.set()
        LIVE.labels(self.name).set(0)
        for reflector in self.reflectors:
            reflector.stop()
        self.changes.put(None)
        for thread in self.threads:
            thread.join(timeout=5)
        self.client.close()   # (its key material with it: follow/keys.py)

    def relist_all(self) -> None:
        for reflector in self.reflectors:
            reflector.rv = None
            reflector.stop()

    def put(self, item) -> None:
        """For the writer, in order: a Mirrored change, a Relisted kind, a State, or None (a bookmark)."""
        self.changes.put(item)

    # The writer thread -----------------------------------------------------------------

    def write(self) -> None:
        close_old_connections()
        try:
            while not self.stopped.is_set():
                try:
                    first = self.changes.get(timeout=HEARTBEAT_SECONDS)
                except queue.Empty:
                    first = None
                items = [first]
                while len(items) < BATCH:
                    try:
                        items.append(self.changes.get_nowait())
                    except queue.Empty:
                        break
                if self.stopped.is_set():
                    break
                try:
                    self.apply(items)
                except DatabaseError:
                    log.warning("follow %s: could not write; retrying", self.name, exc_info=True)
                    connection.close()
                    for item in reversed(items):   # keep them, in order, for the next round
                        self.changes.queue.appendleft(item)
                    self.stopped.wait(1)
                except Exception:   # noqa: BLE001 - a defect: start over from a full list
                    log.exception("follow %s: could not apply what was read; relisting", self.name)
                    self.relist_all()
        finally:
            connection.close()

    def apply(self, items: list) -> None:
        pending: list[Mirrored] = []
        for item in items:
            if isinstance(item, Mirrored):
                pending.append(item)
                continue
            if pending:
                self.mirror(pending)
                self.event_at, pending = timezone.now(), []
            if isinstance(item, Relisted):
                self.reconcile(item)
            elif isinstance(item, Skipped):
                self.skip(item)
            elif isinstance(item, State):
                self.watching[(item.res.kind, item.selector)] = item.watching
                if not item.watching:
                    self.failure = item.message
        if pending:
            self.mirror(pending)
            self.event_at = timezone.now()
        self.save_state()

    def mirror(self, changes: list[Mirrored]) -> None:
        written = mirror.mirror(self.name, changes, self.still_followed)
        if written:
            CHANGES.labels(self.name).inc(written)
            LAST_EVENT.labels(self.name).set(time.time())
        elif not self.still_followed():
            self.stopped.set()   # removed (clusters.remove): stop before the runner notices

    def still_followed(self) -> bool:
        # (plain SQL: asked in every batch's transaction, where the ORM's query building showed)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT 1 FROM {Cluster._meta.db_table} WHERE id = %s", [self.row_id])
            return cursor.fetchone() is not None

    def reconcile(self, relisted: Relisted) -> None:
        """Make the copy of one kind exactly the list: write what differs, delete what is gone."""
        res = relisted.res
        held = mirror.mirrored_keys(self.name, res, self.namespace or None, relisted.only)
        changes, listed = [], set()
        for obj in relisted.objects:
            m = obj["metadata"]
            key = (m.get("namespace", ""), m["name"])
            listed.add(key)
            if held.get(key) != str(m.get("resourceVersion", "")):
                changes.append(Mirrored(res, key[0], key[1], obj))
        changes += [Mirrored(res, ns, name, None) for ns, name in held.keys() - listed]
        started = time.monotonic()
        for i in range(0, len(changes), BATCH):
            self.mirror(changes[i:i + BATCH])
        self.event_at = timezone.now()
        log.info("follow %s: reconciled %d %s with the list: %d written in %.2f s", self.name,
                 len(relisted.objects), res.plural, len(changes), time.monotonic() - started)

    def skip(self, item: Skipped) -> None:
        """Report objects that cannot be stored, by name and reason (the log, the Clusters page)."""
        for name, why in item.objects:
            log.warning("follow %s: skipped %s %s: %s", self.name, item.res.singular, name, why)
        SKIPPED.labels(self.name).inc(len(item.objects))
        self.skipped[item.res.plural] = item.objects

    def skipped_text(self) -> str:
        if not any(self.skipped.values()):
            return ""
        parts = []
        for plural, objects in self.skipped.items():
            if objects:
                name, why = objects[-1]
                more = f" and {len(objects) - 1} more" if len(objects) > 1 else ""
                parts.append(f"{plural} {name} ({why}){more}")
        return "skipped what cannot be stored: " + "; ".join(parts)

    def silent(self) -> list[Reflector]:
        """The reflectors watching that heard nothing within the silence deadline (their read
        timeout ends them about now: the cluster is stale from this moment, not from then)."""
        deadline = time.monotonic() - silence_seconds()
        return [r for r in self.reflectors
                if self.watching.get((r.res.kind, r.selector)) and r.heard is not None and r.heard < deadline]

    def save_state(self) -> None:
        """The cluster's state for the pages: live when every kind is being watched and has
        been heard from within the silence deadline."""
        watched = len(self.watching) == len(self.reflectors) and all(self.watching.values())
        silent = self.silent()
        if watched and not silent:
            state, message = Cluster.LIVE, self.skipped_text()
        elif silent:
            state, message = Cluster.STALE, f"{silent[0].res.plural}: {_describe(Silent(silence_seconds()))}"
        elif any(r.failures for r in self.reflectors):
            state, message = Cluster.STALE, self.failure
        else:
            state, message = Cluster.SYNCING, self.failure
        live = state == Cluster.LIVE
        if state == self.state and message != self.message and silent:
            message = self.message   # (the same silence: keep the moment it was first told)
        now = time.monotonic()
        # The row is written when the state changes, else at most every HEARTBEAT_SECONDS (the
        # heartbeat and the last change's time ride along): not once per batch of changes.
        if state == self.state and now - self.written_at < HEARTBEAT_SECONDS:
            return
        LIVE.labels(self.name).set(1 if live else 0)
        fields = {"heartbeat_at": timezone.now()} if live else {}
        if state != self.state:
            fields.update(state=state, state_since=timezone.now())
        if state != self.state or message != self.message:
            fields["message"], self.message = message[:1000], message
        if self.event_at is not None:
            fields["last_event_at"], self.event_at = self.event_at, None
        heard = max((r.heard_at for r in self.reflectors if r.heard_at is not None), default=None)
        if heard is not None and heard != self.heard_at:
            fields["heard_at"] = self.heard_at = heard
        if fields:
            Cluster.objects.filter(name=self.name).update(**fields)
        self.record_span(live)
        self.state, self.written_at = state, now

    def record_span(self, live: bool) -> None:
        """The span in which the copy is live (FollowSpan, the time bar's "not followed" gaps):
        opened when it becomes live, moved on with each heartbeat; once it is not, ended where
        every kind was last heard from (what came after that is not known), never before it began."""
        moment = timezone.now()
        heard = min((r.heard_at for r in self.reflectors if r.heard_at is not None), default=None)
        if live and self.span is None:
            self.span = FollowSpan.objects.create(cluster_id=self.row_id, since=moment, until=moment).pk
        elif live:
            FollowSpan.objects.filter(pk=self.span).update(until=moment)
        elif self.span is not None:
            span = FollowSpan.objects.filter(pk=self.span).first()
            if span is not None and heard is not None and heard < span.until:
                span.until = max(span.since, heard)
                span.save(update_fields=["until"])
            self.span = None


def _status_error(code: int, data: bytes) -> Exception:
    """The exception for an HTTP error answer: its status code only. Its body is another server's
    text (an internal service's page, a secret) and is never shown, logged or kept."""
    if code == 410:
        return Gone()
    return Upstream(code)

"""SQLite writers take turns through a lock file (dashboard/kube/sqlite/base.py) instead of
sleeping in SQLite's busy handler: the lock is held exactly while a write transaction is open,
a waiting writer goes ahead once it is released, and a lock nobody releases never stops a
write (SQLite's own lock decides then)."""
from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest
from django.db import connection, connections, transaction

from conftest import ROOT, server_env

pytestmark = pytest.mark.skipif(connection.vendor != "sqlite", reason="the lock file is SQLite's backend only")


def _try_lock(path: str) -> bool:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.mark.django_db(transaction=True)
def test_the_writers_lock_is_held_exactly_while_a_write_transaction_is_open():
    lock = connection.settings_dict["NAME"] + "-writers"
    assert _try_lock(lock)
    with transaction.atomic():
        assert not _try_lock(lock), "a write transaction is open but the writers' lock is free"
        with transaction.atomic():   # a savepoint takes nothing more
            pass
        assert not _try_lock(lock)
    assert _try_lock(lock), "committed, but the lock was kept"
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            raise RuntimeError("rolled back")
    assert _try_lock(lock), "rolled back, but the lock was kept"


@pytest.mark.django_db(transaction=True)
def test_a_waiting_writer_goes_ahead_when_the_holder_commits(monkeypatch):
    from dashboard.kube.models import RevisionCounter
    from dashboard.kube.sqlite import base

    RevisionCounter.objects.update_or_create(pk=1, defaults={"value": 0})
    entered, release, done = threading.Event(), threading.Event(), threading.Event()
    waiting = threading.Event()

    def poll_sleep(seconds):   # between a writer's tries for a turn someone else holds
        waiting.set()
        time.sleep(seconds)

    monkeypatch.setattr(base, "time", SimpleNamespace(monotonic=time.monotonic, sleep=poll_sleep))
    order = []

    def holder():
        with transaction.atomic():
            RevisionCounter.objects.filter(pk=1).update(value=1)
            order.append("holder")
            entered.set()
            release.wait(10)
        connections.close_all()

    def waiter():
        entered.wait(10)
        with transaction.atomic():
            order.append("waiter")
            RevisionCounter.objects.filter(pk=1).update(value=2)
        connections.close_all()
        done.set()

    threads = [threading.Thread(target=holder), threading.Thread(target=waiter)]
    for t in threads:
        t.start()
    entered.wait(10)
    assert waiting.wait(10), "the second writer did not wait for the first"
    assert not done.is_set()
    release.set()
    assert done.wait(10), "the second writer never went ahead"
    for t in threads:
        t.join(10)
    assert order == ["holder", "waiter"]
    assert RevisionCounter.objects.get(pk=1).value == 2


def test_a_lock_nobody_releases_does_not_stop_writes(tmp_path):
    """Another process holds the lock file forever: a write still goes through once the wait
    is over (here shortened to 0.2 s), and commits."""
    env = server_env(tmp_path)
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], env=env, cwd=ROOT, check=True)
    fd = os.open(tmp_path / "kubedash.sqlite3-writers", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        script = ("import dashboard.kube.sqlite.base as b; b.WAIT_SECONDS = 0.2\n"
                  "from django.db import transaction\n"
                  "from dashboard.kube.models import RevisionCounter\n"
                  "with transaction.atomic():\n"
                  "    RevisionCounter.objects.update_or_create(pk=1, defaults={'value': 41})\n"
                  "print(RevisionCounter.objects.get(pk=1).value)\n")
        out = subprocess.run([sys.executable, str(ROOT / "manage.py"), "shell", "-c", script], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().splitlines()[-1] == "41"
    finally:
        os.close(fd)


@pytest.mark.django_db(transaction=True)
def test_a_connection_that_never_waits_is_refused_at_begin_while_the_turn_is_taken():
    """The event loop's connection (server/inline.py LoopInline): a write that finds the writers' turn
    taken gets "database is locked" before anything is written, instead of waiting."""
    from django.db import OperationalError

    from dashboard.kube.models import RevisionCounter

    RevisionCounter.objects.update_or_create(pk=1, defaults={"value": 5})
    lock = connection.settings_dict["NAME"] + "-writers"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    connection.never_wait()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert not connection.writers_turn_free()
        with pytest.raises(OperationalError, match="locked"):
            with transaction.atomic():
                RevisionCounter.objects.filter(pk=1).update(value=6)
        fcntl.flock(fd, fcntl.LOCK_UN)
        assert connection.writers_turn_free()
        with transaction.atomic():
            RevisionCounter.objects.filter(pk=1).update(value=7)
        assert RevisionCounter.objects.get(pk=1).value == 7
    finally:
        os.close(fd)
        connection.close()   # the next test's connection waits again

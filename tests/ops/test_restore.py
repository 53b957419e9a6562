"""A backup restored under a running workload never lets a watch miss a change: after the
restore procedure of docs/OPERATIONS.md (the database's own backup tool, then
`manage.py bump_revision`), resuming from any resourceVersion handed out before the restore is
410 Expired, on SQLite and on PostgreSQL, while the workload keeps writing."""
from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import threading
import uuid

import pytest

from conftest import ROOT, LiveServer, migrate, server_env
from pg_support import connect, pg_url, require_postgres

LEASES = "/apis/coordination.k8s.io/v1/namespaces/restore/leases"


def _lease(name: str, holder: str) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "restore"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}}


class Renewer(threading.Thread):
    """A client renewing one Lease as fast as the server answers, across server restarts (the
    server it talks to is swapped in; errors while none is up are counted, not fatal)."""

    def __init__(self):
        super().__init__(daemon=True)
        self.server, self.token, self.renewals, self.errors = None, None, 0, 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            server = self.server
            if server is None:
                self.stop.wait(0.05)
                continue
            try:
                status, _, _ = server.request("PATCH", f"{LEASES}/renewed", token=self.token,
                                              body={"spec": {"renewTime": None, "holderIdentity": f"r{self.renewals}"}},
                                              content_type="application/merge-patch+json")
            except OSError:
                status = 0
            if status == 200:
                self.renewals += 1
            else:
                self.errors += 1
                self.stop.wait(0.05)


def _rv(body: dict) -> int:
    return int(body["metadata"]["resourceVersion"])


def _resume(server, rv: int):
    """Watch leases from rv: (HTTP status, the first event or the error body)."""
    with server.watch(f"{LEASES}?watch=true&resourceVersion={rv}") as stream:
        if stream.status != 200:
            return stream.status, stream.response.read()
        return 200, stream.next(timeout=15)


def _backend(kind: str, tmp_path):
    """(env, backup(), restore()) for a fresh database of the given kind."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    env = server_env(data_dir)
    if kind == "sqlite":
        db = data_dir / "kubedash.sqlite3"
        backup_file = tmp_path / "kubedash-backup.sqlite3"

        def backup():   # docs/OPERATIONS.md: SQLite's online backup
            src, dst = sqlite3.connect(db), sqlite3.connect(backup_file)
            src.backup(dst)
            dst.close()
            src.close()

        def restore():  # server stopped: replace the file, drop its -wal/-shm
            for suffix in ("-wal", "-shm"):
                (data_dir / f"kubedash.sqlite3{suffix}").unlink(missing_ok=True)
            shutil.copyfile(backup_file, db)

        return env, backup, restore, None
    require_postgres()
    name = f"kubedash_i24_restore_{uuid.uuid4().hex[:8]}"
    with connect() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    env["DATABASE_URL"] = pg_url(name)
    dump = tmp_path / "kubedash.dump"

    def backup():       # docs/OPERATIONS.md: pg_dump -Fc while the server runs
        subprocess.run(["pg_dump", "-Fc", "-f", str(dump), env["DATABASE_URL"]], check=True)

    def restore():      # docs/OPERATIONS.md: pg_restore --clean --if-exists, app stopped
        subprocess.run(["pg_restore", "--clean", "--if-exists", "--no-owner", "-d", env["DATABASE_URL"], str(dump)],
                       check=True)

    def drop():
        with connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return env, backup, restore, drop


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_restore_under_a_running_workload_makes_resuming_watches_relist(kind, tmp_path):
    env, backup, restore, drop = _backend(kind, tmp_path)
    renewer = Renewer()
    server = LiveServer(tmp_path / "data", env=env)
    try:
        migrate(env)
        server.start()
        token = server.admin_token
        for i in range(5):
            assert server.request("POST", LEASES, _lease(f"kept-{i}", "a"))[0] == 201
        assert server.request("POST", LEASES, _lease("renewed", "r"))[0] == 201
        renewer.server, renewer.token = server, token
        renewer.start()
        backup()
        # After the backup: more renewals, 5 objects the restore will lose, and a watcher's
        # resourceVersion from the newest of them.
        lost = [_rv(server.request("POST", LEASES, _lease(f"lost-{i}", "b"))[2]) for i in range(5)]
        seen = lost[-1]
        renewals = renewer.renewals
        while renewer.renewals < renewals + 20:
            renewer.stop.wait(0.05)
        renewer.server = None
        server.stop()   # the app stops

        restore()
        out = subprocess.run([sys.executable, str(ROOT / "manage.py"), "bump_revision"], env=env, cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
        assert "compacted" in out

        migrate(env)
        server.start()   # again, on the restored database
        renewer.server = server
        renewals = renewer.renewals
        while renewer.renewals < renewals + 20:   # the workload writes on the restored history
            renewer.stop.wait(0.05)

        # Every resourceVersion handed out before the restore (before or after the backup) is
        # gone: 410 Expired, never a silent resume.
        for rv in (seen, lost[0], lost[0] - 1):
            status, got = _resume(server, rv)
            if status == 200:
                assert got["type"] == "ERROR" and got["object"]["code"] == 410, (rv, got)
            else:
                assert status == 410, (rv, status, got)
        status, _, body = server.request("GET", f"{LEASES}?resourceVersion={seen}&resourceVersionMatch=Exact")
        assert status == 410 and body["reason"] == "Expired", body

        # The relist: the restored state, without the lost objects; a watch from it sees the
        # workload's next renewal.
        status, _, listed = server.request("GET", LEASES)
        names = sorted(item["metadata"]["name"] for item in listed["items"])
        assert names == ["kept-0", "kept-1", "kept-2", "kept-3", "kept-4", "renewed"]
        assert _rv(listed) > seen
        status, event = _resume(server, _rv(listed))
        assert status == 200 and event["type"] == "MODIFIED" and event["object"]["metadata"]["name"] == "renewed"
        assert _rv(event["object"]) > seen
        renewer.stop.set()
        renewer.join(5)
    finally:
        renewer.stop.set()
        server.stop()
        if drop is not None:
            drop()

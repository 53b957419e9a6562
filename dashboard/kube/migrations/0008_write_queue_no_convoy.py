"""PostgreSQL only: group commit's waiters no longer take the revision lock one after another.

0006's kube_write woke its waiters at once (a shared wait), but each whose update the holder had
not run (queued after the holder's scan: during its commit's flush, the longest part) then
waited for the lock exclusively: a convoy, one grant, wake-up and commit after another, each
waiting for a core while it held the lock (docs/BENCHMARKS.md, "Group commit's convoy"). Now:

- the holder runs the queue again after its own update, so what was queued meanwhile shares its
  transaction and flush;
- a waiter's shared hold is a session lock let go at once, not held to its transaction's end;
- a waiter whose update is not done tries the lock (no wait): the first to get it runs the
  queue, and the others wait for it in shared mode again, and find theirs done. Only a waiter
  that missed twice with no holder in the way (other waiters' brief shared holds) waits for the
  lock exclusively.

kube_write's signature and answers are 0006's: kube/storage/postgresql.py is unchanged."""

import importlib

from django.db import migrations

CREATE = """
CREATE OR REPLACE PROCEDURE kube_write(statement text, INOUT rv bigint DEFAULT NULL, INOUT outcome text DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    mine bigint;
    typed bigint;
    item record;
    n integer;
    tries integer := 0;
BEGIN
    IF pg_try_advisory_xact_lock(7411) THEN
        n := kube_write_queued(32);
        EXECUTE statement INTO rv, typed;
        -- (queued while it ran: one flush for them too; 64 subtransactions at most in all)
        PERFORM kube_write_queued(63 - n);
        outcome := 'own';
        RETURN;
    END IF;
    INSERT INTO kube_write_queue (statement) VALUES (statement) RETURNING id INTO mine;
    COMMIT;   -- (unlogged: no WAL flush) now the holder's next scan sees it
    LOOP
        -- Wait for the holder to commit: a shared hold, let go at once (every waiter wakes
        -- together, and none keeps the lock from the one that takes it next).
        PERFORM pg_advisory_lock_shared(7411);
        PERFORM pg_advisory_unlock_shared(7411);
        SELECT q.done, q.rv, q.failed INTO item FROM kube_write_queue q WHERE q.id = mine;
        outcome := 'handed';
        EXIT WHEN item.done;
        -- Queued after the holder's last scan: the first to take the lock runs the queue; the
        -- others wait for it (the loop again). A second miss (another waiter's shared hold in
        -- the way, not a holder) waits for the lock in turn.
        tries := tries + 1;
        IF tries >= 3 THEN
            PERFORM pg_advisory_xact_lock(7411);
        ELSIF NOT pg_try_advisory_xact_lock(7411) THEN
            CONTINUE;
        END IF;
        SELECT q.done, q.rv, q.failed INTO item FROM kube_write_queue q WHERE q.id = mine;
        IF NOT item.done THEN
            -- (a row left by a session that died before it was answered: done, never read)
            DELETE FROM kube_write_queue WHERE done AND queued_at < now() - interval '10 minutes';
            PERFORM kube_write_queued(NULL);   -- mine among them, in queue order
            SELECT q.done, q.rv, q.failed INTO item FROM kube_write_queue q WHERE q.id = mine;
            outcome := 'own';
        END IF;
        EXIT;
    END LOOP;
    DELETE FROM kube_write_queue WHERE id = mine;
    rv := item.rv;
    IF item.failed IS NOT NULL THEN
        outcome := 'failed';
    END IF;
END $$;
"""

PREVIOUS = importlib.import_module("dashboard.kube.migrations.0006_write_queue")


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":   # (0006's procedure again)
        start = PREVIOUS.CREATE.index("CREATE PROCEDURE kube_write(")
        schema_editor.execute(PREVIOUS.CREATE[start:].replace("CREATE PROCEDURE", "CREATE OR REPLACE PROCEDURE", 1))


class Migration(migrations.Migration):

    dependencies = [
        ('kube', '0007_revision_pack'),
    ]

    operations = [migrations.RunPython(forwards, backwards)]

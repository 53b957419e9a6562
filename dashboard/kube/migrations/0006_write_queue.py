"""PostgreSQL only: the write queue through which a writer that finds the revision lock taken
hands its update to the holder, who commits every queued update with its own in one transaction
(one WAL flush): kube/storage/postgresql.py, docs/ARCHITECTURE.md "Group commit on PostgreSQL".

kube_write(statement): statement is one of postgresql.py's conditional updates, its parameters
bound (it answers (revision, typed rows) or no row). With the lock free, the caller runs the
queued updates, then its own, in its transaction. Else it queues its update (an unlogged row,
committed at once and without a WAL flush), waits for the holder to let go (in shared mode: the
waiters wake together, not one grant and wake-up after another) and finds its update done by
the holder ("handed"), or else takes the lock and runs the queue itself ("own"). A queued update that raises fails alone (a
subtransaction): its owner is told "failed" and runs it again by itself. The lock's key is
postgresql.py's REVISION_LOCK."""

from django.db import migrations

CREATE = """
CREATE UNLOGGED TABLE kube_write_queue (
    id bigserial PRIMARY KEY,
    statement text NOT NULL,
    done boolean NOT NULL DEFAULT false,
    rv bigint,
    failed text,
    queued_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION kube_write_queued(most integer) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    item record;
    written bigint;
    typed bigint;
    n integer := 0;
BEGIN
    FOR item IN SELECT id, statement FROM kube_write_queue WHERE NOT done ORDER BY id LIMIT most LOOP
        BEGIN
            EXECUTE item.statement INTO written, typed;
            UPDATE kube_write_queue SET done = true, rv = written WHERE id = item.id;
        EXCEPTION WHEN OTHERS THEN
            UPDATE kube_write_queue SET done = true, failed = SQLSTATE || ': ' || SQLERRM WHERE id = item.id;
        END;
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

CREATE PROCEDURE kube_write(statement text, INOUT rv bigint DEFAULT NULL, INOUT outcome text DEFAULT NULL)
LANGUAGE plpgsql AS $$
DECLARE
    mine bigint;
    typed bigint;
    item record;
BEGIN
    IF pg_try_advisory_xact_lock(7411) THEN
        PERFORM kube_write_queued(64);   -- (each is a subtransaction: 64 stay in the backend's cache)
        EXECUTE statement INTO rv, typed;
        outcome := 'own';
        RETURN;
    END IF;
    INSERT INTO kube_write_queue (statement) VALUES (statement) RETURNING id INTO mine;
    COMMIT;   -- (unlogged: no WAL flush) now the holder's next scan sees it
    -- Wait for the holder in shared mode: when it lets go, every waiter is woken at once (not
    -- one exclusive grant, one wake-up after another) and most find their update done.
    PERFORM pg_advisory_xact_lock_shared(7411);
    SELECT q.done, q.rv, q.failed INTO item FROM kube_write_queue q WHERE q.id = mine;
    outcome := 'handed';
    IF NOT item.done THEN   -- (queued after the holder's scan) hold the lock and run the queue
        COMMIT;
        PERFORM pg_advisory_xact_lock(7411);
        SELECT q.done, q.rv, q.failed INTO item FROM kube_write_queue q WHERE q.id = mine;
    END IF;
    IF NOT item.done THEN
        -- (a row left by a session that died before it was answered: done, never read)
        DELETE FROM kube_write_queue WHERE done AND queued_at < now() - interval '10 minutes';
        PERFORM kube_write_queued(NULL);   -- mine among them, in queue order
        SELECT q.done, q.rv, q.failed INTO item FROM kube_write_queue q WHERE q.id = mine;
        outcome := 'own';
    END IF;
    DELETE FROM kube_write_queue WHERE id = mine;
    rv := item.rv;
    IF item.failed IS NOT NULL THEN
        outcome := 'failed';
    END IF;
END $$;
"""

DROP = """
DROP PROCEDURE IF EXISTS kube_write(text, bigint, text);
DROP FUNCTION IF EXISTS kube_write_queued(integer);
DROP TABLE IF EXISTS kube_write_queue;
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ('kube', '0005_compaction_history'),
    ]

    operations = [migrations.RunPython(forwards, backwards)]

"""Django's `migrate`, one at a time: on PostgreSQL it first takes an advisory lock, so the
migrate init containers of several new pods (deploy/kubernetes/deployment.yaml), a compose
`migrate` step and an operator's run never migrate the same database at once. The others wait,
then find nothing left to apply. SQLite needs nothing: its writers already take turns.

Directly on PostgreSQL the lock is a session lock around Django's migrate. Through PgBouncer in
transaction pooling (KUBEDASH_PGBOUNCER) a session lock would stay on whichever server
connection took it (and the unlock might reach another): there the whole migrate runs in one
transaction, which holds both its server connection and a transaction-level lock until it ends
(PostgreSQL's DDL is transactional; each migration is a savepoint inside it).
"""
from django.conf import settings
from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import connections, transaction

LOCK_KEY = 7412   # (store.py's revision lock is 7411: these never meet)


class Command(DjangoMigrate):
    help = DjangoMigrate.help + " kubedash: one at a time (a PostgreSQL advisory lock)."

    def handle(self, *args, **options):
        connection = connections[options["database"]]
        if connection.vendor != "postgresql":
            return super().handle(*args, **options)
        if settings.KUBEDASH_PGBOUNCER:
            with transaction.atomic(using=options["database"]):
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
                return super().handle(*args, **options)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
        try:
            return super().handle(*args, **options)
        finally:
            if connection.connection is not None:   # (a lost connection has released it already)
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])

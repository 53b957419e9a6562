"""Django's `migrate`, one at a time: on PostgreSQL it first takes a session advisory lock, so
the migrate init containers of several new pods (deploy/kubernetes/deployment.yaml), a compose
`migrate` step and an operator's run never migrate the same database at once. The others wait,
then find nothing left to apply. SQLite needs nothing: its writers already take turns."""
from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import connections

LOCK_KEY = 7412   # (store.py's revision lock is 7411, a transaction lock: these never meet)


class Command(DjangoMigrate):
    help = DjangoMigrate.help + " kubedash: one at a time (a PostgreSQL advisory lock)."

    def handle(self, *args, **options):
        connection = connections[options["database"]]
        if connection.vendor != "postgresql":
            return super().handle(*args, **options)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [LOCK_KEY])
        try:
            return super().handle(*args, **options)
        finally:
            if connection.connection is not None:   # (a lost connection has released it already)
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [LOCK_KEY])

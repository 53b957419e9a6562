"""Django's `migrate`, one at a time: the storage backend holds it to its turn (on PostgreSQL an
advisory lock, kube/storage/postgresql.py), so the migrate init containers of several new pods
(deploy/kubernetes/deployment.yaml), a compose `migrate` step and an operator's run never migrate
the same database at once. The others wait, then find nothing left to apply. SQLite needs
nothing: its writers already take turns.
"""
from django.core.management.commands.migrate import Command as DjangoMigrate
from django.db import connections

from dashboard.kube import storage


class Command(DjangoMigrate):
    help = DjangoMigrate.help + " kubedash: one at a time (a PostgreSQL advisory lock)."

    def handle(self, *args, **options):
        connection = connections[options["database"]]
        with storage.backend(connection).one_migration_at_a_time(connection):
            return super().handle(*args, **options)

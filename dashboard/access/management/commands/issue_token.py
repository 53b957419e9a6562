"""`manage.py issue_token USERNAME --role ROLE [--impersonate]`: create a bearer token (the
user if needed); --impersonate lets it act as other identities (access/impersonation.py).

The token is shown once (only its hash is stored) and is the last line of output, so
scripts can take it with `| tail -n 1`.
"""
from django.core.management.base import BaseCommand

from dashboard.access.models import Role
from dashboard.access.tokens import issue_token


class Command(BaseCommand):
    help = "Issue a new API bearer token for USERNAME (created if needed) with ROLE."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--name", default="", help="a label for the token")
        parser.add_argument("--impersonate", action="store_true",
                            help="the token may send Impersonate-User/-Group headers and act as any identity "
                                 "(more than its own role allows): for a service writing as its users")

    def handle(self, *args, **options):
        token = issue_token(options["username"], options["role"], name=options["name"],
                            impersonate=options["impersonate"])
        may = "; it may impersonate" if options["impersonate"] else ""
        self.stdout.write(f"New token for {options['username']} (role {options['role']}{may}); "
                          f"only its hash is kept, so it cannot be shown again:")
        self.stdout.write(token)

"""`manage.py issue_token USERNAME --role ROLE`: create a bearer token (the user if needed).

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

    def handle(self, *args, **options):
        token = issue_token(options["username"], options["role"], name=options["name"])
        self.stdout.write(f"New token for {options['username']} (role {options['role']}); "
                          f"only its hash is kept, so it cannot be shown again:")
        self.stdout.write(token)

"""`manage.py kubeconfig USERNAME --role ROLE`: write a kubeconfig with a new bearer token.
`manage.py kubeconfig --oidc`: one whose user signs in with the identity provider (kubelogin).

The cluster entry trusts the local CA (inline, so the file works from any directory) and
points at the HTTPS listener; the user entry carries a token issued for USERNAME, or (--oidc) an
exec entry running `kubectl oidc-login get-token` against the API's JWT issuer.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError

from dashboard.access.models import Role
from dashboard.access.tokens import issue_token
from dashboard.access.own_kubeconfig import (DEFAULT_SERVER, build_kubeconfig, build_oidc_kubeconfig, ca_pem_for,
                                             oidc_provider_for_api, write_kubeconfig)


class Command(BaseCommand):
    help = "Write a kubeconfig for USERNAME with a new bearer token and the local CA."

    def add_arguments(self, parser):
        parser.add_argument("username", nargs="?")
        parser.add_argument("--role", choices=Role.values)
        parser.add_argument("--oidc", action="store_true",
                            help="sign in with the identity provider through kubelogin instead of a token "
                                 "(issuer and client id: KUBEDASH_AUTHENTICATION_CONFIG's first, else KUBEDASH_OIDC_*)")
        parser.add_argument("--issuer-ca", default="",
                            help="with --oidc: a file with the issuer's CA, for kubelogin (--certificate-authority)")
        parser.add_argument("--server", default=DEFAULT_SERVER,
                            help=f"API server URL (default {DEFAULT_SERVER})")
        parser.add_argument("--output", "-o", default="kubeconfig",
                            help="file to write (default ./kubeconfig)")
        parser.add_argument("--namespace", default="default",
                            help="the context's namespace (default: default)")
        parser.add_argument("--name", default="kubeconfig", help="a label for the token")

    def handle(self, *args, **options):
        server = options["server"]
        if urlsplit(server).scheme != "https":
            # kubectl refuses to send a bearer token over plain HTTP.
            raise CommandError("--server must be an https:// URL")
        ca_pem = ca_pem_for(server)
        if options["oidc"]:
            issuer, client_id, _ = oidc_provider_for_api()
            if not issuer:
                raise CommandError("--oidc needs KUBEDASH_AUTHENTICATION_CONFIG (or KUBEDASH_OIDC_ISSUER)")
            config = build_oidc_kubeconfig(server, ca_pem, issuer, client_id, options["namespace"],
                                           options["issuer_ca"])
            path = write_kubeconfig(options["output"], config)
            self.stdout.write(f"Wrote {path} (sign-in with {issuer} through kubelogin, server {server}).")
            self.stdout.write(f"Try: kubectl --kubeconfig {path} get leases -A")
            return
        if not options["username"] or not options["role"]:
            raise CommandError("USERNAME and --role are required (or --oidc)")
        token = issue_token(options["username"], options["role"], name=options["name"])
        config = build_kubeconfig(server, ca_pem, options["username"], token, options["namespace"])
        path = write_kubeconfig(options["output"], config)
        self.stdout.write(f"Wrote {path} (user {options['username']}, role {options['role']}, "
                          f"server {server}).")
        self.stdout.write(f"Try: kubectl --kubeconfig {path} get leases -A")

"""`manage.py start`: everything a first-time user needs, then the server.

Migrates the database, writes ./kubeconfig for the `admin` user, makes sure `admin` can log
in to the pages, prints how to use both, starts the demo simulator beside the server, and runs
`serve` (by its name: it takes every option `serve` takes, plus --no-demo). Safe to run again:
the kubeconfig token and the password are kept while they still work, so restarts pile nothing up.
It lives with the demo because the simulator is what it adds to `serve`.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.core.management import call_command, get_commands, load_command_class
from django.core.management.base import BaseCommand

from dashboard.access.own_kubeconfig import build_kubeconfig, ca_pem_for, client_url, current_token, write_kubeconfig
from dashboard.access.models import Role
from dashboard.access.tokens import ensure_user, issue_token, token_works
from dashboard.demo.runner import DEFAULT_NAMESPACES, start_demo, stop_demo
from dashboard.kube import codec

ADMIN = "admin"
PASSWORD_FILE = "admin-password"


def read_token(path: Path) -> str | None:
    """The token of the current context's user in the kubeconfig at path, or None if there is
    none (no file, not YAML)."""
    try:
        return current_token(codec.load_yaml(path.read_text()))
    except (OSError, codec.YAMLError):
        return None


def ensure_admin_kubeconfig(path: Path, server: str, namespace: str = "default") -> bool:
    """Write the admin kubeconfig; reuse its token if it still works. True if reused."""
    ca_pem = ca_pem_for(server)
    token = read_token(path)
    reused = bool(token) and token_works(token, ADMIN, Role.ADMIN)
    if not reused:
        token = issue_token(ADMIN, Role.ADMIN, name="start: ./kubeconfig")
    # Rewritten even when reused: the server URL or the CA may have changed since.
    write_kubeconfig(path, build_kubeconfig(server, ca_pem, ADMIN, token, namespace))
    return reused


def ensure_admin_password(data_dir: Path) -> str | None:
    """Make sure `admin` can log in; return the password, or None if it was changed since.

    The first run picks a random password and keeps it in DATA_DIR/admin-password (0600);
    later runs reuse it, and never overwrite a password someone set through the site.
    """
    path = Path(data_dir) / PASSWORD_FILE
    password = path.read_text().strip() if path.exists() else ""
    if not password:
        password = secrets.token_urlsafe(12)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(password + "\n")
        os.chmod(path, 0o600)
    user = ensure_user(ADMIN, Role.ADMIN)
    if not user.password or not user.has_usable_password():
        # New user, or one made by issue_token (password ""): give it the stored one.
        user.set_password(password)
        user.save(update_fields=["password"])
        return password
    return password if user.check_password(password) else None


class Command(BaseCommand):
    help = "Migrate, write ./kubeconfig and the admin login, then run the server."

    def add_arguments(self, parser):
        add_serve_arguments(parser)   # --host, --port, --tls-port, --workers, … as `serve` has them
        parser.add_argument("--no-demo", action="store_true",
                            help="do not run the demo simulator (leases renewing, endpoints "
                                 "flapping, jobs progressing in namespaces demo, payments, batch)")

    def handle(self, *args, **options):
        host, port, tls_port = options["host"], options["port"], options["tls_port"]
        self.stdout.write("Preparing the database ...")
        call_command("migrate", interactive=False, verbosity=max(0, options["verbosity"] - 1))
        # Hashed, compressed static files (served with a year's caching); a second run copies
        # only what changed.
        call_command("collectstatic", interactive=False, verbosity=0)

        kubeconfig = Path(settings.BASE_DIR) / "kubeconfig"
        server = client_url("https", host, tls_port)
        reused = ensure_admin_kubeconfig(kubeconfig, server)
        password = ensure_admin_password(settings.DATA_DIR)

        shown = _relative(kubeconfig)
        site = client_url("http", host, port)
        login = settings.LOGIN_URL if str(settings.LOGIN_URL).startswith("/") else "/"
        if password is None:
            password = (f"(changed since; the one in {Path(settings.DATA_DIR) / PASSWORD_FILE} "
                        f"no longer works)")
        self.stdout.write("")
        self.stdout.write("Dashboard:")
        self.stdout.write(f"  open      {site}{login}")
        self.stdout.write(f"  username  {ADMIN}")
        self.stdout.write(f"  password  {password}")
        self.stdout.write("kubectl:")
        self.stdout.write(f"  kubectl --kubeconfig {shown} get leases -A")
        self.stdout.write(f"  ({'kept' if reused else 'wrote'} {shown}: user {ADMIN}, server {server})")
        if not options["no_demo"]:
            self.stdout.write(f"Demo: a simulator writes to namespaces {DEFAULT_NAMESPACES} "
                              f"through the API (--no-demo turns it off)")
        self.stdout.write("")
        if "KUBEDASH_REQUEST_LOG" not in os.environ:
            # This terminal is for a person (and the demo writes many times a second): no JSON
            # line per request unless asked for; `serve` (production) logs them by default.
            os.environ["KUBEDASH_REQUEST_LOG"] = "0"
            settings.KUBEDASH_REQUEST_LOG = False
        # The demo simulator is a separate API client; it starts writing once serve listens.
        demo = None if options["no_demo"] else start_demo(site)
        try:
            call_command("serve", **{**{k: v for k, v in options.items() if k != "no_demo"}, "allow_placeholders": True})
        finally:
            stop_demo(demo)


def add_serve_arguments(parser) -> None:
    """Add `serve`'s options to start's parser: the command found by its name, as call_command
    finds it (the server is the composition root; nothing imports it)."""
    load_command_class(get_commands()["serve"], "serve").add_arguments(parser)


def _relative(path: Path) -> str:
    try:
        return "./" + str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)

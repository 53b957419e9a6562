"""`manage.py proxy_tls --host NAME --to DIR`: make or renew (30 days before expiry) the serving
certificate with the local CA (dashboard/access/tls.py, in DATA_DIR/tls) and copy what a proxy
needs, the certificate, its key and the CA certificate, into DIR: never the CA's key, the
secret key or the credentials key, which stay in DATA_DIR. docker-compose.yml runs it in its
migrate step and daily in its `certs` service; nginx reloads to pick the renewed one up."""
from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from dashboard.access.tls import ensure_tls


class Command(BaseCommand):
    help = "Make or renew the proxy's serving certificate and copy it (not the CA key) to a directory."

    def add_arguments(self, parser):
        parser.add_argument("--host", action="append", default=[], help="a DNS name or IP it must cover (repeatable)")
        parser.add_argument("--to", required=True, help="the directory the proxy reads")

    def handle(self, *args, host=(), to=None, **options):
        paths = ensure_tls(settings.DATA_DIR, host)
        target = Path(to)
        target.mkdir(parents=True, exist_ok=True)
        for source in (paths.server_cert, paths.server_key, paths.ca_cert):
            partial = target / f".{source.name}.new"
            shutil.copyfile(source, partial)
            partial.chmod(0o600 if source.suffix == ".key" else 0o644)
            partial.replace(target / source.name)   # a reload never sees half a file
        self.stdout.write(f"{paths.server_cert.name}, {paths.server_key.name}, {paths.ca_cert.name} -> {target}")

"""`manage.py follow add|list|remove`: the real clusters kubedash follows (read-only).

    follow add NAME --kubeconfig PATH [--context C] [--namespace N]   PATH "-": standard input
    follow list
    follow set NAME --writes read-only|as-user|own-credentials
    follow remove NAME

`add` stores the kubeconfig reduced to one context, files inlined, encrypted
(dashboard/follow/following.py); it does not contact the cluster: the follower does, and `list`
shows how that goes. Credentials are never printed.
"""
from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from dashboard.follow import following, secrets
from dashboard.follow.models import Cluster
from dashboard.kube.formats import human_duration

MAX_KUBECONFIG_BYTES = 1 << 20


class Command(BaseCommand):
    help = "Follow real Kubernetes clusters: add, list, set (the write mode), remove."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True, metavar="{add,list,set,remove}")
        add = sub.add_parser("add", help="follow a cluster from a kubeconfig (its credentials are stored encrypted)")
        add.add_argument("name", help="the cluster's name in kubedash (a DNS label, not 'local')")
        add.add_argument("--kubeconfig", required=True, metavar="PATH", help="the kubeconfig file; '-' reads standard input")
        add.add_argument("--context", default=None, help="the context to use (default: its current-context)")
        add.add_argument("--namespace", default="", help="follow only this namespace (default: every namespace)")
        writes_help = ("how the dashboard's changes reach the cluster: read-only (default), as-user (impersonating "
                       "the signed-in user with the cluster's credentials) or own-credentials (each user's own kubeconfig)")
        add.add_argument("--writes", default=Cluster.READ_ONLY, choices=Cluster.WRITE_MODES, help=writes_help)
        set_ = sub.add_parser("set", help="change a followed cluster's settings")
        set_.add_argument("name")
        set_.add_argument("--writes", required=True, choices=Cluster.WRITE_MODES, help=writes_help)
        sub.add_parser("list", help="the followed clusters and how their copies are doing")
        remove = sub.add_parser("remove", help="stop following a cluster and delete its objects from kubedash")
        remove.add_argument("name")

    def handle(self, *args, **options):
        return getattr(self, f"_{options['action']}")(options)

    def _add(self, options):
        path = options["kubeconfig"]
        if path == "-":
            text, base_dir = sys.stdin.read(MAX_KUBECONFIG_BYTES + 1), Path.cwd()
        else:
            file = Path(path).expanduser()
            try:
                with open(file, encoding="utf-8") as f:
                    text = f.read(MAX_KUBECONFIG_BYTES + 1)
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"cannot read the kubeconfig {path}: {getattr(exc, 'strerror', None) or exc}") from None
            base_dir = file.resolve().parent
        if len(text) > MAX_KUBECONFIG_BYTES:
            raise CommandError(f"the kubeconfig is larger than {MAX_KUBECONFIG_BYTES} bytes")
        try:
            cluster = following.add(options["name"], text, context=options["context"],
                                   namespace=options["namespace"], base_dir=base_dir,
                                   writes=options["writes"])
        except (ValueError, secrets.CredentialsError) as exc:
            raise CommandError(str(exc)) from None
        scope = f"namespace {cluster.namespace}" if cluster.namespace else "every namespace"
        self.stdout.write(f"Following {cluster.name}: {cluster.server} (context {cluster.context}, {scope}, writes {cluster.writes}). "
                          "kubedash's follower connects to it; `manage.py follow list` shows how that goes.")

    def _list(self, options):
        now = timezone.now()
        rows = [("NAME", "SERVER", "CONTEXT", "NAMESPACE", "WRITES", "STATE", "LAST WORD", "LAST EVENT", "MESSAGE")]

        def ago(moment):
            return f"{human_duration(max((now - moment).total_seconds(), 0))} ago" if moment else "never"

        for c in Cluster.objects.order_by("name"):
            # Live only while current (Cluster.is_current): a follower that stopped reporting
            # (its process died) leaves "live" on the row, and that is not shown as live.
            state = c.state if c.is_current(now) or c.state != Cluster.LIVE else "stale (no heartbeat)"
            rows.append((c.name, c.server, c.context or "-", c.namespace or "(all)", c.writes, state,
                         ago(c.heard_at), ago(c.last_event_at), c.message if state != Cluster.LIVE else ""))
        if len(rows) == 1:
            self.stdout.write("No followed clusters. Add one: manage.py follow add NAME --kubeconfig PATH")
            return
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for row in rows:
            self.stdout.write("   ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())

    def _set(self, options):
        try:
            cluster = following.set_writes(options["name"], options["writes"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{cluster.name}: writes {cluster.writes}.")

    def _remove(self, options):
        try:
            removed = following.remove(options["name"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Stopped following {options['name']}; removed {removed} of its objects from kubedash.")

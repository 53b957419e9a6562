"""`manage.py simulate`: the demo cluster (leader elections, endpoints, jobs) over the HTTP API.

    manage.py simulate [--server http://127.0.0.1:8000] [--token T | --token-file F]
                       [--namespaces demo,payments,batch] [--speed 1.0] [--seed N] [--duration S]

It is a client like any other: it authenticates with a bearer token (without one it issues
a token for the `simulator` user, role editor) and only speaks HTTP; the logic is in
dashboard.demo (its timeline, and one actor module per kind). At exit it prints one summary
line: `simulator summary: writes=N conflicts=N errors=N reads=N seconds=S`.
"""
from __future__ import annotations

import signal
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from dashboard.access.models import Role
from dashboard.access.tokens import issue_token
from dashboard.demo.client import Client, Stats
from dashboard.demo.runner import DEFAULT_NAMESPACES, SIMULATOR_USER
from dashboard.demo.cluster import Simulation


class _Stop(Exception):
    pass


_stopping = False


def _raise_stop(signum, frame):
    """SIGINT / SIGTERM: stop once. Ctrl-C in `start` reaches us twice (the terminal's
    SIGINT, then start's SIGTERM), and the second must not cut the summary short."""
    global _stopping
    if not _stopping:
        _stopping = True
        raise _Stop()


class Command(BaseCommand):
    help = "Run the demo simulator: leases, endpoints and jobs changing, through the HTTP API."

    def add_arguments(self, parser):
        parser.add_argument("--server", default="http://127.0.0.1:8000",
                            help="the API's base URL (default http://127.0.0.1:8000)")
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--token", help="bearer token (default: issue one for user 'simulator', role editor)")
        group.add_argument("--token-file", help="read the bearer token from this file")
        parser.add_argument("--ca-file", help="CA certificate to trust for an https:// server")
        parser.add_argument("--namespaces", default=DEFAULT_NAMESPACES,
                            help=f"comma-separated namespaces to play in (default {DEFAULT_NAMESPACES})")
        parser.add_argument("--speed", type=float, default=1.0,
                            help="time factor: 2 runs everything twice as fast (default 1)")
        parser.add_argument("--seed", type=int, help="random seed, for a repeatable run")
        parser.add_argument("--duration", type=float, default=0,
                            help="stop after this many seconds (default: run until stopped)")
        parser.add_argument("--max-jobs", type=int, default=12, help="at most this many Jobs at once (default 12)")
        parser.add_argument("--wait", type=float, default=60,
                            help="wait up to this many seconds for the server to answer (default 60)")

    def handle(self, *args, **options):
        namespaces = [ns.strip() for ns in options["namespaces"].split(",") if ns.strip()]
        if not namespaces:
            raise CommandError("--namespaces needs at least one namespace")
        if options["speed"] <= 0:
            raise CommandError("--speed must be greater than 0")
        token = self._token(options)
        stats = Stats(log=self._log)
        try:
            client = Client(options["server"], token, stats, ca_file=options["ca_file"])
        except ValueError as exc:
            raise CommandError(str(exc))
        # SIGTERM (from `start`, or a service manager) ends the run as Ctrl-C does.
        previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        started = time.monotonic()
        ready = False
        try:
            self._wait_for_server(client, options["wait"])
            self._check_token(client, namespaces[0])
            ready = True
            sim = Simulation(client, namespaces, speed=options["speed"], seed=options["seed"],
                             max_jobs=options["max_jobs"])
            self._log(f"simulator: driving {options['server']} in namespaces {', '.join(namespaces)} "
                      f"at speed {options['speed']:g} (Ctrl-C stops)")
            started = time.monotonic()
            sim.setup()
            sim.run(duration=options["duration"] or None)
        except (KeyboardInterrupt, _Stop):
            pass
        finally:
            global _stopping
            _stopping = True          # from here on, signals are ignored until we are done
            client.close()
            if ready:
                self.stdout.write(stats.summary(time.monotonic() - started))
                for kind, count in sorted(stats.by_kind.items()):
                    self.stdout.write(f"  {count:6d}  {kind}")
                self.stdout.flush()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _check_token(self, client: Client, namespace: str) -> None:
        """Fail fast on a token the server refuses: every request would fail the same way."""
        probe = client.raw("GET", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases?limit=1")
        if probe.status in (401, 403):
            message = probe.body.get("message", "") if isinstance(probe.body, dict) else ""
            raise CommandError(f"the server refused the simulator's token ({probe.status}): {message}")

    def _token(self, options) -> str:
        if options["token"]:
            return options["token"].strip()
        if options["token_file"]:
            try:
                token = Path(options["token_file"]).read_text().strip()
            except OSError as exc:
                raise CommandError(f"cannot read --token-file: {exc}")
            if not token:
                raise CommandError(f"--token-file {options['token_file']} is empty")
            return token
        return issue_token(SIMULATOR_USER, Role.EDITOR, name="manage.py simulate")

    def _wait_for_server(self, client: Client, seconds: float) -> None:
        """`start` launches us alongside the server: begin once it answers."""
        deadline = time.monotonic() + seconds
        while True:
            resp = client.raw("GET", "/readyz")
            if resp.status == 200:
                return
            if time.monotonic() >= deadline:
                raise CommandError(f"the server at {client.host}:{client.port} did not answer /readyz "
                                   f"within {seconds:g}s ({resp.status or resp.body})")
            time.sleep(0.25)

    def _log(self, line: str) -> None:
        self.stderr.write(line)
        self.stderr.flush()

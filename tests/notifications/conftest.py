import pytest

from conftest import migrate, running, LiveServer, server_env

# Maintenance on and elected within a second or so; retries and rule reloads fast.
NOTIFY_ENV = dict(KUBEDASH_MAINTENANCE="1", KUBEDASH_MAINTENANCE_RETRY_PERIOD="0.5",
                  KUBEDASH_MAINTENANCE_LEASE_SECONDS="5", KUBEDASH_MAINTENANCE_RENEW_DEADLINE="3",
                  KUBEDASH_NOTIFY_BACKOFF_SECONDS="0.3", KUBEDASH_NOTIFY_BACKOFF_MAX_SECONDS="1",
                  KUBEDASH_NOTIFY_RULES_RELOAD_SECONDS="0.5", KUBEDASH_NOTIFY_POLL_SECONDS="0.3")


def notify_server(data_dir, **env) -> LiveServer:
    server = LiveServer(data_dir, env=server_env(data_dir, **{**NOTIFY_ENV, **env}))
    migrate(server.env)
    return server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = notify_server(tmp_path_factory.mktemp("notify"))
    with running(s):
        _ = s.admin_token   # (live-admin: the rules' owner unless a test names another)
        yield s


NOTIFY_SCRIPT = """
import shlex
from django.core.management import call_command
for line in {lines!r}:
    call_command(*shlex.split(line))
"""


def notify(server, *lines: str) -> str:
    """Several `manage.py notify …` commands (each a line) in one process: each process costs seconds."""
    return server.manage("shell", "-c", NOTIFY_SCRIPT.format(lines=[f"notify {line}" for line in lines]))

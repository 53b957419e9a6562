"""Fixtures of the browser tests alone (the Chromium ones, for every folder: tests/chromium.py)."""
from __future__ import annotations

import secrets

import pytest

from followed import mirror, shell


@pytest.fixture
def prod(kube_server, ns):
    """A followed cluster, live and current, holding one lease in the test's namespace."""
    name = f"prod-{secrets.token_hex(3)}"
    shell(kube_server, "from django.utils import timezone\nfrom dashboard.follow.models import Cluster\n"
                       f"Cluster.objects.create(name={name!r}, server='https://prod.example:6443', credentials=b'x',"
                       " state='live', heartbeat_at=timezone.now() + timezone.timedelta(hours=1),"
                       " last_event_at=timezone.now())")
    mirror(kube_server, name, ns, [["prod-lease", "prod-holder", 10]])
    yield name
    shell(kube_server, "from dashboard.follow.models import Cluster\nfrom dashboard.kube import mirror\n"
                       f"Cluster.objects.filter(name={name!r}).delete()\nmirror.forget({name!r})")

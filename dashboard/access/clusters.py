"""Which cluster a request is about: the local store, or a followed cluster (dashboard/follow).

Every object in the store belongs to one cluster (a column of the revision log and of each
kind's table). The cluster a piece of work is about is a context variable, set where a
request says it (kube/context.py's RequestContext carries it too: `/clusters/<name>/...` API
paths, `?cluster=` on pages, a websocket's page; the hub's re-checks; the follower writing
what it read upstream) and read by the store's queries (kube/models.py's scoped managers) and
by Principal.can. Unset, it is the local store, so code that knows nothing of clusters keeps
working on local objects.
"""
from __future__ import annotations

import contextvars
import re
from contextlib import contextmanager

LOCAL = "local"   # the cluster of kubedash's own objects (written through its API)

# A DNS label: a followed cluster's name is a URL path segment and a query parameter value.
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

# kubedash's one context variable, for a library boundary: Django calls the models' managers
# (kube/models.py InCluster.get_queryset), a field's default (named by path in five migrations)
# and template tags (web/templatetags/incluster.py) without any argument of ours to carry it.
_current: contextvars.ContextVar[str] = contextvars.ContextVar("kubedash_cluster", default=LOCAL)


def current() -> str:
    return _current.get()


def is_local() -> bool:
    return _current.get() == LOCAL


@contextmanager
def within(name: str):
    """Run the block as work about cluster `name`."""
    token = _current.set(name)
    try:
        yield name
    finally:
        _current.reset(token)


def enter(name: str) -> None:
    """Set the cluster for the rest of this context (a page socket's task, a hub re-check's)."""
    _current.set(name)

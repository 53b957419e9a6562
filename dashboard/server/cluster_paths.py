"""`/clusters/<name>/api/...`: a followed cluster's copy through the same API, read-only.

`kubectl --server https://host:8443/clusters/prod` asks for /clusters/prod/api, /apis,
/openapi/v3, /version: this ASGI wrapper strips the prefix, so the lanes, direct dispatch,
discovery, lists, Tables and watches below answer as for local objects, and runs the request
as work about that cluster (its context's within_cluster, kube/context.py: the store's queries,
watch subscriptions and Principal.can follow it). Writes are refused before the body is read: a followed cluster
changes only in the cluster itself. Names cannot be probed: without valid credentials every
name is 401 on every path (/version and discovery included); with them, a name that is not followed and one the caller may not see (a user
limited to other clusters) get the same 404, discovery included. "local" names kubedash's own
objects, read-only here too.
"""
from __future__ import annotations

import time

import orjson
from asgiref.sync import sync_to_async
from django.db import DatabaseError, close_old_connections

from dashboard.access import clusters
from dashboard.follow.models import Cluster
from dashboard.kube import context, reviews
from dashboard.kube.errors import ApiError, unauthorized
from dashboard.kube.paths import CLUSTER_API_PATH

from .admission import caller_principal

READ_METHODS = ("GET", "HEAD")
NAMES_TTL_SECONDS = 1.0   # a cluster added or removed is seen here within this


def _followed_names() -> frozenset:
    close_old_connections()
    return frozenset(Cluster.objects.values_list("name", flat=True))


class ClusterPaths:
    def __init__(self, app):
        self.app = app
        self._names: frozenset = frozenset()
        self._names_at = float("-inf")

    async def names(self) -> frozenset:
        if time.monotonic() - self._names_at > NAMES_TTL_SECONDS:
            self._names = await sync_to_async(_followed_names, thread_sensitive=False)()
            self._names_at = time.monotonic()
        return self._names

    async def __call__(self, scope, receive, send):
        path = scope["path"] if scope["type"] == "http" else ""
        match = CLUSTER_API_PATH.match(path) if path.startswith("/clusters/") else None   # (every request passes here)
        if match is None:
            return await self.app(scope, receive, send)
        name, rest = match.groups()
        if scope["method"] not in READ_METHODS and not (scope["method"] == "POST" and reviews.by_path(rest)):
            # (an access review writes nothing: "what may I do in this cluster" is answered)
            return await _refuse(send, ApiError(
                405, "MethodNotAllowed",
                f'cluster "{name}" is served read-only here: {scope["method"]} is not allowed; '
                "change its objects in the cluster itself", headers={"Allow": "GET, HEAD"}))
        try:
            known = name == clusters.LOCAL or name in await self.names()
            caller = await sync_to_async(caller_principal, thread_sensitive=False)(scope.get("headers", ()))
        except DatabaseError:
            return await _refuse(send, ApiError(503, "ServiceUnavailable",
                                                "the store is unavailable: try again shortly",
                                                headers={"Retry-After": "1"}))
        if caller is None:
            # Every name, known or not, and every path (discovery and /version too, which the
            # local API answers anonymously): otherwise an answer would tell followed names apart.
            return await _refuse(send, unauthorized())
        if not known or not caller.sees_cluster(name):
            # The same answer for a cluster that is not followed and one this caller may not see.
            return await _refuse(send, ApiError(
                404, "NotFound", f'cluster "{name}" is not followed here (`manage.py follow list` shows those that are)'))
        ctx = context.in_scope(scope)
        ctx.cluster_path = True   # (read-only, "local" too: inline.py, heavy.py, access reviews)
        with ctx.within_cluster(name):
            await self.app({**scope, "path": rest, "raw_path": rest.encode()}, receive, send)


async def _refuse(send, err: ApiError) -> None:
    body = orjson.dumps(err.status())
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    headers += [(k.lower().encode(), v.encode()) for k, v in err.headers.items()]
    await send({"type": "http.response.start", "status": err.code, "headers": headers})
    await send({"type": "http.response.body", "body": body})

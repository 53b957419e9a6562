"""The dashboard's writes to a followed cluster: through to its API server, as the signed-in user.

A followed cluster's copy is written only by its follower (kube/mirror.py). When an admin sets a
cluster's write mode (`Cluster.writes`) to something other than `read-only`, the pages' writes
(forms, the YAML editor, actions, bulk actions and undo, delete) still call store.create /
update / delete, handing them the Writer (`through=`, from the request's context: web/edit_views.py
editor_view); the store hands them to the Writer, which sends them upstream:

- `as-user`: with the cluster's own credentials, impersonating the user (`Impersonate-User:
  <kubedash username>`, `Impersonate-Group: kubedash:role:<role>`, one
  `Impersonate-Group: kubedash:namespace:<ns>` per namespace limit): the cluster's RBAC for
  those names decides;
- `own-credentials`: with the kubeconfig the user stored for that cluster (UserCredentials).

An update is a PUT of the object built on the copy the user saw, at the upstream resourceVersion
that copy was read at, so a change upstream meanwhile is upstream's 409 and today's conflict
page. What upstream returns is mirrored at once (read-your-writes), and the follower's later
events for older versions are not applied over it (mirror.py, newer_only).

Upstream's answers are another server's words: only a kube Status's message (and its causes'
field and message) are shown, printable and bounded; anything else is said in our words
(informer.describe). One JSON audit line per write (logger `kubedash.audit`).
"""
from __future__ import annotations

import copy
import http
import json
import logging
import threading
import time
from urllib.parse import quote

import orjson
import urllib3

from dashboard.access import clusters as access_clusters
from dashboard.access.impersonation import groups_for as impersonation_groups
from dashboard.kube import mirror, store
from dashboard.kube.errors import STALE_OBJECT, ApiError, conflict, not_found
from dashboard.kube.registry import Resource

from . import admit, destination, following, secrets, upstream_kubeconfig
from .failures import collection_path, describe
from .models import Cluster, UserCredentials

audit = logging.getLogger("kubedash.audit")

FIELD_MANAGER = "kubedash"         # the manager upstream records for the dashboard's writes
TIMEOUT = (5, 30)                  # connect, read (seconds)
ACCESS_CACHE_SECONDS = 10          # how long an upstream access review's answer is reused
MAX_SHOWN = 400                    # characters of an upstream message shown


class NoCredentials(Exception):
    """own-credentials mode, and this user stored none (or they cannot be decrypted)."""


def mode_refusal(cluster: Cluster, principal) -> str | None:
    """Why this principal's dashboard writes cannot reach the cluster at all (its write mode,
    their stored credentials), or None. kubedash's own role is checked before this."""
    if cluster.writes == Cluster.AS_USER:
        return None
    if cluster.writes == Cluster.OWN_CREDENTIALS:
        if UserCredentials.objects.filter(cluster=cluster, user_id=principal.user_id).exists():
            return None
        return (f"{cluster.name} takes changes with each user's own credentials: store your kubeconfig "
                f"for {cluster.name} first (/clusters/{cluster.name}/credentials/).")
    return f"{cluster.name} is followed read-only: change it in the cluster itself."


def impersonation(principal) -> list[tuple[str, str]]:
    """The as-user headers (the contract with kubedash's own API, docs/FOLLOWING.md)."""
    return [("Impersonate-User", principal.username),
            *(("Impersonate-Group", group) for group in impersonation_groups(principal))]


def _clean(text, limit: int = MAX_SHOWN) -> str:
    text = "".join(c if c.isprintable() else " " for c in str(text or ""))
    return text if len(text) <= limit else text[:limit] + "…"


def _path(res: Resource, namespace: str, name: str = "") -> str:
    base = collection_path(res, namespace)
    return f"{base}/{quote(name, safe='')}" if name else base


_cache: dict[tuple, tuple[float, str | None]] = {}
_cache_lock = threading.Lock()


class Writer:
    """One principal's writes to one followed cluster (the store's `through` hands them here)."""

    def __init__(self, cluster: Cluster, principal):
        self.cluster, self.principal = cluster, principal

    # -- how to reach the cluster, as whom

    def _config(self) -> dict:
        if self.cluster.writes == Cluster.OWN_CREDENTIALS:
            row = UserCredentials.objects.filter(cluster=self.cluster, user_id=self.principal.user_id).first()
            if row is None:
                raise NoCredentials()
            return json.loads(secrets.decrypt(bytes(row.credentials)))
        return following.credentials(self.cluster)

    def identity(self) -> str:
        """Who upstream sees, for the audit line (never a secret)."""
        if self.cluster.writes == Cluster.AS_USER:
            return f"{self.principal.username} (impersonated with the cluster's credentials)"
        return f"{self.principal.username}'s own credentials"

    def _headers(self) -> list[tuple[str, str]]:
        return impersonation(self.principal) if self.cluster.writes == Cluster.AS_USER else []

    def request(self, method: str, path: str, query: list | None = None, body: dict | None = None):
        """(HTTP status, decoded JSON body or None). Raises ApiError 503 when the cluster cannot be
        reached, in a sentence of our own (never a library's text or upstream's body)."""
        if why := mode_refusal(self.cluster, self.principal):
            raise ApiError(403, "Forbidden", why)
        try:
            config = self._config()
        except (NoCredentials, secrets.CredentialsError, ValueError) as err:
            raise ApiError(503, "ServiceUnavailable", f"cannot use the credentials for {self.cluster.name}: "
                           + (str(err) if isinstance(err, secrets.CredentialsError) else "store them again")) from None
        try:
            client = upstream_kubeconfig.api_client(config)
        except upstream_kubeconfig.KubeconfigError as err:
            raise ApiError(503, "ServiceUnavailable", f"cannot use the credentials for {self.cluster.name}: {err}") from None
        try:
            if why := describe_refusal(client):
                raise ApiError(503, "ServiceUnavailable", f"{self.cluster.name} is not reachable here: {why}")
            _, url, headers, _, _ = client.param_serialize(
                method=method, resource_path=path, query_params=query or [],
                header_params={"Accept": "application/json", "Content-Type": "application/json"},
                auth_settings=["BearerToken"])
            sent = urllib3.HTTPHeaderDict(headers)
            for key, value in self._headers():
                sent.add(key, value)   # (repeated headers: one Impersonate-Group per group)
            response = client.rest_client.request(method, url, headers=sent, body=body, _request_timeout=TIMEOUT)
            data = response.read() if hasattr(response, "read") else response.data
            status = response.status
        except ApiError:
            raise
        except Exception as err:   # noqa: BLE001 - any failure to reach it, in our words
            raise ApiError(503, "ServiceUnavailable", f"cannot reach {self.cluster.name}: {describe(err)}") from None
        finally:
            client.close()
        try:
            decoded = orjson.loads(data) if data else None
        except orjson.JSONDecodeError:
            decoded = None
        return status, decoded

    # -- errors

    def _error(self, status: int, body, res: Resource, name: str) -> ApiError:
        """Upstream's refusal as the pages show today's: 409 the conflict page, 422 causes beside
        the fields, 403 "the cluster refused: …". Only a Status's message and causes are used."""
        is_status = isinstance(body, dict) and body.get("kind") == "Status"
        message = _clean(body.get("message")) if is_status else ""
        reason = body.get("reason") if is_status and isinstance(body.get("reason"), str) else ""
        if status == 409 and reason == "AlreadyExists":
            return ApiError(409, "AlreadyExists", message or f'{res.plural} "{name}" already exists')
        if status == 409:
            return conflict(res.group, res.plural, name, STALE_OBJECT)
        if status == 404:
            return not_found(res.group, res.plural, name)
        if status == 422:
            details = body.get("details") if is_status and isinstance(body.get("details"), dict) else {}
            causes = [{"reason": _clean(c.get("reason"), 60), "field": _clean(c.get("field"), 200),
                       "message": _clean(c.get("message"))}
                      for c in (details.get("causes") or [])[:20] if isinstance(c, dict)]
            return ApiError(422, "Invalid", f"the cluster refused: {message or 'the object is invalid'}",
                            {"name": name, "group": res.group, "kind": res.kind, "causes": causes})
        if status in (401, 403):
            return ApiError(403, "Forbidden", f"the cluster refused: {message or 'forbidden'}")
        try:
            phrase = " " + http.HTTPStatus(status).phrase
        except ValueError:
            phrase = ""
        return ApiError(502, "InternalError", f"{self.cluster.name} answered HTTP {status}{phrase}")

    # -- the store's verbs (store.create / update / delete hand them here)

    def _audit(self, verb: str, res: Resource, namespace: str, name: str, status: int, dry_run: bool) -> None:
        if dry_run:
            return
        fields = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "event": "follow.write",
            "cluster": self.cluster.name, "user": self.principal.username, "upstreamIdentity": self.identity(),
            "mode": self.cluster.writes, "verb": verb, "resource": res.plural, "group": res.group,
            "namespace": namespace, "name": name, "upstreamStatus": status}
        # The message is the JSON line itself (KUBEDASH_LOG_FORMAT=text); the JSON log's formatter
        # writes the fields as its own (server/logs.py).
        audit.info(json.dumps(fields, separators=(",", ":")), extra={"fields": fields})

    def _send(self, verb: str, method: str, res: Resource, namespace: str, name: str, *, dry_run: bool,
              body: dict | None = None, query: list | None = None, collection: bool = False) -> dict:
        query = list(query or [])
        if method in ("POST", "PUT"):
            query.append(("fieldManager", FIELD_MANAGER))
        if dry_run:
            query.append(("dryRun", "All"))
        try:
            status, answer = self.request(method, _path(res, namespace, "" if collection else name), query, body)
        except ApiError as err:
            self._audit(verb, res, namespace, name, err.code, dry_run)
            raise
        self._audit(verb, res, namespace, name, status, dry_run)
        if not 200 <= status < 300:
            raise self._error(status, answer, res, name)
        if not isinstance(answer, dict):
            raise ApiError(502, "InternalError", f"{self.cluster.name} answered without an object")
        return answer

    def _mirrored(self, res: Resource, namespace: str, name: str, obj: dict | None) -> dict | None:
        """Mirror what upstream answered now (read-your-writes); the object as stored here."""
        if obj is not None:
            try:
                obj = admit.admit(res, obj)
            except admit.Refused:
                return None   # (the follower reports it)
        mirror.mirror(self.cluster.name, [mirror.Mirrored(res, namespace, name, obj)],
                      lambda: Cluster.objects.filter(pk=self.cluster.pk).exists())
        if obj is None:
            return None
        try:
            return store.get(res, namespace, name)
        except ApiError:
            return obj

    def _catch_up(self, res: Resource, namespace: str, name: str) -> None:
        """After upstream's 409: mirror its current object now, so the conflict page compares
        the user's change with what the cluster holds, not with a copy the follower has yet to
        update."""
        try:
            status, current = self.request("GET", _path(res, namespace, name))
        except ApiError:
            return
        if status == 200 and isinstance(current, dict):
            self._mirrored(res, namespace, name, current)

    def create(self, res: Resource, namespace: str, obj: dict, *, dry_run: bool = False) -> store.Result:
        body = copy.deepcopy(obj)
        body["apiVersion"], body["kind"] = res.api_version, res.kind
        body.setdefault("metadata", {})["namespace"] = namespace
        name = body["metadata"].get("name", "")
        answer = self._send("create", "POST", res, namespace, name, dry_run=dry_run, body=body, collection=True)
        shown = answer if dry_run else (self._mirrored(res, namespace, name, answer) or answer)
        return store.Result(shown, created=True)

    def update(self, res: Resource, namespace: str, name: str, obj_or_fn, *, dry_run: bool = False) -> store.Result:
        with access_clusters.within(self.cluster.name):
            current = store.get(res, namespace, name)
            upstream_rv = mirror.upstream_rv(self.cluster.name, res, namespace, name)
        new = obj_or_fn(copy.deepcopy(current)) if callable(obj_or_fn) else copy.deepcopy(obj_or_fn)
        wanted = (new.get("metadata") or {}).get("resourceVersion") or ""
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise conflict(res.group, res.plural, name, STALE_OBJECT)   # stale against the copy already
        new["apiVersion"], new["kind"] = res.api_version, res.kind
        meta = new.setdefault("metadata", {})
        meta.update(name=name, namespace=namespace, resourceVersion=upstream_rv)
        meta.pop("managedFields", None)   # upstream keeps its own
        if "status" in current:
            new["status"] = current["status"]   # the main resource keeps status, as upstream does
        try:
            answer = self._send("update", "PUT", res, namespace, name, dry_run=dry_run, body=new)
        except ApiError as err:
            if err.code == 409 and err.reason == "Conflict":
                self._catch_up(res, namespace, name)
            raise
        changed = str(answer.get("metadata", {}).get("resourceVersion")) != upstream_rv
        if dry_run:
            return store.Result(answer, changed=changed)
        return store.Result(self._mirrored(res, namespace, name, answer) or answer, changed=changed)

    def delete(self, res: Resource, namespace: str, name: str, *, uid: str | None = None, rv: str | None = None,
               dry_run: bool = False) -> store.Result:
        with access_clusters.within(self.cluster.name):
            current = store.get(res, namespace, name)
        preconditions = {}
        if uid:
            preconditions["uid"] = uid
        if rv:
            if rv != current["metadata"]["resourceVersion"]:
                raise conflict(res.group, res.plural, name, STALE_OBJECT)
            preconditions["resourceVersion"] = mirror.upstream_rv(self.cluster.name, res, namespace, name)
        body = {"kind": "DeleteOptions", "apiVersion": "v1", **({"preconditions": preconditions} if preconditions else {})}
        answer = self._send("delete", "DELETE", res, namespace, name, dry_run=dry_run, body=body)
        if dry_run:
            return store.Result(current, deleted=True)
        # A Status: gone now; the object with a deletionTimestamp: waiting on its finalizers.
        if answer.get("kind") == res.kind and (answer.get("metadata") or {}).get("deletionTimestamp"):
            return store.Result(self._mirrored(res, namespace, name, answer) or answer, deleted=False)
        self._mirrored(res, namespace, name, None)
        return store.Result(current, deleted=True)

    # -- buttons follow permission

    def access_refusal(self, verb: str, res: Resource, namespace: str) -> str | None:
        """What upstream answers a SelfSubjectAccessReview for this user (cached briefly): None
        when allowed (or when the cluster cannot be asked: the write itself will say)."""
        key = (self.cluster.name, self.cluster.writes, self.principal.username, self.principal.role,
               self.principal.namespaces, verb, res.group, res.plural, namespace)
        now = time.monotonic()
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"verb": verb, "group": res.group, "resource": res.plural,
                                                  "namespace": namespace}}}
        try:
            status, answer = self.request("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", [], review)
        except ApiError:
            return None
        why = None
        if 200 <= status < 300 and isinstance(answer, dict):
            st = answer.get("status") or {}
            if isinstance(st, dict) and st.get("allowed") is not True:
                why = (f"the cluster refuses: {self.principal.username} may not {verb} {res.plural} "
                       f"in namespace “{namespace}” on {self.cluster.name}")
        with _cache_lock:
            if len(_cache) > 10_000:
                _cache.clear()
            _cache[key] = (now + ACCESS_CACHE_SECONDS, why)
        return why


def describe_refusal(client) -> str | None:
    """Why the client must not connect where its configuration points (follow/destination.py)."""
    for url, what in ((client.configuration.host, "the server"), (client.configuration.proxy, "the proxy")):
        if url and (why := destination.refusal(url, what)):
            return why
    return None

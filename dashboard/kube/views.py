"""HTTP views for the documented Kubernetes paths. Thin: parse the request, call store.

One class serves every kind: the URL names the resource, the registry declares it.
"""
from __future__ import annotations

import json
import logging

import orjson
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpResponse, StreamingHttpResponse
from rest_framework import exceptions as drf_exceptions
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from dashboard.access import clusters, impersonation
from dashboard.access.authentication import (BearerTokenAuthentication, TokenRow, recent_principal, token_check_params,
                                             token_check_sql)
from dashboard.access.models import hash_token
from dashboard.compat.django import logged_already

from . import codec, context, lists, registry, schema_state, storage, store
from .registry import backend, from_storage, to_storage
from .codec import APPLY_PATCH, FIELD_VALIDATION, JSON, check_type_meta, decode_object, duplicate_fields
from .errors import (TOO_LONG, ApiError, Cause, Verbatim, bad_request, database_lost, forbidden, forbidden_request,
                     internal_error, invalid, invalid_object, method_not_allowed, not_supported, path_not_found,
                     request_entity_too_large, required, unauthorized)
from .managed_fields import MAX_MANAGER_LENGTH
from .metrics import DATABASE_LOST, UNCONFIRMED_WRITES
from .meta import now, parse_bool, parse_resource_version
from .patch import apply_patch, patch_type
from .selectors import parse_field_selector, parse_label_selector
from .tables import negotiate_output, table_content_type, table_of_texts
from .validation import validate_list_options

log = logging.getLogger(__name__)



# ---------------------------------------------------------------------------------------------
# Responses


def json_response(body, status: int = 200, *, request=None, headers: dict | None = None,
                  content_type: str = JSON) -> HttpResponse:
    """Serialize body (a dict, or bytes already JSON) honouring ?pretty."""
    pretty = request is not None and _pretty(request)
    if isinstance(body, (bytes, bytearray)):
        data = orjson.dumps(orjson.loads(body), option=orjson.OPT_INDENT_2) if pretty else bytes(body)
    else:
        data = orjson.dumps(body, option=orjson.OPT_INDENT_2 if pretty else 0)
    if pretty:
        data += b"\n"
    response = HttpResponse(data, status=status, content_type=content_type)
    for key, value in (headers or {}).items():
        response[key] = value
    return response


def _pretty(request) -> bool:
    try:
        return parse_bool(request.GET.get("pretty"), "pretty")
    except ApiError:
        return False


def status_response(err: ApiError, request=None) -> HttpResponse:
    if err.limits_hit and request is not None:
        context.of(request).limits_hit = True   # (the server's tarpit: a body no honest client sends)
    body = err.status()
    fresh = getattr(err, "list_continue", None)
    if fresh:
        body["metadata"] = {"continue": fresh}
    response = json_response(body, err.code, request=request)
    for key, value in err.headers.items():
        response[key] = value
    return response


def exception_handler(exc, drf_context):
    """DRF hook: every failure becomes a metav1.Status, never an HTML page or a traceback."""
    request = drf_context.get("request")
    if isinstance(exc, ApiError):
        return status_response(exc, request)
    if isinstance(exc, (drf_exceptions.NotAuthenticated, drf_exceptions.AuthenticationFailed)):
        return status_response(unauthorized(), request)
    if isinstance(exc, drf_exceptions.MethodNotAllowed):
        return status_response(method_not_allowed(request.method if request else ""), request)
    if isinstance(exc, RequestDataTooBig):
        return status_response(request_entity_too_large(settings.KUBEDASH_MAX_BODY_BYTES), request)
    if isinstance(exc, drf_exceptions.APIException):
        return status_response(ApiError(exc.status_code, type(exc).__name__, str(exc.detail)), request)
    unmigrated = schema_state.not_migrated_error(exc)
    if unmigrated is not None:
        # (readiness logs the missing migrations once: not Django, for every request meanwhile)
        return logged_already(status_response(unmigrated, request))
    method, path = getattr(request, "method", "GET"), getattr(request, "path", "?")
    if storage.backend().connection_lost(exc):
        log.warning("database connection lost serving %s %s: %s", method, path, exc, extra={"request": request})
        DATABASE_LOST.inc()
        return status_response(database_lost(method), request)
    log.exception("unexpected error serving %s", path, extra={"request": request})
    return status_response(internal_error(method), request)


class JSONOnly(BaseContentNegotiation):
    """We render responses ourselves (JSON, Table, discovery); DRF must never answer 406."""

    def select_parser(self, request, parsers):
        return None

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], JSON


class KubeAPIView(APIView):
    content_negotiation_class = JSONOnly
    renderer_classes = [JSONRenderer]
    parser_classes = []

    def permission_denied(self, request, message=None, code=None):
        raise unauthorized()

    def handle_exception(self, exc):
        response = exception_handler(exc, self.get_renderer_context())
        response.exception = True
        return response

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if request.user is None:
            raise unauthorized()
        acting(request, request.user, request.auth)
        output(request)  # kube negotiates the answer before doing anything: 406 changes nothing


def acting(request, caller, auth):
    """Who the request acts as, kept in its context (authorize() asks it): the authenticated
    caller, or whom it impersonates; auth is the caller's TokenRow (None for a session). The
    request log notes an impersonation asked for, whether allowed."""
    ctx = context.of(request)
    ctx.principal = caller   # (the log's user, should impersonating be refused)
    ctx.principal = impersonated(request.META, caller, auth, ctx.record)
    return ctx.principal


def impersonated(meta, caller, auth, record: dict | None = None):
    """The caller, or whom meta's Impersonate-* headers ask for (access/impersonation.py), or
    the ApiError refusing it; record: the request log's, told what was asked."""
    try:
        want = impersonation.wanted(meta)
        if want is None:
            return caller
        if record is not None:
            record.update(impersonatedUser=want.user, impersonatedGroups=list(want.groups))
        return impersonation.resolve(want, caller, isinstance(auth, TokenRow) and auth.may_impersonate)
    except impersonation.Refused as refused:
        raise ApiError(refused.code, refused.reason, refused.message, refused.details) from None


def output(request) -> tuple[str, str | None]:
    """The negotiated response shape: ("object"|"Table"|"PartialObjectMetadata", version)."""
    chosen = getattr(request, "kube_output", None)
    if chosen is None:
        chosen = request.kube_output = negotiate_output(request.META.get("HTTP_ACCEPT", ""))
    return chosen


# ---------------------------------------------------------------------------------------------
# Request parsing


def _body_type(request) -> str:
    return codec.content_type(request.META.get("CONTENT_TYPE", ""))


def read_body(request) -> dict:
    """Decode a JSON or YAML request body into an object (a dict), or answer 400/413/415."""
    try:
        raw = request.body
    except RequestDataTooBig:
        raise request_entity_too_large(settings.KUBEDASH_MAX_BODY_BYTES)
    return codec.decode_body(raw, codec.content_type(request.META.get("CONTENT_TYPE", "")))




def warning_headers(response: HttpResponse, warnings: list[str]) -> HttpResponse:
    if warnings:
        # Warning: 299 - "text" (RFC 7234), comma-separated; quoted like Go's %q, ASCII only,
        # so a field name with a newline or non-Latin-1 text can't break the header.
        response["Warning"] = ", ".join("299 - " + json.dumps(w) for w in warnings)
    return response


def _dry_run_causes(values: list) -> list:
    """kube's ValidateDryRun: every value must be "All" (the value shown as Go's []string)."""
    if all(v == "All" for v in values):
        return []
    shown = "[]string{" + ", ".join(json.dumps(str(v)) for v in values) + "}"
    return [not_supported("dryRun", Verbatim(shown), ["All"])]


def write_options(request, options: str, *, apply: bool = False) -> tuple[str, str, bool]:
    """(fieldValidation, field manager, dry run) of a create, update or patch, validated as
    kube's ValidateCreateOptions / ValidateUpdateOptions / ValidatePatchOptions: every bad
    option in one 422 for the options kind (CreateOptions, UpdateOptions, PatchOptions).

    The manager is fieldManager, else the User-Agent up to its first '/' (kube's
    managerOrUserAgent)."""
    params = request.GET
    manager = params.get("fieldManager", "")
    causes = []
    if options == "PatchOptions" and not apply and "force" in params:
        causes.append(forbidden("force", "may not be specified for non-apply patch"))
    if apply and not manager:
        causes.append(required("fieldManager", "is required for apply patch"))
    if len(manager.encode()) > MAX_MANAGER_LENGTH:
        causes.append(Cause(TOO_LONG, "fieldManager", f"may not be more than {MAX_MANAGER_LENGTH} bytes"))
    elif any(not ch.isprintable() for ch in manager):
        causes.append(invalid("fieldManager", manager, "must only contain printable characters"))
    dry = params.getlist("dryRun")
    causes += _dry_run_causes(dry)
    mode = params.get("fieldValidation", "")
    if mode not in ("", *FIELD_VALIDATION):
        causes.append(not_supported("fieldValidation", mode, ["", "Ignore", "Strict", "Warn"]))
    if causes:
        raise invalid_object("meta.k8s.io", options, "", causes)
    return mode or "Warn", manager or _user_agent_manager(request, MAX_MANAGER_LENGTH), bool(dry)


def _user_agent_manager(request, limit: int) -> str:
    agent = request.META.get("HTTP_USER_AGENT", "").split("/", 1)[0]
    out = ""
    for ch in agent:
        if ch.isprintable():
            if len((out + ch).encode()) > limit:
                break
            out += ch
    return out


# ---------------------------------------------------------------------------------------------
# The resource view: every documented non-watch path of every kind


def resolve(kwargs) -> registry.Resource:
    res = registry.lookup(kwargs.get("group", ""), kwargs["version"], kwargs["plural"])
    if res is None:
        raise path_not_found()
    return res


def authorize(request, res: registry.Resource, verb: str, namespace: str | None) -> None:
    principal = context.of(request).principal
    if not principal.can(verb, namespace):
        raise forbidden_request(principal.username, verb, res.group, res.plural, namespace)


def list_query(request, res: registry.Resource, namespace: str | None, *, watch: bool = False) -> lists.ListQuery:
    """The list (or watch) parameters. Watches validate resourceVersionMatch themselves."""
    params = request.GET
    label = parse_label_selector(params.get("labelSelector", "")) if params.get("labelSelector") else None
    allowed = {"metadata.name", "metadata.namespace", *res.field_getters}
    field = parse_field_selector(params.get("fieldSelector", ""), allowed, kind=res.kind) if params.get("fieldSelector") else None
    limit = params.get("limit", "")
    if limit and not limit.lstrip("-").isdigit():
        raise bad_request(f'invalid value for query parameter "limit": "{limit}" is not an integer')
    limit_value = max(int(limit), 0) if limit else 0
    rv_text = params.get("resourceVersion", "")
    match = params.get("resourceVersionMatch", "")
    cont = params.get("continue", "")
    if watch:
        match = ""
    # kube-apiserver's order: the option rules (one aggregated 422), then the storage's checks:
    # the resourceVersion parses, the continue token decodes, and only then the two may clash.
    send_initial = None
    if not watch and params.get("sendInitialEvents"):
        send_initial = parse_bool(params["sendInitialEvents"], "sendInitialEvents")
    causes = validate_list_options(rv_text, match, cont, send_initial)
    if causes:
        raise invalid_object("meta.k8s.io", "ListOptions", "", causes)
    rv = parse_resource_version(rv_text)
    if cont and not watch:
        lists.decode_continue(cont)
    if cont and rv not in (None, 0):
        raise bad_request("specifying resource version is not allowed when using continue")
    names = ()
    if field is not None:
        names = tuple(field.exact("metadata.name") or ())
        ns_exact = field.exact("metadata.namespace")
        if ns_exact and namespace is None and len(ns_exact) == 1:
            namespace = ns_exact[0]
    return lists.ListQuery(namespace=namespace, label_selector=label, field_selector=field,
                           limit=limit_value or None, continue_token=cont, resource_version=rv,
                           resource_version_match=match, names=names)


def render_objects(request, res: registry.Resource, items: list[bytes], list_meta: dict, *,
                   single: bool = False) -> HttpResponse:
    """A list (or a single object) as JSON, or as the meta.k8s.io Table or
    PartialObjectMetadata(List) the client asked for."""
    shape, version = output(request)
    if res.storage is not None and shape == "object":
        items = [orjson.dumps(res.from_storage(orjson.loads(t))) for t in items]
    if shape == "PartialObjectMetadata":
        return _partial_metadata(request, items, list_meta, version, single)
    if shape == "Table":
        include = request.GET.get("includeObject", "") or "Metadata"
        table = table_of_texts(res, items, list_meta=list_meta, include_object=include, now=now(), version=version)
        return json_response(table, request=request, content_type=table_content_type(version))
    if single:
        return json_response(items[0], request=request)
    meta = b'{"resourceVersion":"' + list_meta["resourceVersion"].encode() + b'"'
    if list_meta.get("continue"):
        meta += b',"continue":"' + list_meta["continue"].encode() + b'"'
    if list_meta.get("remainingItemCount") is not None:
        meta += b',"remainingItemCount":' + str(list_meta["remainingItemCount"]).encode()
    meta += b"}"
    body = (b'{"kind":"' + res.list_kind.encode() + b'","apiVersion":"' + res.api_version.encode()
            + b'","metadata":' + meta + b',"items":[' + b",".join(items) + b"]}")
    return json_response(body, request=request)


def _partial_metadata(request, items: list[bytes], list_meta: dict, version: str, single: bool) -> HttpResponse:
    api_version = f"meta.k8s.io/{version}"

    def partial(text: bytes) -> dict:
        return {"kind": "PartialObjectMetadata", "apiVersion": api_version, "metadata": orjson.loads(text)["metadata"]}

    if single:
        body, kind = partial(items[0]), "PartialObjectMetadata"
    else:
        kind = "PartialObjectMetadataList"
        body = {"kind": kind, "apiVersion": api_version, "metadata": list_meta, "items": [partial(t) for t in items]}
    return json_response(body, request=request, content_type=f"application/json;as={kind};v={version};g=meta.k8s.io")


def streams_list(request, q: lists.ListQuery) -> bool:
    """Is this list sent batch by batch (stream_list)? A whole list (no limit: a page is
    bounded by its limit), not indented (?pretty re-reads the body), served by kubedash's
    server on a lane's thread (it sends the pieces as they are read, with backpressure; the
    event loop must never wait for a batch), unless KUBEDASH_STREAM_LISTS=0."""
    if not (settings.KUBEDASH_STREAM_LISTS and not q.limit and request.method == "GET"):
        return False
    ctx = context.of(request)
    return ctx.streams and not ctx.inline and not _pretty(request)


def stream_list(request, res: registry.Resource, q: lists.ListQuery) -> StreamingHttpResponse:
    """A whole list as JSON, Table or PartialObjectMetadataList, encoded and sent one batch of
    the snapshot at a time (lists.stream_objects): the same bytes as render_objects, but the
    list is never held whole and its first bytes leave before the rest is read.

    Every error is raised here, before the response starts: the snapshot's revision and 410
    (stream_objects), includeObject (the Table's envelope is built now). What could still fail
    later is the database itself; then the response is cut short (no final chunk), and the
    client sees a broken body, as with kube-apiserver's streaming list encoder."""
    shape, version = output(request)
    snapshot, batches = lists.stream_objects(backend(res), q)
    meta = {"resourceVersion": str(snapshot)}
    if shape == "Table":
        include, moment = request.GET.get("includeObject", "") or "Metadata", now()

        def table(texts):
            return table_of_texts(res, texts, list_meta=meta, include_object=include, now=moment, version=version)

        head, content_type = orjson.dumps(table([])), table_content_type(version)

        def encode(texts: list[bytes]) -> bytes:
            return orjson.dumps(table(texts)["rows"])[1:-1]
    elif shape == "PartialObjectMetadata":
        api_version = f"meta.k8s.io/{version}"
        head = orjson.dumps({"kind": "PartialObjectMetadataList", "apiVersion": api_version, "metadata": meta, "items": []})
        content_type = f"application/json;as=PartialObjectMetadataList;v={version};g=meta.k8s.io"

        def encode(texts: list[bytes]) -> bytes:
            return b",".join(orjson.dumps({"kind": "PartialObjectMetadata", "apiVersion": api_version,
                                           "metadata": orjson.loads(t)["metadata"]}) for t in texts)
    else:
        head = orjson.dumps({"kind": res.list_kind, "apiVersion": res.api_version, "metadata": meta, "items": []})
        content_type = JSON
        convert = res.from_storage if res.storage is not None else None

        def encode(texts: list[bytes]) -> bytes:
            return b",".join(orjson.dumps(convert(orjson.loads(t))) for t in texts) if convert else b",".join(texts)
    assert head.endswith(b"[]}")   # the items (rows) are the envelope's last field

    def body():
        yield head[:-2]
        sep = b""
        for texts in batches:
            yield sep + encode(texts)
            sep = b","
        yield b"]}"

    response = StreamingHttpResponse(body(), content_type=content_type)
    response.compressible = True   # a list, not a watch: the pages' gzip (sessions) may compress it
    return response


def object_response(request, res, obj: dict, status: int = 200, warnings=()) -> HttpResponse:
    """obj as stored (another version of a kind is converted here)."""
    if output(request)[0] != "object":
        response = render_objects(request, res, [orjson.dumps(obj)], {"resourceVersion": obj["metadata"].get("resourceVersion", "")}, single=True)
        response.status_code = status
    else:
        response = json_response(from_storage(res, obj), status, request=request)
    return warning_headers(response, list(warnings))


class CollectionView(KubeAPIView):
    """/…/{plural} (all namespaces) and /…/namespaces/{ns}/{plural}."""

    def get(self, request, **kw):
        res = resolve(kw)
        namespace = kw.get("namespace")
        authorize(request, res, "list", namespace)
        q = list_query(request, res, namespace)
        if streams_list(request, q):
            return stream_list(request, res, q)
        page = lists.list_objects(backend(res), q)
        meta = {"resourceVersion": str(page.resource_version)}
        if page.continue_token:
            meta["continue"] = page.continue_token
        if page.remaining is not None:
            meta["remainingItemCount"] = page.remaining
        return render_objects(request, res, page.items, meta)

    def post(self, request, **kw):
        res = resolve(kw)
        namespace = kw.get("namespace")
        if namespace is None:
            raise method_not_allowed("POST")
        authorize(request, res, "create", namespace)
        mode, manager, is_dry = write_options(request, "CreateOptions")
        obj = read_body(request)
        check_type_meta(res, obj)
        body_ns = (obj.get("metadata") or {}).get("namespace")
        if body_ns and body_ns != namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        obj, warnings = decode_object(res, obj, mode, duplicates=duplicate_fields(request.body, _body_type(request), mode))
        result = store.create(backend(res), namespace, to_storage(res, obj), dry_run=is_dry, manager=manager,
                              version=res.api_version)
        return object_response(request, res, result.object, 201, warnings)

    def delete(self, request, **kw):
        res = resolve(kw)
        namespace = kw.get("namespace")
        if namespace is None:
            raise method_not_allowed("DELETE")
        authorize(request, res, "deletecollection", namespace)
        options = delete_options(request)
        q = list_query(request, res, namespace)
        deleted = []
        for ns, name in lists.keys_matching(backend(res), q):
            try:
                gone = store.delete(backend(res), ns, name, dry_run=options["dryRun"]).object
                deleted.append(from_storage(res, gone))
            except ApiError as err:
                if err.code != 404:  # deleted meanwhile: not an error for a collection delete
                    raise
        body = {"kind": res.list_kind, "apiVersion": res.api_version,
                "metadata": {"resourceVersion": str(store.current_revision())}, "items": deleted}
        return json_response(body, request=request)


def delete_options(request) -> dict:
    """DeleteOptions from the body (kubectl sends one) or, without a body, from the query, as
    kube's delete handler reads them; validated as kube's ValidateDeleteOptions (one 422)."""
    if request.body:
        try:
            body = orjson.loads(request.body)
        except orjson.JSONDecodeError as exc:
            raise bad_request(f"couldn't decode DeleteOptions: {exc}")
        if not isinstance(body, dict):
            raise bad_request("DeleteOptions must be a JSON object")
        dry = body.get("dryRun") or []
        dry = dry if isinstance(dry, list) else [dry]
    else:
        params = request.GET
        body = {key: params[key] for key in ("propagationPolicy", "gracePeriodSeconds") if key in params}
        if "orphanDependents" in params:
            body["orphanDependents"] = parse_bool(params["orphanDependents"], "orphanDependents")
        dry = params.getlist("dryRun")
    policy = body.get("propagationPolicy")
    causes = []
    if body.get("orphanDependents") is not None and policy is not None:
        causes.append(invalid("propagationPolicy", policy, "orphanDependents and deletionPropagation cannot be both set"))
    if policy is not None and policy not in ("Foreground", "Background", "Orphan"):
        causes.append(not_supported("propagationPolicy", policy, ["Foreground", "Background", "Orphan", "nil"]))
    causes += _dry_run_causes(dry)
    if causes:
        raise invalid_object("meta.k8s.io", "DeleteOptions", "", causes)
    grace = body.get("gracePeriodSeconds")
    if grace not in (None, ""):
        try:
            grace = int(grace)
        except (TypeError, ValueError):
            raise bad_request(f'invalid gracePeriodSeconds "{grace}": must be an integer')
    pre = body.get("preconditions") or {}
    if not isinstance(pre, dict):
        raise bad_request("preconditions must be an object")
    return {"dryRun": bool(dry), "propagationPolicy": policy or "",
            "gracePeriodSeconds": grace, "uid": pre.get("uid"), "resourceVersion": pre.get("resourceVersion")}


collection = CollectionView.as_view()


class ObjectView(KubeAPIView):
    """/…/namespaces/{ns}/{plural}/{name} and its /status subresource."""

    def _target(self, request, kw, verb):
        res = resolve(kw)
        sub = kw.get("subresource", "")
        if sub and (sub != "status" or not res.has_status):
            raise path_not_found()
        authorize(request, res, verb, kw["namespace"])
        return res, kw["namespace"], kw["name"], sub

    def get(self, request, **kw):
        res, ns, name, _ = self._target(request, kw, "get")
        raw = store.get_raw(backend(res), ns, name)
        if output(request)[0] != "object" or res.storage is not None:
            obj = orjson.loads(raw)
            return render_objects(request, res, [raw], {"resourceVersion": obj["metadata"]["resourceVersion"]}, single=True)
        return json_response(raw, request=request)

    def put(self, request, token_check: storage.TokenCheck | None = None, **kw):
        res, ns, name, sub = self._target(request, kw, "update")
        mode, manager, is_dry = write_options(request, "UpdateOptions")
        obj = read_body(request)
        check_type_meta(res, obj)
        obj, warnings = decode_object(res, obj, mode, duplicates=duplicate_fields(request.body, _body_type(request), mode))
        result = store.update(backend(res), ns, name, to_storage(res, obj), subresource=sub, dry_run=is_dry,
                              manager=manager, version=res.api_version, token_check=token_check)
        return object_response(request, res, result.object, 201 if result.created else 200, warnings)

    def patch(self, request, token_check: storage.TokenCheck | None = None, **kw):
        res, ns, name, sub = self._target(request, kw, "patch")
        ctype = patch_type(request.META.get("CONTENT_TYPE", ""))
        mode, manager, is_dry = write_options(request, "PatchOptions", apply=ctype == APPLY_PATCH)
        body = request.body
        if not body:
            raise bad_request("the patch body is empty")
        warnings: list[str] = []

        if ctype == APPLY_PATCH:
            return self._apply(request, res, ns, name, sub, body, mode, manager, is_dry, token_check)
        repeated = duplicate_fields(body, ctype, mode)

        def patched(current: dict) -> dict:
            new = apply_patch(from_storage(res, current), body, ctype, res.definition)
            if not isinstance(new, dict):
                raise bad_request("the patched object is not a JSON object")
            check_type_meta(res, new)
            new, found = decode_object(res, new, mode, patched=True, duplicates=repeated)
            warnings.extend(found)
            return to_storage(res, new)

        result = store.update(backend(res), ns, name, patched, subresource=sub, dry_run=is_dry, is_patch=True,
                              manager=manager, version=res.api_version, token_check=token_check)
        return object_response(request, res, result.object, 200, warnings)

    def _apply(self, request, res, ns, name, sub, body, mode, manager, is_dry, token_check):
        """Server-side apply (apply.py): the applied configuration merged by the schema, with
        field ownership; creates the object when it does not exist."""
        force = parse_bool(request.GET.get("force"), "force")
        applied = codec.decode_apply_patch(body)
        check_type_meta(res, applied)
        applied, warnings = decode_object(res, applied, mode)
        repeated = codec.duplicate_yaml_keys(body) if mode != "Ignore" else []
        if repeated:
            # kube's apply re-reads the patch with go-yaml's strict decoder.
            text = "error converting YAML to JSON: yaml: unmarshal errors:\n  " + "\n  ".join(repeated)
            if mode == "Strict":
                raise bad_request("error strict decoding YAML: " + text)
            warnings.append(text)
        am = applied.setdefault("metadata", {})
        if am.get("name", name) != name:
            raise bad_request(f"the name of the object ({am.get('name')}) does not match the name on the URL ({name})")
        if am.get("namespace", ns) != ns:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        if am.get("managedFields") is not None:
            raise bad_request("metadata.managedFields must be nil")
        am.pop("resourceVersion", None)
        result = store.update(backend(res), ns, name, store.Apply(to_storage(res, applied), force), subresource=sub,
                              dry_run=is_dry, is_patch=True, manager=manager, version=res.api_version,
                              token_check=token_check)
        return object_response(request, res, result.object, 201 if result.created else 200, warnings)

    def delete(self, request, **kw):
        res, ns, name, sub = self._target(request, kw, "delete")
        if sub:
            raise method_not_allowed("DELETE")
        options = delete_options(request)
        result = store.delete(backend(res), ns, name, uid=options["uid"], rv=options["resourceVersion"],
                              dry_run=options["dryRun"])
        if not result.deleted:
            return json_response(from_storage(res, result.object), request=request)
        m = result.object["metadata"]
        return json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                              "details": {"name": name, "group": res.group, "kind": res.plural, "uid": m.get("uid")}},
                             request=request)


class NotFoundView(KubeAPIView):
    """Anything else under /api and /apis: a 404 Status, as kube-apiserver answers."""

    authentication_classes = []

    def initial(self, request, *args, **kwargs):
        raise path_not_found()


# ---------------------------------------------------------------------------------------------
# Direct dispatch: a bearer-token call to a resource path (one object, a collection) goes
# straight to the view's method, without Django's URL resolver or DRF's request wrapper,
# authenticator list and response finalising: a third of a Lease renewal's CPU. The same
# methods answer, with the same authentication, negotiation and Status errors
# (dashboard/server/dispatch.py decides which requests come here).

DIRECT_METHODS = frozenset({"GET", "HEAD", "PUT", "PATCH", "POST", "DELETE"})


def direct_route(path: str) -> tuple[type, dict] | None:
    """The resource view and its URL arguments for /api/{v}/... and /apis/{g}/{v}/... paths of
    one object or a collection (dashboard/urls.py's kube_paths, watches aside); None for any
    other path, which Django's resolver then answers."""
    parts = path.split("/")
    if len(parts) < 4 or parts[0] != "":
        return None
    if parts[1] == "api":
        kw, rest = {"version": parts[2]}, parts[3:]
    elif parts[1] == "apis" and len(parts) >= 5:
        kw, rest = {"group": parts[2], "version": parts[3]}, parts[4:]
    else:
        return None
    if "" in rest or "" in kw.values() or rest[0] == "watch":
        return None
    if len(rest) == 1:
        if registry.lookup(kw.get("group", ""), kw["version"], rest[0]) is None:
            return None   # not a kind's collection (an access review, a 404): the resolver answers
        return CollectionView, {**kw, "plural": rest[0]}
    if rest[0] != "namespaces" or not 3 <= len(rest) <= 5:
        return None   # /namespaces/<ns> itself (no Namespace kind here) and longer paths: the resolver's 404
    kw.update(namespace=rest[1], plural=rest[2])
    if len(rest) == 3:
        return CollectionView, kw
    if len(rest) == 5:
        kw["subresource"] = rest[4]
    return ObjectView, {**kw, "name": rest[3]}


def bearer_route(method: str, authorization: str, path: str) -> tuple[type, dict] | None:
    """direct_route for a request that may be dispatched directly: a bearer token, a method the
    views answer (the server asks (server/admission.py) before Django builds the request, and again inside it)."""
    if method not in DIRECT_METHODS or authorization[:7].lower() != "bearer ":
        return None
    return direct_route(path)


def serve_direct(request, view_class: type, kw: dict) -> HttpResponse:
    """What DRF's dispatch does for these views, in a few lines: authenticate the bearer
    token, negotiate the output (406 first, as kube), call the method, Status on failure."""
    answered = _unconfirmed_write(request, view_class, kw)
    if answered is not None:
        return answered
    try:
        found = BearerTokenAuthentication().authenticate(request)
        if found is None:
            raise unauthorized()
        acting(request, *found)
        method = "get" if request.method == "HEAD" else request.method.lower()
        handler = getattr(view_class, method, None)
        if handler is None:
            raise method_not_allowed(request.method)
        output(request)
        return handler(view_class(), request, **kw)
    except Exception as exc:   # noqa: BLE001 - every failure is answered as a Status
        ctx = context.of(request)
        if ctx.inline and storage.backend().would_wait(exc):
            # Run on the event loop, which must not wait for SQLite's lock: nothing was
            # written (the lock is taken first); server/inline.py runs the request again on a thread.
            ctx.would_wait = True
            return HttpResponse(status=503)
        return exception_handler(exc, {"request": request})


def _unconfirmed_write(request, view_class: type, kw: dict) -> HttpResponse | None:
    """An update of one object (a renewal) on a database whose write can check a token in its own
    statement (PostgreSQL): served for the caller its token stood for at its last check in this
    process (authentication.recent_principal), without checking it first. The token check is
    handed to the store (storage.TokenCheck), whose one-statement write checks it with the
    object, so a revoked or changed token writes nothing; any answer but a confirmed write is
    thrown away. None: nothing was written; serve it the usual way (the token checked first).
    One round trip fewer for a renewal; revocation still ends at once."""
    ctx = context.of(request)
    if (request.method not in ("PUT", "PATCH") or view_class is not ObjectView
            or not storage.backend().confirms_tokens() or ctx.cluster != clusters.LOCAL):
        return None   # (a followed cluster is read-only here: server/cluster_paths.py)
    token_hash = hash_token(request.META.get("HTTP_AUTHORIZATION", "")[7:].strip())
    recent = recent_principal(token_hash)
    if recent is None or impersonation.wanted(request.META) is not None:
        return None
    principal, _, fingerprint = recent
    check = storage.TokenCheck(token_check_sql(), token_check_params(token_hash, fingerprint))
    try:
        ctx.principal = principal
        output(request)
        response = getattr(view_class(), request.method.lower())(request, token_check=check, **kw)
    except Exception as exc:   # noqa: BLE001 - as serve_direct's
        response = exception_handler(exc, {"request": request}) if check.confirmed else None
    (WRITTEN if check.confirmed else SERVED_AGAIN).inc()
    return response if check.confirmed else None


WRITTEN, SERVED_AGAIN = (UNCONFIRMED_WRITES.labels(outcome) for outcome in ("written", "served_again"))

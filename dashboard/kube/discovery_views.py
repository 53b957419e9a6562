"""Discovery, version and OpenAPI endpoints (public, like kube-apiserver's discovery roles)."""
from __future__ import annotations

from django.http import HttpResponse

from . import discovery, openapi
from .errors import path_not_found
from .views import KubeAPIView, json_response


class PublicView(KubeAPIView):
    authentication_classes = []

    def initial(self, request, *args, **kwargs):
        pass


def _aggregated_or_legacy(request, core: bool):
    body, content_type = discovery.root_document(core, request.META.get("HTTP_ACCEPT", ""), request.get_host())
    return json_response(body, request=request, content_type=content_type)


class VersionView(PublicView):
    def get(self, request):
        return json_response(discovery.version_info(), request=request)


class CoreDiscoveryView(PublicView):
    def get(self, request):
        return _aggregated_or_legacy(request, core=True)


class GroupsDiscoveryView(PublicView):
    def get(self, request):
        return _aggregated_or_legacy(request, core=False)


class GroupView(PublicView):
    def get(self, request, group):
        body = discovery.api_group(group)
        if body is None:
            raise path_not_found()
        return json_response(body, request=request)


class ResourceListView(PublicView):
    def get(self, request, version, group=""):
        body = discovery.api_resource_list(group, version)
        if body is None:
            raise path_not_found()
        return json_response(body, request=request)


class OpenAPIv3RootView(PublicView):
    def get(self, request):
        return json_response(openapi.v3_root(), request=request)


class OpenAPIv3DocView(PublicView):
    def get(self, request, gv):
        found = openapi.v3_group_version(gv)
        if found is None:
            raise path_not_found()
        data, digest = found
        response = HttpResponse(data, content_type="application/json")
        if request.GET.get("hash") == digest:
            # The hash names this exact document: clients may cache it forever.
            response["Cache-Control"] = "public, immutable"
            response["ETag"] = f'"{digest}"'
        return response


class OpenAPIv2View(PublicView):
    def get(self, request):
        accept = request.META.get("HTTP_ACCEPT", "")
        if "protobuf" in accept and "json" not in accept:
            # Only JSON is served; kubectl tolerates a 404 here and uses /openapi/v3.
            raise path_not_found()
        return HttpResponse(openapi.v2(), content_type="application/json")


def healthz(request):
    """/healthz, /livez, /readyz: plain "ok", as kube-apiserver answers (also the bench ceiling)."""
    return HttpResponse(b"ok", content_type="text/plain; charset=utf-8")

"""The tokens page: API tokens for the signed-in user (admins without limits see everyone's;
a limited admin, like everyone else, only its own).

A token is shown once, on the page that answers its creation (or inside the kubeconfig
download that creates it); only its sha256 is stored.
"""
from __future__ import annotations

import os
from urllib.parse import urlsplit

import yaml
from django import forms
from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from dashboard.access.own_kubeconfig import build_kubeconfig, build_oidc_kubeconfig, oidc_provider_for_api
from dashboard.access.models import ApiToken
from dashboard.access.principals import principal_for
from dashboard.access.tls import ensure_tls
from dashboard.access.tokens import create_token

from .share import user_required

DEFAULT_TLS_PORT = 8443   # `manage.py serve`'s HTTPS listener, unless it says otherwise:
TLS_PORT_ENV = "KUBEDASH_TLS_PORT"   # set by `serve` to the port its HTTPS listener is on


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. “CI pipeline”.")


class KubeconfigForm(TokenForm):
    server = forms.URLField(max_length=500, assume_scheme="https",
                            help_text="The HTTPS address of this server's API listener.")
    namespace = forms.CharField(max_length=253, required=False)

    def clean_server(self):
        server = self.cleaned_data["server"].rstrip("/")
        if urlsplit(server).scheme != "https":
            # kubectl sends a bearer token only over TLS.
            raise forms.ValidationError("Use an https:// address: kubectl sends tokens only over TLS.")
        return server


def guess_server(request) -> str:
    """The API's HTTPS address as seen from this page: this origin if it is HTTPS, else
    the same host on the port serve's HTTPS listener is on (serve/start --tls-port)."""
    if request.is_secure():
        return f"https://{request.get_host()}"
    host = urlsplit(f"//{request.get_host()}").hostname or "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"https://{host}:{tls_port()}"


def tls_port() -> int:
    """The HTTPS port this server listens on: read when asked, since serve sets it after
    the settings were loaded (its worker processes inherit it)."""
    value = os.environ.get(TLS_PORT_ENV, "")
    return int(value) if value.isdigit() else DEFAULT_TLS_PORT


def _rows(request, principal):
    rows = ApiToken.objects.select_related("user").filter(revoked=False).order_by("-created")
    return rows if principal.is_full_admin else rows.filter(user=request.user)


def _page(request, status=200, **extra):
    principal = principal_for(request.user)
    namespace = sorted(principal.namespaces_here)[0] if principal.namespaces_here else "default"
    ctx = {"principal": principal, "active": "tokens", "tokens": _rows(request, principal),
           "all_tokens": principal.is_full_admin, "form": TokenForm(),
           "kube_form": KubeconfigForm(initial={"name": "kubeconfig", "server": guess_server(request),
                                                "namespace": namespace}),
           "oidc_issuer": oidc_provider_for_api()[0],
           **extra}
    return render(request, "web/tokens/list.html", ctx, status=status)


@user_required
@require_http_methods(["GET", "POST"])
def tokens(request):
    if request.method == "GET":
        return _page(request)
    form = TokenForm(request.POST)
    if not form.is_valid():
        return _page(request, status=400, form=form)
    token = create_token(request.user, form.cleaned_data["name"])
    response = render(request, "web/tokens/created.html", {
        "principal": principal_for(request.user), "active": "tokens", "name": form.cleaned_data["name"],
        "token": token})
    response["Cache-Control"] = "no-store"
    return response


@user_required
@require_POST
def token_revoke(request, token_id: int):
    principal = principal_for(request.user)
    row = get_object_or_404(ApiToken, pk=token_id, revoked=False)
    if not (principal.is_full_admin or row.user_id == request.user.pk):
        raise Http404("No such token.")
    row.revoked = True
    row.save(update_fields=["revoked"])
    messages.success(request, f"Revoked token “{row.name or row.pk}”: it no longer authenticates.")
    return redirect("tokens")


@user_required
@require_POST
def token_kubeconfig(request):
    """Create a token and answer with a kubeconfig carrying it (the only place it appears)."""
    form = KubeconfigForm(request.POST)
    if not form.is_valid():
        return _page(request, status=400, kube_form=form)
    data = form.cleaned_data
    ca_pem = ensure_tls(settings.DATA_DIR).ca_cert.read_bytes()
    token = create_token(request.user, data["name"])
    username = request.user.get_username()
    config = build_kubeconfig(data["server"], ca_pem, username, token, data["namespace"] or "default")
    body = yaml.safe_dump(config, default_flow_style=False, sort_keys=False)
    response = HttpResponse(body, content_type="application/yaml")
    response["Content-Disposition"] = 'attachment; filename="kubeconfig"'
    response["Cache-Control"] = "no-store"
    return response


class OidcKubeconfigForm(forms.Form):
    server = KubeconfigForm.base_fields["server"]
    namespace = KubeconfigForm.base_fields["namespace"]
    clean_server = KubeconfigForm.clean_server


@user_required
@require_POST
def token_kubeconfig_oidc(request):
    """A kubeconfig that signs in with the identity provider (kubelogin): no token in it."""
    issuer, client_id, _ = oidc_provider_for_api()
    form = OidcKubeconfigForm(request.POST)
    if not issuer or not form.is_valid():
        return _page(request, status=400 if issuer else 404)
    data = form.cleaned_data
    ca_pem = ensure_tls(settings.DATA_DIR).ca_cert.read_bytes()
    config = build_oidc_kubeconfig(data["server"], ca_pem, issuer, client_id, data["namespace"] or "default")
    response = HttpResponse(yaml.safe_dump(config, default_flow_style=False, sort_keys=False),
                            content_type="application/yaml")
    response["Content-Disposition"] = 'attachment; filename="kubeconfig-oidc"'
    return response

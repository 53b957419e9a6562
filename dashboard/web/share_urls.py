"""Share links and API tokens (included at the root before dashboard.web.urls)."""
from django.urls import path

from . import group_views, share_views, token_views

urlpatterns = [
    path("share/", share_views.share_list, name="share_list"),
    path("share/new/", share_views.share_new, name="share_new"),
    path("share/<int:link_id>/revoke/", share_views.share_revoke, name="share_revoke"),
    path("s/leave/", share_views.share_leave, name="share_leave"),
    path("s/<str:token>/", share_views.share_open, name="share_open"),
    path("tokens/", token_views.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", token_views.token_revoke, name="token_revoke"),
    path("tokens/kubeconfig/", token_views.token_kubeconfig, name="token_kubeconfig"),
    path("tokens/kubeconfig/oidc/", token_views.token_kubeconfig_oidc, name="token_kubeconfig_oidc"),
    path("people/groups/", group_views.groups, name="group_bindings"),
    path("people/groups/<int:binding_id>/unbind/", group_views.group_unbind, name="group_unbind"),
    path("accounts/whoami/", group_views.whoami, name="whoami"),
]

"""Django's admin (/admin/) serves only admins without namespace or cluster limits.

Anyone who may edit users there may give any user (themselves included) any role and limits, so
entering it is itself the highest right: a limited or demoted admin is refused (the login page
says they are not authorised), whatever its is_staff says (access/signals.py keeps that flag
following the kubedash grant anyway). Day-to-day user management is on the dashboard's pages.
"""
from urllib.parse import quote

from django.conf import settings
from django.contrib.admin import AdminSite
from django.http import HttpResponseRedirect

from dashboard.access.principals import principal_for


class KubedashAdminSite(AdminSite):
    def has_permission(self, request):
        user = request.user
        return user.is_active and user.is_authenticated and principal_for(user).is_full_admin


    def login(self, request, extra_context=None):
        # With KUBEDASH_LOCAL_LOGIN=0 no password signs anyone in here either: the identity
        # provider's sign-in, then back.
        if settings.KUBEDASH_OIDC and not settings.KUBEDASH_LOCAL_LOGIN:
            return HttpResponseRedirect(settings.LOGIN_URL + "?next=" + quote(request.GET.get("next") or "/admin/"))
        return super().login(request, extra_context)

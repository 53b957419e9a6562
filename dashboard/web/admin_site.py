"""Django's admin (/admin/) serves only admins without namespace or cluster limits.

Anyone who may edit users there may give any user (themselves included) any role and limits, so
entering it is itself the highest right: a limited or demoted admin is refused (the login page
says they are not authorised), whatever its is_staff says (access/signals.py keeps that flag
following the kubedash grant anyway). Day-to-day user management is on the dashboard's pages.
"""
from django.contrib.admin import AdminSite

from dashboard.access.principals import principal_for


class KubedashAdminSite(AdminSite):
    def has_permission(self, request):
        user = request.user
        return user.is_active and user.is_authenticated and principal_for(user).is_full_admin


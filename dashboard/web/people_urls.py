"""The people pages (people_views.py), included at the root before dashboard.web.urls. A page
beside "Users" (e.g. /people/groups/) goes before the <username> route."""
from django.urls import path

from . import people_views as v

urlpatterns = [
    path("people/", v.people_list, name="people"),
    path("people/<str:username>/", v.person, name="person"),
    path("people/<str:username>/sign-out/", v.person_sign_out, name="person_sign_out"),
    path("people/<str:username>/active/", v.person_active, name="person_active"),
    path("people/<str:username>/tokens/<int:token_id>/revoke/", v.person_token_revoke, name="person_token_revoke"),
]

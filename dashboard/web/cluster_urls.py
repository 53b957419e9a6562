"""Routes of the followed-clusters page (admins): the list and add form, removing one."""
from django.urls import path

from . import cluster_views

urlpatterns = [
    path("clusters/", cluster_views.cluster_list, name="clusters"),
    path("clusters/<str:name>/remove/", cluster_views.cluster_remove, name="cluster_remove"),
    path("clusters/<str:name>/writes/", cluster_views.cluster_writes, name="cluster_writes"),
    path("clusters/<str:name>/credentials/", cluster_views.cluster_credentials, name="cluster_credentials"),
]

from django.urls import path

from .all_clusters_socket import AllClustersConsumer
from .consumers import LiveConsumer

websocket_urlpatterns = [
    path("ws/live/", LiveConsumer.as_asgi()),
    path("ws/clusters/", AllClustersConsumer.as_asgi()),   # the all-clusters overview (`/?cluster=*`)
]

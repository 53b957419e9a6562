"""Routes of the followed-clusters page (filled in by cluster_views)."""
urlpatterns: list = []

"""Routes of the notifications page: rules, channels (admins add them), the delivery log, muting, tests."""
from django.urls import path

from . import views

urlpatterns = [
    path("notifications/", views.page, name="notifications"),
    path("notifications/read/", views.read_all, name="notifications_read"),
    path("notifications/channels/", views.channel_add, name="notification_channel_add"),
    path("notifications/channels/<str:name>/test/", views.channel_test, name="notification_channel_test"),
    path("notifications/channels/<str:name>/remove/", views.channel_remove, name="notification_channel_remove"),
    path("notifications/rules/", views.rule_add, name="notification_rule_add"),
    path("notifications/rules/<str:name>/mute/", views.rule_mute, name="notification_rule_mute"),
    path("notifications/rules/<str:name>/remove/", views.rule_remove, name="notification_rule_remove"),
]

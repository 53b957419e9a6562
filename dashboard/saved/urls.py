from django.urls import path

from . import views

urlpatterns = [
    path("views/", views.views_page, name="saved-views"),
    path("views/save/", views.save, name="saved-save"),
    path("views/palette/", views.palette_data, name="saved-palette"),
    path("views/<slug:slug>/", views.open_view, name="saved-open"),
    path("views/<slug:slug>/change/", views.change, name="saved-change"),
    path("views/<slug:slug>/delete/", views.delete, name="saved-delete"),
    path("views/<slug:slug>/default/", views.make_default, name="saved-default"),
    path("pins/", views.pin, name="pin"),
]

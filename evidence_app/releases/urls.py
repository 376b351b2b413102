from __future__ import annotations

from django.urls import path

from . import views

app_name = "releases"

urlpatterns = [
    path("", views.release_list, name="list"),
    path("<int:pk>/", views.release_detail, name="detail"),
    path("<int:pk>/feed.atom", views.release_feed, name="feed"),
]

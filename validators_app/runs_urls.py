from __future__ import annotations

from django.urls import path

from validators_app import runs_views

app_name = "runs"

urlpatterns = [
    path("", runs_views.run_list, name="list"),
    path("start/", runs_views.run_start, name="start"),
    path("<int:pk>/", runs_views.run_detail, name="detail"),
    path("<int:pk>/cancel/", runs_views.run_cancel, name="cancel"),
]

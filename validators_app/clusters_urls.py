from __future__ import annotations

from django.urls import path

from validators_app import clusters_views

app_name = "clusters"

urlpatterns = [
    path("", clusters_views.cluster_list, name="list"),
    path("new/", clusters_views.cluster_new, name="new"),
    path("<int:pk>/", clusters_views.cluster_detail, name="detail"),
    path("<int:pk>/test/", clusters_views.cluster_test, name="test"),
    path("<int:pk>/settings/", clusters_views.cluster_settings, name="settings"),
]

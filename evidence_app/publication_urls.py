"""``/aicr/data/…``: AICR's dashboard data layout (``index.json``, ``series/<recipe>.json``),
this site's ``labels.json`` and the listing at ``data/``."""

from __future__ import annotations

from django.urls import path, re_path

from evidence_app import publication_views

app_name = "aicr-dashboard"

urlpatterns = [
    path("data/", publication_views.dashboard_listing, name="listing"),
    path("data/index.json", publication_views.dashboard_index, name="index"),
    path("data/labels.json", publication_views.dashboard_labels, name="labels"),
    # Recipe names contain dots and dashes, never a slash.
    re_path(
        r"^data/series/(?P<name>[^/]{1,200})\.json$",
        publication_views.dashboard_series,
        name="series",
    ),
]

"""The one DRF router of the site: every app's API under ``/api/v1/`` (namespace ``api``)."""

from __future__ import annotations

from django.urls import path, re_path
from rest_framework.routers import DefaultRouter

from evidence_app.api.export_views import (
    AuditPackageExportView,
    EvidenceCsvExportView,
    EvidenceNdjsonExportView,
)
from evidence_app.api.views import (
    EvidenceBundleView,
    EvidenceViewSet,
    EvidenceWithdrawView,
    SignerViewSet,
    UploadDetailView,
)
from recipes_app.api.views import RecipeQueryView, RecipeResolvedYAMLView, RecipeViewSet

app_name = "api"

router = DefaultRouter()
router.include_format_suffixes = False  # recipe names contain dots: "….json" stays a name
router.register("recipes", RecipeViewSet, basename="recipe")
router.register("evidence", EvidenceViewSet, basename="evidence")
router.register("signers", SignerViewSet, basename="signer")

urlpatterns = [
    re_path(
        r"^recipes/(?P<name>[^/]+)/resolved\.yaml$",
        RecipeResolvedYAMLView.as_view(),
        name="recipe-resolved-yaml",
    ),
    path("query/", RecipeQueryView.as_view(), name="recipe-query"),
    re_path(
        r"^evidence/(?P<pk>[0-9]+)/bundle$", EvidenceBundleView.as_view(), name="evidence-bundle"
    ),
    re_path(
        r"^evidence/(?P<pk>[0-9]+)/withdraw$",
        EvidenceWithdrawView.as_view(),
        name="evidence-withdraw",
    ),
    path("uploads/<int:pk>/", UploadDetailView.as_view(), name="upload-detail"),
    path("export/evidence.ndjson", EvidenceNdjsonExportView.as_view(), name="export-ndjson"),
    path("export/evidence.csv", EvidenceCsvExportView.as_view(), name="export-csv"),
    path("export/audit.tar.gz", AuditPackageExportView.as_view(), name="export-audit"),
    *router.urls,
]

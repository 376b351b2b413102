"""The one DRF router of the site: every app's API under ``/api/v1/`` (namespace ``api``)."""

from __future__ import annotations

from django.urls import path, re_path
from rest_framework.routers import DefaultRouter

from evidence_app.api.check import SnapshotCheckView
from evidence_app.api.export_jobs import ExportJobViewSet
from evidence_app.api.export_views import (
    AuditPackageExportView,
    EvidenceCsvExportView,
    EvidenceNdjsonExportView,
)
from evidence_app.api.keys import SigningKeyViewSet
from evidence_app.api.pointers import PointerViewSet
from evidence_app.api.qualifications import (
    QualificationCsvExportView,
    QualificationListView,
    QualificationNdjsonExportView,
)
from evidence_app.api.releases import ReleaseViewSet
from evidence_app.api.views import (
    EvidenceBundleView,
    EvidenceViewSet,
    EvidenceWithdrawView,
    SignerViewSet,
    UploadDetailView,
)
from recipes_app.api.views import RecipeQueryView, RecipeResolvedYAMLView, RecipeViewSet
from validators_app.api.clusters import ClusterTestView, ClusterViewSet
from validators_app.api.runs import RunCtrfView, RunPointerView, RunViewSet

app_name = "api"

router = DefaultRouter()
router.include_format_suffixes = False  # recipe names contain dots: "….json" stays a name
router.register("recipes", RecipeViewSet, basename="recipe")
router.register("evidence", EvidenceViewSet, basename="evidence")
router.register("signers", SignerViewSet, basename="signer")
router.register("keys", SigningKeyViewSet, basename="key")
router.register("pointers", PointerViewSet, basename="pointer")
router.register("runs", RunViewSet, basename="run")
router.register("clusters", ClusterViewSet, basename="cluster")
router.register("releases", ReleaseViewSet, basename="release")
router.register("exports", ExportJobViewSet, basename="export-job")

urlpatterns = [
    re_path(
        r"^recipes/(?P<name>[^/]+)/resolved\.yaml$",
        RecipeResolvedYAMLView.as_view(),
        name="recipe-resolved-yaml",
    ),
    path("query/", RecipeQueryView.as_view(), name="recipe-query"),
    path("check/", SnapshotCheckView.as_view(), name="check"),
    re_path(
        r"^evidence/(?P<pk>[0-9]+)/bundle$", EvidenceBundleView.as_view(), name="evidence-bundle"
    ),
    re_path(
        r"^evidence/(?P<pk>[0-9]+)/withdraw$",
        EvidenceWithdrawView.as_view(),
        name="evidence-withdraw",
    ),
    path("uploads/<int:pk>/", UploadDetailView.as_view(), name="upload-detail"),
    path("runs/<int:pk>/ctrf.json", RunCtrfView.as_view(), name="run-ctrf"),
    path("runs/<int:pk>/pointer.yaml", RunPointerView.as_view(), name="run-pointer"),
    path("clusters/<int:pk>/test/", ClusterTestView.as_view(), name="cluster-test"),
    path("export/evidence.ndjson", EvidenceNdjsonExportView.as_view(), name="export-ndjson"),
    path("export/evidence.csv", EvidenceCsvExportView.as_view(), name="export-csv"),
    path("export/audit.tar.gz", AuditPackageExportView.as_view(), name="export-audit"),
    path("qualifications/", QualificationListView.as_view(), name="qualifications"),
    path(
        "export/qualifications.csv",
        QualificationCsvExportView.as_view(),
        name="qualifications-csv",
    ),
    path(
        "export/qualifications.ndjson",
        QualificationNdjsonExportView.as_view(),
        name="qualifications-ndjson",
    ),
    *router.urls,
]

from __future__ import annotations

from django.urls import path

from evidence_app import export_pages, views

app_name = "evidence"

urlpatterns = [
    path("evidence/", views.evidence_list, name="list"),
    path("evidence/new/", views.evidence_new, name="new"),
    path("evidence/compare/", views.evidence_compare, name="compare"),
    path("evidence/pointers/", views.pointer_list, name="pointers"),
    path("evidence/uploads/<int:pk>/", views.upload_result, name="upload"),
    path("evidence/<int:pk>/", views.evidence_detail, name="detail"),
    path("evidence/<int:pk>/withdraw/", views.evidence_withdraw, name="withdraw"),
    path("evidence/<int:pk>/pointer.yaml", views.evidence_pointer, name="pointer-yaml"),
    path("exports/", export_pages.export_list, name="exports"),
    path("exports/<int:pk>/", export_pages.export_detail, name="export"),
    path("exports/<int:pk>/download", export_pages.export_file, name="export-file"),
    path("signers/", views.signer_list, name="signers"),
    path("signers/<slug:slug>/", views.signer_detail, name="signer"),
    path("signers/<slug:slug>/key.pub", views.signer_key, name="signer-key"),
]

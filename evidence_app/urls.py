from __future__ import annotations

from django.urls import path

from evidence_app import views

app_name = "evidence"

urlpatterns = [
    path("evidence/", views.evidence_list, name="list"),
    path("evidence/new/", views.evidence_new, name="new"),
    path("evidence/<int:pk>/", views.evidence_detail, name="detail"),
    path("evidence/<int:pk>/withdraw/", views.evidence_withdraw, name="withdraw"),
    path("signers/<slug:slug>/", views.signer_detail, name="signer"),
]

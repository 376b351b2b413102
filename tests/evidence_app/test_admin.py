"""The maintainers' admin: rows created through the services, the production root protected,
the upload log listed without loading evidence bytes."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evidence_app.models import SigningKey, TrustRoot, UploadLog
from evidence_app.services import keys

pytestmark = pytest.mark.django_db


def test_the_production_root_cannot_be_edited_or_deleted(
    admin_client: Client, evidence_db: None
) -> None:
    root = TrustRoot.objects.get(is_production=True)
    change = f"/admin/evidence_app/trustroot/{root.pk}/change/"

    page = admin_client.get(change)
    edit = admin_client.post(change, {"name": "mine", "trusted_root_json": "{}", "enabled": ""})
    delete = admin_client.post(f"/admin/evidence_app/trustroot/{root.pk}/delete/", {"post": "yes"})
    bulk = admin_client.post(
        "/admin/evidence_app/trustroot/",
        {"action": "delete_selected", "_selected_action": [root.pk], "post": "yes"},
    )

    assert page.status_code == 200  # view only
    assert edit.status_code == 403
    assert delete.status_code == 403
    assert bulk.status_code in (200, 302, 403)
    root.refresh_from_db()
    assert (root.name, root.enabled) == ("production", True)


def test_a_key_added_in_the_admin_is_registered_by_the_service(
    admin_client: Client, evidence_db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    register = keys.signing_key_register
    monkeypatch.setattr(
        keys, "signing_key_register", lambda **kw: calls.append(kw["name"]) or register(**kw)
    )
    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )

    response = admin_client.post(
        "/admin/evidence_app/signingkey/add/", {"name": "lab key", "public_key_pem": pem}
    )
    again = admin_client.post(
        "/admin/evidence_app/signingkey/add/", {"name": "same key", "public_key_pem": pem}
    )

    assert response.status_code == 302
    assert calls == ["lab key"]
    key = SigningKey.objects.get()
    assert (key.algorithm, key.registered_by.username) == ("ecdsa-p256", "admin")
    assert "already registered" in again.content.decode()


def test_the_upload_log_list_does_not_load_evidence(
    admin_client: Client, evidence_db: None, django_user_model: Any
) -> None:
    for _ in range(3):
        UploadLog.objects.create(channel="api", verdict="rejected")

    with CaptureQueriesContext(connection) as queries:
        response = admin_client.get("/admin/evidence_app/uploadlog/")

    assert response.status_code == 200
    assert not any('"evidence_app_evidence"' in q["sql"] for q in queries.captured_queries)

"""One JSON error shape for every ``/api/`` error: ``code``, ``message``, ``details``,
``request_id`` (echoed in ``X-Request-Id``), from DRF's errors and Django's alike; 429 with
``Retry-After``."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from evidence_app.auth import EvidenceUploadThrottle
from evidence_app.services.tokens import token_create, user_with_role

SHAPE = {"code", "message", "detail", "details", "request_id"}


def _assert_shape(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) >= SHAPE
    assert body["code"] == code
    assert body["message"]
    assert body["detail"] == body["message"]
    assert isinstance(body["details"], dict)
    assert body["request_id"] == response["X-Request-Id"]
    return body


@pytest.fixture
def contributor(db: None) -> str:
    return token_create(
        user=user_with_role(username="carl", role="contributor"), role="contributor"
    )[1]


@pytest.mark.django_db
def test_it_answers_401_403_404_405_and_400_in_one_shape(client: Client, contributor: str) -> None:
    _assert_shape(client.get("/api/v1/export/evidence.ndjson"), 401, "not-authenticated")
    _assert_shape(
        client.get("/api/v1/export/evidence.csv", HTTP_AUTHORIZATION=f"Bearer {contributor}"),
        403,
        "permission-denied",
    )
    _assert_shape(client.get("/api/v1/evidence/999999/"), 404, "not-found")
    _assert_shape(client.get("/api/v1/nothing-here/"), 404, "not-found")
    _assert_shape(client.delete("/api/v1/signers/"), 405, "method-not-allowed")
    body = _assert_shape(client.get("/api/v1/evidence/", {"stale": "maybe"}), 400, "invalid")
    assert "stale" in body["details"]
    _assert_shape(
        client.get("/api/v1/evidence/", HTTP_AUTHORIZATION="Bearer aicr_nope"),
        401,
        "authentication-failed",
    )


@pytest.mark.django_db
def test_it_echoes_a_client_request_id(client: Client) -> None:
    rid = str(uuid.uuid4())
    response = client.get("/api/v1/evidence/999999/", HTTP_X_REQUEST_ID=rid)
    assert response.json()["request_id"] == rid == response["X-Request-Id"]


@pytest.mark.django_db
def test_it_answers_429_with_retry_after(
    client: Client, contributor: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.clear()
    monkeypatch.setattr(EvidenceUploadThrottle, "THROTTLE_RATES", {"evidence-upload": "1/min"})
    headers = {"HTTP_AUTHORIZATION": f"Bearer {contributor}"}

    def upload() -> Any:
        bundle = SimpleUploadedFile("b.json", b"{}", content_type="application/json")
        return client.post("/api/v1/evidence/", {"bundle": bundle}, **headers)

    assert upload().status_code == 422
    response = upload()
    _assert_shape(response, 429, "throttled")
    assert 0 < int(response["Retry-After"]) <= 60

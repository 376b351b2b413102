"""``/health`` and ``/ready``: ready only when the database, the broker and the cache answer."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from aicr_site import health
from aicr_site.celery import app


def test_it_answers_health_without_touching_anything(client: Client) -> None:
    response = client.get("/health")  # no django_db mark: a query would raise
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_it_is_ready_when_everything_answers(client: Client) -> None:
    response = client.get("/ready")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ready"
    assert set(body["checks"]) == {"database", "broker", "cache"}
    assert all(check["ok"] for check in body["checks"].values())
    assert response["Cache-Control"].startswith("max-age=0")


@pytest.mark.django_db
def test_it_is_not_ready_when_the_broker_does_not_answer(
    client: Client, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False
    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:9/0")  # discard port: closed
    monkeypatch.setattr(health, "BROKER_TIMEOUT_SECONDS", 0.5)

    response = client.get("/ready")

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not-ready"
    assert body["checks"]["broker"]["ok"] is False
    assert body["checks"]["broker"]["detail"]
    assert body["checks"]["database"]["ok"] is True


@pytest.mark.django_db
def test_it_is_not_ready_when_the_cache_loses_writes(client: Client, settings: Any) -> None:
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
    response = client.get("/ready")
    assert response.status_code == 503
    assert response.json()["checks"]["cache"]["ok"] is False

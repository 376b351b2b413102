"""Withdrawal: who may withdraw, the reason, and what it changes (visible, not counted)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from evidence_app.models import Evidence
from evidence_app.services.withdrawal import WithdrawalError, evidence_withdraw
from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory


@pytest.fixture
def owned(example_recipe: Recipe, make_token: Callable[..., str]) -> tuple[Evidence, str]:
    token = make_token("carol", "contributor")
    carol = get_user_model().objects.get(username="carol")
    return EvidenceFactory(recipe=example_recipe, uploaded_by=carol), token


def _withdraw(api: Any, token: str | None, evidence: Evidence, reason: str | None) -> Any:
    body = {} if reason is None else {"reason": reason}
    return api(token).post(
        f"/api/v1/evidence/{evidence.pk}/withdraw", body, content_type="application/json"
    )


def test_it_lets_a_contributor_withdraw_their_own_upload(
    api: Any, owned: tuple[Evidence, str], client: Client
) -> None:
    evidence, token = owned
    assert Evidence.objects.counted().filter(pk=evidence.pk).exists()

    response = _withdraw(api, token, evidence, "  ran on the wrong  driver ")

    assert response.status_code == 200
    body = response.json()
    assert body["withdrawn"] is True
    assert body["withdrawal"]["reason"] == "ran on the wrong driver"
    assert body["withdrawal"]["by"] == "carol"
    assert "withdrawn" in {r["code"] for r in body["stale_reasons"]}
    evidence.refresh_from_db()
    assert evidence.withdrawn_at is not None
    assert not Evidence.objects.counted().filter(pk=evidence.pk).exists()
    # still visible
    detail = client.get(f"/api/v1/evidence/{evidence.pk}/").json()
    assert detail["withdrawal"]["reason"] == "ran on the wrong driver"
    assert [r["id"] for r in client.get("/api/v1/evidence/").json()["results"]] == [evidence.pk]
    again = _withdraw(api, token, evidence, "twice")
    assert again.status_code == 409


def test_it_refuses_other_contributors_auditors_and_anonymous_users(
    api: Any, owned: tuple[Evidence, str], make_token: Callable[..., str]
) -> None:
    evidence, _ = owned

    assert (
        _withdraw(api, make_token("mallory", "contributor"), evidence, "mine now").status_code
        == 403
    )
    assert _withdraw(api, make_token("audrey", "auditor"), evidence, "audit").status_code == 403
    assert _withdraw(api, None, evidence, "anon").status_code == 401
    evidence.refresh_from_db()
    assert evidence.withdrawn_at is None


def test_it_lets_a_maintainer_withdraw_anything_with_a_reason(
    api: Any, owned: tuple[Evidence, str], make_token: Callable[..., str]
) -> None:
    evidence, _ = owned
    maintainer = make_token("maria", "maintainer")

    missing = _withdraw(api, maintainer, evidence, None)
    blank = _withdraw(api, maintainer, evidence, "   ")
    done = _withdraw(api, maintainer, evidence, "duplicate lab run")

    assert missing.status_code == 400
    assert "reason is required" in missing.json()["detail"]
    assert blank.status_code == 400
    assert done.status_code == 200
    assert done.json()["withdrawal"]["by"] == "maria"


def test_the_service_enforces_the_rules_itself(owned: tuple[Evidence, str]) -> None:
    evidence, _ = owned
    stranger = get_user_model().objects.create(username="stranger")

    with pytest.raises(WithdrawalError) as forbidden:
        evidence_withdraw(evidence=evidence, by=stranger, roles={"contributor"}, reason="x")
    with pytest.raises(WithdrawalError) as no_reason:
        evidence_withdraw(
            evidence=evidence, by=evidence.uploaded_by, roles={"contributor"}, reason=""
        )

    assert forbidden.value.code == "forbidden"
    assert no_reason.value.code == "reason-required"
    assert Evidence.objects.filter(withdrawn_at__isnull=True).count() == 1

"""ETag and 304 on API lists and details: unchanged answers are not sent again; a change is."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from evidence_app.models import Evidence
from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def recipe(real_catalog: object) -> Recipe:
    return Recipe.objects.filter(catalog=real_catalog).order_by("name").first()


@pytest.mark.parametrize(
    "path",
    [
        lambda e: "/api/v1/evidence/",
        lambda e: f"/api/v1/evidence/{e.pk}/",
        lambda e: "/api/v1/signers/",
        lambda e: f"/api/v1/signers/{e.signer.slug}/",
    ],
    ids=["evidence-list", "evidence-detail", "signer-list", "signer-detail"],
)
def test_it_answers_304_until_something_changes(
    client: Client, recipe: Recipe, path: Callable[[Evidence], str]
) -> None:
    evidence = EvidenceFactory(recipe=recipe)
    url = path(evidence)
    first = client.get(url)
    assert first.status_code == 200
    etag = first["ETag"]

    unchanged = client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert unchanged.status_code == 304
    assert unchanged.content == b""

    EvidenceFactory(recipe=recipe, signer=evidence.signer)
    Evidence.objects.filter(pk=evidence.pk).update(
        withdrawn_at=evidence.attested_at, withdrawal_reason="x"
    )
    changed = client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert changed.status_code == 200
    assert changed["ETag"] != etag

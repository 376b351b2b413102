"""``/api/v1/evidence/`` pages by cursor: walking the list while evidence arrives sees every row
that was there exactly once (page numbers would repeat one)."""

from __future__ import annotations

from datetime import timedelta

from django.test import Client
from django.utils import timezone

from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory


def test_it_walks_every_row_once_while_rows_arrive(client: Client, example_recipe: Recipe) -> None:
    now = timezone.now()
    rows = [
        EvidenceFactory(recipe=example_recipe, attested_at=now - timedelta(hours=i))
        for i in range(7)
    ]
    rows.append(EvidenceFactory(recipe=example_recipe, attested_at=rows[3].attested_at))  # a tie
    seen: list[int] = []
    url: str | None = "/api/v1/evidence/?page_size=3"
    pages = 0
    while url:
        body = client.get(url).json()
        assert body["count"] >= len(rows)
        seen += [item["id"] for item in body["results"]]
        url = body["next"]
        pages += 1
        # Newer evidence arrives between pages: it sorts before the cursor, not into the walk.
        EvidenceFactory(recipe=example_recipe, attested_at=now + timedelta(minutes=pages))
    assert sorted(seen) == sorted(e.pk for e in rows)
    assert len(seen) == len(set(seen))
    assert "cursor=" in client.get("/api/v1/evidence/?page_size=3").json()["next"]


def test_it_refuses_a_forged_cursor(client: Client, example_recipe: Recipe) -> None:
    response = client.get("/api/v1/evidence/", {"cursor": "o=-5&p=x"})
    assert response.status_code == 404
    assert response.json()["code"] == "not-found"

"""The OpenAPI document is checked into the repository (docs/openapi.yaml), so a change to the
API shows up in review: a change to an endpoint without regenerating it fails here."""

from __future__ import annotations

from django.test import Client

from tests.shared_data import REPO_ROOT

CHECKED_IN = REPO_ROOT / "docs" / "openapi.yaml"


def test_the_served_schema_is_the_checked_in_one(client: Client, db: None) -> None:
    response = client.get("/api/schema/")
    assert response.status_code == 200
    assert response.content.decode() == CHECKED_IN.read_text(encoding="utf-8"), (
        "the API changed: regenerate the checked-in schema with `make schema` and commit it"
    )

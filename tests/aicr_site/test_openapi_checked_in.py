"""The OpenAPI document is checked into the repository (docs/openapi.yaml, written by
``make schema`` on the default SQLite database), so a change to the API shows up in review: a
change to an endpoint without regenerating it fails here.

The integer bounds drf-spectacular derives from the database backend (SQLite's 64-bit
integers, PostgreSQL's 16- and 32-bit integer columns) are the only backend-dependent part of
the document; they are set aside before comparing, so the test means the same on either
database."""

from __future__ import annotations

from typing import Any

import yaml
from django.test import Client

from tests.shared_data import REPO_ROOT

CHECKED_IN = REPO_ROOT / "docs" / "openapi.yaml"
BACKEND_BOUNDS = {2**15 - 1, -(2**15), 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)}


def _without_backend_bounds(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: _without_backend_bounds(value)
            for key, value in node.items()
            if not (key in ("maximum", "minimum") and value in BACKEND_BOUNDS)
            and not (key == "format" and value in ("int32", "int64"))
        }
    if isinstance(node, list):
        return [_without_backend_bounds(item) for item in node]
    return node


def test_the_served_schema_is_the_checked_in_one(client: Client, db: None) -> None:
    response = client.get("/api/schema/")
    assert response.status_code == 200
    served = _without_backend_bounds(yaml.safe_load(response.content))
    checked_in = _without_backend_bounds(yaml.safe_load(CHECKED_IN.read_text(encoding="utf-8")))
    assert served == checked_in, (
        "the API changed: regenerate the checked-in schema with `make schema` and commit it"
    )

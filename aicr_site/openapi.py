"""Responses every operation of a kind can give, added to the OpenAPI document in one place
(a drf-spectacular postprocessing hook) rather than repeated on each view.

* Every operation answers 400 to a parameter that is not valid (named) or that carries text no
  database column can hold (``UnstorableTextMiddleware``: a NUL, an unpaired surrogate).
* An operation that takes a bearer token answers 401 to a token that is not valid (unknown,
  revoked, expired, or its user left the role's group), even where no token is needed: DRF
  authenticates before it asks for permission.
* A paginated list answers 404 to a page or cursor that does not exist (DRF's pagination).
"""

from __future__ import annotations

from typing import Any

_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}


def document_common_refusals(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            responses.setdefault(
                "400", {"description": "A parameter is not valid (named).", "content": _ERROR}
            )
            if any("bearerToken" in scheme for scheme in operation.get("security", [])):
                responses.setdefault(
                    "401", {"description": "The token is not valid.", "content": _ERROR}
                )
            queries = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
            if queries & {"page", "cursor"}:
                responses.setdefault(
                    "404", {"description": "No such page or cursor.", "content": _ERROR}
                )
    return result

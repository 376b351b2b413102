"""Cursor pagination for large, growing lists (``/api/v1/evidence/``).

A page number shifts when rows are inserted before it (a client walking pages sees a row twice
or skips one); an opaque cursor names a position in the ordering instead, so walking the list
while evidence arrives sees every row once. The body keeps the shape of page-number pagination
(``count``, ``next``, ``previous``, ``results``); ``next``/``previous`` carry ``cursor=…``.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView


def _count(queryset: QuerySet[Any]) -> int:
    """The rows of ``queryset``; for the whole evidence table unfiltered, its tallied total
    (``SignerActivity``, kept by triggers: a sum over a row per signer instead of a
    ``COUNT(*)`` over every record, 123 ms at 1,000,000)."""
    from evidence_app.models import Evidence
    from evidence_app.services.signer_tallies import evidence_total

    if queryset.model is Evidence and not queryset.query.where:
        return evidence_total()
    return queryset.count()


class CountedCursorPagination(CursorPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200
    ordering = ("-attested_at", "-pk")

    # Narrower than the base (a QuerySet, not any sequence): only the evidence list uses it.
    def paginate_queryset(  # type: ignore[override]
        self, queryset: QuerySet[Any], request: Request, view: APIView | None = None
    ) -> list[Any] | None:
        self.count = _count(queryset)
        return super().paginate_queryset(queryset, request, view)

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "count": self.count,
                "next": self.get_next_link(),
                "previous": self.get_previous_link(),
                "results": data,
            }
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        body = super().get_paginated_response_schema(schema)
        body["properties"] = {"count": {"type": "integer", "example": 123}, **body["properties"]}
        body["required"] = ["count", *body.get("required", [])]
        return body

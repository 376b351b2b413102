"""``GET /api/v1/qualifications/`` and its exports ``/api/v1/export/qualifications.csv`` and
``.ndjson``: the qualifications table (``evidence_app.qualifications``) as JSON, with the
page's filters and sort (``QualificationFilter``). Public, like the page: every value in it
is already on the public recipe and evidence pages. The exports stream in chunks, staleness
computed per chunk in a fixed number of queries (as ``exports.records`` does)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import batched
from typing import Any

from django.db.models import QuerySet
from django.http.response import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from evidence_app.api.export_views import ERRORS, _ExportView
from evidence_app.api.serializers import ErrorSerializer
from evidence_app.auth import BearerTokenAuthentication
from evidence_app.exports.records import csv_stream, ndjson_stream
from evidence_app.models import Evidence
from evidence_app.qualifications import (
    QualificationFilter,
    qualification_queryset,
    qualification_record,
    qualification_rows,
)
from evidence_app.qualifications.table import QualificationRecord

TAGS = ["qualifications"]
CHUNK_SIZE = 1000
CSV_COLUMNS = tuple(QualificationRecord.__annotations__)


class QualificationSerializer(serializers.Serializer[Any]):
    """One row; a value the bundle does not carry is null and named in ``not_recorded`` or
    ``redacted``."""

    id = serializers.IntegerField()
    recipe = serializers.CharField()
    signer = serializers.CharField()
    signer_slug = serializers.CharField()
    signer_class = serializers.CharField()
    signer_kind = serializers.CharField()
    gpu_model = serializers.CharField(allow_null=True)
    gpu_count = serializers.CharField(allow_null=True)
    instance_type = serializers.CharField(allow_null=True)
    k8s_version = serializers.CharField(allow_null=True)
    driver = serializers.CharField(allow_null=True)
    gpu_operator = serializers.CharField(allow_null=True)
    not_recorded = serializers.ListField(child=serializers.CharField())
    redacted = serializers.ListField(child=serializers.CharField())
    aicr_version = serializers.CharField()
    attested_at = serializers.DateTimeField()
    state = serializers.CharField(help_text="The recipe's consensus state; empty if none stored.")
    stale = serializers.ListField(child=serializers.CharField(), help_text="Stale reason codes.")
    is_demo = serializers.BooleanField()
    is_simulated = serializers.BooleanField()
    measures = serializers.ListField(
        child=serializers.CharField(), help_text='"<check> <label>=<value> <unit>" per number.'
    )


class QualificationPagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200


class _QualificationQuery(generics.GenericAPIView[Evidence]):
    queryset = Evidence.objects.none()  # the schema's model; get_queryset gives the rows
    filterset_class = QualificationFilter
    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [AllowAny]

    def get_queryset(self) -> QuerySet[Evidence]:
        return qualification_queryset()


class QualificationListView(_QualificationQuery):
    pagination_class = QualificationPagination

    @extend_schema(
        summary="List qualifications",
        description="One row per counted evidence record, with the identities it ran on and "
        "what it measured; simulated runs only with `simulated=true`.",
        responses={200: QualificationSerializer(many=True), 400: ErrorSerializer},
        tags=TAGS,
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset())) or []
        records = [qualification_record(row) for row in qualification_rows(page)]
        return self.get_paginated_response(QualificationSerializer(records, many=True).data)


def _records(queryset: QuerySet[Evidence]) -> Iterator[QualificationRecord]:
    for chunk in batched(queryset.iterator(chunk_size=CHUNK_SIZE), CHUNK_SIZE):
        yield from (qualification_record(row) for row in qualification_rows(list(chunk)))


class _QualificationExport(_ExportView, _QualificationQuery):
    # Public like the page and the list (_ExportView's auditor role guards the full records).
    permission_classes: list[Any] = [AllowAny]


class QualificationCsvExportView(_QualificationExport):
    @extend_schema(
        summary="Export qualifications as CSV",
        description="The table's rows with its filters and sort (streamed; formula-like cells "
        "prefixed with an apostrophe).",
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR), **ERRORS},
        tags=TAGS,
    )
    def get(self, request: Request) -> HttpResponseBase:
        records = _records(self.filter_queryset(self.get_queryset()))
        body = csv_stream(records, columns=CSV_COLUMNS)
        return self._stream(
            body, "text/csv; charset=utf-8; header=present", "csv", what="qualifications"
        )


class QualificationNdjsonExportView(_QualificationExport):
    @extend_schema(
        summary="Export qualifications as NDJSON",
        description="One JSON object per line, the list's items (streamed).",
        responses={(200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR), **ERRORS},
        tags=TAGS,
    )
    def get(self, request: Request) -> HttpResponseBase:
        body = ndjson_stream(_records(self.filter_queryset(self.get_queryset())))
        return self._stream(
            body, "application/x-ndjson; charset=utf-8", "ndjson", what="qualifications"
        )

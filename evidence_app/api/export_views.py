"""Exports for auditors: ``/api/v1/export/evidence.ndjson``, ``.csv`` (streamed, constant memory)
and ``/api/v1/export/audit.tar.gz`` (the signed offline package). Auditor or maintainer token;
the filters of ``/api/v1/evidence/`` (``EvidenceFilter``)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable
from typing import Any

from django.db import connection
from django.db.models import QuerySet
from django.http import FileResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from aicr_site.errors import error_response
from evidence_app.api.filters import EVIDENCE_FILTER_PARAMETERS, EvidenceFilter
from evidence_app.api.serializers import ErrorSerializer
from evidence_app.auth import HasRole
from evidence_app.exports.ndjson_pg import ndjson_stream_pg
from evidence_app.exports.package import audit_package_write
from evidence_app.exports.records import (
    csv_stream,
    export_records,
    ndjson_stream,
    site_url_builder,
)
from evidence_app.models import Evidence
from evidence_app.permissions import EXPORT_ROLES
from evidence_app.services.site_key import SiteKeyUnavailable

TAGS = ["export"]

ERRORS = {400: ErrorSerializer, 401: ErrorSerializer, 403: ErrorSerializer}


def filtered_evidence(request: Request) -> QuerySet[Evidence]:
    """``EvidenceFilter`` over every record; a bad value is a 400 naming the parameter."""
    filterset = EvidenceFilter(request.query_params, queryset=Evidence.objects.all())
    if not filterset.is_valid():
        raise ValidationError(filterset.errors)
    return filterset.qs


def url_builder(request: Request) -> Callable[[str, int], str]:
    """``url_of(route, id)`` under the site this request reached."""
    return site_url_builder(request.build_absolute_uri("/"))


class _ExportView(APIView):
    permission_classes = [HasRole.of(*EXPORT_ROLES)]

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # The body is NDJSON / CSV / tar.gz whatever Accept says; errors are JSON.
        return (JSONRenderer(), JSONRenderer.media_type)

    @staticmethod
    def _stamp() -> str:
        return timezone.now().strftime("%Y%m%dT%H%M%SZ")

    def _stream(
        self, body: Iterable[bytes], content_type: str, extension: str, *, what: str = "evidence"
    ) -> HttpResponseBase:
        """``body`` streamed as an attachment named ``<what>-<UTC time>.<extension>``."""
        response = StreamingHttpResponse(body, content_type=content_type)
        filename = f"{what}-{self._stamp()}.{extension}"
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        response["X-Content-Type-Options"] = "nosniff"
        return response


class EvidenceNdjsonExportView(_ExportView):
    @extend_schema(
        summary="Export evidence as NDJSON",
        description="One JSON object per line per record (streamed; oldest id first).",
        parameters=EVIDENCE_FILTER_PARAMETERS,
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR),
            **ERRORS,
        },
        tags=TAGS,
    )
    def get(self, request: Request) -> HttpResponseBase:
        queryset, url_of = filtered_evidence(request), url_builder(request)
        if connection.vendor == "postgresql":
            # The database builds each line (ndjson_pg); the same records as export_records.
            body = ndjson_stream_pg(queryset, url_of=url_of)
        else:
            body = ndjson_stream(export_records(queryset, url_of=url_of))
        return self._stream(body, "application/x-ndjson; charset=utf-8", "ndjson")


class EvidenceCsvExportView(_ExportView):
    @extend_schema(
        summary="Export evidence as CSV",
        description="A header and one row per record (streamed; cells a spreadsheet would "
        "read as a formula are prefixed with an apostrophe).",
        parameters=EVIDENCE_FILTER_PARAMETERS,
        responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR), **ERRORS},
        tags=TAGS,
    )
    def get(self, request: Request) -> HttpResponseBase:
        records = export_records(filtered_evidence(request), url_of=url_builder(request))
        return self._stream(csv_stream(records), "text/csv; charset=utf-8; header=present", "csv")


class AuditPackageExportView(_ExportView):
    @extend_schema(
        summary="Export a signed offline audit package",
        description="records.ndjson, the exact bytes, transcripts, trusted roots, keys, "
        "allowlist, recipe YAML and catalog snapshots, MANIFEST.sha256 signed with the site "
        "key; re-verify with `manage.py verify_audit` or the README's commands. 503 when no "
        "site signing key is configured.",
        parameters=EVIDENCE_FILTER_PARAMETERS,
        responses={
            (200, "application/gzip"): OpenApiResponse(OpenApiTypes.BINARY),
            503: ErrorSerializer,
            **ERRORS,
        },
        tags=TAGS,
    )
    def get(self, request: Request) -> HttpResponseBase:
        queryset = filtered_evidence(request)
        spool = tempfile.TemporaryFile()  # noqa: SIM115 (FileResponse closes it)
        try:
            audit_package_write(
                queryset,
                spool,
                url_of=url_builder(request),
                filters=dict(request.query_params.items()),
                site=request.build_absolute_uri("/"),
            )
        except SiteKeyUnavailable as exc:
            spool.close()
            return error_response(request._request, status=503, message=f"No audit package: {exc}.")
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return FileResponse(
            spool,
            as_attachment=True,
            filename=f"audit-{self._stamp()}.tar.gz",
            content_type="application/gzip",
        )

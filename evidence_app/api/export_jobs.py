"""``/api/v1/exports/``: ask for an export built by a worker (202 with its status URL), watch its
progress, download it when done. Auditors and maintainers; each sees only their own jobs. The
view only translates HTTP: the rules are ``evidence_app.exports.jobs``."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from aicr_site.parsers import BoundedJSONParser
from evidence_app.api.releases import ReleaseErrorSerializer
from evidence_app.api.serializers import ErrorSerializer
from evidence_app.auth import HasRole
from evidence_app.exports.jobs import (
    CONTENT_TYPES,
    ExportRequestError,
    export_job_body,
    export_job_request,
)
from evidence_app.models import ExportFormat, ExportJob, ExportState
from evidence_app.permissions import EXPORT_ROLES

TAGS = ["export"]


class ExportJobInputSerializer(serializers.Serializer[Any]):
    """The request (documentation only: ``exports.jobs`` checks it)."""

    format = serializers.ChoiceField(choices=ExportFormat.choices)
    filters = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        help_text="The filters of /api/v1/evidence/ (recipe, signer, class, verdict, stale, "
        "aicr_version, counted, demo, attested_after, attested_before); an unknown one is a 400.",
    )


class ExportJobSerializer(serializers.ModelSerializer[ExportJob]):
    url = serializers.SerializerMethodField()
    download_url = serializers.SerializerMethodField(
        help_text="Where the file is, once state is done; null before."
    )
    page_url = serializers.SerializerMethodField(help_text="The job's page, with its progress.")

    class Meta:
        model = ExportJob
        fields = [
            "id",
            "format",
            "filters",
            "state",
            "total",
            "done",
            "error",
            "filename",
            "size",
            "sha256",
            "created_at",
            "started_at",
            "finished_at",
            "url",
            "page_url",
            "download_url",
        ]
        read_only_fields = fields

    def _absolute(self, path: str) -> str:
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path

    def get_url(self, job: ExportJob) -> str:
        return self._absolute(reverse("api:export-job-detail", args=[job.pk]))

    def get_page_url(self, job: ExportJob) -> str:
        return self._absolute(reverse("evidence:export", args=[job.pk]))

    def get_download_url(self, job: ExportJob) -> str | None:
        if job.state != ExportState.DONE:
            return None
        return self._absolute(reverse("api:export-job-download", args=[job.pk]))


def export_download(job: ExportJob) -> HttpResponseBase:
    """The built file as an attachment (the API's and the page's download)."""
    response = StreamingHttpResponse(
        export_job_body(job), content_type=CONTENT_TYPES[ExportFormat(job.format)]
    )
    response["Content-Length"] = str(job.size)
    response["Content-Disposition"] = f'attachment; filename="{job.filename}"'
    response["ETag"] = f'"{job.sha256}"'
    response["Digest"] = f"sha-256={job.sha256}"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@extend_schema_view(
    list=extend_schema(
        summary="Your exports",
        description="The exports you asked for, newest first (each kept EXPORT_KEEP_HOURS "
        "after it is done).",
        responses={
            200: ExportJobSerializer(many=True),
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
        },
        tags=TAGS,
    ),
    retrieve=extend_schema(
        summary="One of your exports: state and progress",
        description="`done` of `total` records written so far; `download_url` once the "
        "state is `done`. Someone else's export is a 404.",
        responses={
            200: ExportJobSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
        },
        tags=TAGS,
    ),
)
class ExportJobViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    permission_classes = [HasRole.of(*EXPORT_ROLES)]
    serializer_class = ExportJobSerializer
    parser_classes = [BoundedJSONParser]

    def get_queryset(self) -> QuerySet[ExportJob]:
        return ExportJob.objects.filter(requested_by_id=self.request.user.pk)

    @extend_schema(
        summary="Ask for an export built by a worker",
        description=(
            '`{"format": "ndjson" | "csv" | "audit", "filters": {…}}`: the same file as '
            "/api/v1/export/… gives for those filters, built in the background. 202 with "
            "the job (its `url` in `Location`); poll it for progress. 400 names the wrong "
            "field, 429 when you already have EXPORT_ACTIVE_PER_USER exports queued or "
            "building, 503 for an audit package when no site signing key is configured."
        ),
        request=ExportJobInputSerializer,
        responses={
            202: ExportJobSerializer,
            400: ReleaseErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            429: ReleaseErrorSerializer,
            503: ReleaseErrorSerializer,
        },
        tags=TAGS,
    )
    def create(self, request: Request) -> Response:
        data = request.data if isinstance(request.data, dict) else None
        if data is None:
            return _refusal(ExportRequestError("the body must be a JSON object"))
        try:
            job = export_job_request(
                user=request.user,
                format=str(data.get("format", "")),
                filters=data.get("filters"),
                site=request.build_absolute_uri("/"),
            )
        except ExportRequestError as exc:
            return _refusal(exc)
        body = ExportJobSerializer(job, context={"request": request}).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})

    @extend_schema(
        summary="Download an export",
        description="The file, once the job is `done` (409 naming its state before).",
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR),
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
            (200, "application/gzip"): OpenApiResponse(OpenApiTypes.BINARY),
            401: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
        tags=TAGS,
    )
    @action(detail=True, methods=["get"], url_path="download")
    def download(self, request: Request, pk: str | None = None) -> HttpResponseBase:
        job = self.get_object()
        if job.state != ExportState.DONE:
            return Response(
                {"detail": f"export #{job.pk} is {job.get_state_display().lower()}, not ready"},
                status=status.HTTP_409_CONFLICT,
            )
        return export_download(job)

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        if self.action == "download":  # the body is the file whatever Accept says
            return super().perform_content_negotiation(request, force=True)
        return super().perform_content_negotiation(request, force)


def _refusal(exc: ExportRequestError) -> Response:
    body: dict[str, str] = {"detail": str(exc), "code": "invalid"}
    if exc.field:
        body["field"] = exc.field
    if exc.status == 429:
        body["code"] = "too-many"
    elif exc.status == 503:
        body["code"] = "unavailable"
    return Response(body, status=exc.status)

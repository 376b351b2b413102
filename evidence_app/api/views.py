"""Evidence API: upload (verify-before-count), list/filter, detail, exact bytes, withdrawal,
OCI upload status, signers. Reads are public; writes need a Bearer token with a role.

Views only translate HTTP: every workflow is a service call (``services.ingest``,
``services.oci``, ``services.withdrawal``), every read a QuerySet.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Prefetch, QuerySet
from django.http import HttpResponse, HttpResponseNotModified
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import mixins, status, viewsets
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from aicr_site.pagination import PagePagination
from aicr_site.parsers import BoundedJSONParser
from evidence_app import permissions
from evidence_app.api.filters import EVIDENCE_FILTER_PARAMETERS, EvidenceFilter, SignerFilter
from evidence_app.api.pagination import CountedCursorPagination
from evidence_app.api.serializers import (
    ErrorSerializer,
    EvidenceDetailSerializer,
    EvidenceListSerializer,
    EvidenceUploadSerializer,
    IngestResultSerializer,
    OciAcceptedSerializer,
    SignerDetailSerializer,
    SignerListSerializer,
    UploadStatusSerializer,
    WithdrawInputSerializer,
)
from evidence_app.auth import BearerTokenAuthentication, EvidenceUploadThrottle, HasRole
from evidence_app.models import Evidence, Role, Signer, SignerClassChange, UploadLog, UploadState
from evidence_app.services import oci
from evidence_app.services.ingest import (
    IngestResult,
    evidence_ingest,
    max_upload_bytes,
    refuse_if_too_large,
)
from evidence_app.services.ingest.queued import bundle_queue
from evidence_app.services.staleness import staleness_bulk
from evidence_app.services.withdrawal import WithdrawalError, evidence_withdraw
from evidence_app.upload_status import http_status_of

TAGS = ["evidence"]
WITHDRAWAL_STATUS = {"reason-required": 400, "forbidden": 403, "already-withdrawn": 409}


LIST_DEFERRED = (
    "predicate",
    "check_results",
    "identity",
    "identities",
    *(
        f"recipe__{name}"
        for name in (
            "canonical_yaml",
            "deterministic_yaml",
            "components",
            "constraints",
            "checks",
            "applied_overlays",
            "deployment_order",
            "search_text",
        )
    ),
)


class EvidencePagination(CountedCursorPagination):
    """Newest attestation first; stable while evidence arrives (``api/pagination.py``)."""


def _result_body(result: IngestResult, request: Request) -> dict[str, Any]:
    evidence = result.evidence
    return {
        "id": evidence.pk if evidence else None,
        "url": reverse("api:evidence-detail", args=[evidence.pk], request=request)
        if evidence
        else None,
        "upload_id": result.upload.pk if result.upload else None,
        "verdict": result.verdict,
        "failed_step": result.failed_step,
        "created": result.created,
        "withdrawn": bool(evidence and evidence.withdrawn_at is not None),
        "signer": result.signer,
        "transcript": result.transcript,
        "reason": result.reason,
    }


def _log_body(log: UploadLog, request: Request) -> dict[str, Any]:
    return {
        "id": log.evidence_id,
        "url": None,
        "upload_id": log.pk,
        "verdict": log.verdict,
        "failed_step": log.failed_step,
        "created": bool(log.created),
        "withdrawn": False,
        "signer": log.signer,
        "transcript": log.transcript,
        "reason": log.reason,
    }


@extend_schema_view(
    list=extend_schema(
        summary="List evidence",
        description="Stored (verified) evidence, newest attestation first, with staleness. "
        "400: a filter value is not valid (named).",
        parameters=EVIDENCE_FILTER_PARAMETERS,
        responses={200: EvidenceListSerializer(many=True), 400: ErrorSerializer},
        tags=TAGS,
    ),
    retrieve=extend_schema(
        summary="One piece of evidence",
        description="Transcript, certificate claims, Rekor entry, predicate summary, per-phase "
        "check results, staleness reasons and copy-paste verify commands.",
        responses={200: EvidenceDetailSerializer, 404: ErrorSerializer},
        tags=TAGS,
    ),
)
class EvidenceViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    authentication_classes = [BearerTokenAuthentication]
    pagination_class = EvidencePagination
    filterset_class = EvidenceFilter
    serializer_class = EvidenceListSerializer
    parser_classes = [MultiPartParser, BoundedJSONParser]

    def get_permissions(self) -> list[Any]:
        if self.action == "create":
            return [HasRole.of(Role.CONTRIBUTOR, Role.MAINTAINER)()]
        return [AllowAny()]

    def get_throttles(self) -> list[BaseThrottle]:
        # Uploads verify signatures (CPU) and store bytes: per user, EVIDENCE_UPLOAD_RATE.
        # Reads are not throttled.
        if self.action == "create":
            return [EvidenceUploadThrottle()]
        return []

    def get_queryset(self) -> QuerySet[Evidence]:
        # A list row reads none of the evidence's JSON nor its recipe's documents, only the
        # recipe's catalog id: deferred, 50 rows carried each recipe's YAML (issue 22).
        qs = Evidence.objects.for_listing().defer(*LIST_DEFERRED)
        if self.action == "retrieve":
            qs = Evidence.objects.select_related("signer", "recipe", "withdrawn_by").defer(
                "content", "artifact"
            )
        return qs.order_by("-attested_at", "-pk")

    def get_serializer_class(self) -> type:
        if self.action == "retrieve":
            return EvidenceDetailSerializer
        if self.action == "create":
            return EvidenceUploadSerializer
        return EvidenceListSerializer

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        rows = list(page if page is not None else queryset)
        context = {**self.get_serializer_context(), "staleness": staleness_bulk(rows)}
        data = EvidenceListSerializer(rows, many=True, context=context).data
        return self.get_paginated_response(data) if page is not None else Response(data)

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        evidence = self.get_object()
        context = {**self.get_serializer_context(), "staleness": staleness_bulk([evidence])}
        return Response(EvidenceDetailSerializer(evidence, context=context).data)

    @extend_schema(
        summary="Upload evidence",
        description=(
            "Multipart `bundle` (a Sigstore bundle, or an AICR evidence directory as tar/tar.gz) "
            'with an optional `artifact`; or JSON `{"oci_ref": '
            '"registry/repo@sha256:…"}`, pulled by a worker (202, then poll `status_url`). '
            "With `Prefer: respond-async` a bundle is verified by a worker too: 202 with "
            "`status_url` (and `Location`, `Preference-Applied: respond-async`) once its bytes "
            "are committed; the status says pending, then the outcome below. "
            "201: verified and stored; 200: this signed statement by this signer is already stored "
            "(in any wrapper; `withdrawn` says whether that record is withdrawn); 422: refused "
            "(`verdict`, `failed_step`, `reason`, `transcript`); 503 with `Retry-After`: the "
            "database could not take it now, nothing was stored; 413: too large; 400: a body "
            "that is neither (no `bundle`, a malformed `oci_ref`). Needs a "
            "contributor or maintainer token."
        ),
        request={
            "multipart/form-data": EvidenceUploadSerializer,
            "application/json": EvidenceUploadSerializer,
        },
        responses={
            201: IngestResultSerializer,
            200: IngestResultSerializer,
            202: OciAcceptedSerializer,
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            413: IngestResultSerializer,
            415: ErrorSerializer,
            422: IngestResultSerializer,
            503: IngestResultSerializer,
        },
        tags=TAGS,
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        refused = refuse_if_too_large(
            content_length=request.META.get("CONTENT_LENGTH"), user=request.user, channel="api"
        )
        if refused is not None:
            return Response(_result_body(refused, request), status=http_status_of(refused.outcome))

        data = request.data
        if not hasattr(data, "getlist") and isinstance(data, dict):
            unknown = sorted(set(data) - {"oci_ref"})
            if unknown:
                raise ValidationError(
                    {
                        "detail": 'A JSON body carries only {"oci_ref": …}; upload a bundle as the '
                        f"multipart file field `bundle` (unexpected: {', '.join(unknown)[:200]})."
                    }
                )
        serializer = EvidenceUploadSerializer(data=data)
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data

        if values.get("oci_ref"):
            log = oci.oci_upload_request(oci_ref=values["oci_ref"], user=request.user)
            if log.state == UploadState.DONE and log.evidence_id is None and log.outcome:
                return Response(_log_body(log, request), status=http_status_of(log.outcome))
            return _accepted(log, request)

        bundle = values["bundle"]
        artifact_file = values.get("artifact")
        limit = max_upload_bytes()
        blob = bundle.read(limit + 1)
        artifact = artifact_file.read(limit + 1) if artifact_file is not None else None
        within_limit = len(blob) <= limit and (artifact is None or len(artifact) <= limit)
        if within_limit and prefers_async(request.headers.get("Prefer", "")):
            log = bundle_queue(
                data=blob, artifact=artifact, filename=bundle.name or "", user=request.user
            )
            return _accepted(log, request, {"Preference-Applied": "respond-async"})
        result = evidence_ingest(
            data=blob,
            artifact=artifact,
            filename=bundle.name or "",
            user=request.user,
            channel="api",
        )
        headers = {"Retry-After": str(result.retry_after)} if result.unavailable else None
        return Response(
            _result_body(result, request), status=http_status_of(result.outcome), headers=headers
        )


def _accepted(log: UploadLog, request: Request, headers: dict[str, str] | None = None) -> Response:
    """202: a worker will finish the upload; its status URL (also ``Location``) says when."""
    status_url = reverse("api:upload-detail", args=[log.pk], request=request)
    return Response(
        {"upload_id": log.pk, "state": log.state, "status_url": status_url},
        status=status.HTTP_202_ACCEPTED,
        headers={"Location": status_url, **(headers or {})},
    )


def prefers_async(prefer: str) -> bool:
    """Whether a ``Prefer`` header (RFC 7240: comma-separated preferences, each with optional
    ``;`` parameters, names case-insensitive) asks for ``respond-async``."""
    return any(
        item.split(";", 1)[0].split("=", 1)[0].strip().lower() == "respond-async"
        for item in prefer[:1000].split(",")
    )


class EvidenceBundleView(APIView):
    """The exact stored bytes."""

    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Download the exact evidence bytes",
        description="What was uploaded, byte for byte; `ETag` is its sha256.",
        responses={
            # Any schema: the bytes as stored, with the media type they were stored with (a
            # Sigstore bundle's JSON, a tarball's).
            (200, "*/*"): OpenApiResponse(OpenApiTypes.ANY),
            304: OpenApiResponse(description="Not modified (If-None-Match)."),
            404: ErrorSerializer,
        },
        tags=TAGS,
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        evidence = get_object_or_404(
            Evidence.objects.only("pk", "sha256", "content", "media_type", "container"), pk=pk
        )
        etag = f'"{evidence.sha256}"'
        if etag in request.headers.get("If-None-Match", ""):
            return HttpResponseNotModified(headers={"ETag": etag})
        response = HttpResponse(
            bytes(evidence.content), content_type=evidence.media_type or "application/octet-stream"
        )
        response["Content-Disposition"] = f'attachment; filename="{_download_name(evidence)}"'
        response["ETag"] = etag
        response["X-Content-Type-Options"] = "nosniff"
        response["Cache-Control"] = "public, max-age=31536000, immutable"
        return response


def _download_name(evidence: Evidence) -> str:
    short = evidence.sha256[:12]
    if evidence.media_type == "application/gzip":
        return f"evidence-{short}.tar.gz"
    if evidence.media_type == "application/x-tar":
        return f"evidence-{short}.tar"
    return f"evidence-{short}.sigstore.json"


class EvidenceWithdrawView(APIView):
    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [HasRole.of(Role.CONTRIBUTOR, Role.MAINTAINER)]
    parser_classes = [BoundedJSONParser, MultiPartParser]

    @extend_schema(
        summary="Withdraw evidence",
        description="A contributor withdraws their own uploads, a maintainer any. It stays "
        "visible as withdrawn and stops counting. A reason is required.",
        request=WithdrawInputSerializer,
        responses={
            200: EvidenceDetailSerializer,
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
        tags=TAGS,
    )
    def post(self, request: Request, pk: int) -> Response:
        evidence = get_object_or_404(
            Evidence.objects.select_related("signer", "recipe", "withdrawn_by").defer(
                "content", "artifact"
            ),
            pk=pk,
        )
        serializer = WithdrawInputSerializer(data=request.data)
        if not serializer.is_valid():
            return Response(
                {
                    "detail": "A reason is required to withdraw evidence.",
                    "errors": serializer.errors,
                },
                status=status.HTTP_400_BAD_REQUEST,
            )
        try:
            evidence_withdraw(
                evidence=evidence,
                by=request.user,
                roles=permissions.roles_of(request.user, token=request.auth),
                reason=serializer.validated_data["reason"],
            )
        except WithdrawalError as exc:
            return Response({"detail": exc.message}, status=WITHDRAWAL_STATUS[exc.code])
        context = {"request": request, "staleness": staleness_bulk([evidence])}
        return Response(EvidenceDetailSerializer(evidence, context=context).data)


class UploadDetailView(APIView):
    """An upload's state and outcome (OCI and ``respond-async`` uploads are finished by a
    worker)."""

    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [IsAuthenticated]

    @extend_schema(
        summary="Upload status",
        description="The uploader, auditors and maintainers may read it.",
        responses={200: UploadStatusSerializer, 401: ErrorSerializer, 404: ErrorSerializer},
        tags=TAGS,
    )
    def get(self, request: Request, pk: int) -> Response:
        log = get_object_or_404(UploadLog.objects.all(), pk=pk)
        roles = permissions.roles_of(request.user, token=request.auth)
        if log.user_id != request.user.pk and not roles & {Role.MAINTAINER, Role.AUDITOR}:
            raise PermissionDenied("Only the uploader, an auditor or a maintainer may see it.")
        return Response(UploadStatusSerializer(log, context={"request": request}).data)


@extend_schema_view(
    list=extend_schema(
        summary="List signers",
        parameters=[
            OpenApiParameter(
                "class",
                OpenApiTypes.STR,
                enum=["first-party", "partner", "community", "registered-key", "reported"],
            ),
            OpenApiParameter("counted", OpenApiTypes.BOOL),
            OpenApiParameter("kind", OpenApiTypes.STR, enum=["keyless", "key"]),
        ],
        tags=TAGS,
    ),
    retrieve=extend_schema(
        summary="One signer, with its class history",
        responses={200: SignerDetailSerializer, 404: ErrorSerializer},
        tags=TAGS,
    ),
)
class SignerViewSet(viewsets.ReadOnlyModelViewSet):
    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [AllowAny]
    lookup_field = "slug"
    lookup_value_regex = "[0-9a-f]{32}"
    filterset_class = SignerFilter
    pagination_class = PagePagination

    def get_queryset(self) -> QuerySet[Signer]:
        qs = Signer.objects.annotate(evidence_count=Count("evidence")).order_by("label", "pk")
        if self.action == "retrieve":
            qs = qs.select_related("key").prefetch_related(
                Prefetch("class_changes", queryset=SignerClassChange.objects.order_by("-at", "-pk"))
            )
        return qs

    def get_serializer_class(self) -> type:
        return SignerDetailSerializer if self.action == "retrieve" else SignerListSerializer

"""Validation runs API: start (maintainers), list/filter and read (public), merged CTRF bytes,
cancel (maintainers).

Views only translate HTTP; every workflow is a ``services.runs`` call. Reads never show a
cluster's server or credentials: a run names its cluster by id, name and environment.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Prefetch, QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from aicr_site.pagination import PagePagination
from aicr_site.parsers import BoundedJSONParser
from evidence_app.api.serializers import ErrorSerializer
from evidence_app.auth import HasRole
from evidence_app.models import Role
from validators_app.models import CheckRun, Cluster, RunStatus, ValidationRun
from validators_app.services import runs

TAGS = ["runs"]
CONFLICT_HEADER = "X-Active-Run"


# --- serializers ------------------------------------------------------------------------------


class RunStartInputSerializer(serializers.Serializer):
    cluster = serializers.IntegerField(help_text="Cluster id.")
    recipe = serializers.CharField(max_length=200, help_text="Recipe name (current catalog).")
    phases = serializers.ListField(
        child=serializers.CharField(max_length=20),
        required=False,
        max_length=4,
        help_text="Phases in the order to run them; default all three "
        "(deployment, conformance, performance). `all` alone means the default.",
    )


class RunCreatedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    status = serializers.CharField()


class CheckRunSerializer(serializers.ModelSerializer):
    class Meta:
        model = CheckRun
        fields = ["name", "phase", "status", "message", "duration_ms", "exit_code", "job_name"]


class ClusterRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    environment = serializers.CharField()


class RunSerializer(serializers.ModelSerializer):
    """A run with its checks; ``evidence`` once it was published."""

    cluster = serializers.SerializerMethodField()
    recipe = serializers.CharField(source="recipe.name")
    checks = CheckRunSerializer(many=True, read_only=True)
    evidence = serializers.SerializerMethodField()
    ctrf_url = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = ValidationRun
        fields = [
            "id",
            "url",
            "status",
            "phase",
            "current_check",
            "error",
            "cluster",
            "recipe",
            "phases",
            "aicr_run_id",
            "aicr_version",
            "cancel_requested",
            "attempts",
            "checks",
            "evidence",
            "publish_error",
            "ctrf_url",
            "created_at",
            "started_at",
            "finished_at",
        ]

    @extend_schema_field(ClusterRefSerializer)
    def get_cluster(self, run: ValidationRun) -> dict[str, Any]:
        cluster = run.cluster
        return {"id": cluster.pk, "name": cluster.name, "environment": cluster.environment}

    # Inline (not a $ref under allOf): validators of OpenAPI 3.0 ignore "nullable" there.
    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "properties": {"id": {"type": "integer"}, "url": {"type": "string"}},
            "required": ["id", "url"],
        }
    )
    def get_evidence(self, run: ValidationRun) -> dict[str, Any] | None:
        if run.evidence_id is None:
            return None
        request = self.context.get("request")
        return {
            "id": run.evidence_id,
            "url": reverse("api:evidence-detail", args=[run.evidence_id], request=request),
        }

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_ctrf_url(self, run: ValidationRun) -> str | None:
        if run.status not in (RunStatus.PASSED, RunStatus.FAILED):
            return None
        return reverse("api:run-ctrf", args=[run.pk], request=self.context.get("request"))

    @extend_schema_field(OpenApiTypes.URI)
    def get_url(self, run: ValidationRun) -> str:
        return reverse("api:run-detail", args=[run.pk], request=self.context.get("request"))


# --- views ------------------------------------------------------------------------------------


class RunFilter(django_filters.FilterSet):
    # Bounded: an id past the database's 64-bit integer is a 400, not a driver OverflowError.
    cluster = django_filters.NumberFilter(
        field_name="cluster_id", min_value=1, max_value=2**63 - 1, help_text="Cluster id."
    )
    recipe = django_filters.CharFilter(
        field_name="recipe__name", max_length=200, help_text="Recipe name (exact)."
    )
    status = django_filters.ChoiceFilter(choices=RunStatus.choices, help_text="Run status.")

    class Meta:
        model = ValidationRun
        fields: list[str] = []


class _MaintainerWrites(BasePermission):
    """Reads are public; starting and cancelling need a maintainer."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return HasRole.of(Role.MAINTAINER)().has_permission(request, view)


@extend_schema_view(
    list=extend_schema(
        summary="List validation runs",
        description="Newest first; filter by cluster id, recipe name and status. Public.",
        tags=TAGS,
    ),
    retrieve=extend_schema(
        summary="A validation run",
        description="Status (AICR's exit semantics), the phase and check running now, every "
        "check with its status and message, the evidence it was published as. Public.",
        responses={200: RunSerializer, 404: ErrorSerializer},
        tags=TAGS,
    ),
)
class RunViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    serializer_class = RunSerializer
    filterset_class = RunFilter
    pagination_class = PagePagination
    permission_classes = [_MaintainerWrites]
    parser_classes = [BoundedJSONParser]

    def get_queryset(self) -> QuerySet[ValidationRun]:
        checks = Prefetch("checks", queryset=CheckRun.objects.defer("stdout").order_by("position"))
        return (
            ValidationRun.objects.for_listing()
            .prefetch_related(checks)
            .order_by("-created_at", "-pk")
        )

    @extend_schema(
        summary="Start a validation run",
        description="Maintainers. Queues `aicr validate` of a recipe of the current catalog on "
        "a cluster; a `validation` worker runs it. 409 while the cluster has an active run "
        "(the `X-Active-Run` header names it); 400 names the bad field.",
        request=RunStartInputSerializer,
        responses={
            201: RunCreatedSerializer,
            400: ErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            409: ErrorSerializer,
        },
        tags=TAGS,
    )
    def create(self, request: Request) -> Response:
        if not isinstance(request.data, dict):
            return _bad("the body must be a JSON object with cluster, recipe and phases")
        serializer = RunStartInputSerializer(data=request.data)
        if not serializer.is_valid():
            field, errors = next(iter(serializer.errors.items()))
            message = errors[0] if isinstance(errors, list) and errors else errors
            if isinstance(message, dict):  # a list item's error
                message = next(iter(message.values()))[0]
            return _bad(f"{field}: {message}", errors=serializer.errors)
        values = serializer.validated_data
        cluster = Cluster.objects.filter(pk=values["cluster"]).first()
        if cluster is None:
            return _bad(f"cluster: there is no cluster with id {values['cluster']}")
        try:
            run = runs.run_start(
                cluster=cluster,
                recipe_name=values["recipe"],
                phases=values.get("phases"),
                by=request.user,
            )
        except runs.RunStartError as exc:
            if exc.code == "conflict" and exc.active_run is not None:
                url = reverse("api:run-detail", args=[exc.active_run.pk], request=request)
                return Response(
                    {"detail": exc.message, "active_run": {"id": exc.active_run.pk, "url": url}},
                    status=status.HTTP_409_CONFLICT,
                    headers={CONFLICT_HEADER: str(exc.active_run.pk)},
                )
            return _bad(f"{exc.field}: {exc.message}" if exc.field else exc.message)
        url = reverse("api:run-detail", args=[run.pk], request=request)
        return Response(
            {"id": run.pk, "url": url, "status": run.status},
            status=status.HTTP_201_CREATED,
            headers={"Location": url},
        )

    @extend_schema(
        summary="Cancel a validation run",
        description="Maintainers. A queued run ends `cancelled` at once; a running one is "
        "flagged, and its worker deletes the Job in flight and the run's objects, then ends "
        "it `cancelled`. 409 when it already finished.",
        request=None,
        responses={
            200: RunSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: ErrorSerializer,
        },
        tags=TAGS,
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        run = self.get_object()
        try:
            runs.run_cancel(run=run, by=request.user)
        except runs.RunCancelError as exc:
            return Response({"detail": exc.message}, status=status.HTTP_409_CONFLICT)
        return Response(self.get_serializer(self.get_queryset().get(pk=run.pk)).data)


def _bad(message: str, **extra: Any) -> Response:
    return Response({"detail": message, **extra}, status=status.HTTP_400_BAD_REQUEST)


class RunCtrfView(APIView):
    """The merged CTRF of a finished run, byte for byte as AICR writes it."""

    permission_classes = [AllowAny]

    @extend_schema(
        summary="Merged CTRF report of a run",
        description="The bytes `aicr validate` writes for this run (`MergeReports`), exactly. "
        "404 with the reason when there is none: the run has not finished, or ended in error "
        "(readiness or pre-flight failure: AICR writes no CTRF) or was cancelled.",
        responses={
            (200, "application/json"): OpenApiResponse(
                OpenApiTypes.OBJECT, description="A CTRF document (AICR's Go JSON bytes)."
            ),
            404: ErrorSerializer,
        },
        tags=TAGS,
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        run = get_object_or_404(
            ValidationRun.objects.only("pk", "status", "error", "ctrf", "aicr_run_id"), pk=pk
        )
        if run.ctrf is None or run.is_active:  # publishing: shown with its evidence, not before
            return Response({"detail": _no_ctrf_reason(run)}, status=status.HTTP_404_NOT_FOUND)
        response = HttpResponse(bytes(run.ctrf), content_type="application/json")
        response["Content-Disposition"] = f'inline; filename="ctrf-{run.aicr_run_id}.json"'
        response["X-Content-Type-Options"] = "nosniff"
        return response


def _no_ctrf_reason(run: ValidationRun) -> str:
    if run.status == RunStatus.PUBLISHING:
        return f"run #{run.pk} is publishing its evidence: its CTRF report is served once done"
    if run.is_active:
        return f"run #{run.pk} is {run.status}: its CTRF report exists once it finishes"
    if run.status == RunStatus.ERROR:
        return f"run #{run.pk} ended in error, and AICR writes no CTRF report then: {run.error}"
    if run.status == RunStatus.CANCELLED:
        return f"run #{run.pk} was cancelled: no CTRF report"
    return f"run #{run.pk} has no CTRF report"


__all__ = ["RunCtrfView", "RunViewSet"]

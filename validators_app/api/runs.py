"""Validation runs API: start (maintainers), list/filter and read (public), merged CTRF bytes,
the AICR pointer file of pushed evidence, cancel (maintainers).

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
from validators_app.models import CheckRun, Cluster, RunOciPublication, RunStatus, ValidationRun
from validators_app.services import run_images, runs

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


class ImageRanSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=["agent", "validator"])
    phase = serializers.CharField(help_text='The phase; "snapshot" for the agent.')
    check = serializers.CharField(allow_blank=True, help_text='The check; "" for the agent.')
    image = serializers.CharField(help_text="The image reference the kubelet reported.")
    digest = serializers.CharField(
        allow_blank=True,
        help_text='sha256 repository digest from the pod\'s imageID; "" = the runtime reported '
        "none (never started, or a node-loaded image): not reported, never guessed.",
    )
    mutable = serializers.BooleanField(
        help_text="AICR's rule: the reference is not digest-pinned nor a CI-frozen AICR tag."
    )


class ClusterRefSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    environment = serializers.CharField()


class OciPublicationSerializer(serializers.ModelSerializer):
    """Where the run's evidence went in the OCI registry (``services.publication``)."""

    pointer_url = serializers.SerializerMethodField()

    class Meta:
        model = RunOciPublication
        fields = [
            "state",
            "repository",
            "reference",
            "oci_ref",
            "referrer_digest",
            "keyless",
            "pointer_path",
            "pointer_url",
            "reason",
            "attempts",
            "pushed_at",
            "updated_at",
        ]

    @extend_schema_field(serializers.URLField(allow_null=True))
    def get_pointer_url(self, publication: RunOciPublication) -> str | None:
        if not publication.pointer_yaml:
            return None
        request = self.context.get("request")
        return reverse("api:run-pointer", args=[publication.run_id], request=request)


class RunSerializer(serializers.ModelSerializer):
    """A run with its checks; ``evidence`` once it was published; ``oci_publication`` once a
    push to the site's OCI registry was tried."""

    cluster = serializers.SerializerMethodField()
    recipe = serializers.CharField(source="recipe.name")
    checks = CheckRunSerializer(many=True, read_only=True)
    images = serializers.SerializerMethodField()
    evidence = serializers.SerializerMethodField()
    oci_publication = serializers.SerializerMethodField()
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
            "images",
            "evidence",
            "publish_error",
            "oci_publication",
            "ctrf_url",
            "created_at",
            "started_at",
            "finished_at",
        ]

    @extend_schema_field(ClusterRefSerializer)
    def get_cluster(self, run: ValidationRun) -> dict[str, Any]:
        cluster = run.cluster
        return {"id": cluster.pk, "name": cluster.name, "environment": cluster.environment}

    @extend_schema_field(ImageRanSerializer(many=True))
    def get_images(self, run: ValidationRun) -> list[dict[str, Any]]:
        return list(ImageRanSerializer(run_images.images_ran(run), many=True).data)

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

    # Inline for the same reason as ``evidence``: "nullable" beside a $ref is ignored.
    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "description": "Where the run's evidence went in the OCI registry, once a push "
            "was tried: `state` pushed | failed | skipped, the pinned `oci_ref`, the AICR "
            "pointer (`pointer_path`, `pointer_url`) for keyless evidence, or the `reason`.",
            "properties": {
                "state": {"type": "string", "enum": ["pushed", "failed", "skipped"]},
                "repository": {"type": "string"},
                "reference": {"type": "string"},
                "oci_ref": {"type": "string"},
                "referrer_digest": {"type": "string"},
                "keyless": {"type": "boolean"},
                "pointer_path": {"type": "string"},
                "pointer_url": {"type": "string", "format": "uri", "nullable": True},
                "reason": {"type": "string"},
                "attempts": {"type": "integer"},
                "pushed_at": {"type": "string", "format": "date-time", "nullable": True},
                "updated_at": {"type": "string", "format": "date-time"},
            },
            "required": ["state", "oci_ref", "pointer_url", "reason"],
        }
    )
    def get_oci_publication(self, run: ValidationRun) -> dict[str, Any] | None:
        publication = _publication_of(run)
        if publication is None:
            return None
        return dict(OciPublicationSerializer(publication, context=self.context).data)

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
            .select_related("oci_publication")
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


def _publication_of(run: ValidationRun) -> RunOciPublication | None:
    try:
        return run.oci_publication
    except RunOciPublication.DoesNotExist:
        return None


class RunPointerView(APIView):
    """The pointer file AICR's repository takes for a run's pushed, keyless evidence."""

    permission_classes = [AllowAny]

    @extend_schema(
        summary="AICR pointer file of a run",
        description="The `recipes/evidence/<recipe>/<src>/sha256-<digest>.yaml` file for a pull "
        "request to AICR's repository, written once the run's evidence was pushed to the "
        "site's OCI registry, signed keyless, and read back verified. The `X-Pointer-Path` "
        "header says where it goes. 404 with the reason when there is none (not pushed, the "
        "push failed, key-signed evidence, a simulated cluster).",
        responses={
            (200, "application/yaml"): OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="The pointer file: a YAML mapping of AICR's pointer schema 1.0.0.",
            ),
            404: ErrorSerializer,
        },
        tags=TAGS,
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        run = get_object_or_404(ValidationRun.objects.only("pk", "evidence"), pk=pk)
        publication = RunOciPublication.objects.filter(run=run).first()
        if publication is None or not publication.pointer_yaml:
            return Response({"detail": _no_pointer_reason(run, publication)}, status=404)
        response = HttpResponse(publication.pointer_yaml, content_type="application/yaml")
        filename = publication.pointer_path.rpartition("/")[2]
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        response["X-Pointer-Path"] = publication.pointer_path
        response["X-Content-Type-Options"] = "nosniff"
        return response


def _no_pointer_reason(run: ValidationRun, publication: RunOciPublication | None) -> str:
    if publication is not None:
        return f"run #{run.pk} has no pointer: {publication.reason or publication.state}"
    if run.evidence_id is None:
        return f"run #{run.pk} has no published evidence to point at"
    return (
        f"run #{run.pk}'s evidence was not pushed to an OCI registry "
        "(RUN_EVIDENCE_OCI_REPOSITORY is not set, or `manage.py push_run_evidence` has not run)"
    )


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


__all__ = ["RunCtrfView", "RunPointerView", "RunViewSet"]

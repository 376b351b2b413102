"""Recipe API views: the filtered list, one recipe, its canonical YAML, and ad-hoc queries.

Reads go through ``RecipeFilter`` (the same filters as the HTML list), ``selectors`` and
``services``; the views only translate HTTP.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml
from django.db.models import QuerySet
from django.http import HttpResponse, JsonResponse
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import status, viewsets
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from aicr_site.pagination import PagePagination
from evidence_app import consensus
from recipes_app import selectors
from recipes_app.aicrd.errors import AicrdError, error_body, request_id
from recipes_app.aicrd.inputs import MAX_VALUE_LENGTH, InputError, criteria_from_query, shorten
from recipes_app.aicrd.resolve import resolve_criteria
from recipes_app.api.serializers import (
    AicrdErrorSerializer,
    FilterErrorsSerializer,
    NotFoundSerializer,
    RecipeDetailSerializer,
    RecipeListSerializer,
    RecipeQuerySerializer,
    RecipeResultSerializer,
)
from recipes_app.filters import RecipeFilter
from recipes_app.models import Recipe

RECIPE_NAME = re.compile(r"[a-z0-9.-]{1,200}")
LIST_COLUMNS = (
    "id",
    "catalog_id",
    "name",
    "leaf",
    "profile",
    "service",
    "accelerator",
    "os",
    "intent",
    "platform",
    "coordinate",
    "digest",
    "digest_v3",
    "component_count",
    "check_count",
    "change",
)
TAGS = ["recipes"]
CATALOG_PARAMETER = OpenApiParameter(
    "catalog",
    OpenApiTypes.INT,
    description="Catalog version id (default: the current catalog).",
)
FILTER_PARAMETERS = [
    OpenApiParameter(dim, OpenApiTypes.STR, description=description)
    for dim, description in (
        ("service", "Kubernetes service, e.g. `eks`, `gke`, `aks`, `any`."),
        ("accelerator", "GPU, e.g. `h100`, `gb200`, `any`."),
        ("os", "GPU node OS, e.g. `ubuntu`, `cos`, `any`."),
        ("intent", "`training`, `inference` or `any`."),
        ("platform", "e.g. `kubeflow`, `dynamo`, `slurm`, `any`."),
        (
            "consensus",
            "Recipe-level consensus state: `CONFIRMED`, `SINGLE`, `PARTIAL`, `CONTESTED`, "
            "`FAILING` or `UNTESTED` (no counted evidence).",
        ),
        ("q", "Free text: every word must occur in the recipe (max. 200 characters)."),
    )
] + [CATALOG_PARAMETER]


class YAMLRenderer(BaseRenderer):
    """Writes bytes as they are; anything else (an error raised by DRF itself) as YAML."""

    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        if isinstance(data, bytes):
            return data
        plain = json.loads(json.dumps(data, default=str))  # DRF's ErrorDetail → str
        return yaml.safe_dump(plain, allow_unicode=True, sort_keys=True).encode("utf-8")


class RecipeFilterBackend(DjangoFilterBackend):
    """``RecipeFilter``, with errors that name the field and the value that was refused."""

    # DRF hands filter backends its Request (the stubs say HttpRequest, which it wraps).
    def filter_queryset(  # type: ignore[override]
        self, request: Request, queryset: QuerySet[Recipe], view: Any
    ) -> QuerySet[Recipe]:
        filterset = self.get_filterset(request, queryset, view)
        if not isinstance(filterset, RecipeFilter):  # RecipeViewSet declares it; None otherwise
            return queryset
        data = filterset.data or {}
        if not filterset.is_valid():
            raise ValidationError(
                {
                    "detail": "Unknown filter value.",
                    "errors": [
                        {
                            "field": field,
                            "value": shorten(str(data.get(field, ""))),
                            "message": shorten(str(message)),
                        }
                        for field, messages in filterset.errors.items()
                        for message in messages
                    ],
                }
            )
        if data.get("catalog") in (None, "") and filterset.catalog_version is not None:
            # The default catalog version is the current one: links need no lookup of it.
            view.current_catalog_id = filterset.catalog_version.pk
        return filterset.qs


def _recipe_or_404(request: Request, name: str) -> Recipe:
    """The named recipe of the catalog version asked for; a malformed name is not echoed."""
    if not RECIPE_NAME.fullmatch(name):
        raise NotFound("Recipe names contain only a-z, 0-9, '.' and '-'; no recipe has this name.")
    recipe = selectors.recipe_get(name=name, catalog_id=request.query_params.get("catalog"))
    if recipe is None:
        raise NotFound(f"No recipe named {name!r} in this catalog version.")
    return recipe


@extend_schema_view(
    list=extend_schema(
        summary="List recipes",
        description=(
            "Recipes of the current catalog version (or `?catalog=<id>`), filtered like the "
            "recipe page. An unknown filter value is a 400 naming the field and the value."
        ),
        parameters=FILTER_PARAMETERS,
        responses={200: RecipeListSerializer(many=True), 400: FilterErrorsSerializer},
        tags=TAGS,
    ),
    retrieve=extend_schema(
        summary="One recipe",
        parameters=[CATALOG_PARAMETER],
        tags=TAGS,
        responses={200: RecipeDetailSerializer, 404: NotFoundSerializer},
    ),
)
class RecipeViewSet(viewsets.ReadOnlyModelViewSet):
    """Resolved AICR recipes (one per maximal leaf, plus profile variants)."""

    queryset = Recipe.objects.all()
    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    filter_backends = [RecipeFilterBackend]
    filterset_class = RecipeFilter
    pagination_class = PagePagination
    # Set by RecipeFilterBackend when the list is of the current catalog (links need it).
    current_catalog_id: int | None = None

    def get_queryset(self) -> QuerySet[Recipe]:
        # RecipeFilter narrows this to the catalog version; only the row's own columns load,
        # and its stored consensus row (the badge), joined in the page's query.
        return Recipe.objects.select_related("consensus").only(*LIST_COLUMNS, "consensus")

    def get_serializer_class(self) -> type:
        return RecipeDetailSerializer if self.action == "retrieve" else RecipeListSerializer

    def get_object(self) -> Recipe:
        return _recipe_or_404(self.request, self.kwargs["name"])

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())
        if self.current_catalog_id is not None:
            context["current_catalog_id"] = self.current_catalog_id
        return context

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        recipe = self.get_object()
        if not request.query_params.get("catalog"):
            self.current_catalog_id = recipe.catalog_id  # the default is the current one
        context = self.get_serializer_context()
        context["consensus_grid"] = consensus.consensus_grid(recipe=recipe)
        return Response(RecipeDetailSerializer(recipe, context=context).data)


class RecipeResolvedYAMLView(APIView):
    """The recipe's canonical YAML, byte for byte: ``sha256(body) == digest``."""

    @extend_schema(
        summary="Canonical YAML of one recipe",
        parameters=[CATALOG_PARAMETER],
        tags=TAGS,
        responses={
            (200, "application/yaml"): OpenApiResponse(
                OpenApiTypes.OBJECT,  # a YAML mapping
                description="The bytes `aicr evidence digest` hashes; ETag is the digest.",
            ),
            404: NotFoundSerializer,
        },
    )
    def get(self, request: Request, name: str) -> HttpResponse:
        try:
            recipe = _recipe_or_404(request, name)
        except NotFound as exc:
            return JsonResponse({"detail": str(exc.detail)}, status=404)
        etag = f'"sha256:{recipe.digest}"'
        if etag in request.headers.get("If-None-Match", ""):
            response = HttpResponse(status=status.HTTP_304_NOT_MODIFIED)
        else:
            response = HttpResponse(
                recipe.canonical_yaml.encode("utf-8"),
                content_type="application/yaml; charset=utf-8",
            )
        response["ETag"] = etag
        response["X-Recipe-Digest"] = recipe.digest
        response["Content-Disposition"] = f'inline; filename="{recipe.name}.yaml"'
        return response

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # The body is the stored bytes whatever the Accept header says.
        return (YAMLRenderer(), YAMLRenderer.media_type)


class RecipeQueryView(APIView):
    """Resolve any criteria against the current catalog, like aicrd's ``GET /v1/recipe``."""

    @extend_schema(
        summary="Resolve criteria",
        description=(
            "The RecipeResult AICR resolves for these criteria in the current catalog version. "
            "Errors use aicrd's envelope with AICR's message; an uncovered dimension lists "
            "`details.uncovered[].validCompletions`, a missing OS `details.requiresOS`."
        ),
        parameters=[RecipeQuerySerializer],
        tags=TAGS,
        responses={200: RecipeResultSerializer, 400: AicrdErrorSerializer},
        examples=[
            OpenApiExample(
                "OS required",
                value={
                    "code": "INVALID_REQUEST",
                    "message": "service 'gke' has no OS-agnostic recipe for accelerator ''; "
                    "specify an OS (valid: cos)",
                    "details": {"requiresOS": True},
                    "requestId": "550e8400-e29b-41d4-a716-446655440000",
                    "timestamp": "2026-01-15T10:30:00Z",
                    "retryable": False,
                },
                response_only=True,
                status_codes=["400"],
            )
        ],
    )
    def get(self, request: Request) -> Response:
        rid = request_id(request)
        try:
            try:
                criteria = criteria_from_query(request.query_params)
            except InputError as exc:
                raise AicrdError("Invalid recipe criteria", details={"error": str(exc)}) from exc
            profile = request.query_params.get("profile") or None
            if profile is not None and len(profile) > MAX_VALUE_LENGTH:
                raise AicrdError("Invalid profile selection", details={"error": shorten(profile)})
            resolution = resolve_criteria(
                criteria, invalid_message="Invalid recipe criteria", profile=profile
            )
        except AicrdError as error:
            body = error_body(
                code=error.code, message=error.message, request_id=rid, details=error.details
            )
            return Response(body, status=error.status, headers={"X-Request-Id": rid})
        return Response(resolution.doc, headers={"X-Request-Id": rid})

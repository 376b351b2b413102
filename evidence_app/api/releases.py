"""``/api/v1/releases/``: declare a release (maintainers) and read each claimed profile's status
(public, like the page: every value in it is on the public evidence pages already). The view
only translates HTTP: the check is ``releases.declare``, the rule ``releases.status``."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from aicr_site.parsers import BoundedJSONParser
from evidence_app.api.serializers import ErrorSerializer
from evidence_app.auth import BearerTokenAuthentication, HasRole
from evidence_app.models import Release, Role
from evidence_app.releases.declare import ReleaseInputError, release_declare
from evidence_app.releases.status import STATUSES, release_profiles

TAGS = ["releases"]


class ValidatorImageSerializer(serializers.Serializer[Any]):
    image = serializers.CharField(
        help_text="The image repository, e.g. ghcr.io/nvidia/aicr-validators/deployment."
    )
    digest = serializers.CharField(help_text="sha256:<64 lowercase hex>.")


class ProfileClaimSerializer(serializers.Serializer[Any]):
    recipe = serializers.CharField()
    tuple = serializers.DictField(
        child=serializers.CharField(),
        help_text="The profile's hardware/software tuple (instance_type, node_image, kernel, "
        "driver, gpu_operator, dra_driver, gpu_allocation, fabric, …); empty when not declared.",
    )
    workload_images = ValidatorImageSerializer(
        many=True,
        required=False,
        help_text="The workload images the profile's runs must record (repository and digest).",
    )


class ReleaseInputSerializer(serializers.Serializer[Any]):
    """The declaration (documentation only: ``releases.declare`` checks it)."""

    name = serializers.CharField()
    operator_image = serializers.CharField(help_text="repo@sha256:<64 hex>.")
    operator_chart = serializers.CharField(help_text="repo@sha256:<64 hex>.")
    aicr_image = serializers.CharField(help_text="repo@sha256:<64 hex>.")
    validator_images = ValidatorImageSerializer(many=True)
    profiles = serializers.ListField(
        child=serializers.JSONField(),
        help_text='Recipe names of the current catalog; an entry may be {"recipe", "tuple", '
        '"workload_images": [{"image", "digest"}]} to declare the profile\'s hardware/software '
        "tuple and the workload images its runs must record.",
    )


class ReleaseSerializer(serializers.ModelSerializer[Release]):
    validator_images = ValidatorImageSerializer(many=True)
    profiles = ProfileClaimSerializer(many=True)
    created_by: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = Release
        fields = [
            "id",
            "name",
            "operator_image",
            "operator_chart",
            "aicr_image",
            "validator_images",
            "profiles",
            "created_by",
            "created_at",
        ]


class ProfileStatusSerializer(serializers.Serializer[Any]):
    recipe = serializers.CharField()
    status = serializers.ChoiceField(choices=list(STATUSES))
    reason = serializers.CharField(help_text="The sentence the Qualified profiles page shows.")
    evidence = serializers.ListField(child=serializers.IntegerField())


class ReleaseErrorSerializer(serializers.Serializer[Any]):
    detail = serializers.CharField()
    field = serializers.CharField(
        required=False,
        help_text=(
            "The field that is wrong, e.g. validator_images[0].digest; absent when the body "
            "itself is refused (code parse-error: not JSON, a NUL character, too deep)."
        ),
    )
    code = serializers.CharField()


@extend_schema_view(
    list=extend_schema(
        summary="List releases",
        description="Every declared release, newest first.",
        responses={200: ReleaseSerializer(many=True)},
        tags=TAGS,
    ),
    retrieve=extend_schema(
        summary="One release",
        responses={200: ReleaseSerializer, 404: ErrorSerializer},
        tags=TAGS,
    ),
)
class ReleaseViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    authentication_classes = [BearerTokenAuthentication]
    serializer_class = ReleaseSerializer
    parser_classes = [BoundedJSONParser]
    pagination_class = None  # a handful of releases; the list is the whole set

    def get_permissions(self) -> list[Any]:
        if self.action == "create":
            return [HasRole.of(Role.MAINTAINER)()]
        return [AllowAny()]

    def get_queryset(self) -> QuerySet[Release]:
        return Release.objects.select_related("created_by")

    @extend_schema(
        summary="Declare a release",
        description=(
            'Maintainers. `{"name", "operator_image", "operator_chart", "aicr_image", '
            '"validator_images": [{"image", "digest"}], "profiles": [recipe names]}`; images '
            "pinned as `repo@sha256:<64 hex>`. 400 names the malformed field (`field`); "
            "nothing is stored then. A release is immutable: an image rebuild is a new release."
        ),
        request=ReleaseInputSerializer,
        responses={
            201: ReleaseSerializer,
            400: ReleaseErrorSerializer,
            401: ErrorSerializer,
            403: ErrorSerializer,
        },
        tags=TAGS,
    )
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            release = release_declare(request.data, by=request.user)
        except ReleaseInputError as exc:
            return Response(
                {"detail": str(exc), "field": exc.field, "code": "invalid"},
                status=status.HTTP_400_BAD_REQUEST,
            )
        return Response(ReleaseSerializer(release).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="The release's profiles and their status",
        description=(
            "Per claimed profile: `status` (qualified, in-progress, not-qualified, "
            "not-claimed, unqualified-changed), `reason` (the sentence the page shows) and "
            "the ids of the evidence it rests on. AICR's operator support policy: counted, "
            "keyless, real-hardware evidence for exactly that recipe, recording the release's "
            "identities and the profile's tuple, with every declared check passed."
        ),
        responses={200: ProfileStatusSerializer(many=True), 404: ErrorSerializer},
        tags=TAGS,
    )
    @action(detail=True, methods=["get"], url_path="profiles")
    def profiles(self, request: Request, pk: str | None = None) -> Response:
        release = self.get_object()
        return Response([p.as_api() for p in release_profiles(release)])

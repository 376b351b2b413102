"""``GET /api/v1/pointers/``: the AICR pointer files this site imported, and what became of
each (pending, ingested, refused, with the reason). Public read, like the evidence list; a
pointer is a locator, so nothing listed here counts by itself."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema, extend_schema_field, extend_schema_view
from rest_framework import mixins, serializers, viewsets
from rest_framework.permissions import AllowAny

from aicr_site.pagination import PagePagination
from evidence_app.api.serializers import ErrorSerializer
from evidence_app.auth import BearerTokenAuthentication
from evidence_app.models import EvidencePointer, PointerState


class PointerFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=PointerState.choices, help_text="Pointer state.")
    recipe = django_filters.CharFilter(max_length=200, help_text="Recipe name (exact).")

    class Meta:
        model = EvidencePointer
        fields: list[str] = []


class PointerSignerSerializer(serializers.Serializer):
    identity = serializers.CharField()
    issuer = serializers.CharField()


class PointerSerializer(serializers.ModelSerializer):
    signer = serializers.SerializerMethodField()
    class_ = serializers.CharField(
        source="claimed_class",
        help_text="The signer's class in the tree's allowlist (empty: not listed there).",
    )
    oci = serializers.CharField(help_text="bundle.oci as the pointer writes it.")

    class Meta:
        model = EvidencePointer
        fields = [
            "path",
            "recipe",
            "profile",
            "signer",
            "class_",
            "predicate_type",
            "oci",
            "state",
            "reason",
            "last_tried",
        ]

    def get_fields(self) -> dict[str, Any]:
        # ``class`` is a Python keyword: declared as ``class_``, renamed in place.
        return {
            ("class" if name == "class_" else name): field
            for name, field in super().get_fields().items()
        }

    @extend_schema_field(PointerSignerSerializer(allow_null=True))
    def get_signer(self, obj: EvidencePointer) -> dict[str, str] | None:
        if not obj.signer_identity:
            return None
        return {"identity": obj.signer_identity, "issuer": obj.signer_issuer}


@extend_schema_view(
    list=extend_schema(
        summary="List imported evidence pointers",
        description=(
            "AICR pointer files (`recipes/evidence/…`) imported by `manage.py import_evidence`, "
            "by recipe and path. `state`: pending (not pulled and verified yet; never counted), "
            "ingested (linked to the evidence its bundle became), refused (`reason` names the "
            "field or check). 400: a filter value is not valid (named)."
        ),
        responses={200: PointerSerializer(many=True), 400: ErrorSerializer},
        tags=["evidence"],
    ),
)
class PointerViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [AllowAny]
    serializer_class = PointerSerializer
    filterset_class = PointerFilter
    pagination_class = PagePagination

    def get_queryset(self) -> QuerySet[EvidencePointer]:
        return EvidencePointer.objects.order_by("recipe", "path")

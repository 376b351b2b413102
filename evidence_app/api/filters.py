"""Filters of ``GET /api/v1/evidence/`` and ``GET /api/v1/signers/``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from evidence_app.models import Evidence, EvidenceQuerySet, Signer, SignerClass, Verdict
from evidence_app.services.staleness import stale_filter


class UtcIsoDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 time, moved to UTC: Python reads offsets up to ±23:59, PostgreSQL takes
    ±15:59, so ``+21:36`` must not reach the database as written (it was a 500)."""

    def to_python(self, value: Any) -> datetime | None:
        parsed = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise forms.ValidationError(
                "%(value)s is out of range.", params={"value": repr(str(value)[:50])}
            ) from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class StrictBooleanField(forms.NullBooleanField):
    """``true``/``false`` (or ``1``/``0``); anything else is an error naming the value, not
    silently "no filter" (an auditor asking ``stale=yes`` must not get everything)."""

    widget = forms.TextInput

    # django-stubs give NullBooleanField BooleanField's ``-> bool``; Django's returns None too.
    def to_python(self, value: Any) -> bool | None:  # type: ignore[override]
        if value in (None, ""):
            return None
        text = str(value).strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        # The value as a param, never in the message: DRF formats the message with ``%``,
        # so a "%" the client sent must not reach the format string (it was a 500).
        raise forms.ValidationError(
            "%(value)s is not true or false.", params={"value": repr(str(value)[:50])}
        )

    def validate(self, value: Any) -> None:
        pass


class StrictBooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField


class EvidenceFilter(django_filters.FilterSet):
    recipe = django_filters.CharFilter(
        field_name="recipe_name", max_length=200, help_text="Recipe name (exact)."
    )
    signer = django_filters.CharFilter(
        field_name="signer__slug", max_length=32, help_text="Signer slug (32 hex)."
    )
    signer_class = django_filters.ChoiceFilter(
        field_name="signer__signer_class",
        choices=SignerClass.choices,
        help_text="Signer class.",
    )
    verdict = django_filters.ChoiceFilter(choices=Verdict.choices, help_text="Verdict.")
    stale = StrictBooleanFilter(
        method="filter_stale", help_text="true: only stale evidence; false: only fresh."
    )
    aicr_version = django_filters.CharFilter(max_length=100, help_text="AICR version (exact).")
    counted = StrictBooleanFilter(
        method="filter_counted", help_text="true: only what consensus counts."
    )
    demo = StrictBooleanFilter(field_name="is_demo", help_text="Demo data.")
    attested_after = UtcIsoDateTimeFilter(
        field_name="attested_at", lookup_expr="gte", help_text="attestedAt at or after (ISO 8601)."
    )
    attested_before = UtcIsoDateTimeFilter(
        field_name="attested_at", lookup_expr="lt", help_text="attestedAt before (ISO 8601)."
    )

    class Meta:
        model = Evidence
        fields: list[str] = []

    def filter_stale(self, queryset: QuerySet[Evidence], name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        return stale_filter(queryset, stale=value)

    def filter_counted(
        self, queryset: EvidenceQuerySet, name: str, value: bool | None
    ) -> QuerySet[Evidence]:
        if value is None:
            return queryset
        counted = queryset.counted()
        return counted if value else queryset.exclude(pk__in=counted.values("pk"))


# ``class`` is a Python keyword: the query parameter is renamed after the class is built.
EvidenceFilter.base_filters["class"] = EvidenceFilter.base_filters.pop("signer_class")


class SignerFilter(django_filters.FilterSet):
    signer_class = django_filters.ChoiceFilter(
        field_name="signer_class", choices=SignerClass.choices, help_text="Signer class."
    )
    counted = django_filters.BooleanFilter(help_text="Counted by consensus.")
    kind = django_filters.CharFilter(max_length=10, help_text="keyless or key.")

    class Meta:
        model = Signer
        fields: list[str] = []


SignerFilter.base_filters["class"] = SignerFilter.base_filters.pop("signer_class")


# The EvidenceFilter's parameters as the OpenAPI document lists them (the evidence list and the
# exports take the same ones).
EVIDENCE_FILTER_PARAMETERS = [
    OpenApiParameter("recipe", OpenApiTypes.STR, description="Recipe name."),
    OpenApiParameter("signer", OpenApiTypes.STR, description="Signer slug."),
    OpenApiParameter(
        "class",
        OpenApiTypes.STR,
        enum=["first-party", "partner", "community", "registered-key", "reported"],
        description="Signer class.",
    ),
    OpenApiParameter(
        "verdict", OpenApiTypes.STR, enum=["verified", "invalid", "unsupported", "rejected"]
    ),
    OpenApiParameter("stale", OpenApiTypes.BOOL, description="Only stale / only fresh."),
    OpenApiParameter("aicr_version", OpenApiTypes.STR, description="AICR version."),
    OpenApiParameter("counted", OpenApiTypes.BOOL, description="Counted by consensus."),
    OpenApiParameter("demo", OpenApiTypes.BOOL, description="Demo data."),
    OpenApiParameter(
        "attested_after", OpenApiTypes.DATETIME, description="attestedAt at or after (ISO 8601)."
    ),
    OpenApiParameter(
        "attested_before", OpenApiTypes.DATETIME, description="attestedAt before (ISO 8601)."
    ),
]

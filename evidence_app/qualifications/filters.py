"""The filters and the sort of the qualifications table: one FilterSet for the page, the API
and the exports, so a shared URL gives the same rows everywhere.

``sort`` is a whitelist (``SORTS``: a stored column or an annotation of
``qualification_queryset``), ``-name`` descending; anything else is a 400 naming the choices.
Ties break on the newest record first, so paging is stable.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import F, QuerySet

from evidence_app.api.filters import StrictBooleanFilter
from evidence_app.consensus import STATES
from evidence_app.models import Evidence, SignerClass

# sort name → what it orders by; the page's column headers link to these.
SORTS: dict[str, str] = {
    "recipe": "recipe_name",
    "signer": "signer__label",
    "gpu": "gpu_model",
    "gpus": "gpu_count",
    "instance": "instance_type",
    "k8s": "k8s_version",
    "driver": "driver",
    "operator": "gpu_operator",
    "aicr": "aicr_version_key",
    "date": "attested_at",
    "state": "recipe__consensus__state",
}
DEFAULT_SORT = "-date"
# The sorted columns of the evidence row itself that hold no NULL.
_NOT_NULL = frozenset(
    f.name for f in Evidence._meta.concrete_fields if f.name in SORTS.values() and not f.null
)


class _Sort(django_filters.OrderingFilter):
    def filter(self, qs: QuerySet[Any], value: Any) -> QuerySet[Any]:
        names = list(value or [DEFAULT_SORT])
        order = []
        for name in names:
            field = (self.param_map or {})[name.lstrip("-")]
            expr = F(field)
            if field in _NOT_NULL:
                # No NULLs to place: the plain order, which the list indexes serve (issue 22:
                # ``attested_at DESC NULLS LAST`` matched no index, and the default sort was a
                # parallel scan of every record, 3.1 s at 1,000,000).
                order.append(expr.desc() if name.startswith("-") else expr.asc())
                continue
            # Rows without a value last either way: "not recorded" is no answer to sort on.
            order.append(
                expr.desc(nulls_last=True) if name.startswith("-") else expr.asc(nulls_last=True)
            )
        return qs.order_by(*order, "-attested_at", "-pk")


class QualificationFilter(django_filters.FilterSet):
    recipe = django_filters.CharFilter(
        field_name="recipe_name", max_length=200, help_text="Recipe name (exact)."
    )
    gpu = django_filters.CharFilter(
        field_name="gpu_model", max_length=200, help_text="GPU model as the snapshot reads it."
    )
    service = django_filters.CharFilter(
        field_name="recipe__service", max_length=50, help_text="The recipe's service (eks, gke…)."
    )
    signer_class = django_filters.ChoiceFilter(
        field_name="signer__signer_class", choices=SignerClass.choices, help_text="Signer class."
    )
    state = django_filters.ChoiceFilter(
        field_name="recipe__consensus__state",
        choices=[(s, s) for s in STATES],
        help_text="The recipe's consensus state.",
    )
    simulated = StrictBooleanFilter(
        method="filter_simulated",
        help_text="true: also verified runs on simulated clusters (labelled; they never count).",
    )
    sort = _Sort(
        fields=[(field, name) for name, field in SORTS.items()],
        help_text="Sort by " + ", ".join(SORTS) + " (prefix - for descending; default -date).",
    )

    class Meta:
        model = Evidence
        fields = ["recipe", "gpu", "service", "signer_class", "state", "simulated", "sort"]

    def filter_simulated(
        self, queryset: QuerySet[Evidence], name: str, value: bool | None
    ) -> QuerySet[Evidence]:
        return queryset  # applied in filter_queryset: leaving it out must narrow too

    def filter_queryset(self, queryset: QuerySet[Evidence]) -> QuerySet[Evidence]:
        # The base rows include verified simulated runs; only simulated=true keeps them.
        queryset = super().filter_queryset(queryset)
        if not self.form.cleaned_data.get("simulated"):
            queryset = queryset.filter(is_simulated=False)
        return queryset

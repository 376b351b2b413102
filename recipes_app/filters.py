"""The recipe filters, shared by the HTML list and the API so both accept exactly the same input.

``consensus`` filters on the recipe-level consensus state (AICR's rules over signed evidence,
default lens), joined from each recipe's stored ``RecipeConsensusState`` (kept current by
``evidence_app.consensus.stored`` from the recipe page grid's own computation), so a badge,
the filter and the page always agree.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import django_filters
from django.db.models import Q, QuerySet
from django.http import HttpRequest, QueryDict

from evidence_app.consensus import STATES, UNTESTED
from evidence_app.consensus import stored as stored_consensus
from recipes_app.models import DIMENSIONS, Catalog, Recipe, RecipeQuerySet

MAX_QUERY_LENGTH = 200
HAS_EVIDENCE = "1"  # ``?has_evidence=1``: the one value the toggle sends

Facets = dict[str, list[tuple[str, int]]]


class RecipeFilter(django_filters.FilterSet):
    """Criteria filters whose choices are the values present in the catalog being browsed.

    An unknown value is a validation error naming the field and the value, never an empty
    result that looks like "no recipes".
    """

    q = django_filters.CharFilter(method="filter_text", label="Search", max_length=MAX_QUERY_LENGTH)
    service = django_filters.ChoiceFilter(choices=[])
    accelerator = django_filters.ChoiceFilter(choices=[])
    os = django_filters.ChoiceFilter(choices=[], label="OS")
    intent = django_filters.ChoiceFilter(choices=[])
    platform = django_filters.ChoiceFilter(choices=[])
    catalog = django_filters.ModelChoiceFilter(
        queryset=Catalog.objects.all(), method="filter_catalog", label="Catalog version"
    )
    consensus = django_filters.ChoiceFilter(
        choices=[(state, state) for state in STATES],
        method="filter_consensus",
        label="Consensus",
        help_text="Recipe-level consensus over signed evidence (latest run per signer).",
    )

    has_evidence = django_filters.ChoiceFilter(
        choices=[(HAS_EVIDENCE, "only recipes with counted evidence")],
        method="filter_has_evidence",
        label="Has evidence",
        help_text="Only recipes with at least one counted run (verified, counted signer, "
        "real hardware, not withdrawn).",
    )

    class Meta:
        model = Recipe
        fields = ["q", *DIMENSIONS, "catalog", "consensus", "has_evidence"]

    def __init__(
        self,
        data: QueryDict | dict[str, Any] | None = None,
        queryset: QuerySet[Recipe] | None = None,
        *,
        request: HttpRequest | None = None,
        prefix: str | None = None,
    ) -> None:
        self.catalog_version = _catalog_from(data)
        base = queryset if queryset is not None else Recipe.objects.all()
        base = base.filter(catalog=self.catalog_version) if self.catalog_version else base.none()
        super().__init__(data, base, request=request, prefix=prefix)
        if self.catalog_version is not None:
            # Badges a counted run has aged out of since they were stored (time alone).
            stored_consensus.consensus_refresh_expired(catalog=self.catalog_version)
        # One query for every facet: the criteria (and consensus state) of every recipe in
        # this catalog version.
        self._rows = list(
            base.order_by().values_list(
                *DIMENSIONS, "search_text", "consensus__state", "consensus__counted_runs"
            )
        )
        for dim_index, dim in enumerate(DIMENSIONS):
            values = sorted({row[dim_index] for row in self._rows})
            self.filters[dim].extra["choices"] = [(v, v) for v in values]
            # Filters cache their form field; one built earlier (e.g. by schema generation on
            # the class) would keep stale, empty choices, so drop it for this instance.
            self.filters[dim].__dict__.pop("_field", None)

    def filter_text(self, queryset: RecipeQuerySet, name: str, value: str) -> RecipeQuerySet:
        return queryset.matching_text(value)

    def filter_catalog(
        self, queryset: QuerySet[Recipe], name: str, value: Catalog
    ) -> QuerySet[Recipe]:
        return queryset  # applied in __init__, where the version also picks the facet choices

    def filter_consensus(
        self, queryset: QuerySet[Recipe], name: str, value: str
    ) -> QuerySet[Recipe]:
        if value == UNTESTED:  # also every recipe without counted evidence (no stored row)
            return queryset.filter(Q(consensus__isnull=True) | Q(consensus__state=UNTESTED))
        return queryset.filter(consensus__state=value)

    def filter_has_evidence(
        self, queryset: QuerySet[Recipe], name: str, value: str
    ) -> QuerySet[Recipe]:
        # A stored row with counted runs: what ``consensus.stored`` keeps for each recipe
        # with counted evidence (a recipe without one has none).
        return queryset.filter(consensus__counted_runs__gt=0) if value == HAS_EVIDENCE else queryset

    def filter_queryset(self, queryset: QuerySet[Recipe]) -> QuerySet[Recipe]:
        """The filtered recipes, each with its stored consensus row joined in the same query
        (``select_related``): a page of results reads its own rows' badges
        (``consensus.recipe_badge``) after pagination, with no query per row."""
        return super().filter_queryset(queryset).select_related("consensus")

    def facets(self) -> Facets:
        """Each dimension's values with the count of recipes that choosing it would show,
        given every *other* active filter (so a count never promises an empty page)."""
        cleaned = self.form.cleaned_data if self.form.is_valid() else {}
        terms = (cleaned.get("q") or "").lower().split()
        chosen = {dim: cleaned.get(dim) for dim in DIMENSIONS if cleaned.get(dim)}
        state = cleaned.get("consensus")
        with_evidence = cleaned.get("has_evidence") == HAS_EVIDENCE
        text_at, state_at, runs_at = len(DIMENSIONS), len(DIMENSIONS) + 1, len(DIMENSIONS) + 2
        rows = [
            row
            for row in self._rows
            if not (terms and not all(term in row[text_at] for term in terms))
            and not (state and (row[state_at] or UNTESTED) != state)
            and not (with_evidence and not row[runs_at])
        ]
        result: Facets = {}
        for dim_index, dim in enumerate(DIMENSIONS):
            counts: Counter[str] = Counter()
            for row in rows:
                if any(
                    row[i] != chosen[other]
                    for i, other in enumerate(DIMENSIONS)
                    if other != dim and other in chosen
                ):
                    continue
                counts[row[dim_index]] += 1
            values = sorted({row[dim_index] for row in self._rows})
            result[dim] = [(value, counts[value]) for value in values]
        return result

    def error_messages(self) -> list[str]:
        """Readable "field: message" lines for the page and the API."""
        return [
            f"{field}: {message}"
            for field, messages in self.form.errors.items()
            for message in messages
        ]


def _catalog_from(data: Mapping[str, Any] | None) -> Catalog | None:
    raw = (data or {}).get("catalog")
    if raw in (None, ""):
        return Catalog.objects.current()
    try:
        return Catalog.objects.defer("files").filter(pk=int(raw)).first()
    except (TypeError, ValueError):
        return None

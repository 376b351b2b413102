"""Reads behind the evidence list and the pages of one piece of evidence.

Every function runs a fixed number of queries whatever the number of evidence rows. Consensus
lives in ``evidence_app.consensus``; what one evidence page shows in ``evidence_page``, a
signer's page in ``signer_page``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.db.models import Count, QuerySet

from evidence_app.list_filters import ListFilters, chosen_filters, list_filters, typed_filters
from evidence_app.models import Evidence, EvidencePointer, PointerState
from evidence_app.services.staleness import StaleReason, staleness_bulk

PAGE_SIZE = 25
# The columns of an evidence row that lists and grids never read (bytes and big JSON).
HEAVY_FIELDS = ("content", "artifact", "transcript", "predicate", "check_results", "certificate")


def evidence_get(*, pk: int) -> Evidence | None:
    return (
        Evidence.objects.select_related("signer", "signer__key", "recipe", "recipe__catalog")
        .defer("content", "artifact", "recipe__catalog__files")
        .filter(pk=pk)
        .first()
    )


@dataclass
class EvidenceListing:
    page: Page[Evidence]
    stale: dict[int, list[StaleReason]]
    filters: ListFilters
    query: str

    @property
    def filtered(self) -> bool:
        return bool(self.filters.chosen)


def evidence_queryset() -> QuerySet[Evidence]:
    return Evidence.objects.select_related("signer").defer(*HEAVY_FIELDS)


def evidence_listing(*, params: Mapping[str, Any], page_number: Any) -> EvidenceListing:
    """Evidence, newest first, optionally for one recipe name, signer slug and/or verdict,
    with each filter's options and counts (``list_filters``). A bad verdict lists nothing and
    says why."""
    chosen, errors = chosen_filters(params)
    # The filters first: a typed recipe or signer is resolved (or refused) there.
    filters = list_filters(chosen, errors, typed_filters(params))
    chosen, errors = filters.chosen, filters.errors
    qs = evidence_queryset().order_by("-attested_at", "-pk")
    lookups = {"recipe": "recipe_name", "signer": "signer__slug", "verdict": "verdict"}
    qs = qs.filter(**{lookups[name]: value for name, value in chosen.items()})
    if errors:
        qs = qs.none()
    paginator = Paginator(qs, PAGE_SIZE)
    if not errors:
        # The tallies' count of what the filters leave, instead of a COUNT(*) of the rows.
        paginator.count = filters.shown
    page = paginator.get_page(page_number)
    items = list(page.object_list)
    page.object_list = items
    return EvidenceListing(
        page=page,
        stale=staleness_bulk(items),
        filters=filters,
        query=urlencode(list(chosen.items())),
    )


@dataclass
class PointerListing:
    page: Page[EvidencePointer]
    state: str
    counts: dict[str, int]

    @property
    def tabs(self) -> list[tuple[str, int]]:
        return [(value, self.counts.get(value, 0)) for value in PointerState.values]

    @property
    def query(self) -> str:
        """The chosen tab, for the page links."""
        return urlencode({"state": self.state}) if self.state else ""


def pointer_listing(*, state: str, page_number: Any) -> PointerListing:
    """The imported pointers, by recipe and path, optionally of one state (unknown: all)."""
    if state not in PointerState.values:
        state = ""
    qs = EvidencePointer.objects.select_related("evidence").order_by("recipe", "path")
    counts = {
        row["state"]: row["n"]
        for row in EvidencePointer.objects.order_by().values("state").annotate(n=Count("pk"))
    }
    if state:
        qs = qs.filter(state=state)
    return PointerListing(
        page=Paginator(qs, PAGE_SIZE).get_page(page_number), state=state, counts=counts
    )

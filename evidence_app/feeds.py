"""``/feeds/evidence.atom``: new, withdrawn and newly stale evidence, newest event first.

Filters: ``recipe`` (an exact recipe name), ``service``, ``accelerator`` (values of the current
catalog); an unknown value is a 400 naming it, never an empty feed that looks like "nothing
happened". Three bounded queries (one per kind of event), whatever the number of records.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.syndication.views import Feed
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.feedgenerator import Atom1Feed
from django.views.decorators.http import require_safe

from evidence_app.models import Evidence
from evidence_app.selectors import evidence_queryset
from evidence_app.services.staleness import stale_after_days
from recipes_app.models import Catalog, Recipe

ITEMS = 50
FILTERS = ("recipe", "service", "accelerator")


class BadFilter(ValueError):
    pass


@dataclass(frozen=True)
class EvidenceEvent:
    kind: str  # "new", "withdrawn", "stale"
    at: datetime
    evidence: Evidence
    detail: str


@dataclass(frozen=True)
class FeedFilter:
    recipe: str = ""
    service: str = ""
    accelerator: str = ""

    def apply(self, records: QuerySet[Evidence]) -> QuerySet[Evidence]:
        if self.recipe:
            records = records.filter(recipe_name=self.recipe)
        if self.service:
            records = records.filter(recipe__service=self.service)
        if self.accelerator:
            records = records.filter(recipe__accelerator=self.accelerator)
        return records

    @property
    def title(self) -> str:
        chosen = [f"{name} {getattr(self, name)}" for name in FILTERS if getattr(self, name)]
        return f" ({', '.join(chosen)})" if chosen else ""


def feed_filter(params: Any, catalog: Catalog | None) -> FeedFilter:
    """The filters of ``params``; raises ``BadFilter`` naming an unknown value."""
    values = {name: str(params.get(name) or "").strip()[:200] for name in FILTERS}
    recipes = Recipe.objects.in_catalog(catalog)
    for name in FILTERS:
        value = values[name]
        field = "name" if name == "recipe" else name
        if value and not recipes.filter(**{field: value}).exists():
            raise BadFilter(f"{name}: no recipe of the current catalog has “{value}”")
    return FeedFilter(**values)


def evidence_events(chosen: FeedFilter, *, now: datetime | None = None) -> list[EvidenceEvent]:
    now = now or timezone.now()
    records = chosen.apply(evidence_queryset())
    days = stale_after_days()
    events = [
        EvidenceEvent("new", e.uploaded_at, e, "stored after verification")
        for e in records.order_by("-uploaded_at", "-pk")[:ITEMS]
    ]
    events += [
        EvidenceEvent("withdrawn", e.withdrawn_at, e, f"withdrawn: {e.withdrawal_reason}")
        for e in records.filter(withdrawn_at__isnull=False).order_by("-withdrawn_at")[:ITEMS]
        if e.withdrawn_at is not None
    ]
    # A record turns stale when it ages past the limit: that moment is the event.
    aged = records.filter(
        withdrawn_at__isnull=True, attested_at__lte=now - timedelta(days=days)
    ).order_by("-attested_at", "-pk")[:ITEMS]
    events += [
        EvidenceEvent("stale", e.attested_at + timedelta(days=days), e, f"older than {days} days")
        for e in aged
    ]
    events.sort(key=lambda event: (event.at, event.evidence.pk), reverse=True)
    return events[:ITEMS]


class EvidenceFeed(Feed):
    feed_type = Atom1Feed
    description_template = None

    def get_object(self, request: HttpRequest, *args: Any, **kwargs: Any) -> FeedFilter:
        return feed_filter(request.GET, Catalog.objects.current())

    def title(self, obj: FeedFilter) -> str:
        return f"AICR evidence{obj.title}"

    def subtitle(self, obj: FeedFilter) -> str:
        return "New, withdrawn and newly stale signed evidence, verified by this site."

    def link(self, obj: FeedFilter) -> str:
        return reverse("evidence:list")

    def items(self, obj: FeedFilter) -> list[EvidenceEvent]:
        return evidence_events(obj)

    def item_title(self, item: EvidenceEvent) -> str:
        demo = " [DEMO]" if item.evidence.is_demo else ""
        return f"{item.kind}: {item.evidence.recipe_name} by {item.evidence.signer.label}{demo}"

    def item_description(self, item: EvidenceEvent) -> str:
        e = item.evidence
        return (
            f"{item.detail}. Recipe {e.recipe_name}, signer {e.signer.label} "
            f"({'counted' if e.signer.counted else 'reported'}), AICR {e.aicr_version or '?'}, "
            f"attested {e.attested_at:%Y-%m-%d %H:%M} UTC."
        )

    def item_link(self, item: EvidenceEvent) -> str:
        return reverse("evidence:detail", args=[item.evidence.pk])

    def item_guid(self, item: EvidenceEvent) -> str:
        return f"evidence-{item.evidence.pk}-{item.kind}"

    item_guid_is_permalink = False

    def item_updateddate(self, item: EvidenceEvent) -> datetime:
        return item.at

    def item_pubdate(self, item: EvidenceEvent) -> datetime:
        return item.at

    def item_categories(self, item: EvidenceEvent) -> list[str]:
        return [item.kind]


_feed = EvidenceFeed()


@require_safe
def evidence_feed(request: HttpRequest) -> HttpResponse:
    try:
        return _feed(request)
    except BadFilter as error:
        return HttpResponseBadRequest(str(error), content_type="text/plain; charset=utf-8")

"""A recipe's consensus as a small SVG badge (``/badges/<recipe>.svg``) and its Markdown.

The state is the recipe's stored badge (``RecipeConsensusState``, the list page's); beside it
the number of distinct counted signers and the newest counted attestation. A stale state says
so in the badge text, a demo one too, never by colour alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max

from evidence_app.consensus import UNTESTED, RecipeBadge, recipe_badge
from evidence_app.consensus import stored as stored_consensus
from evidence_app.models import Evidence
from recipes_app.models import Catalog, Recipe

# Fill colours of the state half (the text on it is always dark on light or white on dark).
COLOURS = {
    "CONFIRMED": "#15803d",
    "SINGLE": "#4d7c0f",
    "PARTIAL": "#0369a1",
    "CONTESTED": "#b45309",
    "FAILING": "#b91c1c",
    UNTESTED: "#475569",
}
CHAR_WIDTH = 6.6  # px per character of 11 px Verdana, rounded up: the text never overflows
PADDING = 10


@dataclass(frozen=True)
class BadgeFacts:
    name: str
    badge: RecipeBadge
    counted_signers: int
    last_attested: datetime | None

    @property
    def label(self) -> str:
        return "AICR"

    @property
    def message(self) -> str:
        parts = [self.badge.state]
        if self.badge.stale.stale:
            parts[0] += " (stale)"
        if self.badge.includes_demo:
            parts[0] += " DEMO"
        if self.counted_signers:
            signers = "signer" if self.counted_signers == 1 else "signers"
            parts.append(f"{self.counted_signers} {signers}")
        if self.last_attested is not None:
            parts.append(self.last_attested.strftime("%Y-%m-%d"))
        return " · ".join(parts)

    @property
    def colour(self) -> str:
        return COLOURS.get(self.badge.state, COLOURS[UNTESTED])

    @property
    def label_width(self) -> int:
        return round(len(self.label) * CHAR_WIDTH) + PADDING

    @property
    def message_width(self) -> int:
        return round(len(self.message) * CHAR_WIDTH) + PADDING

    @property
    def width(self) -> int:
        return self.label_width + self.message_width


def badge_facts(*, name: str) -> BadgeFacts | None:
    """What the badge of ``name`` (in the current catalog) says, or None for no such recipe.
    Queries: the catalog, the expired-badge check, the recipe with its stored badge, the
    counted evidence aggregate: constant."""
    catalog = Catalog.objects.current()
    if catalog is None:
        return None
    stored_consensus.consensus_refresh_expired(catalog=catalog)
    recipe = (
        Recipe.objects.in_catalog(catalog)
        .filter(name=name)
        .select_related("consensus")
        .only("pk", "consensus")
        .first()
    )
    if recipe is None:
        return None
    facts = (
        Evidence.objects.counted()
        .filter(recipe_name=name)
        .aggregate(signers=Count("signer", distinct=True), last=Max("attested_at"))
    )
    return BadgeFacts(
        name=name,
        badge=recipe_badge(recipe),
        counted_signers=facts["signers"],
        last_attested=facts["last"],
    )

"""Reads of the stored consensus badges, for tests: the product reads them joined to the recipe
list (``recipes_app.filters``); these read the same rows by recipe name."""

from __future__ import annotations

from evidence_app.consensus import UNTESTED, RecipeBadge
from recipes_app.models import Catalog, RecipeConsensusState


def recipe_consensus_badges(*, catalog: Catalog | None) -> dict[str, RecipeBadge]:
    """Recipe name → its stored badge for every recipe of ``catalog`` with counted evidence."""
    if catalog is None:
        return {}
    stored = RecipeConsensusState.objects.filter(recipe__catalog=catalog).select_related("recipe")
    return {row.recipe.name: RecipeBadge.stored(row) for row in stored}


def recipe_consensus_states(*, catalog: Catalog | None) -> dict[str, str]:
    """Recipe name → stored consensus state; a recipe missing from the map is UNTESTED."""
    return {name: badge.state for name, badge in recipe_consensus_badges(catalog=catalog).items()}


def state_of(states: dict[str, str], name: str) -> str:
    return states.get(name, UNTESTED)

"""Migration 0004 decodes each stored ``|``-joined badge into typed columns, and back (the old
column stays, unwritten, for one release)."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from recipes_app.models import RecipeConsensusState
from tests.factories import CatalogFactory, RecipeFactory
from tests.migration_steps import migrate_to

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("recipes_app", "0003_recipe_consensus_state")]
# (state, old badge string) → (includes_demo, counted_runs, stale_runs, stale_reasons)
ROWS = [
    ("CONFIRMED", "CONFIRMED|0|2|0|", (False, 2, 0, {})),
    (
        "SINGLE",
        "SINGLE|1|3|2|recipe-changed=1,older-than-30-days=2",
        (True, 3, 2, {"recipe-changed": 1, "older-than-30-days": 2}),
    ),
    ("FAILING", "garbled", (False, 0, 0, {})),
]


def _historical_row(model: Any, instance: Any, **values: Any) -> Any:
    """``instance``'s (a factory build's) values for the columns ``model`` had then."""
    for field in model._meta.concrete_fields:
        if field.attname != "id" and field.attname not in values:
            values[field.attname] = getattr(instance, field.attname)
    return model.objects.create(**values)


def test_it_keeps_each_badge_both_ways() -> None:
    try:
        old_apps = migrate_to(BEFORE)
        old_state = old_apps.get_model("recipes_app", "RecipeConsensusState")
        # Rows of the tables as they were then (later migrations add catalog/recipe columns).
        catalog = _historical_row(
            old_apps.get_model("recipes_app", "Catalog"), CatalogFactory.build()
        )
        old_recipe = old_apps.get_model("recipes_app", "Recipe")
        pks = [
            _historical_row(old_recipe, RecipeFactory.build(catalog=None), catalog_id=catalog.pk).pk
            for _ in ROWS
        ]
        for pk, (state, badge, _) in zip(pks, ROWS, strict=True):
            old_state.objects.create(
                recipe_id=pk, state=state, badge=badge, refreshed_at=timezone.now()
            )

        migrate_to()
        migrated = {row.pk: row for row in RecipeConsensusState.objects.all()}
        assert [
            (
                migrated[pk].includes_demo,
                migrated[pk].counted_runs,
                migrated[pk].stale_runs,
                migrated[pk].stale_reasons,
            )
            for pk in pks
        ] == [columns for _, _, columns in ROWS]

        reverted = migrate_to(BEFORE).get_model("recipes_app", "RecipeConsensusState")
        badges = dict(reverted.objects.values_list("pk", "badge"))
        # Well-formed strings come back as they were; a garbled one as the plain badge it read as.
        assert [badges[pk] for pk in pks] == [ROWS[0][1], ROWS[1][1], "FAILING|0|0|0|"]
    finally:
        migrate_to()

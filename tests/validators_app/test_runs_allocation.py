"""Starting a run of a recipe AICR's conversion refuses: the API answers 400 naming the recipe
with AICR's message and stores nothing (the orchestrator applies the same rule again:
test_orchestrator_allocation_sim.py, test_runs_allocation_worker.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from recipes_app.models import Recipe
from tests.validators_app.allocation_support import CHART_GUARD, contradictory_catalog
from tests.validators_app.runs_support import RECIPE, cluster_row
from tests.validators_app.test_runs_api import maintainer, post, schema_check  # noqa: F401
from validators_app.models import CheckRun, ValidationRun
from validators_app.services import runs

pytestmark = pytest.mark.django_db


def test_a_contradictory_allocation_configuration_is_a_400_naming_the_recipe(
    maintainer: Client,  # noqa: F811
    real_tree_files: dict[str, str],
    schema_check: Any,  # noqa: F811
) -> None:
    contradictory_catalog(real_tree_files)
    cluster = cluster_row()
    response = schema_check(post(maintainer, {"cluster": cluster.pk, "recipe": RECIPE}))
    assert response.status_code == 400
    assert response.json()["detail"] == f"recipe: {CHART_GUARD}"
    assert not ValidationRun.objects.exists()
    assert not CheckRun.objects.exists()


def test_the_stock_recipes_start(real_catalog: Any) -> None:
    for recipe in Recipe.objects.current().filter(name__in=[RECIPE, "ocp-training"]):
        assert runs.recipe_input_problem(recipe) is None, recipe.name

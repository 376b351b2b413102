"""Starting a run of a recipe AICR's conversion refuses: the API and the recipe page's form answer
400 with AICR's message and store nothing (the orchestrator applies the same rule again:
test_orchestrator_allocation_sim.py, test_runs_allocation_worker.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils.html import escape

from evidence_app.models import Role
from recipes_app.models import Recipe
from tests.validators_app.allocation_support import CHART_GUARD, contradictory_catalog
from tests.validators_app.runs_support import RECIPE, cluster_row
from tests.validators_app.test_runs_api import maintainer, post, schema_check  # noqa: F401
from tests.validators_app.test_runs_views import signed_in
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


def test_the_recipe_pages_start_form_answers_400_with_the_reason(
    real_tree_files: dict[str, str],
) -> None:
    contradictory_catalog(real_tree_files)
    form = {"recipe": RECIPE, "cluster": cluster_row().pk, "phases": ["deployment"]}
    response = signed_in(Role.MAINTAINER).post("/runs/start/", form)
    assert response.status_code == 400
    assert escape(CHART_GUARD) in response.content.decode()
    assert not ValidationRun.objects.exists()

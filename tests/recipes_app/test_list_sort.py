"""The recipe list's ``?sort=``: name (default), consensus state, last counted attestation."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evidence_app.consensus import UNTESTED
from recipes_app.models import Catalog, Recipe, RecipeConsensusState
from tests.evidence_factories import EvidenceFactory, SignerFactory

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true", "HX-Target": "results"}


def row_names(html: str) -> list[str]:
    return re.findall(r'<td class="recipe-name">\s*<a href="[^"]*">([^<]+)</a>', html)


def passing(recipe: Recipe) -> dict[str, list[dict[str, str]]]:
    return {
        phase: [{"name": check["name"], "status": "passed"} for check in checks]
        for phase, checks in recipe.checks.items()
        if phase != "readiness"
    }


def attest(recipe: Recipe, *, days_ago: int, signers: int = 1) -> None:
    for signer in SignerFactory.create_batch(signers):
        EvidenceFactory(
            recipe=recipe,
            signer=signer,
            check_results=passing(recipe),
            attested_at=datetime.now(UTC) - timedelta(days=days_ago),
        )


@pytest.fixture
def ranked(real_catalog: Catalog) -> list[Recipe]:
    """Three recipes: z… CONFIRMED attested 3 days ago, m… SINGLE 1 day ago, a… FAILING."""
    recipes = list(Recipe.objects.filter(catalog=real_catalog).order_by("name"))
    first, middle, last = recipes[0], recipes[len(recipes) // 2], recipes[-1]
    attest(last, days_ago=3, signers=2)
    attest(middle, days_ago=1)
    failed = {
        phase: [{"name": c["name"], "status": "failed"} for c in checks]
        for phase, checks in first.checks.items()
        if phase != "readiness"
    }
    EvidenceFactory(recipe=first, check_results=failed, attested_at=datetime.now(UTC))
    # A reported (uncounted) signer's newer run is not "last attested".
    EvidenceFactory(recipe=last, signer=SignerFactory(counted=False), check_results=passing(last))
    return [first, middle, last]


def test_by_default_recipes_are_in_name_order(client, ranked):
    names = row_names(client.get("/recipes/").content.decode())
    assert names == sorted(names)
    assert client.get("/recipes/?sort=name").content.decode().count("<tr>") > 1


def test_by_state_best_first_then_by_name(client, ranked):
    first, middle, last = ranked
    names = row_names(client.get("/recipes/?sort=state").content.decode())
    assert names[:2] == [last.name, middle.name]  # CONFIRMED, then SINGLE
    untested = names[2:-1]
    assert untested == sorted(untested)
    # FAILING sorts after everything validated and before UNTESTED.
    assert names[2] == first.name


def test_by_state_a_stored_untested_row_sorts_among_recipes_without_one(client, ranked):
    # Counted runs that decide nothing store UNTESTED; a recipe without counted runs has no row.
    recipes = list(Recipe.objects.filter(catalog=ranked[0].catalog).order_by("name"))
    stored_untested = recipes[len(recipes) // 4]
    RecipeConsensusState.objects.create(
        recipe=stored_untested, state=UNTESTED, refreshed_at=datetime.now(UTC)
    )

    names = row_names(client.get("/recipes/?sort=state").content.decode())

    untested = names[3:]
    assert stored_untested.name in untested
    assert untested == sorted(untested)


def test_by_last_attested_newest_counted_run_first(client, ranked):
    first, middle, last = ranked
    html = client.get("/recipes/?sort=attested").content.decode()
    names = row_names(html)
    assert names[:3] == [first.name, middle.name, last.name]
    rest = names[3:]
    assert rest == sorted(rest)  # never attested: by name
    assert "never" in html


def test_an_unknown_sort_is_a_400_naming_it_and_a_way_out(client, ranked):
    response = client.get("/recipes/?sort=price&service=eks")

    assert response.status_code == 400
    html = response.content.decode()
    assert "sort: choose one of name, state, attested" in html
    assert "price" in html
    assert 'href="/recipes/?service=eks"' in html  # the link without the bad value


def test_the_default_sort_stays_out_of_the_url(client, ranked):
    response = client.get("/recipes/?sort=name&service=eks", headers=HTMX)
    assert response["HX-Push-Url"] == "/recipes/?service=eks"
    response = client.get("/recipes/?sort=state&service=eks", headers=HTMX)
    assert response["HX-Push-Url"] == "/recipes/?service=eks&sort=state"


@pytest.mark.parametrize("sort", ["name", "state", "attested"])
def test_each_sort_runs_a_constant_number_of_queries(client, real_catalog, sort):
    recipes = list(Recipe.objects.filter(catalog=real_catalog).order_by("name"))

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(f"/recipes/?sort={sort}").status_code == 200
        return len(ctx.captured_queries)

    attest(recipes[0], days_ago=1)
    few = queries()
    for recipe in recipes[1:10]:
        attest(recipe, days_ago=2)
    assert queries() == few

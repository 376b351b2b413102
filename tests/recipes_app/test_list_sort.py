"""The recipe list's ``?sort=``: consensus state (default), name, last counted attestation;
and its ``?has_evidence=1`` toggle."""

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


def test_by_default_recipes_are_in_state_order(client, ranked):
    first, middle, last = ranked
    default = row_names(client.get("/recipes/").content.decode())
    assert default == row_names(client.get("/recipes/?sort=state").content.decode())
    assert default[:3] == [last.name, middle.name, first.name]


def test_sort_by_name_still_works(client, ranked):
    html = client.get("/recipes/?sort=name").content.decode()
    names = row_names(html)
    assert len(names) > 3
    assert names == sorted(names)
    assert re.search(r'<option value="name" selected>Name</option>', html)


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


@pytest.mark.parametrize(
    ("param", "message"),
    [
        ("sort=price", "sort: choose one of state, name, attested"),
        ("has_evidence=price", "has_evidence:"),
    ],
)
def test_an_unknown_value_is_a_400_naming_it_and_a_way_out(client, ranked, param, message):
    response = client.get(f"/recipes/?{param}&service=eks")

    assert response.status_code == 400
    html = response.content.decode()
    assert message in html
    assert "price" in html
    assert 'href="/recipes/?service=eks"' in html  # the link without the bad value
    assert not row_names(html)


def test_the_default_sort_stays_out_of_the_url(client, ranked):
    response = client.get("/recipes/?sort=state&service=eks", headers=HTMX)
    assert response["HX-Push-Url"] == "/recipes/?service=eks"
    response = client.get("/recipes/?sort=name&service=eks", headers=HTMX)
    assert response["HX-Push-Url"] == "/recipes/?service=eks&sort=name"


# --- ?has_evidence=1 -------------------------------------------------------------------------


def test_has_evidence_lists_only_recipes_with_counted_runs(client, ranked):
    first, middle, last = ranked
    # Only a reported (uncounted) signer's run: no counted evidence, not listed.
    reported_only = Recipe.objects.filter(catalog=first.catalog).exclude(
        pk__in=[r.pk for r in ranked]
    )[0]
    EvidenceFactory(
        recipe=reported_only,
        signer=SignerFactory(counted=False),
        check_results=passing(reported_only),
    )

    html = client.get("/recipes/?has_evidence=1").content.decode()

    assert row_names(html) == [last.name, middle.name, first.name]  # state order kept
    assert "<strong>3</strong> recipes" in html
    assert re.search(r'name="has_evidence" value="1" checked', html)
    by_name = row_names(client.get("/recipes/?has_evidence=1&sort=name").content.decode())
    assert by_name == sorted(r.name for r in ranked)


def test_has_evidence_combines_with_other_filters_and_facets(client, ranked):
    first, middle, last = ranked
    html = client.get(f"/recipes/?has_evidence=1&service={last.service}").content.decode()

    expected = [r.name for r in (last, middle, first) if r.service == last.service]
    assert row_names(html) == expected
    # The facet counts follow the toggle: only recipes with evidence are counted.
    with_evidence = sum(1 for r in ranked if r.service == last.service)
    assert f'<option value="{last.service}" selected>{last.service} ({with_evidence})' in html


def test_has_evidence_stays_in_the_url(client, ranked):
    response = client.get("/recipes/?has_evidence=1", headers=HTMX)
    assert response["HX-Push-Url"] == "/recipes/?has_evidence=1"
    assert len(row_names(response.content.decode())) == 3


def test_the_api_takes_the_same_toggle(client, ranked):
    response = client.get("/api/v1/recipes/", {"has_evidence": "1"})
    assert response.status_code == 200
    assert sorted(r["name"] for r in response.json()["results"]) == sorted(r.name for r in ranked)
    assert client.get("/api/v1/recipes/", {"has_evidence": "maybe"}).status_code == 400


@pytest.mark.parametrize(
    "query",
    ["sort=name", "sort=state", "sort=attested", "has_evidence=1", "has_evidence=1&sort=name"],
)
def test_each_sort_runs_a_constant_number_of_queries(client, real_catalog, query):
    recipes = list(Recipe.objects.filter(catalog=real_catalog).order_by("name"))

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(f"/recipes/?{query}").status_code == 200
        return len(ctx.captured_queries)

    attest(recipes[0], days_ago=1)
    few = queries()
    for recipe in recipes[1:10]:
        attest(recipe, days_ago=2)
    assert queries() == few

"""The home page: the coverage matrix of the real catalog with stored consensus badges."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import unescape
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evidence_app.corroborate import CONFIRMED, SINGLE, UNTESTED
from recipes_app.models import Catalog, Recipe
from tests.evidence_factories import EvidenceFactory, SignerFactory

pytestmark = pytest.mark.django_db

KUBEFLOW = "h100-eks-ubuntu-training-kubeflow"


def passing(recipe: Recipe) -> dict[str, list[dict[str, str]]]:
    """CTRF results in which every declared check of ``recipe`` passed."""
    return {
        phase: [{"name": check["name"], "status": "passed"} for check in checks]
        for phase, checks in recipe.checks.items()
        if phase != "readiness"
    }


def cells(html: str) -> dict[str, dict[str, Any]]:
    """Each matrix cell (``service/platform/accelerator``) → its link, best state and counts."""
    found = {}
    pattern = re.compile(
        r'<a class="matrix-link" href="([^"]+)" data-cell="([^"]+)"\s+title="([^"]*)">\s*'
        r'<span class="state [^"]+">(\w+)</span>\s*'
        r'<span class="matrix-count">(\d+)/(\d+) validated</span>'
    )
    for href, key, title, best, validated, total in pattern.findall(html):
        found[key] = {
            "href": unescape(href),
            "title": title,
            "best": best,
            "validated": int(validated),
            "total": int(total),
        }
    return found


def fact(html: str, name: str) -> str:
    match = re.search(rf'data-fact="{name}"[^>]*>(.*?)</dd>', html, re.S)
    assert match, name
    return match.group(1)


def test_every_recipe_sits_in_exactly_one_cell_of_its_coordinates(client, real_catalog: Catalog):
    response = client.get("/")

    assert response.status_code == 200
    html = response.content.decode()
    found = cells(html)
    recipes = list(Recipe.objects.filter(catalog=real_catalog))
    expected: dict[str, int] = {}
    for recipe in recipes:
        key = f"{recipe.service}/{recipe.platform}/{recipe.accelerator}"
        expected[key] = expected.get(key, 0) + 1
    assert {key: cell["total"] for key, cell in found.items()} == expected
    assert all(cell["best"] == UNTESTED and cell["validated"] == 0 for cell in found.values())
    assert fact(html, "recipes") == str(len(recipes))
    assert fact(html, "signers") == "0"
    assert "no evidence yet" in fact(html, "as-of")
    assert "No evidence yet" in html  # the empty state says how to contribute
    assert "--emit-attestation" in html


def test_a_cell_opens_the_list_of_exactly_its_recipes(client, real_catalog: Catalog):
    found = cells(client.get("/").content.decode())
    key = "eks/kubeflow/h100"
    listed = client.get(found[key]["href"]).content.decode()

    names = set(re.findall(r'<td class="recipe-name">\s*<a href="[^"]*">([^<]+)</a>', listed))
    expected = set(
        Recipe.objects.filter(
            catalog=real_catalog, service="eks", platform="kubeflow", accelerator="h100"
        ).values_list("name", flat=True)
    )
    assert names == expected
    assert KUBEFLOW in names


def test_counted_evidence_rolls_up_into_the_cell_and_the_counts(client, real_catalog: Catalog):
    recipe = Recipe.objects.get(catalog=real_catalog, name=KUBEFLOW)
    results = passing(recipe)
    first, second = SignerFactory.create_batch(2)
    EvidenceFactory(recipe=recipe, signer=first, check_results=results)
    html = client.get("/").content.decode()
    cell = cells(html)["eks/kubeflow/h100"]
    assert (cell["best"], cell["validated"]) == (SINGLE, 1)
    assert f"1 {SINGLE}" in cell["title"]

    EvidenceFactory(recipe=recipe, signer=second, check_results=results)
    # A reported (not counted) signer never moves a state or the signer count.
    EvidenceFactory(recipe=recipe, signer=SignerFactory(counted=False), check_results=results)
    html = client.get("/").content.decode()
    cell = cells(html)["eks/kubeflow/h100"]
    assert (cell["best"], cell["validated"]) == (CONFIRMED, 1)
    assert fact(html, "signers") == "2"
    assert fact(html, "evidence") == "3"
    assert fact(html, "validated") == "1"
    assert f'data-state-count="{CONFIRMED}">{CONFIRMED} 1</a>' in html
    untested = Recipe.objects.filter(catalog=real_catalog).count() - 1
    assert f'data-state-count="{UNTESTED}">{UNTESTED} {untested}</a>' in html
    # Other cells did not move.
    assert all(
        c["best"] == UNTESTED for key, c in cells(html).items() if key != "eks/kubeflow/h100"
    )
    # The recent evidence names the recipe and signer, newest first.
    recent = html[html.index('id="recent-h"') :]
    assert recent.count(KUBEFLOW) == 3


def test_demo_evidence_and_stale_runs_are_labelled(client, real_catalog: Catalog):
    recipe = Recipe.objects.get(catalog=real_catalog, name=KUBEFLOW)
    EvidenceFactory(
        recipe=recipe,
        check_results=passing(recipe),
        is_demo=True,
        attested_at=datetime.now(UTC) - timedelta(days=45),
    )
    html = client.get("/").content.decode()

    matrix = html[html.index('id="matrix-h"') : html.index('id="recent-h"')]
    assert 'data-cell="eks/kubeflow/h100"' in matrix
    cell_html = matrix[matrix.index('data-cell="eks/kubeflow/h100"') :]
    cell_html = cell_html[: cell_html.index("</a>")]
    assert "DEMO" in cell_html
    assert "1 stale" in cell_html
    stale = html[html.index('id="stale-h"') :]
    assert KUBEFLOW in stale
    assert "older-than-30-days (1)" in stale
    assert "1 of 1 counted run stale" in stale
    assert "not real validations" in html


def test_the_query_count_does_not_grow_with_evidence(client, real_catalog: Catalog):
    recipes = list(Recipe.objects.filter(catalog=real_catalog).order_by("name"))

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/").status_code == 200
        return len(ctx.captured_queries)

    EvidenceFactory(recipe=recipes[0], check_results=passing(recipes[0]))
    few = queries()
    for recipe in recipes[1:12]:
        for _ in range(2):
            EvidenceFactory(recipe=recipe, check_results=passing(recipe))
    many = queries()
    assert few == many
    html = client.get("/").content.decode()
    assert sum(c["validated"] for c in cells(html).values()) == 12


def test_without_a_catalog_it_says_how_to_import_one(client):
    Catalog.objects.all().delete()  # the session's database holds the real one
    response = client.get("/")

    assert response.status_code == 200
    assert "No catalog imported yet" in response.content.decode()


def test_the_brand_link_leads_home(client, real_catalog: Catalog):
    html = client.get("/recipes/").content.decode()
    assert '<a class="brand" href="/">' in html


def test_cells_without_counted_evidence_are_named_in_their_rows_one_line(
    client, real_catalog: Catalog
):
    recipe = Recipe.objects.get(catalog=real_catalog, name=KUBEFLOW)
    EvidenceFactory(recipe=recipe, check_results=passing(recipe))
    # A reported (uncounted) signer's run is not evidence that counts: still "no evidence".
    other = (
        Recipe.objects.filter(catalog=real_catalog, service="eks", platform="kubeflow")
        .exclude(accelerator="h100")
        .first()
    )
    assert other is not None
    EvidenceFactory(recipe=other, signer=SignerFactory(counted=False), check_results=passing(other))

    html = client.get("/").content.decode()

    row = html[
        html.index('<span class="matrix-service">eks</span> <span class="muted">· kubeflow') :
    ]
    row = row[: row.index("</tr>")]
    rest = re.search(
        r'<span class="matrix-rest" data-rest="(\d+)">No evidence yet: (.*?)</span>', row
    )
    assert rest is not None
    named = re.findall(r">([^<]+)</a>", rest.group(2))
    accelerators = set(
        Recipe.objects.filter(catalog=real_catalog, service="eks", platform="kubeflow")
        .exclude(accelerator="h100")
        .values_list("accelerator", flat=True)
    )
    assert set(named) == accelerators
    assert int(rest.group(1)) == len(accelerators)
    assert other.accelerator in named
    h100 = row[row.index('data-label="h100"') - 60 : row.index('data-label="h100"')]
    assert "matrix-cell--no-evidence" not in h100
    assert row.count("matrix-cell--no-evidence") == len(accelerators)

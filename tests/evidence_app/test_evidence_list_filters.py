"""The evidence list's filters: selects of the recipes, signers and verdicts there are, each
option with the number of records it shows, in a bounded number of queries."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evidence_app import list_filters
from evidence_app.models import Verdict
from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory, SignerFactory
from tests.factories import CatalogFactory, RecipeFactory

pytestmark = pytest.mark.django_db
URL = reverse("evidence:list")


def _options(html: str, name: str) -> dict[str, str]:
    select = re.search(rf'<select id="ev-{name}" name="{name}">(.*?)</select>', html, re.S)
    assert select is not None, f"no {name} select"
    return dict(re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', select.group(1)))


def _selected(html: str, name: str) -> list[str]:
    select = re.search(rf'<select id="ev-{name}" name="{name}">(.*?)</select>', html, re.S)
    assert select is not None
    return re.findall(r'<option value="([^"]*)" selected>', select.group(1))


@pytest.fixture
def data() -> dict[str, object]:
    catalog = CatalogFactory()
    alpha, beta = (RecipeFactory(catalog=catalog, name=n) for n in ("alpha-recipe", "beta-recipe"))
    lab, vendor = SignerFactory(label="GPU lab"), SignerFactory(label="Vendor CI")
    for _ in range(3):
        EvidenceFactory(recipe=alpha, signer=lab)
    EvidenceFactory(recipe=alpha, signer=vendor, verdict=Verdict.INVALID)
    EvidenceFactory(recipe=beta, signer=vendor)
    return {"alpha": alpha, "beta": beta, "lab": lab, "vendor": vendor}


def _shown(html: str) -> int:
    return len(re.findall(r'<a href="/evidence/(\d+)/"', html))


def test_every_filter_is_a_select_with_counts(client: Client, data: dict) -> None:
    html = client.get(URL).content.decode()
    assert _options(html, "recipe") == {
        "": "any (5)",
        "alpha-recipe": "alpha-recipe (4)",
        "beta-recipe": "beta-recipe (1)",
    }
    lab, vendor = data["lab"], data["vendor"]
    assert _options(html, "signer") == {
        "": "any (5)",
        lab.slug: "GPU lab (3)",
        vendor.slug: "Vendor CI (2)",
    }
    assert _options(html, "verdict") == {
        "": "any (5)",
        "verified": "Verified (4)",
        "invalid": "Invalid (1)",
    }


def test_each_count_is_what_choosing_it_shows_under_the_other_filters(
    client: Client, data: dict
) -> None:
    vendor = data["vendor"]
    html = client.get(URL, {"signer": vendor.slug}).content.decode()
    assert _selected(html, "signer") == [vendor.slug]
    assert _options(html, "recipe") == {
        "": "any (2)",
        "alpha-recipe": "alpha-recipe (1)",
        "beta-recipe": "beta-recipe (1)",
    }
    # The signer counts ignore the signer filter itself: every other choice stays honest.
    assert _options(html, "signer")[data["lab"].slug] == "GPU lab (3)"
    assert _shown(html) == 2
    for value, label in _options(html, "recipe").items():
        if not value:
            continue
        chosen = client.get(URL, {"signer": vendor.slug, "recipe": value}).content.decode()
        assert _shown(chosen) == int(label.rsplit("(", 1)[1].rstrip(")")), value


def test_a_bad_verdict_is_a_400_naming_it(client: Client, data: dict) -> None:
    response = client.get(URL, {"verdict": "great"})
    html = response.content.decode()
    assert response.status_code == 400
    assert (
        "verdict: &#x27;great&#x27; is not one of verified, invalid, unsupported, rejected." in html
    )
    assert _shown(html) == 0


def test_an_unknown_recipe_stays_chosen_with_a_zero(client: Client, data: dict) -> None:
    html = client.get(URL, {"recipe": "gamma-recipe"}).content.decode()
    assert _options(html, "recipe")["gamma-recipe"] == "gamma-recipe (0)"
    assert _selected(html, "recipe") == ["gamma-recipe"]
    assert "No evidence matches" in html


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"verdict": "verified"},
        {"recipe": "alpha-recipe"},
        {"signer": "-", "verdict": "invalid"},
    ],
)
def test_the_filters_cost_a_fixed_number_of_queries_none_over_the_records(
    client: Client, data: dict, params: dict[str, str]
) -> None:
    if params.get("signer"):
        params = {**params, "signer": data["vendor"].slug}
    with CaptureQueriesContext(connection) as few:
        client.get(URL, params)
    catalog = CatalogFactory()
    for n in range(12):
        recipe: Recipe = RecipeFactory(catalog=catalog, name=f"more-{n}")
        EvidenceFactory(recipe=recipe, signer=SignerFactory())
    with CaptureQueriesContext(connection) as more:
        html = client.get(URL, params).content.decode()
    assert len(more) == len(few)
    # Issue 22: the options come from the facet tallies; no query groups or counts the
    # evidence rows (the list's own count is the tallies' too).
    evidence = [q["sql"] for q in more if 'FROM "evidence_app_evidence"' in q["sql"]]
    assert not [sql for sql in evidence if "GROUP BY" in sql or "COUNT(" in sql], evidence
    if "recipe" in params or "signer" in params:
        return
    offered = list_filters.MAX_OPTIONS["recipe"]
    assert offered < 2 + 12
    assert len(_options(html, "recipe")) == 1 + offered
    assert f'placeholder="or type any of {2 + 12 - offered} more"' in html


def test_a_filter_offers_its_values_with_most_records_and_counts_the_rest(
    client: Client, data: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(list_filters.MAX_OPTIONS, "recipe", 1)
    html = client.get(URL).content.decode()
    assert _options(html, "recipe") == {"": "any (5)", "alpha-recipe": "alpha-recipe (4)"}
    # The value left out of the options is one typed field away (never hidden).
    assert 'name="recipe_other"' in html
    assert 'placeholder="or type any of 1 more"' in html
    assert 'name="signer_other"' not in html  # every signer is an option
    chosen = client.get(URL, {"recipe": "beta-recipe"}).content.decode()
    assert _selected(chosen, "recipe") == ["beta-recipe"]
    assert _options(chosen, "recipe")["beta-recipe"] == "beta-recipe (1)"
    assert _shown(chosen) == 1


def test_a_typed_value_reaches_any_recipe_or_signer_with_records(
    client: Client, data: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(list_filters.MAX_OPTIONS, "recipe", 1)
    monkeypatch.setitem(list_filters.MAX_OPTIONS, "signer", 1)
    typed = client.get(URL, {"recipe_other": "beta-recipe"})
    assert typed.status_code == 200
    html = typed.content.decode()
    assert _shown(html) == 1
    assert _selected(html, "recipe") == ["beta-recipe"]  # with its count, as an option
    assert _options(html, "recipe")["beta-recipe"] == "beta-recipe (1)"
    # Case aside, and a signer by its label: the one value it matches.
    assert _shown(client.get(URL, {"recipe_other": "BETA-recipe"}).content.decode()) == 1
    by_label = client.get(URL, {"signer_other": "vendor ci"}).content.decode()
    assert _selected(by_label, "signer") == [data["vendor"].slug]
    assert _shown(by_label) == 2
    # The typed field wins over the select's value.
    both = client.get(URL, {"recipe": "alpha-recipe", "recipe_other": "beta-recipe"})
    assert _shown(both.content.decode()) == 1


def test_a_typed_value_without_records_is_a_400_naming_the_closest(
    client: Client, data: dict
) -> None:
    response = client.get(URL, {"recipe_other": "beta-recipes"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "recipe: no evidence record has &#x27;beta-recipes&#x27;. Closest: beta-recipe" in html
    assert _shown(html) == 0
    assert 'value="beta-recipes"' in html  # what was typed stays in the field


def test_the_typed_field_fetches_its_suggestions_with_counts(client: Client, data: dict) -> None:
    html = client.get(URL, {"suggest": "signer", "signer_other": "lab"}).content.decode()
    lab = data["lab"]
    assert html == (
        f'<datalist id="ev-signer-values"><option value="{lab.slug}">GPU lab (3)</option>'
        "</datalist>"
    )
    recipes = client.get(URL, {"suggest": "recipe", "recipe_other": "recipe"}).content.decode()
    assert re.findall(r'<option value="([^"]+)">', recipes) == ["alpha-recipe", "beta-recipe"]
    many = [SignerFactory(label=f"lab {i}") for i in range(list_filters.MAX_SUGGESTIONS + 5)]
    for signer in many:
        EvidenceFactory(recipe=data["alpha"], signer=signer)
    capped = client.get(URL, {"suggest": "signer", "signer_other": "lab"}).content.decode()
    assert capped.count("<option") == list_filters.MAX_SUGGESTIONS
    assert f'value="{lab.slug}">GPU lab (3)' in capped  # most records first

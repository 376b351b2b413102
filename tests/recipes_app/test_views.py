"""The recipe list and detail pages, through the Django test client on the real catalog."""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from recipes_app.filters import RecipeFilter
from recipes_app.models import Catalog, Recipe
from recipes_app.selectors import PAGE_SIZE
from recipes_app.services import catalog_import
from tests.factories import CatalogFactory, RecipeFactory

pytestmark = pytest.mark.django_db

KUBEFLOW = "h100-eks-ubuntu-training-kubeflow"
HTMX = {"HX-Request": "true", "HX-Target": "results"}


def list_url() -> str:
    return reverse("recipes:list")


def detail_url(name: str) -> str:
    return reverse("recipes:detail", args=[name])


def row_names(html: str) -> list[str]:
    """The recipe names linked from the results table, in order."""
    return re.findall(r'<td class="recipe-name">\s*<a href="[^"]*">([^<]+)</a>', html)


def results_region(html: str) -> str:
    start = html.index('<section id="results"')
    return html[start : html.index("</section>", start)]


def make_older(catalog: Catalog, *, days: int = 1) -> Catalog:
    Catalog.objects.filter(pk=catalog.pk).update(imported_at=timezone.now() - timedelta(days=days))
    catalog.refresh_from_db()
    return catalog


# --- the list page --------------------------------------------------------------------------


def test_it_lists_every_current_recipe_and_names_the_catalog(client, real_catalog):
    response = client.get(list_url())

    assert response.status_code == 200
    html = response.content.decode()
    expected = sorted(Recipe.objects.filter(catalog=real_catalog).values_list("name", flat=True))
    assert len(expected) > 45  # 45 leaves plus their profile variants
    assert row_names(html) == expected[:PAGE_SIZE]
    assert f"of <strong>{len(expected)}</strong> recipes" in html
    assert f"#{real_catalog.pk}" in html
    assert real_catalog.aicr_version in html
    assert real_catalog.source in html
    assert real_catalog.content_digest[:12] in html
    assert 'id="filters"' in html


def test_it_filters_by_criteria(client, real_catalog):
    response = client.get(list_url(), {"service": "eks", "accelerator": "h100"})

    assert response.status_code == 200
    expected = Recipe.objects.filter(catalog=real_catalog, service="eks", accelerator="h100")
    assert sorted(row_names(response.content.decode())) == sorted(r.name for r in expected)
    assert KUBEFLOW in row_names(response.content.decode())
    assert all(r.service == "eks" and r.accelerator == "h100" for r in expected)


@pytest.fixture
def schema_generated(client):
    """Generate the OpenAPI schema, then undo its side effect on the shared FilterSet class."""
    assert client.get("/api/schema/").status_code == 200
    yield
    for flt in RecipeFilter.base_filters.values():
        flt.__dict__.pop("_field", None)


def test_it_still_filters_after_the_api_schema_was_generated(
    client, real_catalog, schema_generated
):
    """Generating the OpenAPI schema builds the FilterSet's class-level form fields (with
    no choices yet); a filter built afterwards must still accept the catalog's values."""
    response = client.get(list_url(), {"service": "eks"})

    assert response.status_code == 200
    assert KUBEFLOW in row_names(response.content.decode())


def test_it_ignores_empty_parameters_like_a_plain_form_sends_them(client, real_catalog):
    """Without JavaScript the form submits every field, the empty ones too."""
    params = {"q": "", "service": "gke", "accelerator": "", "os": "", "intent": "", "platform": ""}
    response = client.get(list_url(), params)

    assert response.status_code == 200
    expected = Recipe.objects.filter(catalog=real_catalog, service="gke")
    assert sorted(row_names(response.content.decode())) == sorted(r.name for r in expected)


def test_it_shows_facet_counts_under_the_other_active_filters(client, real_catalog):
    response = client.get(list_url(), {"service": "eks"})
    html = response.content.decode()

    recipes = Recipe.objects.filter(catalog=real_catalog)
    eks_accelerators = Counter(recipes.filter(service="eks").values_list("accelerator", flat=True))
    for accelerator, count in eks_accelerators.items():
        assert f'<option value="{accelerator}">{accelerator} ({count})</option>' in html
    # The service facet counts every service, as choosing another one replaces "eks".
    services = Counter(recipes.values_list("service", flat=True))
    assert f'<option value="eks" selected>eks ({services["eks"]})</option>' in html
    assert f'<option value="gke">gke ({services["gke"]})</option>' in html
    # Only values that exist in the catalog are offered.
    select = re.search(r'<select id="f-service" name="service">(.*?)</select>', html, re.S)
    assert select is not None
    assert set(re.findall(r'<option value="([^"]+)"', select.group(1))) == set(services)


def test_it_searches_free_text(client, real_catalog):
    response = client.get(list_url(), {"q": "kubeflow h100"})

    names = row_names(response.content.decode())
    expected = Recipe.objects.filter(catalog=real_catalog).matching_text("kubeflow h100")
    assert names
    assert sorted(names) == sorted(r.name for r in expected)
    assert KUBEFLOW in names
    assert 'value="kubeflow h100"' in response.content.decode()


def test_it_answers_htmx_with_the_results_partial_and_the_facets(client, real_catalog):
    response = client.get(list_url(), {"service": "eks", "q": ""}, headers=HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html
    assert 'id="filters"' not in html  # the form (and the search box being typed in) stays
    assert html.lstrip().startswith('<section id="results"')
    assert 'id="facets" class="filters__facets" hx-swap-oob="innerHTML"' in html
    assert '<option value="eks" selected>' in html
    assert sorted(row_names(html)) == sorted(
        Recipe.objects.filter(catalog=real_catalog, service="eks").values_list("name", flat=True)
    )
    # The pushed URL carries only the active filters, so it is short and shareable.
    assert response["HX-Push-Url"] == "/recipes/?service=eks"
    assert "HX-Request" in response["Vary"]


def test_it_gives_a_history_restore_the_whole_page(client, real_catalog):
    headers = {**HTMX, "HX-History-Restore-Request": "true"}
    response = client.get(list_url(), {"service": "eks"}, headers=headers)

    html = response.content.decode()
    assert "<html" in html
    assert '<option value="eks" selected>' in html


def test_it_works_as_a_plain_form_without_javascript(client, real_catalog):
    html = client.get(list_url()).content.decode()

    form = re.search(r'<form id="filters"[^>]*>', html, re.S)
    assert form is not None
    assert 'method="get"' in form.group(0)
    assert 'action="/recipes/"' in form.group(0)
    assert '<button type="submit"' in html
    for name in ("q", "service", "accelerator", "os", "intent", "platform"):
        assert f'name="{name}"' in html


def test_it_rejects_an_unknown_filter_value_naming_field_and_value(client, real_catalog):
    response = client.get(list_url(), {"service": "nope-cloud", "intent": "training"})

    assert response.status_code == 400
    html = response.content.decode()
    alert = html[html.index('class="alert alert--error"') :]
    assert "service:" in alert
    assert "nope-cloud" in alert
    assert 'id="filters"' in html  # the page still renders, filter bar included
    assert row_names(html) == []
    # The way out keeps the valid filter and drops the unknown one.
    assert 'href="/recipes/?intent=training"' in html


def test_it_names_an_unknown_catalog_version(client, real_catalog):
    response = client.get(list_url(), {"catalog": "424242"})

    assert response.status_code == 400
    html = response.content.decode()
    assert "catalog:" in html
    assert "424242" in html
    assert row_names(html) == []


def test_it_rejects_an_unknown_value_in_an_htmx_request_too(client, real_catalog):
    response = client.get(list_url(), {"accelerator": "tpu"}, headers=HTMX)

    assert response.status_code == 400
    assert "accelerator:" in response.content.decode()
    assert "tpu" in response.content.decode()


def test_it_escapes_user_input(client, real_catalog):
    hostile = "<script>alert(1)</script>"
    response = client.get(list_url(), {"q": hostile})

    html = response.content.decode()
    assert hostile not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html

    response = client.get(list_url(), {"service": hostile})
    assert response.status_code == 400
    assert hostile not in response.content.decode()
    assert "&lt;script&gt;" in response.content.decode()


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"catalog": "9" * 30}, 400),
        ({"catalog": "-1"}, 400),
        ({"page": "9" * 30}, 200),
        ({"page": "last"}, 200),
        ({"q": "x" * 201}, 400),
        # A NUL is refused before the view by aicr_site's middleware (tests/aicr_site/
        # test_request_guards.py), with a plain 400 page naming the parameter.
        ({"service": ""}, 200),
    ],
)
def test_it_answers_odd_input_with_a_page_not_an_error(client, real_catalog, params, status):
    response = client.get(list_url(), params)

    assert response.status_code == status
    assert 'id="filters"' in response.content.decode()


def test_it_says_when_nothing_matches_and_offers_to_clear(client, real_catalog):
    response = client.get(list_url(), {"q": "no-such-component-anywhere"})

    assert response.status_code == 200
    html = response.content.decode()
    assert "No recipe matches these filters" in html
    assert "Clear all filters" in html
    assert row_names(html) == []


def test_it_marks_recipes_changed_since_the_previous_catalog(client):
    older = make_older(CatalogFactory())
    RecipeFactory(catalog=older, name="stays-the-same")
    RecipeFactory(catalog=older, name="gets-changed")
    current = CatalogFactory()
    RecipeFactory(catalog=current, name="stays-the-same", change="unchanged")
    RecipeFactory(catalog=current, name="gets-changed", change="changed")
    RecipeFactory(catalog=current, name="brand-new", change="new")

    html = client.get(list_url()).content.decode()

    rows = {name: html[html.index(f">{name}</a>") :].split("</tr>")[0] for name in row_names(html)}
    assert set(rows) == {"stays-the-same", "gets-changed", "brand-new"}
    assert ">changed</span>" in rows["gets-changed"]
    assert ">new</span>" in rows["brand-new"]
    assert ">unchanged</span>" in rows["stays-the-same"]
    # The earlier version can still be browsed, and says that it is not the current one.
    html = client.get(list_url(), {"catalog": older.pk}).content.decode()
    assert "Earlier catalog" in html
    assert sorted(row_names(html)) == ["gets-changed", "stays-the-same"]


def test_it_paginates_at_fifty(client):
    catalog = CatalogFactory()
    RecipeFactory.create_batch(PAGE_SIZE + 10, catalog=catalog)

    first = client.get(list_url()).content.decode()
    second = client.get(list_url(), {"page": 2}, headers=HTMX)

    assert len(row_names(first)) == PAGE_SIZE
    assert "page=2" in first
    assert len(row_names(second.content.decode())) == 10
    assert second["HX-Push-Url"] == "/recipes/?page=2"
    assert not set(row_names(first)) & set(row_names(second.content.decode()))


@pytest.mark.parametrize("headers", [{}, HTMX], ids=["page", "htmx"])
def test_it_runs_a_constant_number_of_queries(client, headers):
    def queries_for(count: int, **params: str) -> int:
        catalog = CatalogFactory()
        RecipeFactory.create_batch(count, catalog=catalog)
        with CaptureQueriesContext(connection) as queries:
            response = client.get(list_url(), params, headers=headers)
        assert len(row_names(response.content.decode())) == min(count, PAGE_SIZE)
        return len(queries)

    small = queries_for(5)
    large = queries_for(40)
    filtered = queries_for(60, service="eks", q="training")

    assert small == large == filtered
    assert small <= 6


def test_it_keeps_query_count_constant_on_the_detail_page(client, django_assert_max_num_queries):
    catalog = CatalogFactory()
    recipe = RecipeFactory(catalog=catalog)
    # 8 for the page, 2 for the qualifications section (its count, the simulated-run count),
    # 1 for the releases that may claim it (the consensus grid's release lenses).
    with django_assert_max_num_queries(11):
        assert client.get(detail_url(recipe.name)).status_code == 200


# --- the detail page ------------------------------------------------------------------------


def test_it_shows_what_a_real_recipe_installs_and_checks(client, real_catalog):
    recipe = Recipe.objects.get(catalog=real_catalog, name=KUBEFLOW)

    response = client.get(detail_url(KUBEFLOW))

    assert response.status_code == 200
    html = response.content.decode()
    assert recipe.coordinate in html
    assert "gpu-operator" in html
    assert "v26.3.3" in html
    # Components appear in deployment order.
    positions = [html.index(f"<strong>{name}</strong>") for name in recipe.deployment_order]
    assert positions == sorted(positions)
    for phase in ("Readiness", "Deployment", "Conformance", "Performance"):
        assert f"<h3>{phase} " in html
    assert "nccl-all-reduce-bw" in html
    assert "&gt;= 300" in html
    assert recipe.digest in html
    assert recipe.parity_digest in html
    # which evidence binds by which digest
    assert "legacy digest — recipe-evidence v1/v2" in html
    assert f'<code class="hash">{recipe.digest_v3}</code>' in html
    assert "recipe-evidence v3; metadata.version excluded" in html
    assert f'href="/api/v1/recipes/{KUBEFLOW}/resolved.yaml"' in html
    for overlay in recipe.applied_overlays:
        assert f"<code>{overlay}</code>" in html
    for constraint in recipe.constraints:
        assert constraint["name"] in html


def test_it_shows_the_aicr_command_with_a_copy_button(client, real_catalog):
    html = client.get(detail_url(KUBEFLOW)).content.decode()

    command = (
        "aicr recipe --service eks --accelerator h100 --os ubuntu --intent training"
        " --platform kubeflow"
    )
    assert f'<code id="aicr-command">{command}</code>' in html
    assert 'data-copy="#aicr-command"' in html
    assert "<script>" not in html
    assert " style=" not in html


def test_it_loads_the_deterministic_yaml_when_opened(client, real_catalog):
    recipe = Recipe.objects.get(catalog=real_catalog, name=KUBEFLOW)

    response = client.get(detail_url(KUBEFLOW))
    html = response.content.decode()

    assert '<details class="yaml">' in html
    yaml_url = f"/recipes/{KUBEFLOW}/recipe.yaml"
    assert f'data-yaml-src="{yaml_url}"' in html  # recipe.js fetches it when opened
    assert f'<a href="{yaml_url}">recipe.yaml</a>' in html  # and without JavaScript, a link
    assert 'data-copy="#recipe-yaml"' in html
    assert recipe.deterministic_yaml not in html  # not inline: most of the page's weight
    assert len(response.content) < 100_000
    served = client.get(yaml_url)
    assert served.status_code == 200
    assert served["Content-Type"] == "text/plain; charset=utf-8"
    assert served.content.decode() == recipe.deterministic_yaml


def test_its_yaml_names_an_earlier_catalog_version_and_refuses_unknown_ones(client):
    older = make_older(CatalogFactory())
    RecipeFactory(catalog=older, name="r", deterministic_yaml="a: 1\n")
    RecipeFactory(catalog=CatalogFactory(), name="r", deterministic_yaml="a: 2\n")

    page = client.get(detail_url("r"), {"catalog": older.pk}).content.decode()

    assert f'data-yaml-src="/recipes/r/recipe.yaml?catalog={older.pk}"' in page
    assert client.get("/recipes/r/recipe.yaml", {"catalog": older.pk}).content == b"a: 1\n"
    assert client.get("/recipes/r/recipe.yaml").content == b"a: 2\n"
    for missing in ("/recipes/nope/recipe.yaml", "/recipes/r/recipe.yaml?catalog=99999"):
        refused = client.get(missing)
        assert refused.status_code == 404
        assert refused["Content-Type"] == "text/plain; charset=utf-8"
        assert b"No recipe named" in refused.content


def test_it_links_profile_variants_of_the_same_leaf(client, real_catalog):
    variant = Recipe.objects.filter(catalog=real_catalog).exclude(profile="").first()
    assert variant is not None, "the real catalog has profile variants"
    siblings = Recipe.objects.filter(catalog=real_catalog, leaf=variant.leaf).exclude(pk=variant.pk)

    html = client.get(detail_url(variant.name)).content.decode()

    assert variant.profile in html
    assert siblings
    for sibling in siblings:
        assert f'href="{detail_url(sibling.name)}"' in html


def test_it_marks_disabled_components(client):
    recipe = RecipeFactory(
        catalog=CatalogFactory(),
        components=[
            {
                "name": "kept",
                "type": "Helm",
                "version": "v1",
                "dependencyRefs": [],
                "enabled": True,
            },
            {"name": "switched-off", "type": "Helm", "dependencyRefs": [], "enabled": False},
        ],
    )

    html = client.get(detail_url(recipe.name)).content.decode()

    row = html[html.index("<strong>switched-off</strong>") :].split("</tr>")[0]
    assert "disabled" in row
    assert "disabled" not in html[html.index("<strong>kept</strong>") :].split("</tr>")[0]


@pytest.mark.parametrize(
    ("params", "status"),
    [({"catalog": "9" * 30}, 404), ({"catalog": "x"}, 404), ({"against": "9" * 30}, 400)],
)
def test_it_answers_odd_detail_input_without_crashing(client, real_catalog, params, status):
    assert client.get(detail_url(KUBEFLOW), params).status_code == status


def test_it_answers_404_naming_an_unknown_recipe(client, real_catalog):
    response = client.get(detail_url("no-such-recipe"))

    assert response.status_code == 404
    assert "No recipe named “no-such-recipe”" in response.content.decode()


def test_it_escapes_the_name_in_a_404(client, real_catalog):
    hostile = "<img src=x onerror=alert(1)>"
    response = client.get(detail_url(hostile))

    assert response.status_code == 404
    assert hostile not in response.content.decode()
    assert "&lt;img src=x onerror=alert(1)&gt;" in response.content.decode()


def test_it_says_when_there_is_no_earlier_version(client):
    RecipeFactory(catalog=make_older(CatalogFactory()), name="only-in-the-older-one")
    recipe = RecipeFactory(catalog=CatalogFactory())

    html = client.get(detail_url(recipe.name)).content.decode()

    assert "No earlier catalog version contains this recipe" in html


def test_with_one_catalog_version_there_is_no_diff_section(client):
    Catalog.objects.all().delete()  # rolled back after the test
    recipe = RecipeFactory(catalog=CatalogFactory())

    html = client.get(detail_url(recipe.name)).content.decode()

    assert 'id="diff"' not in html
    assert "Changes against an earlier catalog version" not in html
    # A diff asked for explicitly still answers (and names the unknown version).
    response = client.get(detail_url(recipe.name) + "?against=999999")
    assert response.status_code == 400
    assert 'id="diff"' in response.content.decode()


# --- the diff against an earlier catalog version ---------------------------------------------


def test_it_diffs_against_the_previous_version_holding_the_recipe(client):
    oldest = make_older(CatalogFactory(), days=3)
    RecipeFactory(catalog=oldest, name="r", deterministic_yaml="a: 1\nb: 0\n")
    middle = make_older(CatalogFactory(), days=2)  # an earlier version without the recipe
    RecipeFactory(catalog=middle, name="other")
    current = CatalogFactory()
    RecipeFactory(catalog=current, name="r", deterministic_yaml="a: 1\nb: 2\n")

    html = client.get(detail_url("r")).content.decode()

    assert f"Against catalog #{oldest.pk}" in html
    assert '<span class="diff-line diff-line--del">-b: 0</span>' in html
    assert '<span class="diff-line diff-line--add">+b: 2</span>' in html
    assert '<span class="diff-line diff-line--ctx"> a: 1</span>' in html
    assert f'<option value="{middle.pk}">' in html
    assert "(not in that version)" in html


def test_it_says_identical_and_not_in_that_version_honestly(client):
    older = make_older(CatalogFactory(), days=2)
    RecipeFactory(catalog=older, name="same", deterministic_yaml="a: 1\n")
    without = make_older(CatalogFactory(), days=1)
    current = CatalogFactory()
    RecipeFactory(catalog=current, name="same", deterministic_yaml="a: 1\n")

    identical = client.get(detail_url("same")).content.decode()
    absent = client.get(detail_url("same"), {"against": without.pk}).content.decode()

    assert f"Identical to catalog #{older.pk}" in identical
    assert f"Catalog #{without.pk} has no recipe named" in absent
    assert "not in that version" in absent


def test_it_rejects_an_unknown_catalog_to_diff_against(client):
    recipe = RecipeFactory(catalog=CatalogFactory())

    response = client.get(detail_url(recipe.name), {"against": "99999<x>"})

    assert response.status_code == 400
    html = response.content.decode()
    assert "There is no catalog version “99999&lt;x&gt;”" in html
    assert recipe.digest in html  # the rest of the page still renders


def test_its_diff_picker_is_a_plain_form_that_lands_on_the_diff(client):
    older = make_older(CatalogFactory())
    RecipeFactory(catalog=older, name="r", deterministic_yaml="a: 1\n")
    RecipeFactory(catalog=CatalogFactory(), name="r", deterministic_yaml="a: 2\n")

    html = client.get(detail_url("r"), {"against": older.pk}).content.decode()

    assert '<form class="diff-picker" method="get" action="/recipes/r/#diff">' in html
    assert "hx-" not in html.split('<section id="diff"')[1].split("</section>")[0]
    assert "+a: 2" in html


def test_its_pickers_keep_each_others_choices(client):
    """Plain GET forms reload the page: each carries what the other sections show."""
    older = make_older(CatalogFactory())
    RecipeFactory(catalog=older, name="r", deterministic_yaml="a: 1\n")
    RecipeFactory(catalog=CatalogFactory(), name="r", deterministic_yaml="a: 2\n")

    html = client.get(detail_url("r"), {"against": older.pk, "signers": "all"}).content.decode()

    lens_form = html.split('<form class="lens-picker"')[1].split("</form>")[0]
    diff_form = html.split('<form class="diff-picker"')[1].split("</form>")[0]
    assert f'<input type="hidden" name="against" value="{older.pk}">' in lens_form
    assert '<input type="hidden" name="signers" value="all">' in lens_form
    assert '<input type="hidden" name="signers" value="all">' in diff_form
    assert 'name="against"' not in diff_form.replace('<select id="against" name="against">', "")


def test_it_diffs_a_real_recipe_across_two_imported_catalog_versions(
    client, real_catalog, real_tree_files
):
    path = f"overlays/{KUBEFLOW}.yaml"
    files = dict(real_tree_files)
    assert 'value: ">= 1.32.4"' in files[path]
    files[path] = files[path].replace('value: ">= 1.32.4"', 'value: ">= 1.33.0"')
    changed = catalog_import(files=files, source="modified copy", aicr_version="dev").catalog

    detail = client.get(detail_url(KUBEFLOW)).content.decode()
    sibling = client.get(detail_url("h100-eks-ubuntu-training-slurm")).content.decode()
    listing = client.get(list_url(), {"service": "eks", "accelerator": "h100"}).content.decode()

    assert f"Against catalog #{real_catalog.pk}" in detail
    assert re.search(r'diff-line--del">-\s+value: \S*&gt;= 1\.32\.4', detail)
    assert re.search(r'diff-line--add">\+\s+value: \S*&gt;= 1\.33\.0', detail)
    assert f"Identical to catalog #{real_catalog.pk}" in sibling
    row = listing[listing.index(f">{KUBEFLOW}</a>") :].split("</tr>")[0]
    assert ">changed</span>" in row
    # The earlier version stays browsable, its recipe page pointing at the current one.
    old = client.get(detail_url(KUBEFLOW), {"catalog": real_catalog.pk}).content.decode()
    assert "an earlier version" in old
    assert f"/resolved.yaml?catalog={real_catalog.pk}" in old
    assert f"current catalog (#{changed.pk})" in old

"""The consensus on recipe pages: the grid and its lens on the detail page, the badge and the
``consensus`` filter on the list page and in the recipe API."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from evidence_app.consensus.grid import COUNTED_COLUMNS_SHOWN
from evidence_app.corroborate import CONFIRMED, CONTESTED, FAILING, PARTIAL, SINGLE, UNTESTED
from evidence_app.models import Evidence
from recipes_app.models import Catalog, Recipe
from tests.evidence_factories import EXAMPLE_RECIPE, EvidenceFactory, SignerFactory
from tests.factories import CatalogFactory, RecipeFactory

pytestmark = pytest.mark.django_db

HOSTILE = '<script>alert("x")</script>\'"; rm -rf ~ $(id) `id` &amp;'
LONG = "A" * 4096
CHECKS = {
    "deployment": [
        {"name": "operator-health", "thresholds": []},
        {"name": "expected-resources", "thresholds": []},
    ],
    "performance": [
        {
            "name": "nccl-all-reduce-bw",
            "thresholds": [{"name": "nccl-all-reduce-bw", "value": ">= 300"}],
        }
    ],
}


@pytest.fixture
def catalog() -> Catalog:
    """A catalog newer than the real one, so it is the current one."""
    return CatalogFactory()


@pytest.fixture
def recipe(catalog: Catalog) -> Recipe:
    return RecipeFactory(catalog=catalog, checks=CHECKS)


def detail_url(name: str) -> str:
    return reverse("recipes:detail", args=[name])


def deployment(**by_name: str) -> dict[str, Any]:
    return {"deployment": {k.replace("_", "-"): {"status": v} for k, v in by_name.items()}}


def grid_rows(page: str) -> dict[str, str]:
    """``{"phase/check": state}`` of the grid's rows."""
    return {
        html.unescape(check): state
        for check, state in re.findall(
            r'<tr class="check-row" data-check="([^"]*)" data-state="([A-Z]+)">', page
        )
    }


def phase_states(page: str) -> dict[str, str]:
    return dict(
        re.findall(r'<tr class="phase-row" data-phase="([a-z]+)" data-state="([A-Z]+)">', page)
    )


def recipe_state(page: str) -> str:
    found = re.search(r'data-recipe-state="([A-Z]+)"', page)
    assert found is not None
    return found.group(1)


def consensus_section(page: str) -> str:
    start = page.index('<section id="consensus"')
    return page[start : page.index("</section>", start)]


# --- the grid -------------------------------------------------------------------------------


def test_it_shows_the_grid_with_states_rollups_and_signers(client: Any, recipe: Recipe) -> None:
    nvidia = SignerFactory(label="NVIDIA UAT", signer_class="first-party")
    acme = SignerFactory(label="acme/lab")
    stranger = SignerFactory(label="stranger/fork", counted=False, signer_class="reported")
    EvidenceFactory(
        recipe=recipe,
        signer=nvidia,
        check_results={
            **deployment(operator_health="passed"),
            "performance": {"nccl-all-reduce-bw": {"status": "passed"}},
        },
    )
    EvidenceFactory(
        recipe=recipe,
        signer=acme,
        check_results={
            **deployment(operator_health="passed"),
            "performance": {"nccl-all-reduce-bw": {"status": "failed"}},
        },
    )
    EvidenceFactory(
        recipe=recipe, signer=stranger, check_results=deployment(operator_health="failed")
    )

    response = client.get(detail_url(recipe.name))

    assert response.status_code == 200
    page = response.content.decode()
    assert grid_rows(page) == {
        "deployment/expected-resources": UNTESTED,
        "deployment/operator-health": CONFIRMED,
        "performance/nccl-all-reduce-bw": CONTESTED,
    }
    assert phase_states(page) == {
        "deployment": PARTIAL,
        "conformance": UNTESTED,
        "performance": CONTESTED,
    }
    assert recipe_state(page) == CONTESTED
    section = consensus_section(page)
    # Columns: counted signers first (by label), then the reported one.
    assert re.findall(r'class="signer-col__name"[^>]*>([^<]+)<', section) == [
        "acme/lab",
        "NVIDIA UAT",
        "stranger/fork",
    ]
    header = section[section.index("<thead>") : section.index("</thead>")]
    assert header.count('class="badge badge--reported">reported</span>') == 1
    assert "+1 reported" in section
    assert "nccl-all-reduce-bw &gt;= 300" in section  # the threshold next to the check
    # Cells name the run: AICR and Kubernetes versions and the date.
    assert "v0.19.0 · k8s 1.33.0 ·" in section
    assert section.count('class="cell cell--pass') == 3
    assert section.count('class="cell cell--fail') == 2


def test_it_switches_the_aicr_version_lens_with_a_plain_form(client: Any, recipe: Recipe) -> None:
    now = timezone.now()
    a, b = SignerFactory(label="a"), SignerFactory(label="b")
    EvidenceFactory(
        recipe=recipe,
        signer=a,
        aicr_version="v0.14.0",
        attested_at=now - timedelta(days=3),
        check_results=deployment(operator_health="passed"),
    )
    EvidenceFactory(
        recipe=recipe,
        signer=a,
        aicr_version="v1.0.0",
        attested_at=now - timedelta(days=1),
        check_results=deployment(operator_health="failed"),
    )
    EvidenceFactory(
        recipe=recipe,
        signer=b,
        aicr_version="v0.14.0",
        attested_at=now - timedelta(days=2),
        check_results=deployment(operator_health="passed"),
    )

    full = client.get(detail_url(recipe.name)).content.decode()
    lens = client.get(detail_url(recipe.name), {"lens": "v0.14.0"})

    assert grid_rows(full)["deployment/operator-health"] == CONTESTED
    assert '<option value="v1.0.0">AICR v1.0.0</option><option value="v0.14.0">' in full
    action = f'action="{detail_url(recipe.name)}#consensus"'
    assert f'<form class="lens-picker" method="get" {action}>' in full
    assert lens.status_code == 200
    body = lens.content.decode()
    assert grid_rows(body)["deployment/operator-health"] == CONFIRMED
    assert '<option value="v0.14.0" selected>' in body
    assert "Strict same-version consensus" in body
    strict = client.get(detail_url(recipe.name), {"lens": "v1.0.0"}).content.decode()
    assert grid_rows(strict)["deployment/operator-health"] == FAILING


def test_it_says_when_a_lens_names_no_version(client: Any, recipe: Recipe) -> None:
    EvidenceFactory(recipe=recipe, check_results=deployment(operator_health="passed"))

    response = client.get(detail_url(recipe.name), {"lens": HOSTILE})

    assert response.status_code == 200
    page = response.content.decode()
    assert "No counted or reported evidence was produced with AICR version" in page
    assert "<script>alert" not in page
    assert grid_rows(page)["deployment/operator-health"] == SINGLE


def test_it_labels_demo_simulated_and_withdrawn_evidence(client: Any, recipe: Recipe) -> None:
    signer = SignerFactory(label="server")
    EvidenceFactory(
        recipe=recipe,
        signer=signer,
        is_demo=True,
        attested_at=timezone.now() - timedelta(hours=2),
        check_results=deployment(operator_health="passed"),
    )
    EvidenceFactory(
        recipe=recipe,
        signer=signer,
        is_simulated=True,
        check_results=deployment(operator_health="failed"),
    )
    EvidenceFactory(
        recipe=recipe,
        withdrawn_at=timezone.now(),
        withdrawal_reason="ran on the wrong cluster",
        check_results=deployment(operator_health="failed"),
    )

    page = client.get(detail_url(recipe.name)).content.decode()

    section = consensus_section(page)
    assert grid_rows(page)["deployment/operator-health"] == SINGLE
    header = section[section.index("<thead>") : section.index("</thead>")]
    assert ">DEMO</span>" in header
    assert 'class="badge badge--simulated">simulated</span>' in header
    assert ">SIMULATED</span>" in header
    assert ">WITHDRAWN</span>" not in header  # withdrawn evidence has no column
    assert ">WITHDRAWN</span>" in section
    assert 'class="evidence-row is-withdrawn"' in section
    assert "ran on the wrong cluster" in section
    assert "Withdrawn on " in section  # the stale reason's sentence


def test_it_shows_staleness_with_its_reason(client: Any, recipe: Recipe) -> None:
    EvidenceFactory(
        recipe=recipe,
        attested_at=timezone.now() - timedelta(days=45),
        check_results=deployment(operator_health="passed"),
    )

    section = consensus_section(client.get(detail_url(recipe.name)).content.decode())

    assert "stale: older-than-30-days" in section
    assert "days ago" in section
    assert "older than 30 days is stale" in section


def test_it_says_when_evidence_has_only_a_phase_summary(client: Any, recipe: Recipe) -> None:
    EvidenceFactory(recipe=recipe, check_results={})

    section = consensus_section(client.get(detail_url(recipe.name)).content.decode())

    assert "phase summary only" in section
    assert "without per-check CTRF reports" in section
    assert "The predicate's summary for this phase (claimed)" in section


def test_it_says_when_there_is_no_evidence(client: Any, recipe: Recipe) -> None:
    page = client.get(detail_url(recipe.name)).content.decode()

    assert recipe_state(page) == UNTESTED
    assert "No verified evidence for this recipe" in page
    assert set(grid_rows(page).values()) == {UNTESTED}
    assert reverse("evidence:new") in consensus_section(page)


def test_it_escapes_hostile_predicate_strings_everywhere(client: Any, recipe: Recipe) -> None:
    signer = SignerFactory(label=HOSTILE, identity=f"https://github.com/{HOSTILE}/{LONG}"[:4000])
    EvidenceFactory(
        recipe=recipe,
        signer=signer,
        aicr_version=HOSTILE[:100],
        k8s_version=LONG[:100],
        check_results={
            "deployment": {HOSTILE: {"status": "passed"}, LONG: {"status": "failed"}},
        },
        withdrawal_reason="",
    )
    EvidenceFactory(
        recipe=recipe,
        withdrawn_at=timezone.now(),
        withdrawal_reason=HOSTILE + LONG[:900],
        check_results=deployment(operator_health="passed"),
    )

    response = client.get(detail_url(recipe.name))

    page = response.content.decode()
    assert response.status_code == 200
    assert "<script>alert" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    rows = grid_rows(page)
    assert rows[f"deployment/{HOSTILE}"] == SINGLE
    assert rows[f"deployment/{LONG}"] == FAILING


def test_it_reads_the_recipe_page_in_constant_queries(client: Any, recipe: Recipe) -> None:
    def queries_for(count: int) -> int:
        Evidence.objects.filter(recipe_name=recipe.name).delete()
        for i in range(count):
            EvidenceFactory(
                recipe=recipe,
                is_simulated=i % 3 == 1,
                withdrawn_at=timezone.now() if i % 5 == 4 else None,
                withdrawal_reason="bad" if i % 5 == 4 else "",
                check_results=deployment(operator_health="passed" if i % 2 else "failed"),
            )
        with CaptureQueriesContext(connection) as queries:
            response = client.get(detail_url(recipe.name))
        assert response.status_code == 200
        return len(queries)

    queries_for(1)  # warm the per-process validator catalog cache
    one, thirty = queries_for(1), queries_for(30)
    assert one == thirty
    # 20 for the consensus page (5 of them the stored columns: the expiry check, whether the
    # name is built, the shown columns' runs, the counts per group, the row tallies), up to 6
    # for the qualifications section (its count, its rows, staleness facts, the simulated-run
    # count).
    assert one <= 26


# --- the list page --------------------------------------------------------------------------


def list_states(page: str) -> dict[str, str]:
    return dict(
        re.findall(
            r'<td class="recipe-name">\s*<a href="[^"]*">([^<]+)</a>.*?'
            r'<td class="consensus-cell" data-consensus="([A-Z]+)">',
            page,
            re.S,
        )
    )


@pytest.fixture
def listed(catalog: Catalog) -> dict[str, Recipe]:
    checks = {"deployment": [{"name": "operator-health", "thresholds": []}]}
    recipes = {
        state: RecipeFactory(catalog=catalog, checks=checks, name=f"r-{state.lower()}")
        for state in (CONFIRMED, SINGLE, CONTESTED, FAILING, UNTESTED)
    }
    a, b = SignerFactory(), SignerFactory()
    for state, results in (
        (CONFIRMED, ("passed", "passed")),
        (SINGLE, ("passed",)),
        (CONTESTED, ("passed", "failed")),
        (FAILING, ("failed",)),
    ):
        for signer, status in zip((a, b), results, strict=False):
            EvidenceFactory(
                recipe=recipes[state],
                signer=signer,
                check_results=deployment(operator_health=status),
            )
    return recipes


def test_it_shows_a_consensus_badge_per_recipe(client: Any, listed: dict[str, Recipe]) -> None:
    page = client.get(reverse("recipes:list")).content.decode()

    assert list_states(page) == {recipe.name: state for state, recipe in listed.items()}
    assert 'href="/recipes/r-confirmed/#consensus"' in page


@pytest.mark.parametrize("state", [CONFIRMED, SINGLE, CONTESTED, FAILING, UNTESTED, PARTIAL])
def test_it_filters_the_list_by_consensus(
    client: Any, listed: dict[str, Recipe], state: str
) -> None:
    response = client.get(reverse("recipes:list"), {"consensus": state})

    page = response.content.decode()
    expected = {listed[state].name: state} if state in listed else {}
    assert response.status_code == 200
    assert list_states(page) == expected
    assert f'<option value="{state}" title="' in page
    assert re.search(rf'<option value="{state}" title="[^"]*" selected>', page)


def test_its_facet_counts_respect_the_consensus_filter(
    client: Any, listed: dict[str, Recipe]
) -> None:
    everything = client.get(reverse("recipes:list")).content.decode()
    contested = client.get(reverse("recipes:list"), {"consensus": CONTESTED}).content.decode()

    assert '<option value="eks">eks (5)</option>' in everything
    assert '<option value="eks">eks (1)</option>' in contested


def test_it_filters_by_consensus_in_place_and_keeps_it_in_the_url(
    client: Any, listed: dict[str, Recipe]
) -> None:
    response = client.get(
        reverse("recipes:list"),
        {"consensus": CONTESTED, "service": "eks"},
        headers={"HX-Request": "true", "HX-Target": "results"},
    )

    assert list_states(response.content.decode()) == {listed[CONTESTED].name: CONTESTED}
    assert response["HX-Push-Url"] == "/recipes/?service=eks&consensus=CONTESTED"


def test_it_rejects_an_unknown_consensus_state(client: Any, listed: dict[str, Recipe]) -> None:
    response = client.get(reverse("recipes:list"), {"consensus": HOSTILE})

    page = response.content.decode()
    assert response.status_code == 400
    assert "consensus:" in page
    assert "<script>alert" not in page


def test_it_lists_badges_in_constant_queries(client: Any, catalog: Catalog) -> None:
    signers = [SignerFactory(), SignerFactory()]

    def queries_for(count: int) -> tuple[int, int]:
        for recipe in RecipeFactory.create_batch(count, catalog=catalog):
            for signer in signers:
                EvidenceFactory(
                    recipe=recipe,
                    signer=signer,
                    check_results=deployment(operator_health="passed"),
                )
        with CaptureQueriesContext(connection) as miss:
            first = client.get(reverse("recipes:list"))
        with CaptureQueriesContext(connection) as hit:
            second = client.get(reverse("recipes:list"))
        assert list_states(first.content.decode()) == list_states(second.content.decode())
        assert set(list_states(first.content.decode()).values()) == {PARTIAL}
        return len(miss), len(hit)

    queries_for(1)  # the validator catalog version is read once per catalog and process
    one, thirty = queries_for(1), queries_for(30)
    assert one == thirty
    assert one[1] <= 6  # the recipe pages' 5, plus the evidence generation check


# --- the recipe API ---------------------------------------------------------------------------


def test_the_api_lists_and_filters_by_consensus(client: Any, listed: dict[str, Recipe]) -> None:
    everything = client.get("/api/v1/recipes/").json()["results"]
    confirmed = client.get("/api/v1/recipes/", {"consensus": CONFIRMED}).json()["results"]
    bad = client.get("/api/v1/recipes/", {"consensus": "GREEN"})

    assert {r["name"]: r["consensus"] for r in everything} == {
        recipe.name: state for state, recipe in listed.items()
    }
    assert [r["name"] for r in confirmed] == [listed[CONFIRMED].name]
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["field"] == "consensus"


def test_the_api_sums_up_one_recipes_evidence(client: Any, listed: dict[str, Recipe]) -> None:
    name = listed[CONTESTED].name

    body = client.get(f"/api/v1/recipes/{name}/").json()

    assert body["consensus"] == CONTESTED
    summary = body["evidence_summary"]
    assert summary["phase_rollup"] == {
        "deployment": CONTESTED,
        "conformance": UNTESTED,
        "performance": UNTESTED,
    }
    assert summary["counted_signers"] == 2
    assert summary["evidence_count"] == 2
    assert summary["checks"]["contested"] == 1
    assert summary["aicr_versions"] == ["v0.19.0"]
    assert summary["evidence_url"].endswith(f"/api/v1/evidence/?recipe={name}")


def test_a_real_recipe_page_shows_its_declared_checks_in_the_grid(
    client: Any, real_catalog: Catalog
) -> None:
    """On the real catalog (the current one when no other was made in this test)."""
    recipe = Recipe.objects.get(catalog=real_catalog, name=EXAMPLE_RECIPE)

    page = client.get(detail_url(recipe.name)).content.decode()

    declared = {
        f"{phase}/{check['name']}"
        for phase, checks in recipe.checks.items()
        if phase != "readiness"
        for check in checks
    }
    assert set(grid_rows(page)) == declared


# --- one recipe-level state everywhere, and what it rests on ----------------------------------


def list_cell(page: str, name: str) -> str:
    """The list page's consensus cell of recipe ``name``."""
    start = page.index(f">{name}</a>")
    cell = page.index('<td class="consensus-cell"', start)
    return page[cell : page.index("</td>", cell)]


def api_row(client: Any, name: str) -> dict[str, Any]:
    rows = client.get("/api/v1/recipes/").json()["results"]
    return next(r for r in rows if r["name"] == name)


def test_an_uncounted_signers_extra_check_changes_no_state_anywhere(
    client: Any, catalog: Catalog
) -> None:
    """A reported signer (and a simulated run) adding a check name the counted signers did not
    run used to turn the page's CONFIRMED into PARTIAL while the list said CONFIRMED."""
    checks = {"deployment": [{"name": "operator-health", "thresholds": []}]}
    recipe = RecipeFactory(catalog=catalog, checks=checks)
    a, b = SignerFactory(label="a"), SignerFactory(label="b")
    stranger = SignerFactory(label="stranger/fork", counted=False, signer_class="reported")
    for signer in (a, b):
        EvidenceFactory(
            recipe=recipe, signer=signer, check_results=deployment(operator_health="passed")
        )
    EvidenceFactory(
        recipe=recipe,
        signer=stranger,
        check_results=deployment(operator_health="passed", extra_check="passed"),
    )
    EvidenceFactory(
        recipe=recipe,
        signer=a,
        is_simulated=True,
        check_results=deployment(operator_health="failed", simulated_only="passed"),
    )

    page = client.get(detail_url(recipe.name)).content.decode()
    listed = client.get(reverse("recipes:list")).content.decode()
    filtered = client.get(reverse("recipes:list"), {"consensus": CONFIRMED}).content.decode()
    detail = client.get(f"/api/v1/recipes/{recipe.name}/").json()

    assert recipe_state(page) == CONFIRMED
    assert phase_states(page)["deployment"] == CONFIRMED
    assert list_states(listed)[recipe.name] == CONFIRMED
    assert list_states(filtered) == {recipe.name: CONFIRMED}
    assert api_row(client, recipe.name)["consensus"] == CONFIRMED
    assert detail["consensus"] == CONFIRMED
    assert detail["evidence_summary"]["phase_rollup"]["deployment"] == CONFIRMED
    # The uncounted runs' checks are still shown, marked as outside the rollup.
    rows = grid_rows(page)
    assert rows["deployment/extra-check"] == UNTESTED
    assert rows["deployment/simulated-only"] == UNTESTED
    assert consensus_section(page).count(">not in the rollup</span>") == 2


def test_a_counted_signers_extra_check_is_part_of_the_state_everywhere(
    client: Any, catalog: Catalog
) -> None:
    checks = {"deployment": [{"name": "operator-health", "thresholds": []}]}
    recipe = RecipeFactory(catalog=catalog, checks=checks)
    EvidenceFactory(recipe=recipe, check_results=deployment(operator_health="passed"))
    EvidenceFactory(
        recipe=recipe, check_results=deployment(operator_health="passed", extra_check="skipped")
    )

    page = client.get(detail_url(recipe.name)).content.decode()
    listed = client.get(reverse("recipes:list")).content.decode()

    assert recipe_state(page) == PARTIAL
    assert list_states(listed)[recipe.name] == PARTIAL
    assert api_row(client, recipe.name)["consensus"] == PARTIAL


def test_it_labels_every_state_derived_from_demo_evidence(client: Any, catalog: Catalog) -> None:
    demo = RecipeFactory(catalog=catalog, checks=CHECKS, name="r-demo")
    real = RecipeFactory(catalog=catalog, checks=CHECKS, name="r-real")
    EvidenceFactory(recipe=demo, is_demo=True, check_results=deployment(operator_health="passed"))
    EvidenceFactory(recipe=real, check_results=deployment(operator_health="passed"))
    # A reported signer's demo evidence feeds no state: no label.
    EvidenceFactory(
        recipe=real,
        is_demo=True,
        signer=SignerFactory(counted=False, signer_class="reported"),
        check_results=deployment(operator_health="passed"),
    )

    listed = client.get(reverse("recipes:list")).content.decode()
    page = client.get(detail_url(demo.name)).content.decode()
    real_page = client.get(detail_url(real.name)).content.decode()

    assert "data-consensus-demo" in list_cell(listed, demo.name)
    # One state badge in a list row: "demo" in its title and, for a screen reader, in words.
    assert ">DEMO</span>" not in list_cell(listed, demo.name)
    assert 'title="DEMO: rests on evidence signed with a demo key' in list_cell(listed, demo.name)
    assert '<span class="sr-only"> (demo)</span>' in list_cell(listed, demo.name)
    assert "data-consensus-demo" not in list_cell(listed, real.name)
    head = page[page.index('<div class="page-head') : page.index('<section id="consensus"')]
    assert "data-consensus-demo" in head
    section = consensus_section(page)
    rollups = section[section.index('<ul class="rollups"') : section.index("</ul>")]
    assert rollups.count(">DEMO</span>") == 1  # deployment only
    assert "signed with a demo key" in section
    assert "data-consensus-demo" not in real_page
    assert api_row(client, demo.name)["consensus_includes_demo"] is True
    assert api_row(client, real.name)["consensus_includes_demo"] is False
    body = client.get(f"/api/v1/recipes/{demo.name}/").json()
    assert body["consensus_includes_demo"] is True
    assert body["evidence_summary"]["phase_includes_demo"] == {
        "deployment": True,
        "conformance": False,
        "performance": False,
    }
    assert client.get(f"/api/v1/recipes/{real.name}/").json()["consensus_includes_demo"] is False


def test_it_says_how_many_counted_runs_behind_a_state_are_stale(
    client: Any, catalog: Catalog
) -> None:
    checks = {"deployment": [{"name": "operator-health", "thresholds": []}]}
    recipe = RecipeFactory(catalog=catalog, checks=checks)
    fresh = RecipeFactory(catalog=catalog, checks=checks)
    for days in (45, 60, 0):
        EvidenceFactory(
            recipe=recipe,
            attested_at=timezone.now() - timedelta(days=days),
            check_results=deployment(operator_health="passed"),
        )
    EvidenceFactory(recipe=fresh, check_results=deployment(operator_health="passed"))

    listed = client.get(reverse("recipes:list")).content.decode()
    page = client.get(detail_url(recipe.name)).content.decode()
    detail = client.get(f"/api/v1/recipes/{recipe.name}/").json()

    cell = list_cell(listed, recipe.name)
    assert "2 of 3 counted runs stale" in cell
    assert "older-than-30-days (2)" in cell
    assert "stale" not in list_cell(listed, fresh.name)
    head = page[page.index('<div class="page-head') : page.index('<section id="consensus"')]
    assert "2 of 3 counted runs stale" in head
    assert "2 of 3 counted runs stale" in consensus_section(page)
    # On the check's row only as a detail (hover and screen readers): one state per row.
    row = consensus_section(page).split('data-check="deployment/operator-health"')[1]
    row = row[: row.index("</tr>")]
    assert 'data-row-stale="2/3"' in row
    assert "2 of 3 counted results from stale runs" in row
    assert "badge--stale" not in row
    expected = {
        "stale": True,
        "counted_runs": 3,
        "stale_runs": 2,
        "reasons": {"older-than-30-days": 2},
        "summary": "2 of 3 counted runs stale",
    }
    assert detail["consensus_stale"] == expected
    assert api_row(client, recipe.name)["consensus_stale"] == expected
    assert api_row(client, fresh.name)["consensus_stale"]["stale"] is False


def test_it_caps_the_withdrawn_list_and_counts_the_rest(client: Any, recipe: Recipe) -> None:
    for _ in range(25):
        EvidenceFactory(
            recipe=recipe,
            withdrawn_at=timezone.now(),
            withdrawal_reason="bad run",
            check_results=deployment(operator_health="passed"),
        )

    page = client.get(detail_url(recipe.name)).content.decode()
    body = client.get(f"/api/v1/recipes/{recipe.name}/").json()

    section = consensus_section(page)
    withdrawn = section[section.index('<ul class="withdrawn-list">') :]
    assert withdrawn.count('<li class="is-withdrawn">') == 20
    assert "and 5 more withdrawn" in section
    assert body["evidence_summary"]["withdrawn_count"] == 25


def test_it_caps_the_signer_columns_and_shows_all_on_request(client: Any, recipe: Recipe) -> None:
    total = COUNTED_COLUMNS_SHOWN + 3
    for i in range(total):
        EvidenceFactory(
            recipe=recipe,
            attested_at=timezone.now() - timedelta(hours=total - i),
            check_results=deployment(operator_health="failed" if i == 0 else "passed"),
        )

    page = client.get(detail_url(recipe.name)).content.decode()
    section = consensus_section(page)
    assert section.count('<th scope="col" class="signer-col') == COUNTED_COLUMNS_SHOWN
    assert f"Showing {COUNTED_COLUMNS_SHOWN} of {total} counted signers" in section
    assert "all are counted in the states" in section
    assert f"/api/v1/evidence/?recipe={recipe.name}" in section
    # The hidden oldest run's failure still counts.
    assert grid_rows(page)["deployment/operator-health"] == CONTESTED

    every = client.get(detail_url(recipe.name) + "?signers=all").content.decode()
    assert every.count('<th scope="col" class="signer-col') == total
    assert 'name="signers" value="all"' in every
    assert "Show the newest only" in every
    assert grid_rows(every)["deployment/operator-health"] == CONTESTED

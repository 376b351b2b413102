"""What a recipe lacks for CONFIRMED, read from the same rule that computes CONFIRMED.

``corroborate.confirmed_shortfall`` inverts ``compute_consensus`` for one row and
``consensus.rules.confirmed_lacks`` groups the recipe's rows; the recipe page shows the
sentences. Each state case is checked, and that doing what a sentence says reaches CONFIRMED.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from evidence_app.consensus.rules import Run, recipe_consensus
from evidence_app.corroborate import CONFIRMED, CONTESTED, FAILING, PARTIAL, SINGLE, UNTESTED
from tests.evidence_factories import EvidenceFactory, SignerFactory
from tests.factories import CatalogFactory, RecipeFactory

SMI = ("deployment", "check-nvidia-smi")
OPERATOR = ("deployment", "operator-health")


def run(key: str, *, counted: bool = True, **statuses: str) -> Run:
    by_name = {name.replace("_", "-"): status for name, status in statuses.items()}
    return Run(key=key, counted=counted, simulated=False, statuses={"deployment": by_name})


def lacks(declared: list[tuple[str, str]], runs: list[Run]) -> tuple[str, list[str]]:
    consensus = recipe_consensus(declared, runs)
    return consensus.state, [lack.sentence for lack in consensus.lacks_for_confirmed]


@pytest.mark.parametrize(
    ("runs", "state", "sentence"),
    [
        ([], UNTESTED, "needs two independent passing signers on check-nvidia-smi"),
        (
            [run("a", check_nvidia_smi="passed")],
            SINGLE,
            "needs one more independent passing signer on check-nvidia-smi",
        ),
        (
            [run("a", check_nvidia_smi="passed"), run("b", check_nvidia_smi="failed")],
            CONTESTED,
            "needs its one failing signer to pass on check-nvidia-smi",
        ),
        (
            [run("a", check_nvidia_smi="failed")],
            FAILING,
            "needs its one failing signer to pass and one more independent passing signer "
            "on check-nvidia-smi",
        ),
        (
            [run("a", check_nvidia_smi="failed"), run("b", check_nvidia_smi="failed")],
            FAILING,
            "needs its two failing signers to pass on check-nvidia-smi",
        ),
        (
            # A reported (zero-weight) pass helps nothing; a skipped run is not a pass.
            [
                run("a", check_nvidia_smi="passed"),
                run("x", counted=False, check_nvidia_smi="passed"),
                run("b", check_nvidia_smi="skipped"),
            ],
            SINGLE,
            "needs one more independent passing signer on check-nvidia-smi",
        ),
    ],
)
def test_it_says_what_each_state_lacks(runs: list[Run], state: str, sentence: str) -> None:
    assert lacks([SMI], runs) == (state, [sentence])


def test_a_confirmed_recipe_lacks_nothing() -> None:
    runs = [run("a", check_nvidia_smi="passed"), run("b", check_nvidia_smi="passed")]

    assert lacks([SMI], runs) == (CONFIRMED, [])


def test_a_partial_recipe_lacks_only_its_untested_checks() -> None:
    runs = [run("a", check_nvidia_smi="passed"), run("b", check_nvidia_smi="passed")]

    assert lacks([SMI, OPERATOR], runs) == (
        PARTIAL,
        ["needs two independent passing signers on operator-health"],
    )


def test_it_groups_checks_lacking_the_same_and_names_a_few() -> None:
    declared = [("deployment", f"check-{i}") for i in range(5)] + [SMI]
    runs = [run("a", check_nvidia_smi="passed")]

    state, sentences = lacks(declared, runs)

    assert state == PARTIAL
    assert sentences == [
        "needs two independent passing signers on check-0, check-1, check-2 and 2 more checks",
        "needs one more independent passing signer on check-nvidia-smi",
    ]


def test_a_recipe_without_checks_lacks_a_check_with_two_passing_signers() -> None:
    assert lacks([], []) == (
        UNTESTED,
        ["needs two independent passing signers on at least one check"],
    )


@pytest.mark.parametrize(
    "statuses", [(), ("passed",), ("failed",), ("passed", "failed"), ("failed", "failed")]
)
def test_doing_what_it_says_reaches_confirmed(statuses: tuple[str, ...]) -> None:
    """Turn every failing signer to passing and add the passing signers named: CONFIRMED."""
    runs = [run(f"s{i}", check_nvidia_smi=status) for i, status in enumerate(statuses)]
    (lack,) = recipe_consensus([SMI], runs).lacks_for_confirmed

    fixed = [run(r.key, check_nvidia_smi="passed") for r in runs]
    fixed += [
        run(f"new{i}", check_nvidia_smi="passed")
        for i in range(lack.shortfall.more_passing_signers)
    ]
    assert recipe_consensus([SMI], fixed).state == CONFIRMED
    # … and nothing less does: one passing signer fewer stays short of CONFIRMED.
    if len(fixed) > 1:
        assert recipe_consensus([SMI], fixed[:-1]).state != CONFIRMED


@pytest.mark.django_db
def test_the_recipe_page_says_what_it_lacks(client: Any) -> None:
    checks = {"deployment": [{"name": "check-nvidia-smi", "thresholds": []}]}
    recipe = RecipeFactory(catalog=CatalogFactory(), checks=checks)
    EvidenceFactory(
        recipe=recipe,
        signer=SignerFactory(),
        check_results={"deployment": {"check-nvidia-smi": {"status": "passed"}}},
    )

    page = client.get(reverse("recipes:detail", args=[recipe.name])).content.decode()

    start = page.index("data-lacks-confirmed")
    assert (
        "<li>Needs one more independent passing signer on check-nvidia-smi.</li>"
        in page[start : page.index("</div>", start)]
    )


@pytest.mark.django_db
def test_the_list_row_and_the_coverage_cell_say_it_from_the_stored_badge(client: Any) -> None:
    """The list and the home page read what the recipe page computes, from the stored badge
    (no query per row): the recipe page's sentence, shortened."""
    from recipes_app.models import RecipeConsensusState

    checks = {
        "deployment": [
            {"name": "check-nvidia-smi", "thresholds": []},
            {"name": "operator-health", "thresholds": []},
        ]
    }
    recipe = RecipeFactory(catalog=CatalogFactory(), checks=checks)
    passed = {"status": "passed"}
    EvidenceFactory(
        recipe=recipe,
        signer=SignerFactory(),
        check_results={"deployment": {"check-nvidia-smi": passed, "operator-health": passed}},
    )
    recipe.refresh_from_db()
    stored = RecipeConsensusState.objects.get(recipe=recipe).confirmed_lacks
    assert stored == [{"failing": 0, "more": 1, "checks": ["check-nvidia-smi", "operator-health"]}]

    listed = client.get(reverse("recipes:list")).content.decode()
    start = listed.index(f">{recipe.name}</a>")
    row = listed[start : listed.index("</tr>", start)]
    assert (
        '<span class="consensus-lacks" data-lacks-confirmed>needs one more independent passing '
        "signer on check-nvidia-smi and 1 more check</span>" in row
    )

    home = client.get(reverse("home")).content.decode()
    assert (
        '<span class="matrix-lacks" data-lacks-confirmed>needs one more independent passing '
        "signer</span>" in home
    )
    assert "nearest to CONFIRMED needs one more independent passing signer on" in home


@pytest.mark.django_db
def test_a_confirmed_or_untested_row_says_nothing_more(client: Any) -> None:
    checks = {"deployment": [{"name": "check-nvidia-smi", "thresholds": []}]}
    catalog = CatalogFactory()
    confirmed = RecipeFactory(catalog=catalog, checks=checks)
    RecipeFactory(catalog=catalog, checks=checks)  # untested: its state says it
    for _ in range(2):
        EvidenceFactory(
            recipe=confirmed,
            signer=SignerFactory(),
            check_results={"deployment": {"check-nvidia-smi": {"status": "passed"}}},
        )

    listed = client.get(reverse("recipes:list")).content.decode()

    assert 'data-consensus="CONFIRMED"' in listed
    assert "data-lacks-confirmed" not in listed

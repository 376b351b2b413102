"""The facet tallies (issue 22): what the triggers keep always equals a recount of the evidence
rows, whatever wrote them, and the evidence list's options read from them are what a count of
the rows under the other filters gives (the facet rule the options promise)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from evidence_app import list_filters
from evidence_app.models import Evidence, FacetTally, RecipeFacetTally, Verdict
from evidence_app.services import facet_tallies
from evidence_app.services.withdrawal import evidence_withdraw
from tests.evidence_factories import EvidenceFactory, SignerFactory
from tests.factories import CatalogFactory, RecipeFactory

pytestmark = pytest.mark.django_db


def assert_equal_to_a_recount() -> None:
    assert facet_tallies.facets_stored() == facet_tallies.facets_recount()


def test_inserts_moves_and_deletes_keep_the_facets_equal_to_a_recount() -> None:
    catalog = CatalogFactory()
    alpha, beta = (RecipeFactory(catalog=catalog, name=n) for n in ("alpha-recipe", "beta-recipe"))
    lab, other = SignerFactory(label="org/lab"), SignerFactory(label="org/other")
    rows = [
        EvidenceFactory(recipe=alpha, signer=lab),
        EvidenceFactory(recipe=alpha, signer=lab, verdict=Verdict.INVALID),
        EvidenceFactory(recipe=beta, signer=other),
        EvidenceFactory(recipe=beta, signer=lab),
    ]
    assert_equal_to_a_recount()
    assert RecipeFacetTally.objects.get(recipe_name="alpha-recipe", verdict="").records == 2
    # Two signers of one recipe add to two rows of it (their stripes), never wait on one.
    assert RecipeFacetTally.objects.filter(recipe_name="beta-recipe", verdict="").count() == 2
    assert (
        FacetTally.objects.get(recipe_name="alpha-recipe", signer=lab, verdict="invalid").records
        == 1
    )

    evidence_withdraw(evidence=rows[0], by=None, roles={"maintainer"}, reason="bad run")
    assert_equal_to_a_recount()
    # Writes no service makes (an admin edit, a data migration): each key that moves.
    Evidence.objects.filter(pk=rows[1].pk).update(verdict=Verdict.REJECTED)
    assert_equal_to_a_recount()
    Evidence.objects.filter(pk=rows[2].pk).update(signer=lab, recipe_name="gamma-recipe")
    assert_equal_to_a_recount()
    row = Evidence.objects.get(pk=rows[3].pk)
    row.save()  # every column written, none changed: nothing moves
    assert_equal_to_a_recount()
    Evidence.objects.filter(pk=rows[3].pk).delete()
    assert_equal_to_a_recount()
    assert FacetTally.objects.get(recipe_name="beta-recipe", signer=lab, verdict="").records == 0


def test_a_rebuild_equals_a_recount() -> None:
    catalog = CatalogFactory()
    recipe = RecipeFactory(catalog=catalog, name="alpha-recipe")
    signers = [SignerFactory(label=f"org/lab{n}") for n in range(3)]
    for n in range(7):
        verdict = Verdict.INVALID if n % 3 == 0 else Verdict.VERIFIED
        EvidenceFactory(recipe=recipe, signer=signers[n % 3], verdict=verdict)
    FacetTally.objects.update(records=99)  # out of step, as an old backup would be
    RecipeFacetTally.objects.all().delete()
    # Each signer has one verdict here: (recipe, signer) 3 * 2 rows, the recipe's 3 * 2 (one
    # stripe per signer: three ids in a row), signer 3 * 2.
    assert facet_tallies.facets_rebuild() == 6 + 6 + 6
    assert_equal_to_a_recount()


def _counted(rows: list[tuple[str, str, str]], chosen: dict[str, str], name: str) -> Counter[str]:
    """A brute-force count of the rows' ``name`` values under the other chosen filters."""
    index = {"recipe": 0, "signer": 1, "verdict": 2}
    others = [(index[o], v) for o, v in chosen.items() if o != name]
    return Counter(r[index[name]] for r in rows if all(r[i] == v for i, v in others))


def test_every_option_count_equals_a_count_of_the_rows_under_the_other_filters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(list_filters.MAX_OPTIONS, "recipe", 2)
    monkeypatch.setitem(list_filters.MAX_OPTIONS, "signer", 2)
    catalog = CatalogFactory()
    recipes = [RecipeFactory(catalog=catalog, name=f"recipe-{n}") for n in range(4)]
    signers = [SignerFactory(label=f"lab {n}") for n in range(4)]
    verdicts = [Verdict.VERIFIED, Verdict.INVALID, Verdict.REJECTED]
    for n in range(23):
        EvidenceFactory(
            recipe=recipes[(n * n) % 4],
            signer=signers[n % 4 if n % 5 else 0],
            verdict=verdicts[(n // 2) % 3],
        )
    rows = [
        (r, s, v)
        for r, s, v in Evidence.objects.values_list("recipe_name", "signer__slug", "verdict")
    ]
    values = {
        "recipe": [None, "recipe-1", "recipe-3", "nobody"],
        "signer": [None, signers[0].slug, signers[3].slug],
        "verdict": [None, "verified", "rejected"],
    }
    index = {"recipe": 0, "signer": 1, "verdict": 2}
    for recipe, signer, verdict in itertools.product(*values.values()):
        picked = (("recipe", recipe), ("signer", signer), ("verdict", verdict))
        chosen = {k: v for k, v in picked if v is not None}
        filters = list_filters.list_filters(chosen, [])
        assert filters.shown == sum(
            all(r[index[k]] == v for k, v in chosen.items()) for r in rows
        ), chosen
        for shown in filters.filters:
            counted = _counted(rows, chosen, shown.name)
            at_most = list_filters.MAX_OPTIONS[shown.name]
            assert shown.total == sum(counted.values()), (chosen, shown.name)
            options = {o.value: o.count for o in shown.options}
            for value, count in options.items():
                assert count == counted.get(value, 0), (chosen, shown.name, value)
            # The options are values with most records (ties either way), the chosen one
            # added when it is not among them; the rest are counted for the typed field.
            offered = min(at_most, len(counted))
            extra = len(options) - offered
            assert extra == 0 or (extra == 1 and shown.name in chosen), (chosen, shown.name)
            not_offered = [c for v, c in counted.items() if v not in options]
            unchosen = [c for v, c in options.items() if v != chosen.get(shown.name)]
            assert not not_offered or min(unchosen) >= max(not_offered), (chosen, shown.name)
            assert shown.left_out == len(counted) - offered, (chosen, shown.name)

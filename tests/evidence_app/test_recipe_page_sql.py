"""The recipe page's reads besides the consensus columns (issue 22): its newest and newest
withdrawn records, the AICR versions of its lens and its qualifications count, each equal to
the same figure computed in Python over every row of the recipe, with withdrawn, simulated,
failed, uncounted-signer, out-of-range and other recipes' rows beside (SQLite and
PostgreSQL, where the versions come from a skip scan of an index)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from evidence_app.consensus import grid
from evidence_app.consensus.rules import is_counted
from evidence_app.models import Evidence, Signer, Verdict
from evidence_app.qualifications.listing import qualification_listing, recipe_counted
from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory, SignerFactory
from tests.factories import RecipeFactory

pytestmark = pytest.mark.usefixtures("evidence_db")
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
VERSIONS = ("v0.19.0", "v0.20.1", "v1.2.0", "dev", "")
RANGE = ">=0.20.0,<2.0.0"


_MINUTES = itertools.count()


def _add(recipe: Recipe, signer: Signer, n: int, **fields: object) -> None:
    """``n`` records of ``recipe`` by ``signer``, each a minute older than the one before
    (every third sharing the previous one's ``attested_at``: ties order by id), versions in
    turn; ``fields`` override."""
    rows = []
    for i in range(n):
        minute = next(_MINUTES)
        defaults = {
            "aicr_version": VERSIONS[minute % len(VERSIONS)],
            "attested_at": NOW - timedelta(minutes=minute - (i % 3 == 2)),
        }
        rows.append(EvidenceFactory.build(recipe=recipe, signer=signer, **{**defaults, **fields}))
    Evidence.objects.bulk_create(rows)


@pytest.fixture
def recipe() -> Recipe:
    """A recipe with live, withdrawn (more than WITHDRAWN_SHOWN), simulated and failed
    records by two counted signers and an uncounted one, and another recipe's newer rows."""
    recipe, other = RecipeFactory.create_batch(2)
    counted, also, uncounted = SignerFactory(), SignerFactory(), SignerFactory(counted=False)
    withdrawn = {"withdrawn_at": NOW, "withdrawal_reason": "superseded"}
    for signer in (counted, also, uncounted):
        _add(recipe, signer, 9)
        _add(recipe, signer, 9, **withdrawn)
        _add(recipe, signer, 4, is_simulated=True)
        _add(recipe, signer, 2, is_simulated=True, **withdrawn)
        _add(recipe, signer, 3, verdict=Verdict.INVALID)
    _add(other, counted, 6, attested_at=NOW + timedelta(days=1))
    _add(other, counted, 3, attested_at=NOW + timedelta(days=1), **withdrawn)
    return recipe


def _newest_first(recipe: Recipe) -> list[Evidence]:
    rows = Evidence.objects.filter(recipe_name=recipe.name).select_related("signer")
    return sorted(rows, key=lambda e: (e.attested_at, e.pk), reverse=True)


def test_it_lists_the_newest_and_the_newest_withdrawn_records(recipe: Recipe) -> None:
    rows = _newest_first(recipe)
    withdrawn = [e for e in rows if e.withdrawn_at is not None]
    assert len(withdrawn) > grid.WITHDRAWN_SHOWN

    recent, shown, count = grid._recent_and_withdrawn(recipe.name)

    assert [e.pk for e in recent] == [e.pk for e in rows[: grid.RECENT_EVIDENCE]]
    assert [e.pk for e in shown] == [e.pk for e in withdrawn[: grid.WITHDRAWN_SHOWN]]
    assert count == len(withdrawn)


def test_it_lists_withdrawn_records_among_the_newest_once(recipe: Recipe) -> None:
    """The newest records withdrawn too: both lists hold them, each row read once."""
    newest = _newest_first(recipe)[:3]
    Evidence.objects.filter(pk__in=[e.pk for e in newest]).update(
        withdrawn_at=NOW, withdrawal_reason="superseded"
    )
    rows = _newest_first(recipe)
    withdrawn = [e for e in rows if e.withdrawn_at is not None]

    recent, shown, count = grid._recent_and_withdrawn(recipe.name)

    assert [e.pk for e in recent] == [e.pk for e in rows[: grid.RECENT_EVIDENCE]]
    assert [e.pk for e in shown] == [e.pk for e in withdrawn[: grid.WITHDRAWN_SHOWN]]
    assert [e.pk for e in shown[:3]] == [e.pk for e in newest]
    assert count == len(withdrawn)


def test_it_lists_a_recipe_without_withdrawals(recipe: Recipe) -> None:
    Evidence.objects.filter(recipe_name=recipe.name, withdrawn_at__isnull=False).delete()
    rows = _newest_first(recipe)

    recent, shown, count = grid._recent_and_withdrawn(recipe.name)

    assert [e.pk for e in recent] == [e.pk for e in rows[: grid.RECENT_EVIDENCE]]
    assert (shown, count) == ([], 0)
    assert grid._recent_and_withdrawn("no-such-recipe") == ([], [], 0)


def test_its_lens_offers_the_versions_of_eligible_runs(recipe: Recipe) -> None:
    # A withdrawn and a failed run, each the newest and the only one at its version, and a
    # withdrawn newest run at an offered version: none is offered nor moves a version's
    # newest run. A simulated run is eligible: the newest at its version.
    signer = SignerFactory()
    withdrawn = {"withdrawn_at": NOW, "withdrawal_reason": "superseded"}
    later = NOW + timedelta(hours=1)
    _add(recipe, signer, 1, aicr_version="v9.0.0", attested_at=later, **withdrawn)
    _add(recipe, signer, 1, aicr_version="v8.0.0", attested_at=later, verdict=Verdict.REJECTED)
    _add(recipe, signer, 1, aicr_version="v0.19.0", attested_at=later, **withdrawn)
    _add(recipe, signer, 1, aicr_version="v0.20.1", attested_at=later, is_simulated=True)
    newest: dict[str, datetime] = {}
    for e in _newest_first(recipe):
        if e.verdict == Verdict.VERIFIED and e.withdrawn_at is None:
            newest.setdefault(e.aicr_version, e.attested_at)
    mine = Evidence.objects.filter(recipe_name=recipe.name)

    assert sorted(grid._version_pairs(mine, recipe.name)) == sorted(newest.items())
    lens = grid._lens(mine, "", has_evidence=True, recipe_name=recipe.name)
    assert lens.versions == grid._versions_newest_first((v, at) for v, at in newest.items() if v)
    assert set(lens.versions) == {"v0.19.0", "v0.20.1", "v1.2.0", "dev"}
    assert newest["v0.20.1"] == later
    assert newest["v0.19.0"] < later
    assert grid._version_pairs(Evidence.objects.filter(recipe_name="none"), "none") == []


@pytest.mark.parametrize("supported", ["", RANGE], ids=["every-version", "a-range"])
def test_its_qualifications_count_is_its_counted_records(recipe: Recipe, supported: str) -> None:
    with override_settings(AICR_SUPPORTED_RANGE=supported):
        counted = sum(1 for e in _newest_first(recipe) if is_counted(e))
        listing = qualification_listing(params={}, page_number=1, recipe=recipe.name)

        assert 0 < counted < len(_newest_first(recipe))
        assert recipe_counted(recipe.name) == counted
        assert listing.page.paginator.count == counted
        # The same count on /qualifications/ when only the recipe is chosen, and what the
        # rows themselves count to.
        chosen = qualification_listing(params={"recipe": recipe.name}, page_number=1)
        assert chosen.page.paginator.count == counted
        assert chosen.page.paginator.object_list.count() == counted

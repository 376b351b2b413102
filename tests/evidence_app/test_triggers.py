"""The database triggers that keep the evidence tallies exist after ``migrate``, on SQLite and
PostgreSQL alike. SQLite rebuilds a table to add a NOT NULL column and drops its triggers with
the old copy; a migration that does so must put them back (0014 does): a tally that silently
stops counting shows 0 records on ``/signers/``, the home page and the API."""

from __future__ import annotations

import pytest
from django.db import connection

from evidence_app.models import SignerActivity, SignerTally
from recipes_app.models import Recipe
from tests.evidence_factories import EvidenceFactory

#: Per database, every trigger on the evidence table (a new one is added here with its
#: migration, so a lost one fails by name).
EXPECTED = {
    "sqlite": {
        "evidence_signer_tally_insert",
        "evidence_signer_tally_delete",
        "evidence_signer_tally_update",
        "evidence_signer_activity_update",
        "evidence_facet_tally_insert",  # 0015: the evidence list's filter counts
        "evidence_facet_tally_delete",
        "evidence_facet_tally_update",
    },
    "postgresql": {
        "evidence_signer_tally",
        "evidence_facet_tally_insert",
        "evidence_facet_tally_delete",
        "evidence_facet_tally_update",
    },
}


def _triggers() -> set[str]:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' "
                "AND tbl_name = 'evidence_app_evidence'"
            )
        else:
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE NOT tgisinternal "
                "AND tgrelid = 'evidence_app_evidence'::regclass"
            )
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.django_db
def test_every_evidence_trigger_exists_after_migrate() -> None:
    assert _triggers() == EXPECTED[connection.vendor]


@pytest.mark.django_db
def test_a_stored_record_is_tallied(example_recipe: Recipe) -> None:
    evidence = EvidenceFactory(recipe=example_recipe)
    tally = SignerTally.objects.get(signer=evidence.signer)
    assert (tally.records, tally.live) == (1, 1)
    assert SignerActivity.objects.get(signer=evidence.signer).records == 1

"""``SignerTally`` (issue 22): the per-signer aggregates the database triggers keep always equal
a recount of the evidence rows, whatever wrote them; ``/signers/`` and the home page read them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from evidence_app.models import Evidence, SignerActivity, SignerTally
from evidence_app.services import keys, signer_tallies
from evidence_app.services.withdrawal import evidence_withdraw
from recipes_app.models import Recipe
from tests.evidence_factories import (
    EvidenceFactory,
    SignerFactory,
    example_statement,
    signed_example_tarball,
)
from tests.sigstore_private import generate_key, public_pem, sign_dsse_with_key

pytestmark = pytest.mark.django_db


def assert_equal_to_a_recount() -> None:
    assert signer_tallies.tallies_stored() == signer_tallies.tallies_recount()
    assert signer_tallies.activity_stored() == signer_tallies.activity_recount()


def test_inserts_withdrawals_moves_and_deletes_keep_the_tallies_equal_to_a_recount(
    example_recipe: Recipe,
) -> None:
    lab, other = SignerFactory(label="org/lab"), SignerFactory(label="org/other", counted=False)
    rows = [
        EvidenceFactory(recipe=example_recipe, signer=lab, aicr_version="v0.20.1"),
        EvidenceFactory(recipe=example_recipe, signer=lab, aicr_version="v0.19.0"),
        EvidenceFactory(recipe=example_recipe, signer=lab, is_simulated=True),
        EvidenceFactory(recipe=example_recipe, signer=other),
    ]
    assert_equal_to_a_recount()
    assert sum(t.records for t in SignerTally.objects.filter(signer=lab)) == 3
    assert sum(t.live for t in SignerTally.objects.filter(signer=lab)) == 2

    evidence_withdraw(evidence=rows[0], by=None, roles={"maintainer"}, reason="bad run")
    assert_equal_to_a_recount()
    assert sum(t.live for t in SignerTally.objects.filter(signer=lab)) == 1

    # Writes no service makes (an admin edit, a data migration) are kept too.
    Evidence.objects.filter(pk=rows[1].pk).update(signer=other, aicr_version_key="x")
    Evidence.objects.filter(pk=rows[3].pk).update(
        uploaded_at=timezone.now() + timedelta(days=1), is_simulated=True
    )
    assert_equal_to_a_recount()
    Evidence.objects.filter(pk=rows[3].pk).delete()
    assert_equal_to_a_recount()
    Evidence.objects.filter(pk=rows[2].pk).update(withdrawal_reason="unrelated column")
    assert_equal_to_a_recount()


def test_a_rebuild_equals_a_recount(example_recipe: Recipe) -> None:
    signers = [SignerFactory(label=f"org/lab{n}") for n in range(3)]
    for n in range(9):
        EvidenceFactory(recipe=example_recipe, signer=signers[n % 3], is_simulated=n == 4)
    SignerTally.objects.update(records=99, live=99)  # out of step, as an old backup would be
    SignerActivity.objects.update(records=99)
    assert signer_tallies.tallies_rebuild() == 3
    assert_equal_to_a_recount()


def test_an_ingest_is_tallied_in_its_own_statements(ingest: Any, example_recipe: Recipe) -> None:
    key = generate_key("ecdsa-p256")
    keys.signing_key_register(name="lab key", public_key_pem=public_pem(key))
    result = ingest(signed_example_tarball(sign_dsse_with_key(example_statement(), key)))
    assert result.created, result.reason
    assert_equal_to_a_recount()
    tally = SignerTally.objects.get(signer=result.evidence.signer)
    assert (tally.records, tally.live) == (1, 1)
    assert tally.last_uploaded_at == result.evidence.uploaded_at


def test_the_signers_page_and_home_page_figures_equal_a_count_of_the_rows(
    client: Any, example_recipe: Recipe
) -> None:
    lab, reported = SignerFactory(label="org/lab"), SignerFactory(counted=False, label="x/y")
    for n in range(3):
        EvidenceFactory(recipe=example_recipe, signer=lab, is_simulated=n == 2)
    EvidenceFactory(recipe=example_recipe, signer=reported)
    listed = {s.pk: s for s in signer_tallies.signers_annotated()}
    for signer in (lab, reported):
        rows = Evidence.objects.filter(signer=signer)
        assert listed[signer.pk].records == rows.count()
        assert listed[signer.pk].counted_records == rows.counted().count()
        assert listed[signer.pk].last_seen == max(r.uploaded_at for r in rows)
    assert signer_tallies.totals() == (
        Evidence.objects.count(),
        max(e.uploaded_at for e in Evidence.objects.all()),
        Evidence.objects.counted().values("signer").distinct().count(),
    )


def test_the_unfiltered_api_count_is_the_tallied_total_and_equals_a_count(
    client: Any, example_recipe: Recipe
) -> None:
    lab, other = SignerFactory(label="org/lab"), SignerFactory(label="org/other")
    for n in range(3):
        EvidenceFactory(recipe=example_recipe, signer=lab, is_simulated=n == 1)
    EvidenceFactory(recipe=example_recipe, signer=other)
    assert signer_tallies.evidence_total() == Evidence.objects.count() == 4
    assert client.get("/api/v1/evidence/").json()["count"] == 4
    filtered = client.get(f"/api/v1/evidence/?signer={other.slug}").json()
    assert filtered["count"] == len(filtered["results"]) == 1  # a filter counts its rows

"""Migration 0005 gives stored evidence its identity and withdraws duplicates stored before it
(one signed statement re-wrapped into several records)."""

from __future__ import annotations

import gzip
import hashlib

import pytest

from evidence_app.models import Evidence
from evidence_app.services import trust_roots
from recipes_app.models import Catalog, Recipe
from tests.evidence_factories import (
    EXAMPLE_RECIPE,
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    example_statement,
    signed_example_tarball,
)
from tests.migration_steps import migrate_to
from tests.sigstore_private import PrivateSigstore, statement_bytes

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("evidence_app", "0004_evidence_withdrawn_index")]


def test_it_fills_the_identity_and_withdraws_rewrapped_copies(
    private_sigstore: PrivateSigstore, real_catalog: Catalog
) -> None:
    trust_roots.production_root_ensure()
    recipe = Recipe.objects.get(catalog=real_catalog, name=EXAMPLE_RECIPE)
    signed = private_sigstore.sign_dsse(
        example_statement(), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    )
    tarball = signed_example_tarball(signed.bundle)
    wrappers = [tarball, gzip.compress(gzip.decompress(tarball), compresslevel=1), signed.bundle]
    apps = migrate_to(BEFORE)
    try:
        old_signer = apps.get_model("evidence_app", "Signer").objects.create(
            kind="keyless",
            issuer=GITHUB_ISSUER,
            identity=FIRST_PARTY_IDENTITY,
            source_id="a" * 64,
            slug="a" * 32,
            signer_class="first-party",
            counted=True,
            label="first party",
        )
        old_evidence = apps.get_model("evidence_app", "Evidence")
        pks = [
            old_evidence.objects.create(
                sha256=hashlib.sha256(data).hexdigest(),
                content=data,
                size=len(data),
                container="bundle",
                media_type="application/gzip",
                verdict="verified",
                transcript=[],
                signer_id=old_signer.pk,
                recipe_id=recipe.pk,
                recipe_name=recipe.name,
                subject_digest=recipe.digest,
                predicate_type="https://aicr.run/recipe-evidence/v1",
                attested_at="2026-01-01T00:00:00Z",
                predicate={},
            ).pk
            for data in wrappers
        ]
    finally:
        migrate_to()

    rows = {e.pk: e for e in Evidence.objects.all()}
    payload = hashlib.sha256(statement_bytes(example_statement())).hexdigest()
    first, *copies = (rows[pk] for pk in pks)
    assert (first.payload_sha256, first.withdrawn_at) == (payload, None)
    for copy in copies:
        assert copy.payload_sha256 == ""
        assert copy.withdrawn_at is not None
        assert copy.withdrawal_reason.startswith(f"duplicate of evidence #{first.pk}:")
    assert Evidence.objects.counted().count() == 1

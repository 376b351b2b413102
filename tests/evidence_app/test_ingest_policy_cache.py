"""The verification policy is cached in process, but a maintainer's change (a key registered or
revoked, an allowlist published, a trusted root disabled) is seen by the very next upload; and
a verified upload costs a handful of SQL statements."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evidence_app.corroborate.allowlist import source_slug
from evidence_app.models import Evidence, TrustRoot, UploadLog
from evidence_app.services import ingest as ingest_module
from evidence_app.services import keys, signers
from recipes_app.models import Recipe
from tests.evidence_factories import GITHUB_ISSUER, UNKNOWN_IDENTITY, statement_for
from tests.factories import CatalogFactory, RecipeFactory
from tests.sigstore_private import PrivateSigstore, generate_key, public_pem, sign_dsse_with_key

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the policy cache is PostgreSQL only"
)


def _statement(recipe: Recipe, n: int) -> dict[str, Any]:
    return statement_for(recipe, attested_at=datetime.now(UTC) - timedelta(days=1, minutes=n))


def _keyless(instance: PrivateSigstore, recipe: Recipe, n: int, identity: str) -> bytes:
    return instance.sign_dsse(_statement(recipe, n), identity=identity, issuer=GITHUB_ISSUER).bundle


def test_a_registered_then_revoked_key_is_seen_by_the_next_upload(
    ingest: Any, example_recipe: Recipe
) -> None:
    key = generate_key()
    first = sign_dsse_with_key(_statement(example_recipe, 1), key)
    assert ingest(first).verdict == "invalid"  # not registered yet (and now cached)

    registered = keys.signing_key_register(name="lab key", public_key_pem=public_pem(key))
    result = ingest(first)
    assert (result.verdict, result.signer["class"]) == ("verified", "registered-key")
    assert result.evidence is not None
    assert result.evidence.signer.key_id == registered.pk

    keys.signing_key_revoke(key=registered)
    refused = ingest(sign_dsse_with_key(_statement(example_recipe, 2), key))
    assert (refused.verdict, refused.failed_step) == ("invalid", "signature")


def test_a_published_allowlist_classifies_the_next_upload(
    ingest: Any,
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
) -> None:
    signers.seeded_allowlist_ensure()
    before = ingest(_keyless(private_sigstore, example_recipe, 1, UNKNOWN_IDENTITY))
    assert (before.verdict, before.signer["class"]) == ("verified", "reported")

    lab = "https://github.com/example-lab/validate/.github/workflows/aicr.yaml@refs/heads/main"
    data = yaml.safe_load(signers.vendored_allowlist_text())
    entry = {"issuer": GITHUB_ISSUER, "source": source_slug(GITHUB_ISSUER, lab), "label": "lab"}
    data["community"] = [*(data.get("community") or []), entry]
    signers.allowlist_publish(body=yaml.safe_dump(data, sort_keys=False), note="add lab")

    after = ingest(_keyless(private_sigstore, example_recipe, 2, lab))
    assert (after.verdict, after.signer["class"], after.signer["counted"]) == (
        "verified",
        "community",
        True,
    )


def test_a_disabled_trusted_root_refuses_the_next_upload(
    ingest: Any,
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
) -> None:
    assert ingest(_keyless(private_sigstore, example_recipe, 1, UNKNOWN_IDENTITY)).ok
    TrustRoot.objects.filter(pk=private_root.pk).update(enabled=False)
    refused = ingest(_keyless(private_sigstore, example_recipe, 2, UNKNOWN_IDENTITY))
    assert (refused.verdict, refused.failed_step) == ("invalid", "signature")
    TrustRoot.objects.filter(pk=private_root.pk).update(enabled=True)
    assert ingest(_keyless(private_sigstore, example_recipe, 3, UNKNOWN_IDENTITY)).ok


def test_the_policy_is_read_once_while_nothing_changes(
    ingest: Any,
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
) -> None:
    ingest_module.policy_snapshot()
    first = ingest_module.policy_snapshot()
    with CaptureQueriesContext(connection) as queries:
        again = ingest_module.policy_snapshot()
    assert again is first
    assert len(queries) == 1

    # A known signer, new bytes, a recipe bound before: the version, the signer with its
    # record of this statement (none), the Evidence and UploadLog inserts; then its grid
    # column (consensus.columns): the recipe's lock, whether its columns are built, the
    # signer's stored column, the new one written in its place (the same results: no row
    # tally moves).
    assert ingest(_keyless(private_sigstore, example_recipe, 1, UNKNOWN_IDENTITY)).ok
    bundle = _keyless(private_sigstore, example_recipe, 2, UNKNOWN_IDENTITY)
    with CaptureQueriesContext(connection) as queries:
        result = ingest(bundle)
    assert result.created
    statements = [q["sql"] for q in queries.captured_queries]
    written = [s for s in statements if "SAVEPOINT" not in s]
    grid = [s for s in written if "consensus" in s or "pg_advisory_xact_lock" in s]
    assert len(written) - len(grid) == 4, statements
    assert len(grid) == 4, grid

    # The same bytes again: nothing new is written but the UploadLog row.
    count = Evidence.objects.count()
    again_result = ingest(bundle)
    assert (again_result.outcome, again_result.created) == ("existing", False)
    assert Evidence.objects.count() == count
    assert UploadLog.objects.filter(sha256=result.evidence.sha256).count() == 2


def test_a_catalog_import_is_seen_by_the_next_bind(
    ingest: Any,
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
) -> None:
    """Binds are cached under the policy version, which counts the catalog versions."""
    first = ingest(_keyless(private_sigstore, example_recipe, 1, UNKNOWN_IDENTITY))
    assert "of the current catalog" in first.transcript[3]["detail"]

    newer = CatalogFactory()
    RecipeFactory(catalog=newer, name=example_recipe.name)  # same name, another digest
    second = ingest(_keyless(private_sigstore, example_recipe, 2, UNKNOWN_IDENTITY))

    assert second.verdict == "verified", second.reason
    assert f"older catalog #{example_recipe.catalog_id}" in second.transcript[3]["detail"]

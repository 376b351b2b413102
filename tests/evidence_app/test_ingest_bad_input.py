"""Bad input through ingest: every refusal names its step, stores nothing but an UploadLog, and
the one stale-but-valid case (an older catalog's recipe digest) is stored and marked stale."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from evidence_app.models import Evidence, Signer, TrustRoot, UploadLog
from evidence_app.services.staleness import staleness_bulk
from recipes_app.models import Recipe
from tests.evidence_factories import FIRST_PARTY_IDENTITY, GITHUB_ISSUER, statement_for
from tests.factories import CatalogFactory, RecipeFactory
from tests.shared_data import SHARED
from tests.sigstore_private import PrivateSigstore

FIXTURES = SHARED / "fixtures" / "sigstore"


@pytest.fixture
def sign(private_root: TrustRoot, private_sigstore: PrivateSigstore) -> Any:
    def run(statement: Any, identity: str = FIRST_PARTY_IDENTITY) -> bytes:
        return private_sigstore.sign_dsse(statement, identity=identity, issuer=GITHUB_ISSUER).bundle

    return run


def _refused(result: Any, verdict: str, step: str, text: str) -> None:
    assert (result.verdict, result.failed_step) == (verdict, step), result.reason
    assert text in result.reason
    assert result.outcome == "refused"
    assert result.evidence is None
    assert not Evidence.objects.exists()
    assert not Signer.objects.exists()
    log = UploadLog.objects.order_by("-pk").first()
    assert (log.verdict, log.failed_step, log.reason) == (verdict, step, result.reason)


@pytest.mark.parametrize(
    ("data", "verdict", "text"),
    [
        (b"", "invalid", "empty document"),
        (b"\x00\x01\x02 not json", "invalid", "not valid JSON"),
        (
            b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "verif',
            "invalid",
            "not valid JSON",
        ),
        (b"[1, 2, 3]", "invalid", "not a JSON object"),
        (
            b'{"mediaType": "application/json", "dsseEnvelope": {}}',
            "invalid",
            "not a Sigstore bundle media type",
        ),
        (
            b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.9+json"}',
            "unsupported",
            "not a supported bundle version",
        ),
        (
            b'{"base64Signature": "x", "cert": "y", "rekorBundle": {}}',
            "unsupported",
            "legacy cosign bundle",
        ),
        (b'{"a":' * 5000 + b"1" + b"}" * 5000, "invalid", "nesting deeper than"),
        ('{"mediaType": "\u202e\u0000"}'.encode(), "invalid", "bundle"),
    ],
    ids=[
        "empty",
        "binary",
        "truncated",
        "array",
        "media-type",
        "future-version",
        "legacy",
        "nested",
        "hostile",
    ],
)
def test_it_refuses_unreadable_bundles_at_parse(
    ingest: Any, evidence_db: None, data: bytes, verdict: str, text: str
) -> None:
    _refused(ingest(data), verdict, "parse", text)


def test_it_refuses_a_tampered_payload(ingest: Any, sign: Any, example_recipe: Recipe) -> None:
    bundle = json.loads(sign(statement_for(example_recipe)))
    statement = statement_for(example_recipe)
    statement["predicate"]["phases"]["performance"]["skipped"] = 0
    bundle["dsseEnvelope"]["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()

    _refused(ingest(json.dumps(bundle).encode()), "invalid", "signature", "DSSE: invalid signature")


def test_it_refuses_a_staging_bundle_against_the_production_root(
    ingest: Any, evidence_db: None
) -> None:
    case = FIXTURES / "keyless-wrong-instance_fail"
    bundle = (case / "bundle.sigstore.json").read_bytes()
    artifact = (case / "artifact").read_bytes()

    _refused(ingest(bundle, artifact), "invalid", "signature", "CertValidationError")


def test_it_refuses_a_bundle_over_the_size_limit(
    ingest: Any, evidence_db: None, settings: Any
) -> None:
    settings.EVIDENCE_MAX_UPLOAD_BYTES = 100

    result = ingest(b"{" + b" " * 200 + b"}")

    assert (result.verdict, result.failed_step, result.outcome) == (
        "rejected",
        "parse",
        "too_large",
    )
    assert "exceeds the limit of 100 bytes" in result.reason
    assert UploadLog.objects.get().outcome == "too_large"


def test_it_rejects_other_predicate_types_at_the_statement(
    ingest: Any, sign: Any, example_recipe: Recipe
) -> None:
    statement = statement_for(example_recipe, predicate_type="https://slsa.dev/provenance/v1")

    _refused(ingest(sign(statement)), "rejected", "statement", "is not AICR recipe evidence")


def test_it_rejects_hostile_predicate_strings_at_the_statement(
    ingest: Any, sign: Any, example_recipe: Recipe
) -> None:
    statement = statement_for(example_recipe, aicr_version="v1\x1b[31m\nrm -rf ~")

    _refused(ingest(sign(statement)), "rejected", "statement", "control characters")


def test_it_stores_markup_in_predicate_fields_verbatim(
    ingest: Any, sign: Any, example_recipe: Recipe, client: Any
) -> None:
    hostile = "<script>alert('x')</script>"
    result = ingest(sign(statement_for(example_recipe, aicr_version=hostile)))

    assert result.verdict == "verified"
    assert result.evidence.aicr_version == hostile
    body = client.get(f"/api/v1/evidence/{result.evidence.pk}/").json()
    assert body["aicr_version"] == hostile


def test_it_rejects_an_unknown_recipe_digest_at_bind(
    ingest: Any, sign: Any, example_recipe: Recipe
) -> None:
    statement = statement_for(example_recipe, digest="0" * 64)

    result = ingest(sign(statement))

    _refused(result, "rejected", "bind", "unknown recipe")
    assert example_recipe.digest[:12] in UploadLog.objects.get().reason
    assert result.signer["identity"] == FIRST_PARTY_IDENTITY  # verified, so shown
    assert UploadLog.objects.get().signer["class"] == "first-party"


def test_it_rejects_a_digest_that_belongs_to_another_recipe(
    ingest: Any, sign: Any, example_recipe: Recipe, real_catalog: Any
) -> None:
    other = Recipe.objects.filter(catalog=real_catalog).exclude(pk=example_recipe.pk).first()
    statement = statement_for(example_recipe, digest=other.digest)

    _refused(ingest(sign(statement)), "rejected", "bind", f"digest of recipe {other.name!r}")


def test_it_binds_an_older_catalogs_digest_and_marks_it_stale(
    ingest: Any, sign: Any, example_recipe: Recipe
) -> None:
    newer = CatalogFactory()
    RecipeFactory(catalog=newer, name=example_recipe.name)  # same name, another digest
    statement = statement_for(example_recipe, attested_at=datetime.now(UTC) - timedelta(hours=1))

    result = ingest(sign(statement))

    assert result.verdict == "verified", result.reason
    assert result.evidence.recipe == example_recipe
    assert f"older catalog #{example_recipe.catalog_id}" in result.transcript[3]["detail"]
    reasons = staleness_bulk([result.evidence])[result.evidence.pk]
    assert [r.code for r in reasons] == ["recipe-changed"]
    assert example_recipe.digest[:12] in reasons[0].detail

"""Keyless AICR evidence end to end: statements for real recipe digests signed by a private
Sigstore instance (tests/sigstore_private.py), verified against its TrustRoot, bound, classified
by the allowlist in force and stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from evidence_app.corroborate.allowlist import source_slug
from evidence_app.models import (
    Evidence,
    Signer,
    SignerClass,
    SignerClassChange,
    TrustRoot,
    UploadLog,
)
from evidence_app.services.signers import allowlist_publish
from recipes_app.models import Recipe
from tests.evidence_factories import (
    COMMUNITY_IDENTITY,
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    UNKNOWN_IDENTITY,
    statement_for,
)
from tests.sigstore_private import PrivateSigstore

STEPS = ["parse", "signature", "statement", "bind", "classify"]
CLAIMS = {
    "source_repository_uri": "https://github.com/NVIDIA/aicr",
    "source_repository_ref": "refs/heads/main",
    "source_repository_digest": "0123456789abcdef0123456789abcdef01234567",
    "run_invocation_uri": "https://github.com/NVIDIA/aicr/actions/runs/1/attempts/1",
}


def _sign(instance: PrivateSigstore, recipe: Recipe, identity: str, **kw: Any) -> Any:
    statement = statement_for(recipe, attested_at=datetime.now(UTC) - timedelta(days=1))
    return instance.sign_dsse(statement, identity=identity, issuer=GITHUB_ISSUER, **kw)


def test_it_verifies_stores_and_classifies_first_party_evidence(
    ingest: Any, private_root: TrustRoot, private_sigstore: PrivateSigstore, example_recipe: Recipe
) -> None:
    signed = _sign(private_sigstore, example_recipe, FIRST_PARTY_IDENTITY, claims=CLAIMS)

    result = ingest(signed.bundle)

    assert (result.verdict, result.outcome, result.created) == ("verified", "created", True)
    assert result.failed_step == ""
    assert [s["step"] for s in result.transcript] == STEPS
    assert all(s["ok"] for s in result.transcript)
    assert "tests private instance" in result.transcript[1]["detail"]
    assert result.signer["class"] == "first-party"
    assert result.signer["counted"] is True
    assert result.signer["identity"] == FIRST_PARTY_IDENTITY
    assert result.signer["issuer"] == GITHUB_ISSUER

    evidence = Evidence.objects.get()
    assert evidence == result.evidence
    assert bytes(evidence.content) == signed.bundle
    assert evidence.recipe == example_recipe
    assert evidence.subject_digest == example_recipe.digest
    assert evidence.rekor_log_index == signed.log_index
    assert evidence.integrated_time is not None
    assert int(evidence.integrated_time.timestamp()) == signed.integrated_time
    assert evidence.certificate["identity"] == FIRST_PARTY_IDENTITY
    assert (
        evidence.certificate["claims"]["source_repository_uri"] == CLAIMS["source_repository_uri"]
    )
    assert evidence.certificate["production_root"] is False
    assert evidence.trusted_root_name == "tests private instance"
    assert evidence.aicr_version == "v0.19.0-example"
    assert evidence.media_type == "application/vnd.dev.sigstore.bundle.v0.3+json"
    assert evidence.check_results == {}  # a lone bundle has no CTRF
    tools = {c["tool"] for c in evidence.verify_commands}
    assert tools == {"cosign", "sigstore-python"}  # private root: no `aicr evidence verify`
    assert any("--trusted-root" in c["text"] for c in evidence.verify_commands)
    assert evidence.signer.signer_class == SignerClass.FIRST_PARTY
    assert evidence.signer.label == "aicr-uat-aws"
    assert evidence.signer.slug == source_slug(GITHUB_ISSUER, FIRST_PARTY_IDENTITY)
    assert Evidence.objects.counted().get() == evidence
    history = SignerClassChange.objects.get(signer=evidence.signer)
    assert (history.from_class, history.to_class, history.to_counted) == ("", "first-party", True)
    log = UploadLog.objects.get()
    assert (log.evidence, log.verdict, log.created, log.outcome) == (
        evidence,
        "verified",
        True,
        "created",
    )


def test_it_counts_a_community_signer_listed_by_slug(
    ingest: Any, private_root: TrustRoot, private_sigstore: PrivateSigstore, example_recipe: Recipe
) -> None:
    slug = source_slug(GITHUB_ISSUER, COMMUNITY_IDENTITY)
    allowlist_publish(
        body=(
            "schemaVersion: 1.0.0\ncommunity:\n"
            f"  - issuer: {GITHUB_ISSUER}\n    source: {slug}\n    label: acme-lab\n"
        )
    )
    result = ingest(_sign(private_sigstore, example_recipe, COMMUNITY_IDENTITY).bundle)

    assert result.verdict == "verified", result.reason
    signer = Signer.objects.get(slug=slug)
    assert (signer.signer_class, signer.counted, signer.label) == ("community", True, "acme-lab")
    assert "counted" in result.transcript[-1]["detail"]


def test_it_stores_an_unknown_signer_as_reported_and_never_counts_it(
    ingest: Any, private_root: TrustRoot, private_sigstore: PrivateSigstore, example_recipe: Recipe
) -> None:
    result = ingest(_sign(private_sigstore, example_recipe, UNKNOWN_IDENTITY).bundle)

    assert (result.verdict, result.outcome) == ("verified", "created")
    assert result.signer["class"] == "reported"
    assert result.signer["counted"] is False
    assert "not on the allowlist" in result.transcript[-1]["detail"]
    evidence = Evidence.objects.get()
    assert evidence.signer.signer_class == SignerClass.REPORTED
    assert evidence.signer.label == "stranger/fork"
    assert not Evidence.objects.counted().exists()


def test_it_refuses_private_evidence_against_the_production_root_only(
    ingest: Any, private_root: TrustRoot, private_sigstore: PrivateSigstore, example_recipe: Recipe
) -> None:
    TrustRoot.objects.filter(pk=private_root.pk).update(enabled=False)

    result = ingest(_sign(private_sigstore, example_recipe, FIRST_PARTY_IDENTITY).bundle)

    assert (result.verdict, result.failed_step, result.outcome) == (
        "invalid",
        "signature",
        "refused",
    )
    assert result.reason.startswith("CertValidationError")
    assert not Evidence.objects.exists()
    assert not Signer.objects.exists()


def test_it_keeps_one_record_for_the_same_bytes_uploaded_twice(
    ingest: Any, private_root: TrustRoot, private_sigstore: PrivateSigstore, example_recipe: Recipe
) -> None:
    bundle = _sign(private_sigstore, example_recipe, FIRST_PARTY_IDENTITY).bundle

    first = ingest(bundle)
    second = ingest(bundle)

    assert (first.outcome, first.created) == ("created", True)
    assert (second.outcome, second.created, second.verdict) == ("existing", False, "verified")
    assert second.evidence == first.evidence
    assert f"#{first.evidence.pk}" in second.reason
    assert Evidence.objects.count() == 1
    assert Signer.objects.count() == 1
    assert UploadLog.objects.count() == 2


def test_it_checks_the_artifact_when_one_is_given(
    ingest: Any, private_root: TrustRoot, private_sigstore: PrivateSigstore, example_recipe: Recipe
) -> None:
    bundle = _sign(private_sigstore, example_recipe, FIRST_PARTY_IDENTITY).bundle
    recipe_yaml = example_recipe.canonical_yaml.encode()

    wrong = ingest(bundle, recipe_yaml + b"# edited\n")
    right = ingest(bundle, recipe_yaml)

    assert (wrong.verdict, wrong.failed_step) == ("invalid", "signature")
    assert "not among the in-toto subjects" in wrong.reason
    assert right.verdict == "verified", right.reason
    assert bytes(right.evidence.artifact) == recipe_yaml


def test_it_reports_a_signer_whose_issuer_is_not_accepted(
    ingest: Any,
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
    settings: Any,
) -> None:
    """The signature is good; the issuer is unknown: reported, never counted (more in
    test_accepted_issuers.py). A private root's issuers are accepted ones."""
    statement = statement_for(example_recipe)
    signed = private_sigstore.sign_dsse(
        statement, identity="mallory@example.net", issuer="https://idp.example.net"
    )

    result = ingest(signed.bundle)

    assert (result.verdict, result.failed_step) == ("verified", "")
    assert (result.signer["class"], result.signer["counted"]) == ("reported", False)
    assert "does not accept that issuer" in result.transcript[-1]["detail"]

    TrustRoot.objects.filter(pk=private_root.pk).update(accepted_issuers="https://idp.example.net")
    other = private_sigstore.sign_dsse(
        statement_for(example_recipe, attested_at=datetime.now(UTC) - timedelta(hours=2)),
        identity="mallory@example.net",
        issuer="https://idp.example.net",
    )
    result = ingest(other.bundle)
    assert result.verdict == "verified", result.reason
    assert result.signer["class"] == "reported"
    assert "not on the allowlist" in result.transcript[-1]["detail"]


def test_it_pins_identities_with_the_identity_regex_setting(
    ingest: Any,
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    example_recipe: Recipe,
    settings: Any,
) -> None:
    settings.EVIDENCE_IDENTITY_REGEX = r"https://github\.com/NVIDIA/.+"

    refused = ingest(_sign(private_sigstore, example_recipe, UNKNOWN_IDENTITY).bundle)
    accepted = ingest(_sign(private_sigstore, example_recipe, FIRST_PARTY_IDENTITY).bundle)

    assert (refused.verdict, refused.failed_step) == ("invalid", "signature")
    assert "does not match the expected pattern" in refused.reason
    assert accepted.verdict == "verified"

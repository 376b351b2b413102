"""Keyless AICR recipe evidence signed by a private Sigstore instance (tests/sigstore_private.py),
verified offline by sigstore-python through the product's verification path."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from evidence_app.verification import (
    StatementError,
    TrustRoot,
    load_trust_root,
    parse_statement,
    production_root,
    verify_keyless,
    verify_signature,
)
from tests.shared_data import GOLDEN
from tests.sigstore_private import GITHUB_ISSUER, PrivateSigstore

STATEMENT_FILE = GOLDEN / "generated/evidence-example-full/summary-bundle/statement.intoto.json"
IDENTITY = "https://github.com/acme/aicr/.github/workflows/evidence-publish.yaml@refs/heads/main"
CLAIMS = {
    "source_repository_uri": "https://github.com/acme/aicr",
    "source_repository_ref": "refs/heads/main",
    "source_repository_digest": "0123456789abcdef0123456789abcdef01234567",
    "build_trigger": "push",
    "build_config_uri": "https://github.com/acme/aicr/.github/workflows/evidence-publish.yaml@refs/heads/main",
    "run_invocation_uri": "https://github.com/acme/aicr/actions/runs/1/attempts/1",
    "runner_environment": "github-hosted",
    "github_workflow_name": "evidence-publish",
}


@pytest.fixture(scope="module")
def instance() -> PrivateSigstore:
    return PrivateSigstore(name="aicr-ci.test")


@pytest.fixture(scope="module")
def root(instance: PrivateSigstore) -> TrustRoot:
    return load_trust_root(instance.trusted_root_json(), name="aicr-ci private")


@pytest.fixture(scope="module")
def statement() -> dict[str, Any]:
    return json.loads(STATEMENT_FILE.read_bytes())


@pytest.fixture(scope="module")
def signed(instance: PrivateSigstore, statement: dict[str, Any]) -> Any:
    return instance.sign_dsse(statement, identity=IDENTITY, issuer=GITHUB_ISSUER, claims=CLAIMS)


def _edit(bundle: bytes, change: Any) -> bytes:
    doc = json.loads(bundle)
    change(doc)
    return json.dumps(doc).encode()


def test_it_verifies_aicr_evidence_signed_by_the_private_instance(
    root: TrustRoot, signed: Any, statement: dict[str, Any]
) -> None:
    outcome = verify_keyless(
        signed.bundle, trusted_root=root, identity=IDENTITY, issuer=GITHUB_ISSUER
    )
    assert outcome.status == "ok", outcome.detail
    assert outcome.content == "dsse"
    assert outcome.payload_type == "application/vnd.in-toto+json"
    assert json.loads(outcome.payload or b"") == statement

    signer = outcome.signer
    assert signer is not None
    assert signer.mode == "keyless"
    assert (signer.identity, signer.issuer) == (IDENTITY, GITHUB_ISSUER)
    assert signer.repository == "https://github.com/acme/aicr"
    assert signer.ref == "refs/heads/main"
    assert signer.sha == CLAIMS["source_repository_digest"]
    assert signer.workflow_trigger == "push"
    assert signer.workflow_name == "evidence-publish"
    assert signer.run_invocation_uri == CLAIMS["run_invocation_uri"]
    assert signer.runner_environment == "github-hosted"
    assert signer.rekor_log_index == signed.log_index
    assert signer.integrated_time is not None
    assert int(signer.integrated_time.timestamp()) == signed.integrated_time
    assert signer.signed_at == signer.integrated_time
    assert signer.trusted_root == "aicr-ci private"
    assert not signer.production_root
    assert signer.tlog_kind == "dsse/0.0.1"
    assert len(signer.certificate_sha256 or "") == 64

    parsed = parse_statement(outcome.payload, payload_type=outcome.payload_type)
    assert parsed.recipe_name == "h100-eks-ubuntu-training-kubeflow"
    assert parsed.predicate_type == "https://aicr.run/recipe-evidence/v1"


def test_it_rejects_private_evidence_against_the_production_root(signed: Any) -> None:
    outcome = verify_keyless(
        signed.bundle, trusted_root=production_root(), identity=IDENTITY, issuer=GITHUB_ISSUER
    )
    assert outcome.status == "invalid"
    assert outcome.detail.startswith("CertValidationError")
    assert outcome.signer is None
    assert outcome.payload is None


def test_it_rejects_a_wrong_identity(root: TrustRoot, signed: Any) -> None:
    other = "https://github.com/acme/aicr/.github/workflows/other.yaml@refs/heads/main"
    outcome = verify_keyless(signed.bundle, trusted_root=root, identity=other, issuer=GITHUB_ISSUER)
    assert outcome.status == "invalid"
    assert "SANs do not match" in outcome.detail
    prefix = IDENTITY[:-5]  # an identity prefix must not pass (no regex-style matching)
    outcome = verify_keyless(
        signed.bundle, trusted_root=root, identity=prefix, issuer=GITHUB_ISSUER
    )
    assert outcome.status == "invalid"


def test_it_rejects_a_wrong_issuer(root: TrustRoot, signed: Any) -> None:
    outcome = verify_keyless(
        signed.bundle, trusted_root=root, identity=IDENTITY, issuer="https://accounts.google.com"
    )
    assert outcome.status == "invalid"
    assert "issuer" in outcome.detail


def test_it_rejects_a_tampered_payload(
    root: TrustRoot, signed: Any, statement: dict[str, Any]
) -> None:
    forged = copy.deepcopy(statement)
    forged["predicate"]["phases"]["performance"]["passed"] = 4
    payload = base64.b64encode(json.dumps(forged).encode()).decode()
    bundle = _edit(signed.bundle, lambda d: d["dsseEnvelope"].__setitem__("payload", payload))
    outcome = verify_keyless(bundle, trusted_root=root, identity=IDENTITY, issuer=GITHUB_ISSUER)
    assert outcome.status == "invalid"
    assert "DSSE: invalid signature" in outcome.detail


def test_it_rejects_a_tampered_payload_type(root: TrustRoot, signed: Any) -> None:
    bundle = _edit(
        signed.bundle, lambda d: d["dsseEnvelope"].__setitem__("payloadType", "text/plain")
    )
    outcome = verify_keyless(bundle, trusted_root=root, identity=IDENTITY, issuer=GITHUB_ISSUER)
    assert outcome.status == "invalid"


def test_it_rejects_evidence_from_another_instance_with_the_same_claims(
    root: TrustRoot, statement: dict[str, Any]
) -> None:
    rogue = PrivateSigstore(name="rogue.test")
    forged = rogue.sign_dsse(statement, identity=IDENTITY, issuer=GITHUB_ISSUER, claims=CLAIMS)
    outcome = verify_keyless(forged.bundle, trusted_root=root, issuer=GITHUB_ISSUER)
    assert outcome.status == "invalid"
    assert outcome.signer is None


def test_it_rejects_a_certificate_swapped_in_from_another_signer(
    instance: PrivateSigstore, root: TrustRoot, signed: Any, statement: dict[str, Any]
) -> None:
    other = instance.sign_dsse(
        statement, identity="https://github.com/evil/fork/.github/workflows/x.yaml@refs/heads/main"
    )
    cert = json.loads(signed.bundle)["verificationMaterial"]["certificate"]
    bundle = _edit(
        other.bundle, lambda d: d["verificationMaterial"].__setitem__("certificate", cert)
    )
    outcome = verify_keyless(bundle, trusted_root=root, issuer=GITHUB_ISSUER)
    assert outcome.status == "invalid"


def test_it_learns_the_signer_when_no_identity_is_expected(root: TrustRoot, signed: Any) -> None:
    outcome = verify_signature(
        signed.bundle, trusted_root=root, issuer=[GITHUB_ISSUER, "https://x"]
    )
    assert outcome.status == "ok", outcome.detail
    assert outcome.signer is not None
    assert outcome.signer.identity == IDENTITY
    with pytest.raises(ValueError, match="issuer"):
        verify_signature(signed.bundle, trusted_root=root)


def test_it_matches_an_identity_pattern_fully(root: TrustRoot, signed: Any) -> None:
    ok = verify_keyless(
        signed.bundle,
        trusted_root=root,
        identity_regex=r"https://github\.com/acme/aicr/\.github/workflows/[a-z-]+\.yaml@refs/heads/.+",
        issuer=GITHUB_ISSUER,
    )
    assert ok.status == "ok", ok.detail
    partial = verify_keyless(
        signed.bundle,
        trusted_root=root,
        identity_regex=r"https://github\.com/acme",
        issuer=GITHUB_ISSUER,
    )
    assert partial.status == "invalid"
    assert "pattern" in partial.detail


def test_it_applies_extra_policies_to_the_certificate_claims(root: TrustRoot, signed: Any) -> None:
    good = verify_keyless(
        signed.bundle,
        trusted_root=root,
        identity=IDENTITY,
        issuer=GITHUB_ISSUER,
        extra_policies={"OIDCSourceRepositoryURI": "https://github.com/acme/aicr"},
    )
    assert good.status == "ok", good.detail
    bad = verify_keyless(
        signed.bundle,
        trusted_root=root,
        identity=IDENTITY,
        issuer=GITHUB_ISSUER,
        extra_policies={"OIDCSourceRepositoryURI": "https://github.com/evil/aicr"},
    )
    assert bad.status == "invalid"
    assert "OIDCSourceRepositoryURI" in bad.detail


def test_it_tries_each_trusted_root(root: TrustRoot, signed: Any) -> None:
    outcome = verify_keyless(
        signed.bundle,
        trusted_root=[production_root(), root],
        identity=IDENTITY,
        issuer=GITHUB_ISSUER,
    )
    assert outcome.status == "ok"
    assert outcome.signer is not None
    assert outcome.signer.trusted_root == root.name
    rogue = load_trust_root(PrivateSigstore(name="other.test").trusted_root_json(), name="other")
    outcome = verify_keyless(
        signed.bundle,
        trusted_root=[production_root(), rogue],
        identity=IDENTITY,
        issuer=GITHUB_ISSUER,
    )
    assert outcome.status == "invalid"
    assert "production:" in outcome.detail
    assert "other:" in outcome.detail


def test_it_verifies_email_identities_and_v2_only_issuer_extensions(
    instance: PrivateSigstore, root: TrustRoot, statement: dict[str, Any]
) -> None:
    issuer = "https://accounts.example.com"
    signed = instance.sign_dsse(
        statement, identity="alice@example.com", issuer=issuer, issuer_v1=False
    )
    outcome = verify_keyless(
        signed.bundle, trusted_root=root, identity="alice@example.com", issuer=issuer
    )
    assert outcome.status == "ok", outcome.detail
    outcome = verify_keyless(
        signed.bundle, trusted_root=root, identity="alice@example.com", issuer=GITHUB_ISSUER
    )
    assert outcome.status == "invalid"


def test_it_refuses_to_guess_between_several_identities(
    instance: PrivateSigstore, root: TrustRoot, statement: dict[str, Any]
) -> None:
    signed = instance.sign_dsse(
        statement,
        identity=IDENTITY,
        extra_sans=["https://github.com/other/repo/x.yaml@refs/heads/main"],
    )
    learnt = verify_keyless(signed.bundle, trusted_root=root, issuer=GITHUB_ISSUER)
    assert learnt.status == "invalid"
    assert "2 identities" in learnt.detail
    pinned = verify_keyless(
        signed.bundle, trusted_root=root, identity=IDENTITY, issuer=GITHUB_ISSUER
    )
    assert pinned.status == "ok"


def test_it_verifies_message_signatures_but_they_are_not_evidence(
    instance: PrivateSigstore, root: TrustRoot
) -> None:
    recipe = b"kind: RecipeResult\n"
    signed = instance.sign_message(recipe, identity=IDENTITY)
    outcome = verify_signature(
        signed.bundle, trusted_root=root, issuer=GITHUB_ISSUER, artifact=recipe
    )
    assert outcome.status == "ok", outcome.detail
    assert outcome.content == "message_signature"
    assert outcome.payload is None
    with pytest.raises(StatementError, match="not evidence"):
        parse_statement(outcome.payload, payload_type=outcome.payload_type)
    wrong = verify_signature(signed.bundle, trusted_root=root, issuer=GITHUB_ISSUER, artifact=b"x")
    assert wrong.status == "invalid"
    missing = verify_signature(signed.bundle, trusted_root=root, issuer=GITHUB_ISSUER)
    assert missing.status == "unsupported"


def test_it_checks_the_artifact_against_the_statement_subject(
    root: TrustRoot, signed: Any, statement: dict[str, Any]
) -> None:
    digest = statement["subject"][0]["digest"]["sha256"]
    ok = verify_keyless(
        signed.bundle, trusted_root=root, issuer=GITHUB_ISSUER, artifact_sha256=digest.upper()
    )
    assert ok.status == "ok"
    bad = verify_keyless(
        signed.bundle, trusted_root=root, issuer=GITHUB_ISSUER, artifact=b"other recipe"
    )
    assert bad.status == "invalid"
    assert "not among the in-toto subjects" in bad.detail


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["verificationMaterial"].__setitem__("tlogEntries", []), "no transparency log"),
        (
            lambda d: d["verificationMaterial"]["tlogEntries"][0]["kindVersion"].__setitem__(
                "kind", "intoto"
            ),
            "not supported",
        ),
        (
            lambda d: d["dsseEnvelope"]["signatures"].append(d["dsseEnvelope"]["signatures"][0]),
            "2 signatures",
        ),
        (
            lambda d: d["verificationMaterial"]["tlogEntries"][0]["kindVersion"].__setitem__(
                "version", "0.0.9"
            ),
            "not supported",
        ),
    ],
    ids=["no-tlog", "intoto-entry", "two-signatures", "unknown-entry-version"],
)
def test_it_reports_formats_it_cannot_check_as_unsupported(
    root: TrustRoot, signed: Any, change: Any, message: str
) -> None:
    outcome = verify_keyless(_edit(signed.bundle, change), trusted_root=root, issuer=GITHUB_ISSUER)
    assert outcome.status == "unsupported"
    assert message in outcome.detail


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["verificationMaterial"]["tlogEntries"][0].__setitem__("integratedTime", "1"),
        lambda d: d["verificationMaterial"]["tlogEntries"][0]["inclusionProof"].__setitem__(
            "rootHash", base64.b64encode(b"\0" * 32).decode()
        ),
        lambda d: d["verificationMaterial"]["tlogEntries"][0]["inclusionProof"][
            "checkpoint"
        ].__setitem__("envelope", "x\n\n\u2014 y AAAAAAAA\n"),
        lambda d: d["verificationMaterial"]["certificate"].__setitem__("rawBytes", "AAAA"),
    ],
    ids=["integrated-time", "root-hash", "checkpoint", "certificate-der"],
)
def test_it_rejects_tampered_log_material(root: TrustRoot, signed: Any, change: Any) -> None:
    outcome = verify_keyless(_edit(signed.bundle, change), trusted_root=root, issuer=GITHUB_ISSUER)
    assert outcome.status == "invalid", outcome.detail
    assert outcome.signer is None

"""The 21 shared Sigstore fixture cases through the product's verification path.

Each case's expected.json spells out mode, trusted root, identity, issuer, extra policies and the
artifact; the signature step must pass or fail as expected. The passing cases are generic
(SLSA provenance, npm publish attestation, plain message signatures): none is AICR recipe
evidence, so the statement step must then reject them, never the signature step.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from evidence_app.verification import (
    StatementError,
    TrustRoot,
    parse_statement,
    production_root,
    verify_signature,
)
from evidence_app.verification.statement import PREDICATE_TYPES
from evidence_app.verification.trust import load_trust_root_file
from tests.shared_data import SHARED

FIXTURES = SHARED / "fixtures" / "sigstore"
CASES = sorted(p for p in FIXTURES.iterdir() if (p / "expected.json").is_file())


@cache
def _root(kind: str, case_dir: Path) -> TrustRoot:
    if kind == "production":
        return production_root()
    if kind == "staging":
        return load_trust_root_file(FIXTURES / "trusted_root" / "staging.trusted_root.json")
    return load_trust_root_file(case_dir / "trusted_root.json", name=f"custom:{case_dir.name}")


@pytest.mark.parametrize("case_dir", CASES, ids=[p.name for p in CASES])
def test_it_reproduces_the_expected_result_of_every_fixture_case(case_dir: Path) -> None:
    assert len(CASES) == 21
    expected = json.loads((case_dir / "expected.json").read_text())
    bundle = (case_dir / expected["bundle"]).read_bytes()
    artifact = (case_dir / expected["artifact"]).read_bytes() if expected.get("artifact") else None
    if expected["mode"] == "keyless":
        outcome = verify_signature(
            bundle,
            trusted_root=_root(expected["trusted_root"], case_dir),
            identity=expected["identity"],
            issuer=expected["issuer"],
            extra_policies=expected.get("extra_policies"),
            artifact=artifact,
        )
    else:
        outcome = verify_signature(
            bundle,
            public_keys={"registered": (case_dir / expected["key"]).read_bytes()},
            artifact=artifact,
        )

    acceptable = {"pass": {"ok"}, "fail": {"invalid"}}[expected["expected"]]
    if "reject-unsupported" in expected.get("acceptable_results", []):
        acceptable.add("unsupported")
    assert outcome.status in acceptable, outcome.detail
    assert outcome.detail
    assert "\n" not in outcome.detail
    assert outcome.mode in (expected["mode"], None)

    if outcome.status != "ok":
        assert outcome.signer is None
        assert outcome.payload is None
        return

    assert outcome.signer is not None
    if expected["mode"] == "keyless":
        assert outcome.signer.identity == expected["identity"]
        assert outcome.signer.issuer == expected["issuer"]
        assert outcome.signer.certificate_sha256
        assert outcome.signer.signed_at is not None
        assert outcome.signer.rekor_log_index is not None
    else:
        assert outcome.signer.key_id == "registered"
        assert len(outcome.signer.key_fingerprint or "") == 64
    if expected.get("predicate_type"):
        assert json.loads(outcome.payload or b"{}")["predicateType"] == expected["predicate_type"]
        assert expected["predicate_type"] not in PREDICATE_TYPES
    with pytest.raises(StatementError):
        parse_statement(outcome.payload, payload_type=outcome.payload_type)

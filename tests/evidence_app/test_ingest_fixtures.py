"""Every shared Sigstore fixture case through the ingest service.

The policy is configured per case from its ``expected.json``: the case's trusted root is the
only enabled one (the production root otherwise), the accepted issuer is the case's issuer (with
an empty allowlist, so no other issuer sneaks in), the identity is pinned with an anchored regex
and extra policies come from the case; key cases register the case's ``key.pub``.

Bad signatures are ``invalid`` (or ``unsupported`` where allowed) at ``parse``/``signature``;
a good signature by another issuer than the case's passes ``signature``, reported. Good
fixtures are generic (SLSA provenance, npm attestations, plain message signatures), so they
are ``rejected`` at ``statement``, never at ``signature``. Nothing but an UploadLog is stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper

from evidence_app.models import Evidence, Signer, SignerClassChange, TrustRoot, UploadLog
from evidence_app.services import keys, signers, trust_roots
from evidence_app.verification.commands import anchored_identity_regexp
from tests.evidence_app.conftest import EMPTY_ALLOWLIST
from tests.shared_data import SHARED

FIXTURES = SHARED / "fixtures" / "sigstore"
CASES = sorted(p for p in FIXTURES.iterdir() if (p / "expected.json").is_file())
UNLISTED_ISSUER_CASE = "keyless-dsse-wrong-issuer_fail"


def _configure(case_dir: Path, expected: dict[str, Any], settings: SettingsWrapper) -> None:
    signers.allowlist_publish(body=EMPTY_ALLOWLIST, note="fixture case")
    if expected["mode"] == "keyless":
        settings.EVIDENCE_ACCEPTED_ISSUERS = [expected["issuer"]]
        settings.EVIDENCE_IDENTITY_REGEX = anchored_identity_regexp(expected["identity"])
        settings.EVIDENCE_EXTRA_POLICIES = expected.get("extra_policies") or {}
        if expected["trusted_root"] != "production":
            TrustRoot.objects.update(enabled=False)
            path = (
                case_dir / "trusted_root.json"
                if expected["trusted_root"] == "custom"
                else FIXTURES / "trusted_root" / f"{expected['trusted_root']}.trusted_root.json"
            )
            trust_roots.trust_root_add(
                name=f"case {case_dir.name}", trusted_root_json=path.read_text()
            )
    else:
        keys.signing_key_register(
            name=f"case {case_dir.name}", public_key_pem=(case_dir / expected["key"]).read_bytes()
        )


@pytest.mark.parametrize("case_dir", CASES, ids=[p.name for p in CASES])
def test_it_ingests_every_fixture_case_as_expected(
    case_dir: Path, ingest: Any, settings: SettingsWrapper
) -> None:
    assert len(CASES) == 21
    expected = json.loads((case_dir / "expected.json").read_text())
    _configure(case_dir, expected, settings)
    bundle = (case_dir / expected["bundle"]).read_bytes()
    artifact = (case_dir / expected["artifact"]).read_bytes() if expected.get("artifact") else None
    signers_before = Signer.objects.count()
    changes_before = SignerClassChange.objects.count()

    result = ingest(bundle, artifact)

    if expected["expected"] == "pass":
        assert (result.verdict, result.failed_step) == ("rejected", "statement"), result.reason
        assert [s["step"] for s in result.transcript] == ["parse", "signature", "statement"]
        assert result.transcript[1]["ok"] is True
    elif case_dir.name == UNLISTED_ISSUER_CASE:
        # The signature is good, its issuer is not the accepted one: the site reports such a
        # signer instead of calling the signature invalid (test_accepted_issuers.py); this
        # fixture's statement is not AICR evidence, so it stops there.
        assert (result.verdict, result.failed_step) == ("rejected", "statement"), result.reason
        assert result.transcript[1]["ok"] is True
        assert "the issuer is not one this site accepts" in result.transcript[1]["detail"]
        assert (result.signer["class"], result.signer["counted"]) == ("reported", False)
    else:
        allowed = {"invalid"}
        if "reject-unsupported" in expected.get("acceptable_results", []):
            allowed.add("unsupported")
        assert result.verdict in allowed, result.reason
        assert result.failed_step == (
            "parse" if case_dir.name == "keyless-malformed-json_fail" else "signature"
        )
    assert result.outcome == "refused"
    assert result.evidence is None
    assert result.reason
    assert result.transcript[-1] == {
        "step": result.failed_step,
        "ok": False,
        "detail": result.reason,
    }

    assert not Evidence.objects.exists()
    assert Signer.objects.count() == signers_before
    assert SignerClassChange.objects.count() == changes_before
    log = UploadLog.objects.get()
    assert (log.verdict, log.failed_step, log.reason) == (
        result.verdict,
        result.failed_step,
        result.reason,
    )
    assert log.transcript == result.transcript
    assert log.evidence is None
    assert log.size == len(bundle)

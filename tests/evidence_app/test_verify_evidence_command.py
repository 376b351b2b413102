"""``manage.py verify_evidence``: ``aicr evidence verify``'s result on this site's trust policy,
agreeing with the upload path's verdict for the same bytes."""

from __future__ import annotations

import json
import re
import tarfile
from io import BytesIO, StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from pytest_django.fixtures import Settings as SettingsWrapper

from evidence_app.models import TrustRoot
from evidence_app.services import keys
from evidence_app.services.verify_result import VerifyInputError, verify_input
from tests.evidence_app.test_ingest_fixtures import CASES, _configure
from tests.evidence_factories import (
    COMMUNITY_IDENTITY,
    GITHUB_ISSUER,
    example_statement,
    signed_example_tarball,
)
from tests.sigstore_private import PrivateSigstore, generate_key, public_pem, sign_dsse_with_key

pytestmark = pytest.mark.django_db
# Message signatures need their artifact, which `aicr evidence verify` never takes.
DSSE_CASES = [
    case for case in CASES if not json.loads((case / "expected.json").read_text()).get("artifact")
]


def _run(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("verify_evidence", *args, stdout=out, stderr=err)
    return int(exited.value.code or 0), out.getvalue(), err.getvalue()


@pytest.fixture
def signed(evidence_db: None) -> bytes:
    key = generate_key("ecdsa-p256")
    keys.signing_key_register(name="lab key", public_key_pem=public_pem(key))
    return signed_example_tarball(sign_dsse_with_key(example_statement(), key))


def _unpack(data: bytes, where: Path) -> Path:
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(where, filter="data")
    return where / "summary-bundle"


@pytest.mark.parametrize("case_dir", CASES, ids=[p.name for p in CASES])
def test_it_agrees_with_the_upload_path_on_every_fixture(
    case_dir: Path, ingest: Any, settings: SettingsWrapper, tmp_path: Path
) -> None:
    assert len(CASES) == 21
    expected = json.loads((case_dir / "expected.json").read_text())
    _configure(case_dir, expected, settings)
    bundle = (case_dir / expected["bundle"]).read_bytes()
    artifact = (case_dir / expected["artifact"]).read_bytes() if expected.get("artifact") else None
    (tmp_path / "bundle.json").write_bytes(bundle)

    result = verify_input(str(tmp_path / "bundle.json"), artifact=artifact)
    uploaded = ingest(bundle, artifact)

    failed = [step for step in result.steps if step["status"] == "failed"]
    assert result.exit == 2  # none of the fixtures is AICR evidence, or it is a bad signature
    assert [step["name"] for step in failed] == [uploaded.failed_step]
    assert failed[0]["detail"] == uploaded.reason
    assert [step["name"] for step in result.steps] == [s["step"] for s in uploaded.transcript]


def test_it_verifies_an_evidence_directory_and_its_tarball(signed: bytes, tmp_path: Path) -> None:
    (tmp_path / "evidence.tar.gz").write_bytes(signed)
    directory = _unpack(signed, tmp_path / "out")

    for target, kind in ((directory, "dir"), (tmp_path / "evidence.tar.gz", "tarball")):
        status, out, _ = _run(str(target), "-o", "json")
        body = json.loads(out)
        assert status == 0, out
        assert body["input"] == kind
        assert body["exit"] == 0
        assert body["recipeName"] == "h100-eks-ubuntu-training-kubeflow"
        assert body["predicate"]["type"] == "https://aicr.run/recipe-evidence/v1"
        assert body["bundleDigest"].startswith("sha256:")
        names = [step["name"] for step in body["steps"]]
        assert names == ["parse", "signature", "statement", "manifest", "phases"]
        assert all(step["status"] == "passed" for step in body["steps"])
        assert [step["step"] for step in body["steps"]] == [1, 2, 3, 4, 5]


def test_it_reports_phase_failures_as_exit_1_and_aicrs_process_status(
    evidence_db: None, tmp_path: Path
) -> None:
    key = generate_key("ed25519")
    keys.signing_key_register(name="lab key", public_key_pem=public_pem(key))
    statement = example_statement()
    statement["predicate"]["phases"]["deployment"]["failed"] = 1
    bundle = sign_dsse_with_key(statement, key)
    (tmp_path / "bundle.json").write_bytes(bundle)

    status, out, _ = _run(str(tmp_path / "bundle.json"), "-o", "json")

    body = json.loads(out)
    assert body["exit"] == 1
    assert status == 2  # aicr exits 2 for "valid, with phase failures" (AICR.md §4.5)
    phases = body["steps"][-1]
    assert (phases["name"], phases["status"]) == ("phases", "failed")
    assert "deployment" in phases["detail"]
    assert {"key": "deployment", "value": "0 passed, 1 failed, 5 skipped"} in phases["subRows"]


def test_it_refuses_a_pin_on_key_signed_evidence(signed: bytes, tmp_path: Path) -> None:
    (tmp_path / "e.tgz").write_bytes(signed)
    status, out, _ = _run(str(tmp_path / "e.tgz"), "-o", "json", "--expected-issuer", GITHUB_ISSUER)
    body = json.loads(out)
    assert status == 2
    assert body["exit"] == 2
    assert body["steps"][-1]["name"] == "signer"
    assert "no certificate identity" in body["steps"][-1]["detail"]


def test_it_pins_keyless_evidence_to_the_expected_signer(
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    tmp_path: Path,
) -> None:
    signed = private_sigstore.sign_dsse(
        example_statement(), identity=COMMUNITY_IDENTITY, issuer=GITHUB_ISSUER
    )
    (tmp_path / "e.tgz").write_bytes(signed_example_tarball(signed.bundle))
    good = verify_input(
        str(tmp_path / "e.tgz"),
        expected_issuer=GITHUB_ISSUER,
        expected_identity_regexp="^" + re.escape(COMMUNITY_IDENTITY) + "$",
    )
    other = verify_input(
        str(tmp_path / "e.tgz"),
        expected_issuer=GITHUB_ISSUER,
        expected_identity_regexp="^https://github\\.com/someone-else/.+$",
    )
    assert good.exit == 0, good.steps
    assert good.signer == {
        "identity": COMMUNITY_IDENTITY,
        "issuer": GITHUB_ISSUER,
        "rekorLogIndex": good.signer["rekorLogIndex"] if good.signer else None,
    }
    assert other.exit == 2
    failed = [step for step in other.steps if step["status"] == "failed"]
    assert [step["name"] for step in failed] == ["signature"]


def test_it_prints_the_step_table_as_text(signed: bytes, tmp_path: Path) -> None:
    (tmp_path / "e.tgz").write_bytes(signed)
    status, out, _ = _run(str(tmp_path / "e.tgz"))
    assert status == 0
    assert out.splitlines()[0] == "VALID (tarball: h100-eks-ubuntu-training-kubeflow)"
    assert "  ✓ 2. signature:" in out
    assert "      deployment: 0 passed, 0 failed, " in out


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("ghcr.io/nvidia/aicr-evidence:h100-eks", "pin it by digest"),
        ("example.org/repo@sha256:" + "a" * 64, "OCI references are not pulled on this site"),
    ],
)
def test_it_refuses_oci_references_it_may_not_pull(
    evidence_db: None, settings: SettingsWrapper, text: str, reason: str
) -> None:
    settings.EVIDENCE_OCI_ENABLED = False  # (CI's settings enable pulls: nothing may be looked up)
    result = verify_input(text)
    assert result.input == "oci"
    assert result.exit == 2
    assert result.steps[0]["name"] == "pull"
    assert reason in result.steps[0]["detail"]


def test_it_names_an_input_it_cannot_read(evidence_db: None, tmp_path: Path) -> None:
    with pytest.raises(VerifyInputError, match="no such file or directory"):
        verify_input(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(VerifyInputError, match="not an evidence directory"):
        verify_input(str(tmp_path / "empty"))
    with pytest.raises(VerifyInputError, match="not a regex"):
        verify_input(str(tmp_path), expected_identity_regexp="(")
    status, _, err = _run(str(tmp_path / "missing"))
    assert status == 2
    assert "no such file or directory" in err

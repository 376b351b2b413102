"""AICR evidence directories (tar / tar.gz) through ingest: AICR's example evidence for
``h100-eks-ubuntu-training-kubeflow`` (its digest is the real catalog's), re-signed keyless by the
private instance, then key-signed, tampered and unsigned variants."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evidence_app.models import Evidence, SigningKey, TrustRoot, UploadLog
from evidence_app.services import keys
from recipes_app.models import Recipe
from tests.evidence_factories import (
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    example_files,
    example_statement,
    signed_example_tarball,
    tarball,
)
from tests.sigstore_private import PrivateSigstore, generate_key, public_pem, sign_dsse_with_key


@pytest.fixture
def keyless_bundle(private_sigstore: PrivateSigstore) -> bytes:
    return private_sigstore.sign_dsse(
        example_statement(), identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle


@pytest.mark.parametrize("gz", [True, False], ids=["tar.gz", "tar"])
def test_it_verifies_the_example_evidence_directory_with_its_ctrf_results(
    ingest: Any, private_root: TrustRoot, example_recipe: Recipe, keyless_bundle: bytes, gz: bool
) -> None:
    data = signed_example_tarball(keyless_bundle, gz=gz)

    result = ingest(data, filename="evidence.tar.gz")

    assert result.verdict == "verified", result.reason
    assert [s["step"] for s in result.transcript] == [
        "parse",
        "signature",
        "statement",
        "manifest",
        "bind",
        "classify",
    ]
    assert "6 files match manifest.json" in result.transcript[3]["detail"]
    evidence = Evidence.objects.get()
    assert evidence.container == "summary-bundle"
    assert evidence.media_type == ("application/gzip" if gz else "application/x-tar")
    assert bytes(evidence.content) == data
    assert evidence.recipe == example_recipe
    assert evidence.signer.signer_class == "first-party"
    results = evidence.check_results
    assert set(results) == {"conformance", "deployment", "performance"}
    assert set(results["performance"]) == {
        "nccl-all-reduce-bw",
        "inference-perf",
        "nccl-all-reduce-bw-net",
        "nccl-all-reduce-bw-nvls",
    }
    assert results["deployment"]["operator-health"]["status"] == "skipped"
    assert results["performance"]["nccl-all-reduce-bw"]["metrics"] == []
    thresholds = results["performance"]["nccl-all-reduce-bw"]["thresholds"]
    declared = {c["name"]: c for c in example_recipe.checks.get("performance", [])}
    assert thresholds == declared.get("nccl-all-reduce-bw", {}).get("thresholds", [])
    bundle_commands = [c["text"] for c in evidence.verify_commands]
    assert any("summary-bundle/attestation.intoto.jsonl" in t for t in bundle_commands)


def test_it_reads_failures_and_performance_numbers_from_ctrf(
    ingest: Any, private_root: TrustRoot, example_recipe: Recipe, private_sigstore: PrivateSigstore
) -> None:
    """Rewrite the performance CTRF (and the digests that bind it) to carry real numbers."""
    import hashlib

    files = example_files()
    ctrf = json.loads(files["summary-bundle/ctrf/performance.json"])
    tests = ctrf["results"]["tests"]
    tests[0].update(status="passed", stdout=["RESULT: NCCL all-reduce bus bandwidth: 412.5 GB/s"])
    tests[1].update(status="failed", message="throughput below threshold")
    summary = ctrf["results"]["summary"]
    summary.update(passed=1, failed=1, skipped=2)
    perf = json.dumps(ctrf, indent=2).encode()
    files["summary-bundle/ctrf/performance.json"] = perf
    manifest = json.loads(files["summary-bundle/manifest.json"])
    for entry in manifest["files"]:
        if entry["path"] == "ctrf/performance.json":
            entry.update(size=len(perf), sha256="sha256:" + hashlib.sha256(perf).hexdigest())
    manifest_bytes = json.dumps(manifest, indent=2).encode()
    files["summary-bundle/manifest.json"] = manifest_bytes
    statement = example_statement()
    predicate = statement["predicate"]
    predicate["phases"]["performance"] = {
        "passed": 1,
        "failed": 1,
        "skipped": 2,
        "ctrfDigest": "sha256:" + hashlib.sha256(perf).hexdigest(),
    }
    predicate["manifest"]["digest"] = "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()
    files["summary-bundle/statement.intoto.json"] = json.dumps(statement).encode()
    bundle = private_sigstore.sign_dsse(
        statement, identity=FIRST_PARTY_IDENTITY, issuer=GITHUB_ISSUER
    ).bundle
    files["summary-bundle/attestation.intoto.jsonl"] = bundle.replace(b"\n", b"") + b"\n"

    result = ingest(tarball(files))

    assert result.verdict == "verified", result.reason
    perf_results = result.evidence.check_results["performance"]
    assert perf_results["nccl-all-reduce-bw"]["status"] == "passed"
    assert perf_results["nccl-all-reduce-bw"]["metrics"] == [
        {"label": "NCCL all-reduce bus bandwidth", "value": 412.5, "unit": "GB/s"}
    ]
    assert perf_results["inference-perf"]["status"] == "failed"
    assert perf_results["inference-perf"]["message"] == "throughput below threshold"


def test_it_rejects_a_tampered_ctrf_report_at_the_manifest_step(
    ingest: Any, private_root: TrustRoot, example_recipe: Recipe, keyless_bundle: bytes
) -> None:
    files = example_files()
    files["summary-bundle/attestation.intoto.jsonl"] = keyless_bundle.replace(b"\n", b"")
    files["summary-bundle/ctrf/deployment.json"] = files[
        "summary-bundle/ctrf/deployment.json"
    ].replace(b'"skipped"', b'"passed"', 1)

    result = ingest(tarball(files))

    assert (result.verdict, result.failed_step) == ("invalid", "manifest")
    assert "ctrf/deployment.json" in result.reason
    assert not Evidence.objects.exists()
    assert UploadLog.objects.get().failed_step == "manifest"


def test_it_rejects_an_unsigned_evidence_directory(ingest: Any, example_recipe: Recipe) -> None:
    result = ingest(tarball(example_files()))

    assert (result.verdict, result.failed_step) == ("rejected", "parse")
    assert "unsigned evidence" in result.reason


def test_it_verifies_a_key_signed_tarball_only_with_a_registered_key(
    ingest: Any, example_recipe: Recipe
) -> None:
    key = generate_key("ecdsa-p256")
    data = signed_example_tarball(sign_dsse_with_key(example_statement(), key))

    refused = ingest(data)
    keys.signing_key_register(name="lab key", public_key_pem=public_pem(key))
    accepted = ingest(data)

    assert (refused.verdict, refused.failed_step) == ("invalid", "signature")
    assert refused.reason.startswith("no registered key matched")
    assert accepted.verdict == "verified", accepted.reason
    assert accepted.signer["class"] == "registered-key"
    assert accepted.evidence.signer.key == SigningKey.objects.get()
    assert accepted.evidence.certificate["mode"] == "key"
    assert Evidence.objects.counted().count() == 1
    assert any("--key" in c["text"] for c in accepted.evidence.verify_commands)

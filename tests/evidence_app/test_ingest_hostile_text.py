"""Text no database column can hold (a NUL character, an unpaired surrogate) anywhere in an
upload: refused with 422 naming the field, never a 500, nothing stored, and the refusal's
upload-log row written (with the hostile text escaped). Run on PostgreSQL in CI, where text and
jsonb columns refuse U+0000."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from evidence_app.models import Evidence, Signer, TrustRoot, UploadLog
from tests.evidence_factories import (
    FIRST_PARTY_IDENTITY,
    GITHUB_ISSUER,
    example_files,
    example_statement,
    tarball,
)
from tests.sigstore_private import PrivateSigstore

NUL = "\x00"


def _signed(sigstore: PrivateSigstore, statement: Any, **kw: Any) -> bytes:
    kw.setdefault("identity", FIRST_PARTY_IDENTITY)
    return sigstore.sign_dsse(statement, issuer=GITHUB_ISSUER, **kw).bundle


def _statement_with(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    statement = example_statement()
    edit(statement)
    return statement


def _unknown_predicate_field(s: dict[str, Any]) -> None:
    s["predicate"]["phases"]["deployment"]["note"] = f"ok{NUL}then"


def _key_with_nul(s: dict[str, Any]) -> None:
    s["predicate"][f"x{NUL}"] = 1


def _lone_surrogate(s: dict[str, Any]) -> None:
    s["predicate"]["comment"] = "\ud800"


def _raw_statement(statement: dict[str, Any]) -> bytes:
    """JSON text with ``\\u0000`` / ``\\ud800`` escapes (json.dumps writes them so)."""
    return json.dumps(statement, sort_keys=True).encode()


def _bundle_case(edit: Callable[[dict[str, Any]], None]) -> Callable[[PrivateSigstore], bytes]:
    return lambda sigstore: _signed(sigstore, _raw_statement(_statement_with(edit)))


def _ctrf_message_with_nul(sigstore: PrivateSigstore) -> bytes:
    """The deployment CTRF report carries a NUL in a test's message (digests re-bound)."""
    files = example_files()
    path = "summary-bundle/ctrf/deployment.json"
    ctrf = json.loads(files[path])
    ctrf["results"]["tests"][0]["message"] = f"failed{NUL}here"
    report = json.dumps(ctrf).encode()
    files[path] = report
    manifest = json.loads(files["summary-bundle/manifest.json"])
    for entry in manifest["files"]:
        if entry["path"] == "ctrf/deployment.json":
            entry.update(size=len(report), sha256="sha256:" + hashlib.sha256(report).hexdigest())
    manifest_bytes = json.dumps(manifest).encode()
    files["summary-bundle/manifest.json"] = manifest_bytes
    statement = example_statement()
    predicate = statement["predicate"]
    predicate["phases"]["deployment"]["ctrfDigest"] = "sha256:" + hashlib.sha256(report).hexdigest()
    predicate["manifest"]["digest"] = "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()
    files["summary-bundle/statement.intoto.json"] = json.dumps(statement).encode()
    bundle = _signed(sigstore, statement)
    files["summary-bundle/attestation.intoto.jsonl"] = bundle.replace(b"\n", b"") + b"\n"
    return tarball(files)


def _claim_with_nul(sigstore: PrivateSigstore) -> bytes:
    claims = {"source_repository_uri": f"https://github.com/NVIDIA/aicr{NUL}"}
    return _signed(sigstore, example_statement(), claims=claims)


def _bundle_json_with_nul(sigstore: PrivateSigstore) -> bytes:
    bundle = json.loads(_signed(sigstore, example_statement()))
    bundle["x-note"] = NUL
    return json.dumps(bundle).encode()


CASES = [
    pytest.param(
        _bundle_case(_unknown_predicate_field),
        "evidence.sigstore.json",
        ("rejected", "statement"),
        "predicate.phases.deployment.note contains a NUL character",
        id="statement-unknown-predicate-field-nul",
    ),
    pytest.param(
        _bundle_case(_key_with_nul),
        "evidence.sigstore.json",
        ("rejected", "statement"),
        "a key in predicate contains a NUL character",
        id="statement-key-nul",
    ),
    pytest.param(
        _bundle_case(_lone_surrogate),
        "evidence.sigstore.json",
        ("rejected", "statement"),
        "predicate.comment contains an unpaired surrogate (U+D800)",
        id="statement-lone-surrogate",
    ),
    pytest.param(
        _ctrf_message_with_nul,
        "evidence.tar.gz",
        ("invalid", "manifest"),
        "results.tests[0].message contains a NUL character",
        id="ctrf-message-nul",
    ),
    pytest.param(
        _claim_with_nul,
        "evidence.sigstore.json",
        ("rejected", "classify"),
        "signer certificate claims: source_repository_uri contains a NUL character",
        id="certificate-claim-nul",
    ),
    pytest.param(
        _bundle_json_with_nul,
        "evidence.sigstore.json",
        ("invalid", "parse"),
        "x-note contains a NUL character",
        id="bundle-json-nul",
    ),
    pytest.param(
        lambda sigstore: _signed(sigstore, example_statement()),
        f"evil{NUL}.sigstore.json",
        ("rejected", "parse"),
        "filename: the value contains a NUL character",
        id="filename-nul",
    ),
]


@pytest.mark.parametrize(("make", "filename", "refusal", "names"), CASES)
def test_unstorable_text_is_refused_naming_the_field(
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    make: Callable[[PrivateSigstore], bytes],
    filename: str,
    refusal: tuple[str, str],
    names: str,
) -> None:
    from evidence_app.services.ingest import evidence_ingest

    data = make(private_sigstore)
    result = evidence_ingest(data=data, artifact=None, filename=filename, user=None, channel="api")

    outcome = (result.verdict, result.failed_step, result.outcome)
    assert outcome == (*refusal, "refused"), result.reason
    assert names in result.reason
    assert not Evidence.objects.exists()
    assert not Signer.objects.exists()
    log = UploadLog.objects.get()
    assert (log.verdict, log.failed_step, log.outcome) == (*refusal, "refused")
    assert NUL not in log.reason
    assert NUL not in log.filename
    assert NUL not in json.dumps(log.transcript, ensure_ascii=False)


@pytest.mark.parametrize(("make", "filename", "refusal", "names"), CASES[:4])
def test_the_api_answers_422_for_unstorable_evidence(
    api: Callable[..., Client],
    make_token: Callable[..., str],
    private_root: TrustRoot,
    private_sigstore: PrivateSigstore,
    make: Callable[[PrivateSigstore], bytes],
    filename: str,
    refusal: tuple[str, str],
    names: str,
) -> None:
    client = api(make_token("carol", "contributor"))

    response = client.post(
        "/api/v1/evidence/", {"bundle": SimpleUploadedFile(filename, make(private_sigstore))}
    )

    assert response.status_code == 422, response.content[:500]
    body = response.json()
    assert (body["verdict"], body["failed_step"]) == refusal
    assert names in body["reason"]
    assert UploadLog.objects.get().outcome == "refused"
    assert not Evidence.objects.exists()

"""The ingest workflow: verify, bind, classify and store one upload (see the package docstring)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.db import OperationalError, connection

from evidence_app.models import UploadLog, UploadOutcome, Verdict
from evidence_app.services import signers
from evidence_app.services.ingest.bind import bind_recipe, catalog_index
from evidence_app.services.ingest.policy import (
    PolicySnapshot,
    VerificationPolicy,
    policy_current,
    policy_snapshot,
)
from evidence_app.services.ingest.record import evidence_fields
from evidence_app.services.ingest.result import IngestResult, refusal, refused_at_parse
from evidence_app.services.ingest.store import store_evidence
from evidence_app.services.ingest.upload_log import (
    Upload,
    busy,
    busy_result,
    log_upload,
    max_upload_bytes,
)
from evidence_app.services.signers import SignerDecision
from evidence_app.verification._json import unstorable_text
from evidence_app.verification.pipeline import VerificationReport, verify_evidence


@dataclass(frozen=True)
class ExpectedSigner:
    """A keyless signer an upload must be signed by."""

    issuer: str
    identity: str


def evidence_ingest(
    *,
    data: bytes,
    artifact: bytes | None,
    filename: str,
    user: Any,
    channel: str,
    oci_ref: str = "",
    oci_manifest_digest: str | None = None,
    upload: UploadLog | None = None,
    is_simulated: bool = False,
    is_demo: bool = False,
    expected_signer: ExpectedSigner | None = None,
    retried_when_busy: bool = False,
) -> IngestResult:
    """Verify, bind, classify and store one upload; see the package docstring.

    ``expected_signer``: the keyless signer the upload must be signed by (an AICR pointer's
    claimed signer, as AICR's ingest pins ``--expected-issuer/--expected-identity-regexp``): any
    other signature fails the ``signature`` step, so nothing contradicting it is stored.

    ``upload``: an existing (OCI) ``UploadLog`` row to complete instead of writing a new one.
    ``oci_manifest_digest``: the (checked) manifest digest ``data`` was pulled from, which an
    OCI-artifact subject must name.
    ``is_simulated``: evidence from a simulated cluster (labelled, never counted).
    ``is_demo``: demo data; evidence signed by a demo key is demo data anyway.
    ``retried_when_busy``: the caller puts ``upload`` back to pending when the database is
    busy, so the row is not completed as ``busy`` on the way (a queued upload).

    A database error that survives the driver's own waiting (a PostgreSQL lock timeout or a lost
    connection) is no verdict: the outcome is ``busy`` with ``retry_after``, nothing is stored,
    and the upload log records it.
    """
    data = bytes(data)
    sent = Upload(
        row=upload,
        user=user,
        channel=channel,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        filename=filename or "",
        oci_ref=oci_ref,
    )
    try:
        return _ingest(
            data,
            artifact=artifact,
            upload=sent,
            oci_manifest_digest=oci_manifest_digest,
            is_simulated=is_simulated,
            is_demo=is_demo,
            expected_signer=expected_signer,
        )
    except OperationalError as exc:
        if connection.in_atomic_block:
            raise  # the caller's transaction is broken: only the caller can recover
        return busy_result(exc) if retried_when_busy else busy(exc, sent)


def _ingest(
    data: bytes,
    *,
    artifact: bytes | None,
    upload: Upload,
    oci_manifest_digest: str | None,
    is_simulated: bool,
    is_demo: bool,
    expected_signer: ExpectedSigner | None,
) -> IngestResult:
    refused = _refused_unread(data, artifact=artifact, filename=upload.filename)
    if refused is not None:
        return log_upload(refused, upload)
    snapshot = policy_snapshot()
    report = _verify(
        data,
        artifact=artifact,
        oci_manifest_digest=oci_manifest_digest,
        policy=policy_current(snapshot=snapshot),
        expected_signer=expected_signer,
    )
    # Who signed, once the signature verified (shown even when a later step refuses).
    decision = _signer_decision(report, snapshot)
    refused = _refused_verification(report, decision)
    if refused is not None:
        return log_upload(refused, upload)
    assert report.statement is not None
    assert decision is not None
    transcript = report.transcript
    recipe, bind_detail = bind_recipe(report.statement, catalog_index(snapshot.version))
    if recipe is None:
        transcript.fail("bind", bind_detail)
        refused = refusal(
            transcript.to_list(),
            verdict=Verdict.REJECTED,
            step="bind",
            reason=bind_detail,
            signer=decision.summary(),
        )
        return log_upload(refused, upload)
    transcript.ok_step("bind", bind_detail)
    transcript.ok_step("classify", decision.detail)
    fields = evidence_fields(
        report,
        decision=decision,
        recipe=recipe,
        data=data,
        artifact=artifact,
        upload=upload,
        is_demo=is_demo,
        is_simulated=is_simulated,
    )
    return store_evidence(
        fields, decision=decision, allowlist_row=snapshot.allowlist_row, upload=upload
    )


def _refused_unread(data: bytes, *, artifact: bytes | None, filename: str) -> IngestResult | None:
    """Refused before verification: a filename no column can hold, or bytes over the limit."""
    unstorable_name = unstorable_text(filename, what="filename")
    if unstorable_name is not None:
        return refused_at_parse(unstorable_name)
    limit = max_upload_bytes()
    for what, blob in (("upload", data), ("artifact", artifact)):
        if blob is not None and len(blob) > limit:
            reason = f"{what} of {len(blob)} bytes exceeds the limit of {limit} bytes"
            return refused_at_parse(reason, outcome=UploadOutcome.TOO_LARGE)
    return None


def _verify(
    data: bytes,
    *,
    artifact: bytes | None,
    oci_manifest_digest: str | None,
    policy: VerificationPolicy,
    expected_signer: ExpectedSigner | None = None,
) -> VerificationReport:
    """``verification.pipeline.verify_evidence`` under the site's policy (pinned to
    ``expected_signer`` when given: that exact issuer and identity, no registered key)."""
    if expected_signer is not None:
        return verify_evidence(
            data,
            trusted_root=policy.trusted_roots,
            issuer=[expected_signer.issuer],
            identity=expected_signer.identity,
            extra_policies=policy.extra_policies or None,
            oci_manifest_digest=oci_manifest_digest,
            artifact=artifact,
        )
    return verify_evidence(
        data,
        trusted_root=policy.trusted_roots,
        issuer=policy.issuers,
        identity_regex=policy.identity_regex,
        extra_policies=policy.extra_policies or None,
        public_keys=policy.public_keys,
        oci_manifest_digest=oci_manifest_digest,
        artifact=artifact,
        # A good signature from an issuer the site does not accept is reported, not refused.
        report_unlisted_issuers=True,
    )


def _signer_decision(report: VerificationReport, snapshot: PolicySnapshot) -> SignerDecision | None:
    """The signer's class under the allowlist in force, once the signature verified."""
    outcome = report.outcome
    if outcome is None or not outcome.ok or outcome.signer is None:
        return None
    return signers.classify(outcome.signer, allowlist=snapshot.allowlist, keys=snapshot.keys)


def _refused_verification(
    report: VerificationReport, decision: SignerDecision | None
) -> IngestResult | None:
    """The refusal of an upload that did not verify, or whose signer's certificate claims (a
    private CA may write anything into them) no column can hold; checked before any row is
    written. The statement and CTRF reports were checked as they were parsed."""
    transcript = report.transcript
    signer_summary = decision.summary() if decision is not None else {}
    if not transcript.ok or report.statement is None:
        failed = transcript.failed_step
        return refusal(
            transcript.to_list(),
            verdict=_verdict_of_failure(report),
            step=failed.step if failed else "parse",
            reason=failed.detail if failed else "not verified",
            signer=signer_summary,
        )
    assert report.outcome is not None
    assert report.outcome.signer is not None
    assert decision is not None  # a verified signature always has a decision
    unstorable_signer = unstorable_text(signer_summary, what="signer") or unstorable_text(
        dict(report.outcome.signer.claims), what="signer certificate claims"
    )
    if unstorable_signer is None:
        return None
    transcript.fail("classify", unstorable_signer)
    return refusal(
        transcript.to_list(),
        verdict=Verdict.REJECTED,
        step="classify",
        reason=unstorable_signer,
        signer=signer_summary,
    )


def _verdict_of_failure(report: VerificationReport) -> str:
    failed = report.transcript.failed_step
    assert failed is not None
    if failed.step == "parse" and report.unsigned:
        return Verdict.REJECTED
    if failed.step in ("parse", "signature"):
        outcome = report.outcome
        unsupported = outcome is not None and outcome.status == "unsupported"
        return Verdict.UNSUPPORTED if unsupported else Verdict.INVALID
    if failed.step == "manifest":
        return Verdict.INVALID
    return Verdict.REJECTED  # statement, bind

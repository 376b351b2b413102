"""The verification half of verify-before-count: parse → signature → statement (→ manifest).

``verify_evidence`` takes uploaded bytes (a Sigstore bundle, or an AICR evidence directory as
tar / tar.gz) and returns a ``VerificationReport`` whose transcript records each step; it stops
at the first failing step. The Django app then records ``bind`` and ``classify`` on the same
transcript (``report.transcript.record(...)``).

Subjects: ``recipe:<name>`` with the recipe digest, or the OCI artifact the bundle was pushed
as (AICR-V1.md §1, §7: ``aicr evidence publish`` signs the artifact's manifest digest). An
artifact subject is accepted only with the content it signs: an evidence directory that came
from that very artifact (``oci_manifest_digest``, the digest the site pulled and checked, must
be the subject's), whose recipe.yaml then carries the recipe identity (manifest step). A bare
bundle, or a directory uploaded as a file, has no OCI manifest to check the subject against:
it is refused at the statement step, saying to submit the OCI reference instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .bundle import BundleError, ParsedBundle, parse_bundle
from .digests import scheme_for
from .signature import SignatureOutcome, verify_signature
from .statement import AicrStatement, StatementError, parse_statement
from .summary_bundle import (
    SummaryArchive,
    SummaryBundle,
    SummaryBundleError,
    check_summary_files,
    open_summary_bundle,
)
from .transcript import Transcript
from .trust import TrustRoot

# How far in the future ``attestedAt`` may be (clock skew between the signer and this site, or
# between the signer and the transparency log).
ATTESTED_AT_SKEW = timedelta(minutes=5)


@dataclass
class VerificationReport:
    transcript: Transcript
    kind: str  # "bundle" | "tarball"
    outcome: SignatureOutcome | None = None
    statement: AicrStatement | None = None
    summary: SummaryBundle | None = None
    media_type: str = ""  # of the uploaded bytes
    unsigned: bool = False  # an evidence directory without a signed attestation

    @property
    def status(self) -> str:
        """``verified`` | ``invalid`` | ``unsupported`` (for the steps run so far)."""
        if self.outcome is not None and self.outcome.status == "unsupported":
            return "unsupported"
        return "verified" if self.transcript.ok and self.statement is not None else "invalid"


def is_archive(data: bytes) -> bool:
    return data[:2] == b"\x1f\x8b" or (len(data) >= 262 and data[257:262] == b"ustar")


def _signature_failure(outcome: SignatureOutcome, key_count: int | None) -> str:
    if outcome.mode == "key" and "registered" in outcome.detail and key_count is not None:
        if not key_count:
            return (
                "no registered key matched: no key is registered (key-signed evidence counts "
                "only with a key a maintainer registered)"
            )
        plural = "s" if key_count != 1 else ""
        return (
            "no registered key matched: the signature does not verify with any of the "
            f"{key_count} active registered key{plural}"
        )
    return ("unsupported: " if outcome.status == "unsupported" else "") + outcome.detail


def _future_attestation(statement: AicrStatement, outcome: SignatureOutcome, now: datetime) -> str:
    """Why ``attestedAt`` cannot be true (later than now, or than the log's integration time,
    beyond the allowed skew); "" when it is plausible."""
    attested = statement.attested_at
    stamp = f"{attested:%Y-%m-%dT%H:%M:%SZ}"
    if attested > now + ATTESTED_AT_SKEW:
        return (
            f"attestedAt {stamp} is in the future (now {now:%Y-%m-%dT%H:%M:%SZ}; allowed clock "
            f"skew {int(ATTESTED_AT_SKEW.total_seconds() // 60)} minutes)"
        )
    integrated = outcome.signer.integrated_time if outcome.signer is not None else None
    if integrated is not None and attested > integrated + ATTESTED_AT_SKEW:
        return (
            f"attestedAt {stamp} is later than the Rekor integrated time "
            f"{integrated:%Y-%m-%dT%H:%M:%SZ}: the statement claims a time after it was logged"
        )
    return ""


def verify_evidence(
    data: bytes,
    *,
    trusted_root: TrustRoot | Sequence[TrustRoot] | None,
    issuer: str | Iterable[str] | None,
    identity: str | None = None,
    identity_regex: str | None = None,
    extra_policies: Mapping[str, str] | Iterable[Any] | None = None,
    public_keys: Sequence[bytes | str] | Mapping[str, bytes | str] = (),
    oci_manifest_digest: str | None = None,
    artifact: bytes | None = None,
    now: datetime | None = None,
    report_unlisted_issuers: bool = False,
) -> VerificationReport:
    """Verify ``data``; ``artifact``: the signed file, for a message signature (and checked
    against a DSSE statement's subject). ``oci_manifest_digest``: ``sha256:<hex>`` of the OCI
    manifest ``data`` was pulled from (checked against the registry's answer by the caller),
    which an OCI-artifact subject must name. ``now``: the clock ``attestedAt`` is checked against.
    ``report_unlisted_issuers``: a keyless signature by an issuer not in ``issuer`` passes,
    flagged (``outcome.signer.issuer_listed``), instead of failing."""
    tarball = is_archive(data)
    report = VerificationReport(transcript=Transcript(), kind="tarball" if tarball else "bundle")
    opened = _parse_step(data, report, tarball=tarball)
    if opened is None:
        return report
    parsed, archive = opened
    try:
        outcome = verify_signature(
            parsed,
            trusted_root=trusted_root,
            identity=identity,
            identity_regex=identity_regex,
            issuer=issuer,
            extra_policies=extra_policies or None,
            public_keys=public_keys,
            artifact=artifact,
            report_unlisted_issuers=report_unlisted_issuers,
        )
    except ValueError as exc:
        outcome = _configuration_failure(exc)
    report.outcome = outcome
    if not outcome.ok:
        key_count = len(public_keys)
        report.transcript.fail("signature", _signature_failure(outcome, key_count))
        return report
    report.transcript.ok_step("signature", outcome.detail)
    statement = _statement_step(
        report,
        outcome,
        archive=archive,
        oci_manifest_digest=oci_manifest_digest,
        now=now or datetime.now(UTC),
    )
    if statement is not None and archive is not None:
        _manifest_step(report, archive, statement)
    return report


def _parse_step(
    data: bytes, report: VerificationReport, *, tarball: bool
) -> tuple[ParsedBundle, SummaryArchive | None] | None:
    """The bundle (from an evidence directory's attestation when ``tarball``) and the
    directory; ``None`` when parsing failed (the transcript says why)."""
    transcript = report.transcript
    archive = None
    if tarball:
        report.media_type = "application/gzip" if data[:2] == b"\x1f\x8b" else "application/x-tar"
        try:
            archive = open_summary_bundle(data)
            bundle_bytes = archive.signed_bundle
        except SummaryBundleError as exc:
            transcript.fail("parse", str(exc))
            return None
        if bundle_bytes is None:
            report.unsigned = True
            transcript.fail(
                "parse",
                "unsigned evidence: the archive has no attestation.intoto.jsonl (sign it with "
                "`aicr evidence publish` or cosign first)",
            )
            return None
        detail = f"tar archive, {len(archive.files)} files in {archive.root or './'}"
    else:
        bundle_bytes = data
        detail = ""
    try:
        parsed: ParsedBundle = parse_bundle(bundle_bytes)
    except BundleError as exc:
        status = "unsupported: " if exc.unsupported else ""
        report.outcome = SignatureOutcome(
            status="unsupported" if exc.unsupported else "invalid", detail=str(exc), step="parse"
        )
        transcript.fail("parse", status + str(exc))
        return None
    if not tarball:
        report.media_type = parsed.media_type or "application/vnd.dsse.envelope.v1+json"
    kind = "DSSE" if parsed.content == "dsse" else "message signature"
    material = "certificate" if parsed.has_certificate else "public key"
    bundle = f"Sigstore bundle {parsed.version or 'envelope'}, {kind}, {material}"
    transcript.ok_step("parse", "; ".join(filter(None, [detail, bundle])))
    return parsed, archive


def _configuration_failure(exc: ValueError) -> SignatureOutcome:
    """Only configuration can make ``verify_signature`` raise (no enabled trusted root, no
    accepted issuer): a failed signature step that names it."""
    message = str(exc)
    if "trusted root" in message:
        message = "no trusted root is enabled for keyless verification"
    elif "issuer" in message:
        message = "no OIDC issuer is accepted (EVIDENCE_ACCEPTED_ISSUERS and allowlist empty)"
    return SignatureOutcome(status="invalid", detail=message, step="signature")


def _artifact_subject_problem(
    statement: AicrStatement, *, archive: SummaryArchive | None, oci_manifest_digest: str | None
) -> str:
    """Why an OCI-artifact subject cannot be accepted with what arrived ("" when it can, or
    the subject is ``recipe:<name>``); see the module docstring."""
    if not statement.artifact_subject:
        return ""
    subject = f"{statement.subject.name[:200]!r} (sha256:{statement.subject.sha256[:12]}…)"
    if archive is None:
        return (
            f"subject {subject} is an OCI artifact, not recipe:{statement.recipe_name}: a "
            "bare bundle does not carry the recipe.yaml its predicate.recipe must be checked "
            "against; submit the evidence by its OCI reference"
        )
    if oci_manifest_digest is None:
        return (
            f"subject {subject} is an OCI artifact, not recipe:{statement.recipe_name}: an "
            "uploaded evidence directory has no OCI manifest to check that digest against; "
            "submit it by its OCI reference (registry/repository@sha256:"
            f"{statement.subject.sha256[:12]}…)"
        )
    if oci_manifest_digest != f"sha256:{statement.subject.sha256}":
        return (
            f"subject digest sha256:{statement.subject.sha256[:12]}… is not the digest of the "
            f"OCI artifact the evidence was pulled as ({oci_manifest_digest[:19]}…)"
        )
    return ""


def _statement_step(
    report: VerificationReport,
    outcome: SignatureOutcome,
    *,
    archive: SummaryArchive | None,
    oci_manifest_digest: str | None,
    now: datetime,
) -> AicrStatement | None:
    """The verified payload as AICR recipe evidence attested no later than now (and than the
    log's integration time), with a subject what arrived can vouch for; ``None`` when it is
    not (the transcript says why)."""
    transcript = report.transcript
    try:
        statement = parse_statement(
            outcome.payload, payload_type=outcome.payload_type, allow_artifact_subject=True
        )
    except StatementError as exc:
        transcript.fail("statement", str(exc))
        return None
    problem = _artifact_subject_problem(
        statement, archive=archive, oci_manifest_digest=oci_manifest_digest
    ) or _future_attestation(statement, outcome, now)
    if problem:
        transcript.fail("statement", problem)
        return None
    report.statement = statement
    subject = f"; subject OCI artifact {oci_manifest_digest}" if statement.artifact_subject else ""
    transcript.ok_step(
        "statement",
        f"{statement.predicate_type}: recipe {statement.recipe_name} "
        f"sha256:{statement.recipe_digest[:12]}…, "
        f"attested {statement.attested_at:%Y-%m-%dT%H:%M:%SZ}, AICR {statement.aicr_version}"
        + subject,
    )
    return statement


def _manifest_step(
    report: VerificationReport, archive: SummaryArchive, statement: AicrStatement
) -> None:
    """An evidence directory's files against ``manifest.json`` and the statement's digests."""
    try:
        summary = check_summary_files(archive, statement=statement)
    except SummaryBundleError as exc:
        report.statement = None
        report.transcript.fail("manifest", str(exc))
        return
    report.summary = summary
    recipe = (
        f"; recipe.yaml has predicate.recipe's {scheme_for(statement.predicate_type).label}"
        if summary.recipe_digests is not None
        else ""
    )
    report.transcript.ok_step(
        "manifest",
        f"{len(summary.manifest)} files match manifest.json; CTRF digests match for "
        + ", ".join(sorted(summary.ctrf))
        + recipe,
    )


def signed_payload(data: bytes) -> bytes | None:
    """The DSSE payload ``data`` carries (a bundle, or an evidence directory's attestation),
    parsed but not verified; ``None`` when there is none.

    For bytes that were verified before (stored evidence), this is the verified statement:
    migration 0005 reads stored records' identity with it.
    """
    try:
        if is_archive(data):
            bundle_bytes = open_summary_bundle(data).signed_bundle
            if bundle_bytes is None:
                return None
        else:
            bundle_bytes = data
        return parse_bundle(bundle_bytes).payload
    except (BundleError, SummaryBundleError):
        return None

"""The verification half of verify-before-count: parse → signature → statement (→ manifest).

``verify_evidence`` takes uploaded bytes (a Sigstore bundle, or an AICR evidence directory as
tar / tar.gz) and returns a ``VerificationReport`` whose transcript records each step; it stops
at the first failing step. The Django app then records ``bind`` and ``classify`` on the same
transcript (``report.transcript.record(...)``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .bundle import BundleError, ParsedBundle, parse_bundle
from .signature import SignatureOutcome, verify_signature
from .statement import AicrStatement, StatementError, parse_statement
from .summary_bundle import (
    SummaryBundle,
    SummaryBundleError,
    check_summary_files,
    open_summary_bundle,
)
from .transcript import Transcript
from .trust import TrustRoot


@dataclass
class VerificationReport:
    transcript: Transcript
    kind: str  # "bundle" | "tarball"
    outcome: SignatureOutcome | None = None
    statement: AicrStatement | None = None
    summary: SummaryBundle | None = None

    @property
    def status(self) -> str:
        """``verified`` | ``invalid`` | ``unsupported`` (for the steps run so far)."""
        if self.outcome is not None and self.outcome.status == "unsupported":
            return "unsupported"
        return "verified" if self.transcript.ok and self.statement is not None else "invalid"


def is_archive(data: bytes) -> bool:
    return data[:2] == b"\x1f\x8b" or (len(data) >= 262 and data[257:262] == b"ustar")


def verify_evidence(
    data: bytes,
    *,
    trusted_root: TrustRoot | Sequence[TrustRoot] | None,
    issuer: str | Iterable[str] | None,
    identity: str | None = None,
    identity_regex: str | None = None,
    extra_policies: Mapping[str, str] | Iterable[Any] | None = None,
    public_keys: Sequence[bytes | str] | Mapping[str, bytes | str] = (),
    allow_artifact_subject: bool = False,
) -> VerificationReport:
    transcript = Transcript()
    tarball = is_archive(data)
    report = VerificationReport(transcript=transcript, kind="tarball" if tarball else "bundle")

    archive = None
    if tarball:
        try:
            archive = open_summary_bundle(data)
            bundle_bytes = archive.signed_bundle
        except SummaryBundleError as exc:
            transcript.fail("parse", str(exc))
            return report
        if bundle_bytes is None:
            transcript.fail(
                "parse", "unsigned evidence: the archive has no attestation.intoto.jsonl"
            )
            return report
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
        return report
    kind = "DSSE" if parsed.content == "dsse" else "message signature"
    material = "certificate" if parsed.has_certificate else "public key"
    transcript.ok_step(
        "parse",
        "; ".join(
            filter(
                None,
                [detail, f"Sigstore bundle {parsed.version or 'envelope'}, {kind}, {material}"],
            )
        ),
    )

    outcome = verify_signature(
        parsed,
        trusted_root=trusted_root,
        identity=identity,
        identity_regex=identity_regex,
        issuer=issuer,
        extra_policies=extra_policies,
        public_keys=public_keys,
    )
    report.outcome = outcome
    if not outcome.ok:
        prefix = "unsupported: " if outcome.status == "unsupported" else ""
        transcript.fail("signature", prefix + outcome.detail)
        return report
    transcript.ok_step("signature", outcome.detail)

    try:
        statement = parse_statement(
            outcome.payload,
            payload_type=outcome.payload_type,
            allow_artifact_subject=allow_artifact_subject,
        )
    except StatementError as exc:
        transcript.fail("statement", str(exc))
        return report
    report.statement = statement
    transcript.ok_step(
        "statement",
        f"{statement.predicate_type}: recipe {statement.recipe_name} "
        f"sha256:{statement.recipe_digest[:12]}…, "
        f"attested {statement.attested_at:%Y-%m-%dT%H:%M:%SZ}",
    )

    if archive is not None:
        try:
            summary = check_summary_files(archive, statement=statement)
        except SummaryBundleError as exc:
            report.statement = None
            transcript.fail("manifest", str(exc))
            return report
        report.summary = summary
        transcript.ok_step(
            "manifest",
            f"{len(summary.manifest)} files match manifest.json; CTRF digests match for "
            + ", ".join(sorted(summary.ctrf)),
        )
    return report

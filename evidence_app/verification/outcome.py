"""What a signature check comes to (``SignatureOutcome``, ``SignerClaims``), and the helpers the
keyless (``signature``) and key-signed (``keyed``) verifiers share."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from ._json import JSONLimitError, JSONLimits, load_json
from .bundle import IN_TOTO_PAYLOAD_TYPE, BundleError, ParsedBundle, parse_bundle

Status = Literal["ok", "invalid", "unsupported"]
Mode = Literal["keyless", "key"]
MAX_DETAIL = 400
_PAYLOAD_LIMITS = JSONLimits(max_bytes=1_000_000, max_depth=64, max_object_keys=1_000)
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


@dataclass(frozen=True)
class SignerClaims:
    """Who signed, as established by verification (never from unverified bundle text)."""

    mode: Mode
    # keyless
    identity: str | None = None
    issuer: str | None = None
    claims: Mapping[str, str] = field(default_factory=dict)
    certificate_sha256: str | None = None
    certificate_not_before: datetime | None = None
    certificate_not_after: datetime | None = None
    trusted_root: str | None = None
    production_root: bool = False
    tlog_kind: str | None = None
    rekor_log_index: int | None = None
    rekor_log_id: str | None = None
    integrated_time: datetime | None = None
    timestamp_authority_time: datetime | None = None
    issuer_listed: bool = True  # False: verified, but not one of the caller's expected issuers
    # key-signed
    key_fingerprint: str | None = None
    key_id: str | None = None
    key_index: int | None = None

    @property
    def signed_at(self) -> datetime | None:
        """The verified signing time (Rekor v1 integrated time, else the TSA time)."""
        return self.integrated_time or self.timestamp_authority_time

    # GitHub Actions conveniences: the current Fulcio claims, else the deprecated 1.2-1.6 ones.
    @property
    def repository(self) -> str | None:
        return self.claims.get("source_repository_uri") or self.claims.get(
            "github_workflow_repository"
        )

    @property
    def ref(self) -> str | None:
        return self.claims.get("source_repository_ref") or self.claims.get("github_workflow_ref")

    @property
    def sha(self) -> str | None:
        return self.claims.get("source_repository_digest") or self.claims.get("github_workflow_sha")

    @property
    def workflow_trigger(self) -> str | None:
        return self.claims.get("build_trigger") or self.claims.get("github_workflow_trigger")

    @property
    def workflow_name(self) -> str | None:
        return self.claims.get("github_workflow_name")

    @property
    def workflow_ref(self) -> str | None:
        """The caller workflow (build config URI), e.g. ``…/.github/workflows/x.yml@refs/…``."""
        return self.claims.get("build_config_uri")

    @property
    def run_invocation_uri(self) -> str | None:
        return self.claims.get("run_invocation_uri")

    @property
    def runner_environment(self) -> str | None:
        return self.claims.get("runner_environment")


@dataclass(frozen=True)
class SignatureOutcome:
    status: Status
    detail: str
    mode: Mode | None = None
    step: Literal["parse", "signature"] = "signature"
    content: Literal["dsse", "message_signature"] | None = None
    payload_type: str | None = None
    payload: bytes | None = field(default=None, repr=False)
    signer: SignerClaims | None = None
    bundle_sha256: str | None = None
    media_type: str | None = None
    has_tlog_entry: bool = False
    rekor_v2: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def is_in_toto(self) -> bool:
        return self.ok and self.payload_type == IN_TOTO_PAYLOAD_TYPE and self.payload is not None


def one_line(text: str) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= MAX_DETAIL else line[: MAX_DETAIL - 1] + "…"


def failure(
    status: Status,
    detail: str,
    *,
    parsed: ParsedBundle | None = None,
    mode: Mode | None = None,
    step: Literal["parse", "signature"] = "signature",
) -> SignatureOutcome:
    return SignatureOutcome(
        status=status,
        detail=one_line(detail),
        mode=mode,
        step=step,
        content=parsed.content if parsed else None,
        bundle_sha256=parsed.sha256 if parsed else None,
        media_type=parsed.media_type if parsed else None,
        has_tlog_entry=bool(parsed and parsed.tlog_entries),
    )


def parsed_or_failure(bundle: bytes | str | ParsedBundle) -> ParsedBundle | SignatureOutcome:
    if isinstance(bundle, ParsedBundle):
        return bundle
    try:
        return parse_bundle(bundle)
    except BundleError as exc:
        return failure("unsupported" if exc.unsupported else "invalid", str(exc), step="parse")


def artifact_digest(artifact: bytes | None, artifact_sha256: str | None) -> str | None:
    if artifact is not None:
        digest = hashlib.sha256(artifact).hexdigest()
        if artifact_sha256 is not None and artifact_sha256.lower() != digest:
            raise ValueError("artifact and artifact_sha256 disagree")
        return digest
    if artifact_sha256 is not None:
        if not _HEX64.fullmatch(artifact_sha256):
            raise ValueError("artifact_sha256 must be 64 hex digits")
        return artifact_sha256.lower()
    return None


def subject_mismatch(payload_type: str, payload: bytes, digest: str) -> str | None:
    """None when ``digest`` is the sha256 of one of the statement's subjects, else the reason."""
    if payload_type != IN_TOTO_PAYLOAD_TYPE:
        return f"payloadType {payload_type[:80]!r} is not in-toto; cannot match the artifact"
    try:
        statement = load_json(payload, what="payload", limits=_PAYLOAD_LIMITS)
    except JSONLimitError as exc:
        return f"cannot match the artifact: {exc}"
    subjects = statement.get("subject") if isinstance(statement, dict) else None
    if not isinstance(subjects, list):
        return "cannot match the artifact: the statement has no subject list"
    for subject in subjects:
        if isinstance(subject, dict) and isinstance(subject.get("digest"), dict):
            value = subject["digest"].get("sha256")
            if isinstance(value, str) and value.lower() == digest:
                return None
    return f"artifact sha256 {digest} is not among the in-toto subjects"

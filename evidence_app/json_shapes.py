"""The shapes of the JSON columns of ``Evidence`` and ``UploadLog``, as their one writer
(``services.ingest``) stores them.

Readers annotate with these instead of re-checking every level with ``isinstance``: the writer
guarantees the shape. The exception is ``Predicate``: it is the signer's own text, so only the
fields ``verification.statement`` parses (and rejects when malformed) are typed; the rest are
``object`` and readers must still check what they read.
"""

from __future__ import annotations

from typing import Literal, Required, TypedDict

from recipes_app.resolver.checks import Threshold


class TranscriptStep(TypedDict):
    """One verification step (``verification.transcript.TranscriptStep.as_dict``)."""

    step: str
    ok: bool
    detail: str


type Transcript = list[TranscriptStep]


class Metric(TypedDict):
    """A number a check printed (``[RESULT: ]<label>: <value> [unit]``)."""

    label: str
    value: float
    unit: str | None


class CheckResult(TypedDict):
    """One CTRF test of a phase, with the recipe's declared thresholds for it."""

    status: str  # one of verification.ctrf.STATUSES
    raw_status: str
    duration_ms: float | None
    message: str | None
    metrics: list[Metric]
    thresholds: list[Threshold]


# ``{phase: {check name: result}}``; empty unless the upload carried CTRF reports (a tarball).
type CheckResults = dict[str, dict[str, CheckResult]]


class KeyCertificate(TypedDict):
    """Evidence signed with a registered key: which key, as it was at ingest."""

    mode: Literal["key"]
    key_id: int
    key_name: str
    key_fingerprint: str | None
    algorithm: str
    is_demo_key: bool


class KeylessCertificate(TypedDict):
    """Evidence signed keyless: the verified Fulcio certificate and its transparency proof.
    Times are ISO 8601 strings."""

    mode: Literal["keyless"]
    identity: str | None
    issuer: str | None
    claims: dict[str, str]  # Fulcio extension claims (OID names → values)
    certificate_sha256: str | None
    not_before: str | None
    not_after: str | None
    trusted_root: str | None
    production_root: bool | None
    tlog_kind: str | None
    rekor_log_index: int | None
    rekor_log_id: str | None
    integrated_time: str | None
    timestamp_authority_time: str | None


type Certificate = KeyCertificate | KeylessCertificate


class StoredCommand(TypedDict):
    """A copy-paste command built from verified values only: a
    ``verification.commands.VerifyCommand`` as stored, its argv joined into ``text``."""

    tool: str
    text: str
    note: str


class PhaseCounts(TypedDict):
    """``predicate.phases.<phase>``: required and checked by ``verification.statement``."""

    passed: int
    failed: int
    skipped: int
    ctrfDigest: str


class Predicate(TypedDict, total=False):
    """The in-toto predicate exactly as signed. ``phases`` was parsed and validated before the
    evidence was stored; every other value is the signer's text, typed ``object`` so that a
    reader has to check it (it is untrusted input, whatever the signature proves)."""

    phases: Required[dict[str, PhaseCounts]]
    schemaVersion: object
    attestedAt: object
    aicrVersion: object
    validatorCatalogVersion: object
    validatorImages: object
    fingerprint: object
    criteriaMatch: object
    bom: object
    manifest: object
    redaction: object
    profile: object
    recipe: object

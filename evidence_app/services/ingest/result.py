"""What one upload came to: the ``IngestResult`` every path of the ingest returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evidence_app.models import Evidence, UploadLog, UploadOutcome, Verdict


@dataclass
class IngestResult:
    """What happened to one upload (also the API's response body, less ``evidence``).

    ``outcome`` says it in the domain's words; the views choose the HTTP status from it.
    """

    evidence: Evidence | None
    created: bool
    verdict: str
    failed_step: str
    signer: dict[str, Any]
    transcript: list[dict[str, Any]]
    reason: str
    outcome: UploadOutcome
    upload: UploadLog | None = None
    retry_after: int | None = None  # seconds: the database could not take it now; retry

    @property
    def ok(self) -> bool:
        return self.verdict == Verdict.VERIFIED

    @property
    def unavailable(self) -> bool:
        """Nothing was decided: a database write failed (e.g. a lock timeout); retry later."""
        return self.retry_after is not None


def refusal(
    transcript: list[dict[str, Any]],
    *,
    verdict: str,
    step: str,
    reason: str,
    outcome: UploadOutcome = UploadOutcome.REFUSED,
    signer: dict[str, Any] | None = None,
) -> IngestResult:
    """A refused upload: nothing stored, the step that refused it and why."""
    return IngestResult(
        evidence=None,
        created=False,
        verdict=verdict,
        failed_step=step,
        signer=signer or {},
        transcript=transcript,
        reason=reason,
        outcome=outcome,
    )


def refused_at_parse(
    reason: str, *, outcome: UploadOutcome = UploadOutcome.REFUSED
) -> IngestResult:
    """Refused before verification read the bytes (a bad filename, too large)."""
    return refusal(
        [{"step": "parse", "ok": False, "detail": reason}],
        verdict=Verdict.REJECTED,
        step="parse",
        reason=reason,
        outcome=outcome,
    )

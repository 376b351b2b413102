"""The HTTP status of an upload's outcome: the one place the views translate it."""

from __future__ import annotations

from evidence_app.models import UploadOutcome

HTTP_STATUS = {
    UploadOutcome.CREATED: 201,
    UploadOutcome.EXISTING: 200,
    UploadOutcome.REFUSED: 422,
    UploadOutcome.TOO_LARGE: 413,
    UploadOutcome.BUSY: 503,
}
# An OCI upload still waiting for its worker has no outcome yet: accepted.
PENDING = 202


def http_status_of(outcome: str) -> int:
    """201 stored, 200 already known, 422 refused, 413 too large, 503 busy; 202 not decided."""
    return HTTP_STATUS[UploadOutcome(outcome)] if outcome else PENDING

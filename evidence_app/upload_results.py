"""The page an upload redirects to (post/redirect/get): its upload-log row, for its uploader.

An upload's outcome (new record, already known, a withdrawn copy, refused at a step, queued
OCI pull) is stored in its ``UploadLog`` row, so the result has its own address: reloading it
re-reads the outcome instead of sending the file again. Only the user who uploaded it may read
it (a refused upload's reason and file name are theirs).
"""

from __future__ import annotations

from typing import Any

from evidence_app.models import UploadLog
from evidence_app.selectors import HEAVY_FIELDS
from evidence_app.services.staleness import staleness_bulk


def upload_for_uploader(*, pk: int, user: Any) -> UploadLog | None:
    """``pk``'s upload-log row when ``user`` made it, else ``None`` (whoever else asks)."""
    if not getattr(user, "is_authenticated", False):
        return None
    return (
        UploadLog.objects.select_related("evidence", "evidence__signer")
        .defer(*(f"evidence__{name}" for name in HEAVY_FIELDS))
        .filter(pk=pk, user=user)
        .first()
    )


def result_context(upload: UploadLog) -> dict[str, Any]:
    """What ``evidence_app/result.html`` shows of a stored outcome."""
    evidence = upload.evidence
    return {
        "upload": upload,
        "verdict": upload.verdict,
        "failed_step": upload.failed_step,
        "transcript": upload.transcript,
        "reason": upload.reason,
        "created": bool(upload.created),
        "evidence": evidence,
        "filename": upload.filename if upload.channel != "oci" else "",
        "oci_ref": upload.oci_ref,
        "stale": staleness_bulk([evidence]).get(evidence.pk, []) if evidence is not None else [],
    }

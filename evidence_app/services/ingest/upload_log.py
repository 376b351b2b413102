"""The ``UploadLog`` row every upload writes, whatever became of it, and the refusals decided
before any byte is read (too large) or when the database cannot take the upload (busy)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection
from django.utils import timezone

from evidence_app.models import UploadLog, UploadOutcome, UploadState
from evidence_app.services.ingest.result import IngestResult, refused_at_parse
from evidence_app.services.ingest.rows import insert_row
from evidence_app.verification._json import storable

logger = logging.getLogger(__name__)

DEFAULT_MAX_UPLOAD_BYTES = 10 * 1024 * 1024
# Room for the multipart framing and the other form fields around the file(s).
MULTIPART_OVERHEAD = 64 * 1024
# How long a client should wait before retrying an upload the database could not take.
RETRY_AFTER_SECONDS = 5
# Writing the upload log of such an upload: tries, and the pause before each retry.
LOG_WRITE_PAUSES = (0.0, 0.25, 1.0)
MAX_REASON = 1000


def max_upload_bytes() -> int:
    return int(getattr(settings, "EVIDENCE_MAX_UPLOAD_BYTES", DEFAULT_MAX_UPLOAD_BYTES))


@dataclass(frozen=True)
class Upload:
    """Who sent what by which channel: what the upload's log row records beside the result.

    ``row``: an OCI upload's pending ``UploadLog``, completed instead of writing a new one.
    """

    row: UploadLog | None
    user: Any
    channel: str
    sha256: str
    size: int
    filename: str
    oci_ref: str


def is_user(user: Any) -> bool:
    return user is not None and getattr(user, "is_authenticated", False) and user.pk is not None


def log_upload(result: IngestResult, upload: Upload) -> IngestResult:
    """Write (or complete) the upload's log row; the result, with ``upload`` set."""
    log = upload.row or UploadLog(
        user=upload.user if is_user(upload.user) else None, channel=upload.channel
    )
    log.state = UploadState.DONE
    # What a refused upload carried may be text no column can hold (a NUL, a lone surrogate,
    # echoed in a reason or a signer's identity): the log keeps it escaped.
    log.oci_ref = storable(upload.oci_ref) or log.oci_ref
    log.sha256 = upload.sha256
    log.size = upload.size
    log.filename = storable(upload.filename)[:255]
    log.verdict = result.verdict
    log.failed_step = result.failed_step
    log.reason = storable(result.reason)[:MAX_REASON]
    log.transcript = storable(result.transcript)
    log.signer = storable(result.signer)
    log.created = result.created if result.ok else None
    log.outcome = result.outcome
    log.completed_at = timezone.now()
    log.evidence = result.evidence
    if log._state.adding:
        insert_row(log)
    else:  # an OCI upload's pending row, completed by the worker
        log.save()
    result.upload = log
    return result


def busy(exc: OperationalError, upload: Upload) -> IngestResult:
    """The answer to an upload the database could not take, with its upload-log row (retried:
    the same contention may hold for a moment); a log that cannot be written is logged."""
    result = busy_result(exc)
    failure = ""
    for pause in LOG_WRITE_PAUSES:
        time.sleep(pause)
        try:
            # A row read earlier (OCI) may hold state the failed transaction rolled back.
            row = UploadLog.objects.get(pk=upload.row.pk) if upload.row is not None else None
            return log_upload(result, replace(upload, row=row))
        except OperationalError as again:
            failure = " ".join(str(again).split())[:200]
    logger.error(
        "upload log NOT written after %d tries (%s); the refused upload was: channel=%s "
        "sha256=%s size=%s: %s",
        len(LOG_WRITE_PAUSES),
        failure,
        upload.channel,
        upload.sha256,
        upload.size,
        result.reason,
    )
    return result


def busy_result(exc: OperationalError) -> IngestResult:
    """The ``busy`` answer alone, without its log row: for an upload whose caller keeps its row
    pending for a retry (a queued upload), which must never read as finished meanwhile."""
    problem = " ".join(str(exc).split())[:200] or type(exc).__name__
    reason = (
        f"the database could not store this upload now ({problem}); nothing was stored: "
        f"retry in {RETRY_AFTER_SECONDS} seconds"
    )
    logger.warning("upload not stored: %s", problem)
    return IngestResult(
        evidence=None,
        created=False,
        verdict="",
        failed_step="store",
        signer={},
        transcript=[{"step": "store", "ok": False, "detail": reason}],
        reason=reason,
        outcome=UploadOutcome.BUSY,
        retry_after=RETRY_AFTER_SECONDS,
    )


def refuse_if_too_large(
    *, content_length: str | None, user: Any, channel: str
) -> IngestResult | None:
    """Refuse (and log) an upload whose declared ``Content-Length`` is over the limit, before
    any of the body is read; ``None`` when it may be read."""
    limit = max_upload_bytes()
    declared = content_length or "0"
    size = int(declared) if declared.isdigit() else 0
    if size <= limit + MULTIPART_OVERHEAD:
        return None
    reason = (
        f"upload of {size:,} bytes exceeds the limit of {limit:,} bytes (EVIDENCE_MAX_UPLOAD_BYTES)"
    )
    return upload_refused(
        user=user, channel=channel, size=size, reason=reason, outcome=UploadOutcome.TOO_LARGE
    )


def upload_refused(
    *,
    user: Any,
    channel: str,
    size: int,
    reason: str,
    outcome: UploadOutcome = UploadOutcome.REFUSED,
    filename: str = "",
) -> IngestResult:
    """Record an upload refused before its bytes were read (e.g. too large). The refusal
    stands even when the database cannot take its log row (then the error log says so)."""
    result = refused_at_parse(reason, outcome=outcome)
    upload = Upload(
        row=None,
        user=user,
        channel=channel,
        sha256="",
        size=min(max(size, 0), 2**31 - 1),
        filename=filename,
        oci_ref="",
    )
    try:
        log_upload(result, upload)
    except OperationalError as exc:
        if connection.in_atomic_block:
            raise
        logger.error("upload log NOT written (%s) for a refused upload: %s", exc, reason)
    return result

"""Uploads an ``ingest`` worker finishes: an OCI reference it pulls, or a bundle sent with
``Prefer: respond-async`` whose bytes wait in ``QueuedBundle`` (the upload answers 202 with its
status URL instead of verifying in the request).

Both kinds share one claim: a worker takes the ``UploadLog`` row (``running``, ``claimed_at``)
for a lease of ``EVIDENCE_OCI_LEASE_SECONDS``; a redelivered task (a worker restart,
``acks_late``) that finds it running under a live lease raises ``LeaseHeld`` instead of working
alongside the first, and once the lease has expired the first is presumed dead.
``MAX_ATTEMPTS`` caps an upload that keeps killing workers.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from evidence_app.models import QueuedBundle, UploadLog, UploadOutcome, UploadState, Verdict
from evidence_app.services.ingest.service import evidence_ingest

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
# How long a worker's claim on an upload stands before another may take it over.
DEFAULT_LEASE_SECONDS = 15 * 60
INTERNAL_ERROR = "internal error while verifying; the maintainers were notified"


class LeaseHeld(Exception):
    """Another worker claimed this upload less than a lease ago (it may still be working)."""

    def __init__(self, upload_id: int, retry_in: float) -> None:
        super().__init__(f"upload {upload_id} is being processed; retry in {retry_in:.0f}s")
        self.retry_in = retry_in


class Busy(LeaseHeld):
    """The database could not take the upload now (its outcome would have been ``busy``):
    the upload is pending again, its bytes kept, to be retried in ``retry_in`` seconds."""


def lease_seconds() -> float:
    return float(getattr(settings, "EVIDENCE_OCI_LEASE_SECONDS", DEFAULT_LEASE_SECONDS))


def finish_refused(log: UploadLog, message: str, verdict: str, *, step: str = "parse") -> UploadLog:
    """Finish a claimed ``log`` refused, naming why (nothing stored). An upload refused
    before any row exists is ``upload_log.upload_refused``'s."""
    log.state = UploadState.DONE
    log.verdict = verdict
    log.failed_step = step
    log.reason = message[:1000]
    log.transcript = [{"step": step, "ok": False, "detail": message[:500]}]
    log.outcome = UploadOutcome.REFUSED
    log.completed_at = timezone.now()
    log.save()
    return log


def upload_claim(upload_id: int) -> tuple[UploadLog | None, bool]:
    """``(the upload, whether this worker now holds it)``: a finished one comes back not held,
    a gone one as None, one that used up its attempts refused; raises ``LeaseHeld`` while
    another worker's lease stands."""
    now = timezone.now()
    expired = now - timedelta(seconds=lease_seconds())
    claimable = Q(state=UploadState.PENDING) | Q(
        Q(claimed_at__isnull=True) | Q(claimed_at__lt=expired), state=UploadState.RUNNING
    )
    claimed = UploadLog.objects.filter(claimable, pk=upload_id, attempts__lt=MAX_ATTEMPTS).update(
        state=UploadState.RUNNING, attempts=F("attempts") + 1, claimed_at=now
    )
    log = UploadLog.objects.select_related("user").filter(pk=upload_id).first()
    if log is None or claimed:
        return log, bool(claimed)
    if log.state == UploadState.DONE:
        return log, False
    claimed_at = log.claimed_at if log.state == UploadState.RUNNING else None
    if claimed_at is not None and claimed_at >= expired:  # another worker's live lease
        raise LeaseHeld(upload_id, max((claimed_at - expired).total_seconds(), 1.0))
    return finish_refused(log, f"gave up after {log.attempts} attempts", Verdict.REJECTED), False


@transaction.atomic
def bundle_queue(*, data: bytes, artifact: bytes | None, filename: str, user: Any) -> UploadLog:
    """Keep an upload's bytes for a worker and enqueue it (after commit): its ``UploadLog`` is
    ``pending`` until the worker finishes it. The caller has applied the size limit."""
    from evidence_app import tasks  # tasks import the ingest services

    log = UploadLog.objects.create(
        user=user if getattr(user, "is_authenticated", False) else None,
        channel="api",
        state=UploadState.PENDING,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        filename=(filename or "")[:255],
    )
    QueuedBundle.objects.create(upload=log, data=data, artifact=artifact)
    upload_id = log.pk
    # robust: where tasks run in-process (no broker), a failure leaves the upload pending, as
    # a worker's would, instead of failing the request that already committed it.
    transaction.on_commit(lambda: tasks.ingest_queued.delay(upload_id), robust=True)
    return log


def queued_upload_process(*, upload_id: int) -> UploadLog | None:
    """Verify and store a queued bundle (idempotent: a finished upload is left alone). Its
    bytes are deleted once the upload has an outcome; until then a redelivery finds them."""
    log, held = upload_claim(upload_id)
    if log is None or not held:
        if log is not None:
            QueuedBundle.objects.filter(upload_id=upload_id).delete()
        return log
    queued = QueuedBundle.objects.filter(upload_id=upload_id).first()
    if queued is None:
        return finish_refused(
            log, "its bytes are gone (deleted before a worker reached it)", Verdict.REJECTED
        )
    try:
        result = evidence_ingest(
            data=bytes(queued.data),
            artifact=bytes(queued.artifact) if queued.artifact is not None else None,
            filename=log.filename,
            user=log.user,
            channel=log.channel,
            upload=log,
            retried_when_busy=True,
        )
    except Exception:
        logger.exception("queued upload %s failed unexpectedly", upload_id)
        finish_refused(log, INTERNAL_ERROR, Verdict.INVALID)
        raise
    if result.unavailable:  # the database could not take it now: the bytes wait for a retry
        UploadLog.objects.filter(pk=upload_id).update(state=UploadState.PENDING, claimed_at=None)
        raise Busy(upload_id, float(result.retry_after or 5))
    QueuedBundle.objects.filter(upload_id=upload_id).delete()
    log.refresh_from_db()
    return log

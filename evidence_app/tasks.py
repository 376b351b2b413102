"""Celery tasks of the evidence app (queue ``ingest``): thin, idempotent, ids only."""

from __future__ import annotations

from celery import Task, shared_task

from evidence_app.consensus import stored
from evidence_app.services import oci, pointers
from evidence_app.services.ingest import queued


@shared_task(name="evidence_app.tasks.ingest_oci", acks_late=True, bind=True, max_retries=5)
def ingest_oci(self: Task, upload_id: int) -> str | None:
    """Pull and verify the OCI reference of ``UploadLog`` ``upload_id``; returns the verdict
    (None when the upload is gone). Re-running a finished upload does nothing; a redelivered
    task that finds another worker's live claim comes back when that lease ends."""
    try:
        log = oci.oci_upload_process(upload_id=upload_id)
    except queued.LeaseHeld as exc:
        raise self.retry(countdown=exc.retry_in, exc=exc) from None
    return log.verdict if log is not None else None


@shared_task(name="evidence_app.tasks.ingest_queued", acks_late=True, bind=True, max_retries=5)
def ingest_queued(self: Task, upload_id: int) -> str | None:
    """Verify and store the bundle ``UploadLog`` ``upload_id`` was sent with (``Prefer:
    respond-async``); returns the verdict (None when the upload is gone). Retried while another
    worker's lease stands or the database is busy."""
    try:
        log = queued.queued_upload_process(upload_id=upload_id)
    except queued.LeaseHeld as exc:
        raise self.retry(countdown=exc.retry_in, exc=exc) from None
    return log.verdict if log is not None else None


@shared_task(name="evidence_app.tasks.consensus_refresh_expired", acks_late=True)
def consensus_refresh_expired() -> int:
    """Refresh the stored consensus badges a counted run has aged out of since (beat runs it
    every CONSENSUS_REFRESH_SECONDS, so list reads rarely have to); returns the badges stored."""
    return stored.consensus_refresh_expired()


@shared_task(name="evidence_app.tasks.pointers_retry", acks_late=True)
def pointers_retry() -> int:
    """Settle finished pointer pulls and retry the pending pointers that are due (beat runs it
    every EVIDENCE_POINTER_RETRY_TICK_SECONDS); returns how many were tried."""
    return pointers.pointers_retry()


PUBLICATION_LOCK = "evidence_app.publication_rebuild"


@shared_task(
    name="evidence_app.tasks.publication_rebuild", acks_late=True, bind=True, max_retries=None
)
def publication_rebuild(self: Task) -> str | None:
    """Build and store the AICR publication (``/aicr/data/``) for every ``include`` choice
    (queued, debounced, by ``exports.artefact.publication_changed``); returns the evidence
    version it built, None when another worker was building (this one then comes back).

    One build at a time across the site: a build takes minutes at 100,000 records, and a change
    made during one queues the next, so without the lock every upload round started another
    build beside the running ones until they held every worker slot of every host (the
    multi-host bench: four at once, validation runs waiting behind them for over ten
    minutes). The change that queued this task may be newer than the running build read, so it
    is not dropped: it is retried after the debounce."""
    from aicr_site.lib.locks import held_alone
    from evidence_app.exports import artefact

    with held_alone(PUBLICATION_LOCK) as held:
        if held:
            return artefact.publication_rebuild()
    raise self.retry(countdown=max(artefact.debounce_seconds(), 5.0))


@shared_task(name="evidence_app.tasks.export_build", acks_late=True)
def export_build(job_id: int) -> str:
    """Build the file of ``ExportJob`` ``job_id`` (sent when an auditor asks for it); returns
    the state it left the job in. A redelivery after a worker died starts the build again."""
    from evidence_app.exports import jobs

    return jobs.export_job_build(job_id)


@shared_task(name="evidence_app.tasks.exports_expire", acks_late=True)
def exports_expire() -> int:
    """Delete expired export files, fail stalled builds, resend lost ones (beat)."""
    from evidence_app.exports import jobs

    return jobs.exports_expire()

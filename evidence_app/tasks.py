"""Celery tasks of the evidence app (queue ``ingest``): thin, idempotent, ids only."""

from __future__ import annotations

from celery import shared_task

from evidence_app.services import oci


@shared_task(name="evidence_app.tasks.ingest_oci", acks_late=True)
def ingest_oci(upload_id: int) -> str | None:
    """Pull and verify the OCI reference of ``UploadLog`` ``upload_id``; returns the verdict
    (None when the upload is gone). Re-running a finished upload does nothing."""
    log = oci.oci_upload_process(upload_id=upload_id)
    return log.verdict if log is not None else None

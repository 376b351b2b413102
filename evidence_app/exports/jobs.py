"""Exports built by a worker: an auditor asks (``export_job_request``), the Celery task
``evidence_app.tasks.export_build`` writes the file into ``ExportChunk`` rows
(``export_job_build``) with its progress on the job, and any web host streams it back
(``export_job_body``) once the job is ``done``.

The file is the same bytes the streamed exports (``/api/v1/export/…``) give for the same
filters at the same moment: the same writers, the same record links. It lives in PostgreSQL,
not on a worker's disk, because the web host that serves it is not the worker that built it;
``EXPORT_KEEP_HOURS`` after it is done it is deleted (``exports_expire``, beat)."""

from __future__ import annotations

import hashlib
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any, TypeVar

import psycopg
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from aicr_site.lib.locks import held_alone
from evidence_app.api.filters import EvidenceFilter
from evidence_app.exports.ndjson_pg import ndjson_stream_pg
from evidence_app.exports.package import audit_package_write
from evidence_app.exports.records import (
    csv_stream,
    export_records,
    ndjson_stream,
    site_url_builder,
)
from evidence_app.models import Evidence, ExportChunk, ExportFormat, ExportJob, ExportState
from evidence_app.services.site_key import SiteKeyUnavailable, site_private_key

logger = logging.getLogger(__name__)

EXTENSIONS = {ExportFormat.NDJSON: "ndjson", ExportFormat.CSV: "csv", ExportFormat.AUDIT: "tar.gz"}
CONTENT_TYPES = {
    ExportFormat.NDJSON: "application/x-ndjson; charset=utf-8",
    ExportFormat.CSV: "text/csv; charset=utf-8; header=present",
    ExportFormat.AUDIT: "application/gzip",
}
# A build interrupted this many times (its worker killed, the message redelivered) fails,
# naming why, instead of being tried forever.
MAX_ATTEMPTS = 3
PROGRESS_EVERY_SECONDS = 0.5
MAX_FILTER_CHARS = 500
T = TypeVar("T")


class ExportRequestError(Exception):
    """A request that cannot become a job: ``field`` names what is wrong; ``status`` is the
    HTTP status that says so (400 bad input, 429 too many at once, 503 no site key)."""

    def __init__(self, message: str, *, field: str | None = None, status: int = 400) -> None:
        super().__init__(message)
        self.field = field
        self.status = status


def export_filters_clean(filters: Any) -> dict[str, str]:
    """``filters`` as the ``/api/v1/evidence/`` parameters they must be: an object of known
    names to text, each valid. An unknown name is refused rather than ignored, since ignoring
    it would export more records than asked for."""
    if filters is None:
        return {}
    if not isinstance(filters, Mapping):
        raise ExportRequestError("filters must be an object of parameter names", field="filters")
    known = set(EvidenceFilter.base_filters)
    cleaned: dict[str, str] = {}
    for name, value in filters.items():
        if name not in known:
            raise ExportRequestError(
                f"unknown filter {str(name)[:60]!r}; known: {', '.join(sorted(known))}",
                field=f"filters.{str(name)[:60]}",
            )
        if isinstance(value, bool):
            value = "true" if value else "false"
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise ExportRequestError("a filter's value must be text", field=f"filters.{name}")
        text = str(value)
        if len(text) > MAX_FILTER_CHARS or "\x00" in text:
            raise ExportRequestError(
                f"a filter's value is text of at most {MAX_FILTER_CHARS} characters, no NUL",
                field=f"filters.{name}",
            )
        cleaned[name] = text
    filterset = EvidenceFilter(cleaned, queryset=Evidence.objects.none())
    if not filterset.is_valid():
        name, problems = next(iter(filterset.errors.items()))
        raise ExportRequestError(f"{name}: {' '.join(problems)}", field=f"filters.{name}")
    return {name: value for name, value in sorted(cleaned.items()) if value != ""}


def export_job_request(*, user: Any, format: str, filters: Any, site: str) -> ExportJob:
    """A queued job for ``user`` (an auditor or maintainer: the caller checks), its build sent
    to a worker once the row is committed."""
    if format not in ExportFormat.values:
        raise ExportRequestError(
            f"format must be one of {', '.join(ExportFormat.values)}", field="format"
        )
    cleaned = export_filters_clean(filters)
    if format == ExportFormat.AUDIT:
        try:
            site_private_key()  # no key, no package: say so now, not after a queue
        except SiteKeyUnavailable as exc:
            raise ExportRequestError(f"No audit package: {exc}.", status=503) from None
    limit = settings.EXPORT_ACTIVE_PER_USER
    with transaction.atomic():
        # One user's requests are serialised on their own row, so the limit holds under races.
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        if ExportJob.objects.active().filter(requested_by=user).count() >= limit:
            raise ExportRequestError(
                f"you have {limit} exports queued or building; wait for one to finish",
                status=429,
            )
        job = ExportJob.objects.create(format=format, filters=cleaned, site=site, requested_by=user)
        job_id = job.pk
        transaction.on_commit(lambda: _send_build(job_id))
    return job


def _send_build(job_id: int) -> None:
    from evidence_app.tasks import export_build

    export_build.delay(job_id)


class ChunkWriter:
    """A write-only file whose bytes become ``ExportChunk`` rows of ``EXPORT_CHUNK_BYTES``
    each, committed as they fill (memory holds one chunk), with their size and sha256."""

    def __init__(self, job_id: int, *, on_chunk: Callable[[], None] | None = None) -> None:
        self.job_id = job_id
        self.on_chunk = on_chunk
        self.size = 0
        self.digest = hashlib.sha256()
        self._buffer = bytearray()
        self._seq = 0
        self._limit = settings.EXPORT_CHUNK_BYTES

    def write(self, data: bytes) -> int:
        self._buffer += data
        self.size += len(data)
        self.digest.update(data)
        while len(self._buffer) >= self._limit:
            self._store(bytes(self._buffer[: self._limit]))
            del self._buffer[: self._limit]
        return len(data)

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        """Nothing to do: chunks are stored as they fill, the rest on ``close``."""

    def close(self) -> None:
        if self._buffer:
            self._store(bytes(self._buffer))
            self._buffer.clear()

    def _store(self, body: bytes) -> None:
        if connection.vendor == "postgresql":
            # The bytes as a binary parameter: Django binds on the client, as an escaped
            # literal twice their size, 5x slower for a megabyte (bench/export.py).
            connection.ensure_connection()
            with psycopg.Cursor(connection.connection) as cursor:
                cursor.execute(
                    "INSERT INTO evidence_app_exportchunk (job_id, seq, body) VALUES (%s, %s, %b)",
                    (self.job_id, self._seq, body),
                )
        else:
            ExportChunk.objects.create(job_id=self.job_id, seq=self._seq, body=body)
        self._seq += 1
        if self.on_chunk is not None:
            self.on_chunk()


class _Progress:
    """Counts records as they pass and writes the count to the job at most every
    ``PROGRESS_EVERY_SECONDS`` (one small UPDATE; the page polls it)."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        self.count = 0
        self._written_at = 0.0

    def counted(self, items: Iterable[T]) -> Iterator[T]:
        for item in items:
            self.count += 1
            yield item

    def set(self, count: int) -> None:
        self.count = count
        self.save()

    def save(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._written_at >= PROGRESS_EVERY_SECONDS:
            ExportJob.objects.filter(pk=self.job_id).update(
                done=self.count, progress_at=timezone.now()
            )
            self._written_at = now


def _claim(job_id: int) -> ExportJob | None:
    """The job, now ``running`` with its earlier partial chunks gone; None when there is
    nothing to build (gone, finished, or failed here for too many interrupted tries)."""
    with transaction.atomic():
        job = ExportJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.state in (ExportState.DONE, ExportState.FAILED):
            return None
        job.chunks.all().delete()  # a redelivered build starts again from nothing
        job.attempts += 1
        now = timezone.now()
        if job.attempts > MAX_ATTEMPTS:
            job.state, job.error, job.finished_at = (
                ExportState.FAILED,
                f"the build was interrupted {MAX_ATTEMPTS} times (its worker stopped); "
                "start the export again",
                now,
            )
            job.save(update_fields=["state", "error", "finished_at", "attempts"])
            return None
        job.state, job.started_at, job.progress_at = ExportState.RUNNING, now, now
        job.done, job.total = 0, None
        job.save(update_fields=["state", "started_at", "progress_at", "done", "total", "attempts"])
        return job


def _fail(job_id: int, message: str) -> None:
    with transaction.atomic():
        ExportChunk.objects.filter(job_id=job_id).delete()
        ExportJob.objects.filter(pk=job_id).update(
            state=ExportState.FAILED, error=message, finished_at=timezone.now(), size=0
        )


def _write(
    job: ExportJob, queryset: QuerySet[Evidence], writer: ChunkWriter, progress: _Progress
) -> None:
    url_of = site_url_builder(job.site)
    if job.format == ExportFormat.AUDIT:
        audit_package_write(
            queryset,
            writer,  # type: ignore[arg-type]  # a write-only binary file is all it needs
            url_of=url_of,
            filters=job.filters,
            site=job.site,
            progress=progress.set,
        )
        return
    body: Iterable[bytes]
    if job.format == ExportFormat.CSV:
        body = csv_stream(progress.counted(export_records(queryset, url_of=url_of)))
    elif connection.vendor == "postgresql":
        body = _spooled(ndjson_stream_pg(queryset, url_of=url_of), progress)
    else:
        body = ndjson_stream(progress.counted(export_records(queryset, url_of=url_of)))
    for data in body:
        writer.write(data)


def _spooled(body: Iterable[bytes], progress: _Progress) -> Iterator[bytes]:
    """The database's NDJSON, read to the end before any of it is stored: its ``COPY`` holds
    the connection until it ends, and the chunks and the progress are written on that same
    connection. A temporary file keeps memory flat; a record is a line (JSON escapes every
    newline inside), so the progress is the lines read."""
    with tempfile.TemporaryFile() as spool:
        for data in body:
            spool.write(data)
            progress.count += data.count(b"\n")
        spool.seek(0)
        while block := spool.read(settings.EXPORT_CHUNK_BYTES):
            yield block


def export_job_build(job_id: int) -> str:
    """Build job ``job_id``'s file (the task's body); returns the state it left the job in.
    Idempotent: a finished job is left alone, a redelivered one starts again, and a second
    delivery while the first still builds does nothing."""
    with held_alone(f"export-job:{job_id}") as alone:
        if not alone:
            return "building elsewhere"
        job = _claim(job_id)
        if job is None:
            state = ExportJob.objects.filter(pk=job_id).values_list("state", flat=True).first()
            return state or "gone"
        progress = _Progress(job_id)
        writer = ChunkWriter(job_id, on_chunk=progress.save)
        try:
            queryset = EvidenceFilter(job.filters, queryset=Evidence.objects.all()).qs
            ExportJob.objects.filter(pk=job_id).update(total=queryset.count())
            _write(job, queryset, writer, progress)
            writer.close()
        except SiteKeyUnavailable as exc:
            _fail(job_id, f"No audit package: {exc}.")
            return ExportState.FAILED
        except Exception as exc:  # the job says it failed and why; the log has the rest
            logger.exception("export #%s failed", job_id)
            _fail(job_id, f"the build failed ({type(exc).__name__}); start the export again")
            return ExportState.FAILED
        stamp = (job.started_at or timezone.now()).strftime("%Y%m%dT%H%M%SZ")
        what = "audit" if job.format == ExportFormat.AUDIT else "evidence"
        with transaction.atomic():
            # Done, with its size and digest, in one statement: never "ready" before its file.
            ExportJob.objects.filter(pk=job_id, state=ExportState.RUNNING).update(
                state=ExportState.DONE,
                done=progress.count,
                size=writer.size,
                sha256=writer.digest.hexdigest(),
                filename=f"{what}-{stamp}.{EXTENSIONS[ExportFormat(job.format)]}",
                finished_at=timezone.now(),
                progress_at=timezone.now(),
            )
        return ExportState.DONE


def export_job_body(job: ExportJob) -> Iterator[bytes]:
    """The file of a ``done`` job, one stored chunk at a time (memory holds one)."""
    seqs = list(job.chunks.order_by("seq").values_list("seq", flat=True))
    for seq in seqs:
        body = (
            ExportChunk.objects.filter(job_id=job.pk, seq=seq)
            .values_list("body", flat=True)
            .first()
        )
        if body is None:  # expired while being downloaded: the short body says so
            return
        yield bytes(body)


def exports_expire() -> int:
    """Beat's pass over the jobs; returns how many it changed:
    - the files of jobs finished ``EXPORT_KEEP_HOURS`` ago are deleted, with the job;
    - a build that made no progress for ``EXPORT_STALLED_SECONDS`` fails, saying its worker
      stopped (a redelivered message would have restarted it);
    - a job still queued after that long is sent again (its message was lost with a broker
      that did not keep it); a duplicate delivery does nothing (``export_job_build``)."""
    now = timezone.now()
    stalled_before = now - timedelta(seconds=settings.EXPORT_STALLED_SECONDS)
    _, deleted = ExportJob.objects.filter(
        finished_at__lt=now - timedelta(hours=settings.EXPORT_KEEP_HOURS)
    ).delete()
    stalled = list(
        ExportJob.objects.filter(
            state=ExportState.RUNNING, progress_at__lt=stalled_before
        ).values_list("pk", flat=True)
    )
    minutes = max(1, round(settings.EXPORT_STALLED_SECONDS / 60))
    for pk in stalled:
        _fail(
            pk,
            f"the build made no progress for {minutes} minutes (its worker stopped); "
            "start the export again",
        )
    lost = list(
        ExportJob.objects.filter(
            state=ExportState.QUEUED, created_at__lt=stalled_before
        ).values_list("pk", flat=True)
    )
    for pk in lost:
        _send_build(pk)
    return deleted.get(ExportJob._meta.label, 0) + len(stalled) + len(lost)

"""One flat record per piece of evidence, streamed in constant memory.

``export_rows`` walks a filtered QuerySet with ``.iterator(chunk_size)`` (a server-side cursor on
PostgreSQL), computes staleness per chunk in a fixed number of queries, and yields plain dicts:
the NDJSON line, the CSV row and the audit package's ``records.ndjson`` are all this dict.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from itertools import batched
from typing import Any, TypedDict

from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet

from evidence_app import selectors
from evidence_app.models import Evidence
from evidence_app.services.staleness import staleness_bulk

CHUNK_SIZE = 2000

# The columns read (``only``): the stored bytes, transcripts and certificates stay in the table.
_FIELDS = (
    "id",
    "sha256",
    "size",
    "container",
    "media_type",
    "recipe_name",
    "subject_digest",
    "predicate_type",
    "recipe__catalog_id",
    "aicr_version",
    "validator_catalog_version",
    "k8s_version",
    "attested_at",
    "predicate",
    "rekor_log_index",
    "integrated_time",
    "trusted_root_name",
    "verdict",
    "is_demo",
    "is_simulated",
    "uploaded_at",
    "withdrawn_at",
    "withdrawal_reason",
    "signer__slug",
    "signer__kind",
    "signer__identity",
    "signer__issuer",
    "signer__signer_class",
    "signer__counted",
    "signer__label",
    "signer__key__fingerprint",
)


class PhaseCounts(TypedDict):
    passed: int
    failed: int
    skipped: int


class ExportRecord(TypedDict):
    id: int
    sha256: str
    recipe: str
    recipe_digest: str
    catalog: int
    predicate_type: str
    container: str
    media_type: str
    size: int
    has_artifact: bool
    signer_slug: str
    signer_label: str
    signer_kind: str
    signer_identity: str
    signer_issuer: str
    signer_key_fingerprint: str
    signer_class: str
    signer_counted: bool
    counted: bool
    verdict: str
    stale: bool
    stale_reasons: list[str]
    withdrawn: bool
    withdrawn_at: str | None
    withdrawal_reason: str
    aicr_version: str
    validator_catalog_version: str
    k8s_version: str
    attested_at: str
    uploaded_at: str
    rekor_log_index: int | None
    rekor_integrated_time: str | None
    trusted_root: str
    is_simulated: bool
    is_demo: bool
    phases: dict[str, PhaseCounts]
    url: str
    bundle_url: str


def export_queryset(queryset: QuerySet[Evidence]) -> QuerySet[Evidence]:
    """``queryset`` narrowed to the export's columns, in a stable order (oldest id first, so a
    row committed during the export is after every row already sent)."""
    return (
        queryset.select_related("signer", "signer__key", "recipe")
        .only(*_FIELDS)
        .annotate(
            has_artifact=ExpressionWrapper(Q(artifact__isnull=False), output_field=BooleanField())
        )
        .order_by("pk")
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def record_of(
    evidence: Evidence, *, stale_reasons: list[str], url_of: Callable[[str, int], str]
) -> ExportRecord:
    """The flat record; ``url_of(route name, id)``: an absolute URL (the API's routes)."""
    signer = evidence.signer
    phases = selectors.phase_summaries(evidence.predicate)
    return {
        "id": evidence.pk,
        "sha256": evidence.sha256,
        "recipe": evidence.recipe_name,
        "recipe_digest": evidence.subject_digest,
        "catalog": evidence.recipe.catalog_id,
        "predicate_type": evidence.predicate_type,
        "container": evidence.container,
        "media_type": evidence.media_type,
        "size": evidence.size,
        "has_artifact": bool(getattr(evidence, "has_artifact", False)),
        "signer_slug": signer.slug,
        "signer_label": signer.label,
        "signer_kind": signer.kind,
        "signer_identity": signer.identity,
        "signer_issuer": signer.issuer,
        "signer_key_fingerprint": signer.key.fingerprint if signer.key_id else "",
        "signer_class": signer.signer_class,
        "signer_counted": signer.counted,
        "counted": selectors.is_counted(evidence),
        "verdict": evidence.verdict,
        "stale": bool(stale_reasons),
        "stale_reasons": stale_reasons,
        "withdrawn": evidence.withdrawn_at is not None,
        "withdrawn_at": _iso(evidence.withdrawn_at),
        "withdrawal_reason": evidence.withdrawal_reason,
        "aicr_version": evidence.aicr_version,
        "validator_catalog_version": evidence.validator_catalog_version,
        "k8s_version": evidence.k8s_version,
        "attested_at": _iso(evidence.attested_at) or "",
        "uploaded_at": _iso(evidence.uploaded_at) or "",
        "rekor_log_index": evidence.rekor_log_index,
        "rekor_integrated_time": _iso(evidence.integrated_time),
        "trusted_root": evidence.trusted_root_name,
        "is_simulated": evidence.is_simulated,
        "is_demo": evidence.is_demo,
        "phases": {
            name: {"passed": p.passed, "failed": p.failed, "skipped": p.skipped}
            for name, p in sorted(phases.items())
        },
        "url": url_of("api:evidence-detail", evidence.pk),
        "bundle_url": url_of("api:evidence-bundle", evidence.pk),
    }


def export_chunks(
    queryset: QuerySet[Evidence],
    *,
    url_of: Callable[[str, int], str],
    chunk_size: int = CHUNK_SIZE,
) -> Iterator[list[tuple[Evidence, ExportRecord]]]:
    """``(row, record)`` pairs, ``chunk_size`` at a time, from one pass of a server-side cursor;
    staleness costs a fixed number of queries per chunk, not per row."""
    rows = export_queryset(queryset).iterator(chunk_size=chunk_size)
    for chunk in batched(rows, chunk_size):
        stale = staleness_bulk(chunk)
        yield [
            (
                evidence,
                record_of(
                    evidence,
                    stale_reasons=[reason.code for reason in stale.get(evidence.pk, [])],
                    url_of=url_of,
                ),
            )
            for evidence in chunk
        ]


def export_records(
    queryset: QuerySet[Evidence], *, url_of: Callable[[str, int], str]
) -> Iterator[ExportRecord]:
    for chunk in export_chunks(queryset, url_of=url_of):
        for _evidence, record in chunk:
            yield record


# --- NDJSON ----------------------------------------------------------------------------------


def ndjson_line(record: ExportRecord | dict[str, Any]) -> bytes:
    return (
        json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode(
            "utf-8"
        )
        + b"\n"
    )


def ndjson_stream(
    records: Iterable[ExportRecord], *, lines_per_write: int = 200
) -> Iterator[bytes]:
    """Lines joined a few hundred at a time: one small write per batch, not per record."""
    for batch in batched(records, lines_per_write):
        yield b"".join(ndjson_line(record) for record in batch)


# --- CSV -------------------------------------------------------------------------------------

CSV_COLUMNS = (
    "id",
    "sha256",
    "recipe",
    "recipe_digest",
    "catalog",
    "signer_slug",
    "signer_label",
    "signer_kind",
    "signer_identity",
    "signer_issuer",
    "signer_key_fingerprint",
    "signer_class",
    "signer_counted",
    "counted",
    "verdict",
    "stale",
    "stale_reasons",
    "withdrawn",
    "withdrawn_at",
    "withdrawal_reason",
    "aicr_version",
    "validator_catalog_version",
    "k8s_version",
    "attested_at",
    "uploaded_at",
    "rekor_log_index",
    "rekor_integrated_time",
    "trusted_root",
    "is_simulated",
    "is_demo",
    "phases",
    "container",
    "has_artifact",
    "url",
    "bundle_url",
)

# A spreadsheet evaluates a cell that starts with one of these as a formula (OWASP "CSV
# injection"); a leading apostrophe makes it text, and spreadsheets do not show it.
_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def csv_safe(value: str) -> str:
    """``value`` as a cell a spreadsheet shows as text, never runs."""
    return "'" + value if value.startswith(_FORMULA_PREFIXES) else value


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)  # numbers (e.g. a negative id never happens) stay numbers
    if isinstance(value, list):
        return csv_safe(" ".join(str(item) for item in value))
    if isinstance(value, dict):
        # phases: "conformance=3/0/1 deployment=…" (passed/failed/skipped)
        return " ".join(
            f"{name}={counts['passed']}/{counts['failed']}/{counts['skipped']}"
            for name, counts in value.items()
        )
    return csv_safe(str(value))


def csv_stream(records: Iterable[ExportRecord], *, rows_per_write: int = 200) -> Iterator[bytes]:
    """A header, then one row per record (RFC 4180 quoting, CRLF), in UTF-8 with a BOM so
    spreadsheets read non-ASCII text right."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    yield ("\ufeff" + buffer.getvalue()).encode("utf-8")
    for batch in batched(records, rows_per_write):
        buffer.seek(0)
        buffer.truncate()
        writer.writerows([_cell(record[column]) for column in CSV_COLUMNS] for record in batch)  # type: ignore[literal-required]
        yield buffer.getvalue().encode("utf-8")

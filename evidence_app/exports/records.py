"""One flat record per piece of evidence, streamed in constant memory.

``export_rows`` walks a filtered QuerySet with ``.iterator(chunk_size)`` (a server-side cursor on
PostgreSQL), computes staleness per chunk in a fixed number of queries, and yields plain dicts:
the NDJSON line, the CSV row and the audit package's ``records.ndjson`` are all this dict.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import io
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from itertools import batched
from typing import Any, TypedDict

from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.db.models.fields.json import KeyTransform
from django.urls import reverse
from django.utils import timezone

from evidence_app.models import Evidence, counted_q
from evidence_app.services.staleness import (
    AllowlistState,
    StalenessContext,
    delisted_signers,
    stale_after_days,
    staleness_context,
)

CHUNK_SIZE = 2000

# (record key, column) read with ``values_list``: no model instances, the stored bytes,
# transcripts and certificates never leave the table, only ``predicate.phases`` of the predicate.
_COLUMNS = (
    ("id", "id"),
    ("sha256", "sha256"),
    ("recipe", "recipe_name"),
    ("recipe_digest", "subject_digest"),
    ("catalog", "recipe__catalog_id"),
    ("predicate_type", "predicate_type"),
    ("container", "container"),
    ("media_type", "media_type"),
    ("size", "size"),
    ("has_artifact", "has_artifact"),
    ("signer_slug", "signer__slug"),
    ("signer_label", "signer__label"),
    ("signer_kind", "signer__kind"),
    ("signer_identity", "signer__identity"),
    ("signer_issuer", "signer__issuer"),
    ("signer_key_fingerprint", "signer__key__fingerprint"),
    ("signer_class", "signer__signer_class"),
    ("signer_counted", "signer__counted"),
    ("counted", "is_counted"),
    ("verdict", "verdict"),
    ("withdrawn_at", "withdrawn_at"),
    ("withdrawal_reason", "withdrawal_reason"),
    ("aicr_version", "aicr_version"),
    ("validator_catalog_version", "validator_catalog_version"),
    ("k8s_version", "k8s_version"),
    ("attested_at", "attested_at"),
    ("uploaded_at", "uploaded_at"),
    ("rekor_log_index", "rekor_log_index"),
    ("rekor_integrated_time", "integrated_time"),
    ("trusted_root", "trusted_root_name"),
    ("is_simulated", "is_simulated"),
    ("is_demo", "is_demo"),
    ("phases", "predicate_phases"),
    ("signer_id", "signer_id"),
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


def export_rows(
    queryset: QuerySet[Evidence], extra: Mapping[str, Any] | None = None
) -> QuerySet[Any]:
    """``queryset``'s export columns as tuples (``_COLUMNS`` order, then the ``extra``
    annotations, alias → expression, in theirs), oldest id first: a row committed during the
    export comes after every row already sent."""
    extra = extra or {}
    return (
        queryset.annotate(
            has_artifact=ExpressionWrapper(Q(artifact__isnull=False), output_field=BooleanField()),
            # EvidenceQuerySet.counted() as one column (a test holds them equal row by row).
            is_counted=ExpressionWrapper(counted_q(), output_field=BooleanField()),
            predicate_phases=KeyTransform("phases", "predicate"),
            **extra,
        )
        .order_by("pk")
        .values_list(*(column for _, column in _COLUMNS), *extra)
    )


_ID_MARK = 987654321987  # an id no row has: its digits are swapped for each row's id


def url_around_id(url_for: Callable[[int], str]) -> tuple[str, str]:
    """What comes before and after the id in ``url_for``'s URLs, so each row's URL is a
    concatenation (no ``reverse`` per row, and in SQL no ``reverse`` at all)."""
    head, _, tail = url_for(_ID_MARK).partition(str(_ID_MARK))
    return head, tail


def site_url_builder(site: str) -> Callable[[str, int], str]:
    """``url_of(route, id)``: the absolute URL of ``route`` for ``id`` under ``site`` (the
    site's root, ``https://host/``), without a ``reverse`` per row (100,000 rows: it shows).
    A request's exports and a worker's (``exports.jobs``) link records the same way."""
    root = site.rstrip("/")
    templates: dict[str, tuple[str, str]] = {}

    def url_of(route: str, pk: int) -> str:
        if route not in templates:
            templates[route] = url_around_id(lambda marker: root + reverse(route, args=[marker]))
        head, tail = templates[route]
        return f"{head}{pk}{tail}"

    return url_of


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def _phases(value: Any) -> dict[str, PhaseCounts]:
    """Per phase (by name) whose summary is an object, its non-negative integer counts (else
    0): ``consensus.outcomes.phase_summaries``'s reading of ``predicate.phases`` (a test holds them
    equal), without building its summaries: 100,000 rows a request."""
    if not isinstance(value, dict):
        return {}
    return {
        name: {
            "failed": _count(summary.get("failed")),
            "passed": _count(summary.get("passed")),
            "skipped": _count(summary.get("skipped")),
        }
        for name, summary in sorted(value.items())
        if isinstance(summary, dict)
    }


# (recipe name, subject digest, predicate type, its recipe row's catalog id, AICR version,
# signer delisted, older than the limit, withdrawn): all a row's stale reasons depend on.
StaleKey = tuple[str, str, str, int, str, bool, bool, bool]


class StaleCodes:
    """Stale reason codes per row, from ``services.staleness`` (the one rule), memoised.

    A row's reasons depend on its recipe name, digest, predicate type (the digest scheme), its
    recipe row's catalog (the validator check set), AICR version, whether its signer was
    delisted, whether it is older than the limit and whether it is withdrawn (a ``StaleKey``);
    rows sharing these share their codes, so the rule runs once per distinct combination, not
    once per row. (The supported AICR range is a setting, the same for every row.)"""

    MEMO_LIMIT = 10_000

    def __init__(self) -> None:
        self.now = timezone.now()
        self.limit = timedelta(days=stale_after_days())
        self.memo: dict[StaleKey, list[str]] = {}
        self.context = StalenessContext(now=self.now)

    @property
    def old_before(self) -> datetime:
        """Rows attested before this are older than the limit."""
        return self.now - self.limit

    def load_recipes(self, names: Iterable[str]) -> None:
        """Load the facts for recipes not seen yet (a fixed number of queries)."""
        new = set(names) - set(self.context.newest_aicr)
        if new:
            facts = staleness_context([Evidence(recipe_name=name) for name in new], now=self.now)
            self.context.current_digests.update(facts.current_digests)
            self.context.newest_aicr.update(facts.newest_aicr)
            self.context.current_checks = facts.current_checks

    def load_catalogs(self, catalog_ids: Iterable[int]) -> None:
        """Load the validator check sets of catalogs not seen yet (one query when any is)."""
        self.context.load_check_sets(catalog_ids)

    def codes(self, key: StaleKey) -> list[str]:
        codes = self.memo.get(key)
        if codes is None:
            if len(self.memo) == self.MEMO_LIMIT:  # memory stays flat whatever the data
                self.memo.clear()
            recipe, digest, predicate_type, catalog_id, aicr_version, delisted, old, withdrawn = key
            probe = Evidence(
                recipe_name=recipe,
                subject_digest=digest,
                predicate_type=predicate_type,
                aicr_version=aicr_version,
                signer_id=0,  # a stand-in signer, delisted or not as the row's
                # A stand-in time on the same side of the limit as the row's.
                attested_at=self.old_before - timedelta(days=1) if old else self.now,
                withdrawn_at=self.now if withdrawn else None,
                withdrawal_reason="withdrawn" if withdrawn else "",
            )
            context = dataclasses.replace(
                self.context, allowlist_state=AllowlistState(frozenset({0} if delisted else ()))
            )
            codes = [reason.code for reason in context.reasons(probe, catalog_id=catalog_id)]
            self.memo[key] = codes
        return codes


class _ChunkStaleness(StaleCodes):
    """``StaleCodes`` for rows read as dicts. Which signers are delisted is read once, at the
    first row, for the whole export (a point in time, as its other facts are): a query per
    chunk was 1,252 queries for a 250,000-record package. The delisted are the signers that
    counted once and no longer do: few, whatever the number of records."""

    @functools.cached_property
    def delisted(self) -> frozenset[int]:
        return delisted_signers(None)

    def chunk(self, rows: list[dict[str, Any]]) -> None:
        self.load_recipes(row["recipe"] for row in rows)
        self.load_catalogs(row["catalog"] for row in rows)

    def row_codes(self, row: dict[str, Any]) -> list[str]:
        return self.codes(
            (
                row["recipe"],
                row["recipe_digest"],
                row["predicate_type"],
                row["catalog"],
                row["aicr_version"],
                row["signer_id"] in self.delisted,
                row["attested_at"] < self.old_before,
                row["withdrawn_at"] is not None,
            )
        )


def export_chunks(
    queryset: QuerySet[Evidence],
    *,
    url_of: Callable[[str, int], str],
    chunk_size: int = CHUNK_SIZE,
) -> Iterator[list[ExportRecord]]:
    """Records, ``chunk_size`` at a time, from one pass of a server-side cursor; staleness
    costs a fixed number of queries per chunk, never one per row."""
    for chunk in export_chunks_with(queryset, url_of=url_of, chunk_size=chunk_size):
        yield [record for record, _ in chunk]


def export_chunks_with(
    queryset: QuerySet[Evidence],
    *,
    url_of: Callable[[str, int], str],
    chunk_size: int = CHUNK_SIZE,
    extra: Mapping[str, Any] | None = None,
) -> Iterator[list[tuple[ExportRecord, tuple[Any, ...]]]]:
    """``export_chunks`` with each record's ``extra`` columns (``export_rows``) beside it, read
    in the same pass (the audit package's bytes and transcripts: no second query per chunk)."""
    names = [name for name, _ in _COLUMNS]
    width = len(names)
    staleness = _ChunkStaleness()
    for chunk in _row_chunks(queryset, extra, chunk_size):
        rows = [dict(zip(names, values[:width], strict=True)) for values in chunk]
        staleness.chunk(rows)
        records = []
        for row, values in zip(rows, chunk, strict=True):
            stale = staleness.row_codes(row)
            del row["signer_id"]
            row.update(
                signer_key_fingerprint=row["signer_key_fingerprint"] or "",
                stale=bool(stale),
                stale_reasons=stale,
                withdrawn=row["withdrawn_at"] is not None,
                withdrawn_at=_iso(row["withdrawn_at"]),
                attested_at=_iso(row["attested_at"]),
                uploaded_at=_iso(row["uploaded_at"]),
                rekor_integrated_time=_iso(row["rekor_integrated_time"]),
                phases=_phases(row["phases"]),
                url=url_of("api:evidence-detail", row["id"]),
                bundle_url=url_of("api:evidence-bundle", row["id"]),
            )
            records.append((row, values[width:]))
        yield records  # type: ignore[misc]


def _row_chunks(
    queryset: QuerySet[Evidence], extra: Mapping[str, Any] | None, chunk_size: int
) -> Iterator[Sequence[tuple[Any, ...]]]:
    """``export_rows`` of ``queryset``, ``chunk_size`` at a time, in id order.

    With ``extra`` columns (bundle bytes, transcripts) the ids are read first, alone, and each
    chunk's rows by primary key: sorting whole rows that wide by id spilled 60 MB to disk for
    one recipe's 15,386 records at 1M (server-side cursors run without parallel workers), and
    opening that cursor took 1.3 s."""
    if not extra:
        yield from batched(export_rows(queryset).iterator(chunk_size=chunk_size), chunk_size)
        return
    ids = queryset.order_by("pk").values_list("pk", flat=True).iterator(chunk_size=chunk_size)

    def rows_of(batch: tuple[int, ...]) -> list[tuple[Any, ...]]:
        return list(export_rows(Evidence.objects.filter(pk__in=batch), extra))

    batches = batched(ids, chunk_size)
    if connection.in_atomic_block:  # another connection would not see this transaction's rows
        yield from map(rows_of, batches)
    else:
        yield from _read_ahead(batches, rows_of)


def _read_ahead(
    batches: Iterator[tuple[int, ...]], rows_of: Callable[[tuple[int, ...]], list[tuple[Any, ...]]]
) -> Iterator[list[tuple[Any, ...]]]:
    """``rows_of`` each batch, the next one read on a second thread (its own connection,
    closed at the end) while the caller writes this one: PostgreSQL reading and detoasting a
    chunk was a third of a package's time, spent waiting."""

    def close_connection() -> None:
        connection.close()  # this thread's

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="export-read-ahead") as pool:
        try:
            pending: Future[list[tuple[Any, ...]]] | None = None
            for batch in batches:
                following = pool.submit(rows_of, batch)
                if pending is not None:
                    yield pending.result()
                pending = following
            if pending is not None:
                yield pending.result()
        finally:
            pool.submit(close_connection).result()


def export_records(
    queryset: QuerySet[Evidence], *, url_of: Callable[[str, int], str]
) -> Iterator[ExportRecord]:
    for chunk in export_chunks(queryset, url_of=url_of):
        yield from chunk


# --- NDJSON ----------------------------------------------------------------------------------


def ndjson_line(record: ExportRecord | Mapping[str, Any]) -> bytes:
    return (
        json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode(
            "utf-8"
        )
        + b"\n"
    )


def ndjson_stream(
    records: Iterable[ExportRecord] | Iterable[Mapping[str, Any]], *, lines_per_write: int = 200
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
        # phases: "conformance=3/0/1 deployment=…" (passed/failed/skipped); the names are the
        # signer's, so the cell is made safe like any other text.
        return csv_safe(
            " ".join(
                f"{name}={counts['passed']}/{counts['failed']}/{counts['skipped']}"
                for name, counts in value.items()
            )
        )
    return csv_safe(str(value))


def csv_stream(
    records: Iterable[Mapping[str, Any]],
    *,
    rows_per_write: int = 200,
    columns: Sequence[str] = CSV_COLUMNS,
) -> Iterator[bytes]:
    """A header, then one row per record (RFC 4180 quoting, CRLF), in UTF-8 with a BOM so
    spreadsheets read non-ASCII text right. ``columns``: the evidence export's by default (the
    qualifications export passes its own)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(columns)
    yield ("\ufeff" + buffer.getvalue()).encode("utf-8")
    for batch in batched(records, rows_per_write):
        buffer.seek(0)
        buffer.truncate()
        writer.writerows([_cell(record[column]) for column in columns] for record in batch)
        yield buffer.getvalue().encode("utf-8")

"""``SignerTally``: per signer and AICR version key, its records, live records and newest
upload (issue 22: ``/signers/`` and the home page grouped every evidence row per request).

``SignerActivity`` is the same per signer (records, newest upload), one row each, so the
signers index orders every signer without a group. Both are kept by database triggers on
``evidence_app_evidence`` (migration 0012, PostgreSQL and
SQLite), in the statement that changes a row: ingest's insert, a withdrawal's update, and
every other write path alike (the admin, a migration, a test factory, the bench's SQL), at no
extra statement per upload. Each trigger adds to or takes from the row with an upsert, so two
ingests of one signer at once both count (the second waits on the first's row lock, then adds
to its committed value). ``tallies_recount`` is the same figures counted from the evidence
rows themselves (what the table must equal; tested), and ``tallies_rebuild`` replaces the
table with it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.db.models import Count, Exists, F, Max, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce

from evidence_app.models import (
    Evidence,
    Signer,
    SignerActivity,
    SignerTally,
    Verdict,
    supported_range_q,
)

# A live record: what can ever count (the signer's counting and the range are read later).
LIVE = Q(verdict=Verdict.VERIFIED, withdrawn_at__isnull=True, is_simulated=False)


def tallies_recount(signer_ids: Iterable[int] | None = None) -> dict[tuple[int, str], Any]:
    """``{(signer id, version key): (records, live, newest upload)}`` counted from the
    evidence rows (what the table must equal)."""
    rows = Evidence.objects.order_by()
    if signer_ids is not None:
        rows = rows.filter(signer_id__in=sorted(set(signer_ids)))
    return {
        (r["signer_id"], r["aicr_version_key"]): (r["records"], r["live"], r["last"])
        for r in rows.values("signer_id", "aicr_version_key").annotate(
            records=Count("pk"), live=Count("pk", filter=LIVE), last=Max("uploaded_at")
        )
    }


def activity_recount() -> dict[int, Any]:
    """``{signer id: (records, newest upload)}`` counted from the evidence rows."""
    return {
        r["signer_id"]: (r["records"], r["last"])
        for r in Evidence.objects.order_by()
        .values("signer_id")
        .annotate(records=Count("pk"), last=Max("uploaded_at"))
    }


def activity_stored() -> dict[int, Any]:
    return {
        a.signer_id: (a.records, a.last_uploaded_at)
        for a in SignerActivity.objects.filter(records__gt=0)
    }


def tallies_stored(signer_ids: Iterable[int] | None = None) -> dict[tuple[int, str], Any]:
    """The table in ``tallies_recount``'s shape (rows with no records left out)."""
    rows = SignerTally.objects.filter(records__gt=0)
    if signer_ids is not None:
        rows = rows.filter(signer_id__in=sorted(set(signer_ids)))
    return {
        (r.signer_id, r.aicr_version_key): (r.records, r.live, r.last_uploaded_at) for r in rows
    }


@transaction.atomic
def tallies_rebuild() -> int:
    """Replace the whole table by a recount (one INSERT … SELECT); returns the rows."""
    qn = connection.ops.quote_name
    table, evidence = qn(SignerTally._meta.db_table), qn(Evidence._meta.db_table)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:  # nobody adds while the table is rebuilt
            cursor.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
            cursor.execute(f"LOCK TABLE {qn(SignerActivity._meta.db_table)} IN EXCLUSIVE MODE")
    SignerTally.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (signer_id, aicr_version_key, records, live, "  # noqa: S608
            "last_uploaded_at) SELECT signer_id, aicr_version_key, COUNT(*), "
            "SUM(CASE WHEN verdict = %s AND withdrawn_at IS NULL AND NOT is_simulated "
            f"THEN 1 ELSE 0 END), MAX(uploaded_at) FROM {evidence} "
            "GROUP BY signer_id, aicr_version_key",
            [Verdict.VERIFIED],
        )
        rows = int(cursor.rowcount)
        SignerActivity.objects.all().delete()
        activity = connection.ops.quote_name(SignerActivity._meta.db_table)
        cursor.execute(
            f"INSERT INTO {activity} (signer_id, records, last_uploaded_at) "  # noqa: S608
            f"SELECT signer_id, COUNT(*), MAX(uploaded_at) FROM {evidence} GROUP BY signer_id"
        )
        return rows


# --- reads ------------------------------------------------------------------------------------


def signers_annotated() -> QuerySet[Signer]:
    """Signers with ``records`` and ``last_seen`` (their ``SignerActivity`` row: ordering every
    signer by it is a join, not a group) and ``counted_records`` (their tallies, summed per
    listed signer only: PostgreSQL evaluates the subquery after the page's LIMIT)."""
    counted = (
        SignerTally.objects.filter(
            supported_range_q("aicr_version_key"), signer=OuterRef("pk"), signer__counted=True
        )
        .order_by()
        .values("signer")
        .annotate(n=Sum("live"))
        .values("n")
    )
    return Signer.objects.annotate(
        records=Coalesce(F("activity__records"), 0),
        counted_records=Coalesce(Subquery(counted), 0),
        last_seen=F("activity__last_uploaded_at"),
    )


def evidence_total() -> int:
    """Every evidence record, from ``SignerActivity``."""
    return int(SignerActivity.objects.aggregate(n=Sum("records", default=0))["n"])


class Totals(NamedTuple):
    records: int  # every evidence record
    latest_upload: datetime | None
    counted_signers: int  # signers with a record consensus counts


def totals() -> Totals:
    """The home page's figures, in two queries: ``SignerActivity`` summed, and the counted
    signers with a counted tally (an index probe per counted signer, not a distinct count)."""
    rows = SignerActivity.objects.aggregate(
        records=Sum("records", default=0), last=Max("last_uploaded_at")
    )
    counting = SignerTally.objects.filter(
        supported_range_q("aicr_version_key"), signer=OuterRef("pk"), live__gt=0
    )
    counted = Signer.objects.filter(Exists(counting), counted=True).count()
    return Totals(records=int(rows["records"]), latest_upload=rows["last"], counted_signers=counted)


def counted_total() -> int:
    """The records consensus counts (``counted_q``), from the tallies: the live records of
    counted signers over the supported range's keys (a row per signer and version, not a
    count of the records)."""
    live = SignerTally.objects.filter(
        supported_range_q("aicr_version_key"), signer__counted=True
    ).aggregate(n=Sum("live", default=0))["n"]
    return int(live)

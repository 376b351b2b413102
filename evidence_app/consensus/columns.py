"""Each recipe name's grid columns and row tallies, stored and kept where evidence changes.

A recipe's consensus in its default lens is ``rules.recipe_consensus`` over one run per signer
column: each signer's newest eligible run (verified, not withdrawn) in each slot (in the
supported AICR range, outside it, simulated). At 1,000,000 records a recipe has ~2,000 such
columns, and recomputing them took 1.3 to 2.4 s per recipe page and most of a counted upload
(issue 22). So they are stored:

- ``ConsensusColumn``: one row per (recipe name, signer, slot) with that run's statuses, its
  counting, demo and stale facts;
- ``ConsensusRowTally``: per (recipe name, row) the sum of ``rules.run_tallies`` over the
  name's columns, which is all ``rules.fold_consensus`` needs for the states;
- ``ConsensusName``: that a name is built, and the AICR release its staleness was judged by.

``columns_refresh(name, signers)`` brings the columns of a few signers up to date (an upload,
a withdrawal, a signer starting or stopping to count) and adds to the tallies the difference
between each replaced column and its successor: a counted upload changes one column and the
rows it carries, whatever the number of signers. Where a fact every column's staleness rests
on moves (the name's newest counted AICR release, the catalog, time), ``columns_restale``
judges the stored columns again and sums the tallies anew from them; where which run a column
selects can move for every signer (the supported range, a setting), ``columns_rebuild`` reads
them from the evidence again. The caller holds the consensus locks (``stored``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import BooleanField, Count, ExpressionWrapper, F, Min, Q, QuerySet, Window
from django.db.models.functions import RowNumber

from evidence_app.consensus.rules import (
    RUN_FIELDS,
    RowKey,
    RowTally,
    Run,
    StaleSummary,
    check_statuses,
    eligible,
    in_supported_range,
    is_counted,
    latest_per,
    run_tallies,
)
from evidence_app.models import (
    ColumnSlot,
    ConsensusColumn,
    ConsensusName,
    ConsensusRowTally,
    Evidence,
    supported_range_q,
)
from evidence_app.services.staleness import CODES as STALE_CODES
from evidence_app.services.staleness import (
    OLDER_THAN_30_DAYS,
    bar_with,
    newest_aicr_bars,
    stale_after_days,
    staleness_bulk,
    staleness_context,
)
from evidence_app.services.versions import supported_range
from recipes_app.models import Catalog

# What a column is written from (the signer's counting and label for ``is_counted``).
COLUMN_FIELDS = (*RUN_FIELDS, "signer__source_id", "signer__counted", "signer__label")
# What a slot's new run replaces in its stored column.
COLUMN_UPDATE_FIELDS = ["evidence", "attested_at", "counted", "demo", "statuses", "stale_codes"]
# ``columns_rebuild`` reads this many names' newest runs at a time (memory: ~2,000 runs with
# their check results per name at 1,000,000 records).
REBUILD_NAMES_PER_READ = 4


def slot_of(evidence: Evidence) -> str:
    """The column a run is for: simulated, outside the supported range, or the signer's."""
    if evidence.is_simulated:
        return ColumnSlot.SIMULATED
    if not in_supported_range(evidence):
        return ColumnSlot.UNSUPPORTED
    return ColumnSlot.SUPPORTED


DEFAULT_LENS = ""  # each column's newest run, whatever its AICR version


def newest_per_column(
    candidates: QuerySet[Evidence], *, by_version: bool = False
) -> QuerySet[Evidence]:
    """The newest of ``candidates`` for each (recipe name, signer, slot), and AICR version
    when ``by_version`` (the version lenses' columns: a run without a version is in none):
    the grid's selected runs (``grid._selected_runs``) and the stored columns' (one windowed
    query)."""
    partition = ["recipe_name", "signer_id", "is_simulated"]
    if by_version:
        candidates = candidates.exclude(aicr_version="")
        partition.append("aicr_version")
    if supported_range().enabled:
        # A signer's newest run in the supported range is its counted column; its newest run
        # outside it gets a column of its own.
        candidates = candidates.annotate(
            _in_range=ExpressionWrapper(supported_range_q(), output_field=BooleanField())
        )
        partition.append("_in_range")
    return latest_per(candidates, *partition)


_CODE_ORDER = {code: i for i, code in enumerate(STALE_CODES)}


def _stale_text(codes: Iterable[str]) -> str:
    """Stale codes as stored: each once, in ``CODES`` order (so a code added later, by
    ``columns_age``, gives the text a fresh judgment gives)."""
    unique = dict.fromkeys(codes)
    return ",".join(sorted(unique, key=lambda code: (_CODE_ORDER.get(code, 99), code)))


def _column(evidence: Evidence, stale_codes: Iterable[str], lens: str) -> ConsensusColumn:
    counted = is_counted(evidence)
    return ConsensusColumn(
        recipe_name=evidence.recipe_name,
        lens=lens,
        signer_id=evidence.signer_id,
        slot=slot_of(evidence),
        evidence_id=evidence.pk,
        attested_at=evidence.attested_at,
        counted=counted,
        demo=evidence.is_demo,
        statuses=check_statuses(evidence.check_results),
        stale_codes=_stale_text(stale_codes) if counted else "",
    )


def column_run(column: ConsensusColumn) -> Run:
    """The ``Run`` consensus sees of a stored column."""
    return Run(
        key=f"{column.signer_id}:{column.slot}",
        counted=column.counted,
        simulated=column.slot == ColumnSlot.SIMULATED,
        statuses=column.statuses,
        demo=column.demo,
        stale=tuple(code for code in column.stale_codes.split(",") if code),
    )


def _columns_of(
    runs: list[tuple[str, Evidence]], bars: Mapping[str, str] | None = None
) -> tuple[list[ConsensusColumn], dict[str, str]]:
    """Columns for selected (lens, run) pairs, the counted runs judged for staleness (a fixed
    number of queries: uncounted runs feed no stale count, so they cost none), and the newest
    AICR release per name that judgment used (``newest_aicr_bars``, or ``bars`` where the
    caller knows them; counted runs' names)."""
    counted = list({e.pk: e for _, e in runs if is_counted(e)}.values())
    if not counted:
        return [_column(e, (), lens) for lens, e in runs], {}
    context = staleness_context(counted, bars=bars)
    codes = {e.pk: [r.code for r in context.reasons(e)] for e in counted}
    columns = [_column(e, codes.get(e.pk, ()), lens) for lens, e in runs]
    return columns, dict(context.newest_aicr)


def _computed(
    names: Collection[str], signer_ids: Collection[int] | None = None
) -> tuple[list[ConsensusColumn], dict[str, str]]:
    candidates = eligible(Evidence.objects.filter(recipe_name__in=sorted(names)))
    if signer_ids is not None:
        candidates = candidates.filter(signer_id__in=sorted(signer_ids))
    runs: list[tuple[str, Evidence]] = []
    for by_version in (False, True):
        selected = newest_per_column(candidates, by_version=by_version)
        for e in selected.select_related("signer").only(*COLUMN_FIELDS):
            runs.append((e.aicr_version if by_version else DEFAULT_LENS, e))
    return _columns_of(runs)


def columns_computed(
    names: Collection[str], signer_ids: Collection[int] | None = None
) -> list[ConsensusColumn]:
    """The columns of ``names`` (of ``signer_ids`` only, when given) as the evidence gives
    them now, unsaved: what the stored ones must equal."""
    return _computed(names, signer_ids)[0]


def _same(old: ConsensusColumn, new: ConsensusColumn) -> bool:
    return (old.evidence_id, old.counted, old.demo, old.stale_codes, old.statuses) == (
        new.evidence_id,
        new.counted,
        new.demo,
        new.stale_codes,
        new.statuses,
    )


LensRow = tuple[str, str, str]  # (lens, phase, CTRF name)


def name_key(name: str) -> str:
    """A row tally's key for a CTRF name of any length."""
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()


def _add(into: dict[LensRow, RowTally], column: ConsensusColumn, sign: int) -> None:
    for (phase, check), tally in run_tallies(column_run(column)).items():
        key = (column.lens, phase, check)
        into[key] = into.get(key, RowTally()).plus(tally, sign)


def _apply_deltas(name: str, deltas: Mapping[LensRow, RowTally]) -> None:
    """Add ``deltas`` to the name's row tallies (one upsert), then drop rows nobody carries."""
    changed = [(key, t) for key, t in deltas.items() if any(t.values())]
    if not changed:
        return
    table = connection.ops.quote_name(ConsensusRowTally._meta.db_table)
    fields = RowTally.FIELDS
    columns = ", ".join(["recipe_name", "lens", "phase", "name", "name_key", *fields])
    row = "(" + ", ".join(["%s"] * (5 + len(fields))) + ")"
    updates = ", ".join(f"{f} = {table}.{f} + excluded.{f}" for f in fields)
    params: list[str | int] = []
    for (lens, phase, check), tally in changed:
        params += [name, lens, phase, check, name_key(check), *tally.values()]
    # The table and column names are the model's own; the values are parameters.
    sql = (
        f"INSERT INTO {table} ({columns}) VALUES {', '.join([row] * len(changed))} "  # noqa: S608
        f"ON CONFLICT (recipe_name, lens, phase, name_key) DO UPDATE SET {updates}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    if any(t.counted_carriers < 0 or t.other_carriers < 0 for _, t in changed):
        ConsensusRowTally.objects.filter(
            recipe_name=name, counted_carriers=0, other_carriers=0
        ).delete()


def _write_tallies(name: str, columns: Iterable[ConsensusColumn]) -> None:
    """Replace the name's row tallies by the sum over ``columns``."""
    totals: dict[LensRow, RowTally] = {}
    for column in columns:
        _add(totals, column, 1)
    ConsensusRowTally.objects.filter(recipe_name=name).delete()
    ConsensusRowTally.objects.bulk_create(
        [
            ConsensusRowTally(
                recipe_name=name,
                lens=lens,
                phase=phase,
                name=check,
                name_key=name_key(check),
                **dict(zip(t.FIELDS, t.values(), strict=True)),
            )
            for (lens, phase, check), t in totals.items()
            if not t.empty
        ],
        batch_size=1000,
    )


def _mark_built(bars: Mapping[str, str]) -> None:
    ConsensusName.objects.bulk_create(
        [ConsensusName(recipe_name=n, newest_aicr=bar) for n, bar in bars.items()],
        update_conflicts=True,
        unique_fields=["recipe_name"],
        update_fields=["newest_aicr"],
    )


def columns_rebuild(names: Collection[str] | None) -> frozenset[str]:
    """Read the columns of ``names`` (None: every name with eligible evidence, and no column
    is kept for another) from the evidence again, and their tallies; returns the names."""
    if names is None:
        ConsensusColumn.objects.all().delete()
        ConsensusRowTally.objects.all().delete()
        ConsensusName.objects.all().delete()
        names = frozenset(
            eligible(Evidence.objects.all())
            .order_by()
            .values_list("recipe_name", flat=True)
            .distinct()
        )
    wanted = sorted(set(names))
    catalog = Catalog.objects.current()
    for start in range(0, len(wanted), REBUILD_NAMES_PER_READ):
        batch = wanted[start : start + REBUILD_NAMES_PER_READ]
        ConsensusColumn.objects.filter(recipe_name__in=batch).delete()
        columns = columns_computed(batch)
        ConsensusColumn.objects.bulk_create(columns, batch_size=1000)
        for name in batch:
            _write_tallies(name, (c for c in columns if c.recipe_name == name))
        _mark_built(newest_aicr_bars(batch, catalog))
    return frozenset(wanted)


def columns_restale(names: Collection[str] | None) -> frozenset[str]:
    """Judge the stored counted columns of ``names`` (None: all) for staleness again (the
    catalog, the name's newest counted AICR release or the time moved) and sum their tallies
    anew; returns the names."""
    built = ConsensusName.objects.all()
    if names is not None:
        built = built.filter(recipe_name__in=sorted(set(names)))
    wanted = sorted(built.values_list("recipe_name", flat=True))
    catalog = Catalog.objects.current()
    for name in wanted:
        columns = list(ConsensusColumn.objects.filter(recipe_name=name))
        counted: dict[int, list[ConsensusColumn]] = {}  # a run is in one column per lens
        for column in columns:
            if column.counted:
                counted.setdefault(column.evidence_id, []).append(column)
        runs = list(
            Evidence.objects.filter(pk__in=sorted(counted))
            .select_related("signer")
            .only(*(f for f in COLUMN_FIELDS if f != "check_results"))
        )
        stale = staleness_bulk(runs) if runs else {}
        moved = []
        for e in runs:
            text = _stale_text(r.code for r in stale.get(e.pk, []))
            for column in counted[e.pk]:
                if column.stale_codes != text:
                    column.stale_codes = text
                    moved.append(column)
        ConsensusColumn.objects.bulk_update(moved, ["stale_codes"], batch_size=1000)
        _write_tallies(name, columns)
    _mark_built(newest_aicr_bars(wanted, catalog))
    return frozenset(wanted)


def columns_age(names: Collection[str], now: datetime) -> None:
    """Time alone moved: the counted columns (of ``names``, any lens) whose runs have turned
    older than ``EVIDENCE_STALE_AFTER_DAYS`` since they were judged gain that code, and the
    rows they carry move by the difference (no other stale reason depends on time, so only
    those columns change: usually one or two, where judging every column again read
    thousands, 1.5 s per name at 1,000,000 records)."""
    bar = now - timedelta(days=stale_after_days())
    aged = (
        ConsensusColumn.objects.filter(
            recipe_name__in=sorted(names), counted=True, attested_at__lt=bar
        )
        .exclude(stale_codes__contains=OLDER_THAN_30_DAYS)
        .order_by("pk")
    )
    deltas: dict[str, dict[LensRow, RowTally]] = {}
    moved = []
    for column in aged:
        into = deltas.setdefault(column.recipe_name, {})
        _add(into, column, -1)
        column.stale_codes = _stale_text([*column_run(column).stale, OLDER_THAN_30_DAYS])
        _add(into, column, 1)
        moved.append(column)
    ConsensusColumn.objects.bulk_update(moved, ["stale_codes"], batch_size=1000)
    for name, name_deltas in deltas.items():
        _apply_deltas(name, name_deltas)


def _key(column: ConsensusColumn) -> tuple[str, int, str]:
    return (column.lens, column.signer_id, column.slot)


def _newer(column: ConsensusColumn, evidence: Evidence) -> bool:
    """Whether a stored column's run is newer than ``evidence`` (``latest_per``'s order)."""
    return (column.attested_at, column.evidence_id) > (evidence.attested_at, evidence.pk)


def columns_refresh(
    name: str,
    signer_ids: Collection[int],
    *,
    added: Evidence | None = None,
    counted_record: bool = True,
) -> bool:
    """Bring the name's columns of ``signer_ids`` up to date with the evidence, adding to the
    row tallies what each change adds and removes. A name not built yet is built whole; one
    whose newest counted AICR release moved is judged for staleness again (checked when the
    change is to a ``counted_record``: only counted rows set that release). ``added``: the
    change is this new eligible record of the one signer, which either becomes its slot's
    column or is older than the stored one (no read of the signer's other runs). Returns
    whether a counted column changed (only those can move a badge)."""
    built = ConsensusName.objects.filter(recipe_name=name).values_list("newest_aicr").first()
    if built is None:
        columns_rebuild([name])
        return True
    bars: dict[str, str] = {}
    stored: dict[tuple[str, int, str], ConsensusColumn]
    wanted: dict[tuple[str, int, str], ConsensusColumn]
    if added is not None:
        # The stored bar is current (every change that can lower it, or move the catalog's,
        # judges the name again), so a new counted record's bar needs no query.
        known = {name: bar_with(built[0], added)} if counted_record else None
        # Its slot's column in the default lens and in its version's lens.
        slot = slot_of(added)
        lenses = [DEFAULT_LENS] + ([added.aicr_version] if added.aicr_version else [])
        stored = {
            _key(c): c
            for c in ConsensusColumn.objects.filter(
                recipe_name=name, signer_id=added.signer_id, slot=slot, lens__in=lenses
            )
        }
        replaced = [
            lens
            for lens in lenses
            if (lens, added.signer_id, slot) not in stored
            or not _newer(stored[(lens, added.signer_id, slot)], added)
        ]
        columns = _columns_of([(lens, added) for lens in replaced], known)[0] if replaced else []
        bars = known or {}  # only a counted record's bar is checked below
        wanted = {**stored, **{_key(c): c for c in columns}}
    else:
        ids = sorted(set(signer_ids))
        stored = {
            _key(c): c for c in ConsensusColumn.objects.filter(recipe_name=name, signer_id__in=ids)
        }
        columns, bars = _computed([name], ids)
        wanted = {_key(c): c for c in columns}
    deltas: dict[LensRow, RowTally] = {}
    counted_moved = False
    gone: list[int] = []
    written: list[ConsensusColumn] = []
    for key in stored.keys() | wanted.keys():
        old, new = stored.get(key), wanted.get(key)
        if old is not None and new is not None and _same(old, new):
            continue
        counted_moved = counted_moved or any(
            c is not None and c.counted and c.lens == DEFAULT_LENS for c in (old, new)
        )
        if old is not None:
            _add(deltas, old, -1)
            if new is None:
                gone.append(old.pk)
        if new is not None:
            _add(deltas, new, 1)
            written.append(new)
    if gone:
        ConsensusColumn.objects.filter(pk__in=gone).delete()
    if written:  # a slot's new run replaces its old one in place (one statement)
        ConsensusColumn.objects.bulk_create(
            written,
            update_conflicts=True,
            unique_fields=["recipe_name", "lens", "signer", "slot"],
            update_fields=COLUMN_UPDATE_FIELDS,
        )
    _apply_deltas(name, deltas)
    if counted_record:
        bar = bars.get(name)
        if bar is None:
            bar = newest_aicr_bars([name], Catalog.objects.current())[name]
        if bar != built[0]:
            columns_restale([name])
            return True
    return counted_moved


# --- what is read back ------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnCounts:
    """How many columns a recipe's grid has in each group."""

    counted: int = 0
    reported: int = 0
    unsupported: int = 0
    simulated: int = 0

    @property
    def total(self) -> int:
        return self.counted + self.reported + self.unsupported + self.simulated


def column_summary(name: str, lens: str = DEFAULT_LENS) -> tuple[ColumnCounts, StaleSummary]:
    """The name's columns per group in ``lens``, and the ``StaleSummary`` of its counted ones
    (one aggregate over the name's columns)."""
    counts = {"counted": 0, "reported": 0, "unsupported": 0, "simulated": 0}
    stale: list[tuple[tuple[str, ...], int]] = []
    rows = (
        ConsensusColumn.objects.filter(recipe_name=name, lens=lens)
        .order_by()
        .values_list("counted", "slot", "stale_codes")
        .annotate(n=Count("pk"))
    )
    for counted, slot, codes, n in rows:
        if slot == ColumnSlot.SIMULATED:
            counts["simulated"] += n
        elif slot == ColumnSlot.UNSUPPORTED:
            counts["unsupported"] += n
        else:
            counts["counted" if counted else "reported"] += n
        if counted:
            stale.append((tuple(c for c in codes.split(",") if c), n))
    return ColumnCounts(**counts), StaleSummary.of_groups(stale)


def newest_column_runs(
    name: str, caps: Mapping[str, int], lens: str = DEFAULT_LENS
) -> QuerySet[Any, Any]:
    """The runs (``evidence_id``) of the name's newest columns of each group in ``lens``, at
    most ``caps[group]`` each: a subquery ranking the name's columns within each group."""
    ranked = ConsensusColumn.objects.filter(recipe_name=name, lens=lens).annotate(
        _rank=Window(
            RowNumber(),
            partition_by=[F("counted"), F("slot")],
            order_by=[F("attested_at").desc(), F("evidence_id").desc()],
        )
    )
    groups = (
        Q(counted=True, _rank__lte=caps.get("counted", 0))
        | Q(counted=False, slot=ColumnSlot.SUPPORTED, _rank__lte=caps.get("reported", 0))
        | Q(counted=False, slot=ColumnSlot.UNSUPPORTED, _rank__lte=caps.get("unsupported", 0))
        | Q(counted=False, slot=ColumnSlot.SIMULATED, _rank__lte=caps.get("simulated", 0))
    )
    return ranked.filter(groups).values("evidence_id")


def is_built(name: str) -> bool:
    return ConsensusName.objects.filter(recipe_name=name).exists()


def stored_tallies(
    names: Collection[str], lens: str = DEFAULT_LENS
) -> dict[str, dict[RowKey, RowTally]]:
    """Per name, its stored row tallies in ``lens`` (one query)."""
    rows = ConsensusRowTally.objects.filter(recipe_name__in=sorted(names), lens=lens).values_list(
        "recipe_name", "phase", "name", *RowTally.FIELDS
    )
    tallies: dict[str, dict[RowKey, RowTally]] = {}
    for name, phase, check, *values in rows:
        tallies.setdefault(name, {})[(phase, check)] = RowTally(*values)
    return tallies


def stored_stale_summaries(
    names: Collection[str], lens: str = DEFAULT_LENS
) -> dict[str, StaleSummary]:
    """Per name, ``StaleSummary`` of its counted columns in ``lens`` (one aggregate)."""
    groups: dict[str, list[tuple[tuple[str, ...], int]]] = {}
    rows = (
        ConsensusColumn.objects.filter(recipe_name__in=sorted(names), counted=True, lens=lens)
        .order_by()
        .values_list("recipe_name", "stale_codes")
        .annotate(n=Count("pk"))
    )
    for name, codes, n in rows:
        groups.setdefault(name, []).append((tuple(c for c in codes.split(",") if c), n))
    return {name: StaleSummary.of_groups(counted) for name, counted in groups.items()}


def stored_expiry(names: Collection[str], now: datetime) -> dict[str, datetime | None]:
    """Per name, when its first fresh counted column (in any lens: every lens's stale codes
    are judged again then) ages into "older than N days"."""
    stale_after = timedelta(days=stale_after_days())
    rows = (
        ConsensusColumn.objects.filter(
            recipe_name__in=sorted(names), counted=True, attested_at__gte=now - stale_after
        )
        .order_by()
        .values_list("recipe_name")
        .annotate(first=Min("attested_at"))
    )
    expiry: dict[str, datetime | None] = dict.fromkeys(names)
    for name, first in rows:
        expiry[name] = first + stale_after
    return expiry

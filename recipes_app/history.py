"""Reads behind a recipe's history page: checks by evidence records over time, TestGrid-style.

Rows are the recipe's declared checks (deployment, conformance, performance, ordered as the
consensus grid orders them) plus, up to EXTRA_ROWS_SHOWN, other check names the shown runs
carry. Columns are the recipe's verified evidence records, newest first (``attested_at``, then
id), COLUMNS_SHOWN at a time with keyset paging (``from=<evidence id>``: that record and the
older ones), so a page stays the same size whatever the number of records. Withdrawn records
are shown (struck, never counted); simulated and demo ones are labelled.

Each cell is one run's status of one check with the numbers it printed, compared with the
recipe's declared thresholds (``evidence_app.evidence_page.threshold_checks``, as the evidence page
does). Its permalink ``?cell=<check>@<evidence id>`` opens the page holding that record with the
cell highlighted; its anchor is ``#c<evidence id>-<check>``.

Per row: the newest counted pass over *all* records (aggregate queries; ingest stores
``{phase: {check: {status, …}}}``, which the query reads; other shapes the defensive readers
accept are only seen in the shown runs), and a flaky marker when one signer's shown runs go
pass → fail → pass (or the reverse): disagreement *between* signers is CONTESTED in the
consensus grid, not flakiness.

Charts: for each declared performance check, each of its thresholds with a comparison operator
(a floor or a ceiling; "256" or a model name is a setting, not a line) over the newest
CHART_RUNS counted runs.

The number of queries does not grow with the number of records: a page reads the counts, its
records and their staleness facts, the newest counted passes (one query more only for a check
without a pass in the newest RECENT_PASS_SCAN counted records) and the charts' runs; ``from``
and ``cell`` add the anchor record and the newer ids.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Count, Max, Q, QuerySet, Window
from django.db.models.fields.json import KeyTextTransform, KeyTransform

from evidence_app.consensus.grid import GRID_FIELDS
from evidence_app.consensus.outcomes import (
    CheckOutcome,
    Metric,
    PhaseSummary,
    check_outcomes,
    phase_summaries,
)
from evidence_app.consensus.rules import (
    GRID_PHASES,
    declared_checks,
    evidence_standing,
    is_counted,
    row_order,
)
from evidence_app.corroborate import FAIL, PASS
from evidence_app.evidence_page import ThresholdCheck, threshold_bound, threshold_checks
from evidence_app.models import (
    Evidence,
    EvidenceQuerySet,
    SignerClass,
    SignerKind,
    Verdict,
    counted_q,
)
from evidence_app.services.staleness import StaleReason, staleness_bulk
from evidence_app.services.versions import supported_range
from evidence_app.templatetags.evidence_tags import number
from recipes_app import history_charts
from recipes_app.models import Recipe

COLUMNS_SHOWN = 20  # evidence records per page: the page stays under 100 KB of HTML
CHART_RUNS = 50  # counted runs per chart, newest
CELL_LEAD = COLUMNS_SHOWN // 2  # a permalinked cell's page starts this many records newer
EXTRA_ROWS_SHOWN = 5  # undeclared check names shown; the rest are counted in a note
RECENT_PASS_SCAN = 200  # counted records read first for each row's last counted pass
METRICS_SHOWN = 3  # numbers per cell of a check without declared thresholds
NO_RESULT = "none"  # a cell whose run has no result for the check
# A check name fit for a URL and an HTML id as it is; any other gets a hashed key.
_PLAIN_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_CELL = re.compile(r"(?P<key>[^@]{1,300})@(?P<pk>[0-9]{1,18})")
_EVIDENCE_ID = re.compile(r"[0-9]{1,18}")
# A floor or a ceiling: what a horizontal line on a chart means.

RowKey = tuple[str, str]


def history_recipe(*, name: str) -> Recipe | None:
    """The current catalog's recipe ``name`` (its YAML texts left in the database)."""
    return (
        Recipe.objects.current()
        .filter(name=name)
        .defer("deterministic_yaml", "canonical_yaml", "components", "constraints")
        .first()
    )


# --- what the page shows -----------------------------------------------------------------


@dataclass(frozen=True)
class HistoryColumn:
    """One evidence record: when, who, whether it counts and why, its labels."""

    evidence: Evidence
    counted: bool
    why: str
    stale: list[StaleReason]
    summaries: dict[str, PhaseSummary]
    summary_only: bool  # no per-check CTRF data, only the predicate's phase counts

    @property
    def group(self) -> str:
        return evidence_standing(self.evidence)


@dataclass(frozen=True)
class CellNumber:
    """A number the run printed, with the declared threshold it is compared with (if any)."""

    label: str
    value: float
    unit: str
    requirement: str = ""
    meets: bool | None = None


@dataclass(frozen=True)
class HistoryCell:
    column: HistoryColumn
    anchor: str  # the HTML id
    permalink: str  # the ``cell`` parameter's value
    result: str  # pass | fail | not-run | NO_RESULT
    outcome: CheckOutcome | None
    numbers: tuple[CellNumber, ...] = ()
    highlighted: bool = False


@dataclass(frozen=True)
class FlakySigner:
    label: str
    sequence: str  # e.g. "pass → fail → pass", oldest first


@dataclass(frozen=True)
class HistoryRow:
    phase: str
    name: str
    key: str
    declared: bool
    thresholds: list[dict[str, Any]]
    cells: list[HistoryCell]
    last_counted_pass: datetime | None = None
    flaky: tuple[FlakySigner, ...] = ()


@dataclass(frozen=True)
class PhaseCounts:
    """A summary-only record's claimed counts for one phase, as shown (huge numbers capped)."""

    passed: str
    failed: str
    skipped: str

    @classmethod
    def of(cls, summary: PhaseSummary | None) -> PhaseCounts | None:
        if summary is None:
            return None
        return cls(*(_capped(n) for n in (summary.passed, summary.failed, summary.skipped)))


def _capped(count: int) -> str:
    return str(count) if count < 10**6 else "10⁶+"


@dataclass(frozen=True)
class HistoryPhase:
    phase: str
    rows: list[HistoryRow]
    counts: list[PhaseCounts | None]  # per column: a summary-only record's phase counts


@dataclass(frozen=True)
class ChartRow:
    """One plotted run, for the table beside the chart."""

    evidence_id: int
    attested_at: datetime
    signer: str
    demo: bool
    value: float
    finite: bool


@dataclass(frozen=True)
class HistoryChart:
    check: str
    metric: str  # the threshold's name (or the check's, without thresholds)
    requirement: str  # e.g. ">= 300"; "" without a numeric threshold
    unit: str
    geometry: history_charts.Chart[ChartRow]
    table: list[history_charts.Sample[ChartRow]]  # every value, newest first (non-finite too)
    runs: int  # counted runs read (the newest CHART_RUNS)

    @property
    def includes_demo(self) -> bool:
        return any(sample.ref.demo for sample in self.table)

    @property
    def summary(self) -> str:
        """The chart in words (its accessible name)."""
        points = self.geometry.points
        unit = f" {self.unit}" if self.unit else ""
        if not points:
            return f"{self.check} {self.metric}: no measured value in the newest counted runs."
        values = [p.sample.value for p in points]
        name = self.check if self.metric == self.check else f"{self.check} {self.metric}"
        text = (
            f"{name} over {len(points)} counted run"
            f"{'s' if len(points) != 1 else ''}: latest {number(values[-1])}{unit}, "
            f"lowest {number(min(values))}{unit}, highest {number(max(values))}{unit}"
        )
        if self.requirement:
            text += f"; threshold {self.requirement}, {self.geometry.failing} below it"
        return text + "."


@dataclass
class RecipeHistory:
    recipe: Recipe
    columns: list[HistoryColumn]
    phases: list[HistoryPhase]
    charts: list[HistoryChart]
    total: int  # verified records of this recipe
    counted_total: int
    start: int | None = None  # the ``from`` of this page (None: the newest)
    older_from: int | None = None
    newer_from: int | None = None
    has_newer: bool = False
    hidden_rows: int = 0
    newer_count: int = 0  # records newer than the first shown one
    target: str = ""  # the anchor of the highlighted cell
    errors: list[str] = field(default_factory=list)

    @property
    def rows(self) -> list[HistoryRow]:
        return [row for phase in self.phases for row in phase.rows]

    @property
    def first_position(self) -> int:
        """1-based position of the first shown record among all, newest first (0: none)."""
        return self.newer_count + 1 if self.columns else 0

    @property
    def last_position(self) -> int:
        return self.newer_count + len(self.columns)


# --- cells -------------------------------------------------------------------------------


def row_keys(rows: Sequence[RowKey]) -> dict[RowKey, str]:
    """A stable key per row for URLs and HTML ids: the check name when it is plain and not
    taken by an earlier row, else ``_`` and a hash (names are contributor text)."""
    keys: dict[RowKey, str] = {}
    taken: set[str] = set()
    for phase, name in rows:
        key = name
        if not _PLAIN_KEY.fullmatch(name) or name in taken:
            key = "_" + hashlib.sha256(f"{phase}\n{name}".encode()).hexdigest()[:12]
        taken.add(key)
        keys[(phase, name)] = key
    return keys


def _numbers(
    name: str, thresholds: Sequence[Mapping[str, Any]], outcome: CheckOutcome
) -> tuple[CellNumber, ...]:
    if thresholds:
        return tuple(
            CellNumber(
                label=t.name,
                value=t.metric.value,
                unit=t.metric.unit,
                requirement=t.requirement if t.numeric else "",
                meets=t.meets,
            )
            for t in threshold_checks(name, thresholds, outcome.metrics)
            if t.metric is not None
        )
    return tuple(
        CellNumber(label=m.label, value=m.value, unit=m.unit)
        for m in outcome.metrics[:METRICS_SHOWN]
    )


def _flaky(cells: Sequence[HistoryCell]) -> tuple[FlakySigner, ...]:
    """Signers whose shown runs of this check alternate: two or more changes between pass and
    fail, oldest first."""
    by_signer: dict[int, list[str]] = defaultdict(list)
    labels: dict[int, str] = {}
    for cell in reversed(cells):  # oldest first
        if cell.result in (PASS, FAIL) and cell.column.evidence.withdrawn_at is None:
            signer = cell.column.evidence.signer
            by_signer[signer.pk].append(cell.result)
            labels[signer.pk] = signer.label
    flaky = []
    for signer_id, results in by_signer.items():
        changes = sum(1 for a, b in itertools.pairwise(results) if a != b)
        if changes >= 2:
            flaky.append(FlakySigner(label=labels[signer_id], sequence=" → ".join(results[-6:])))
    return tuple(sorted(flaky, key=lambda f: f.label))


# --- the queries -------------------------------------------------------------------------


def _records(recipe: Recipe) -> EvidenceQuerySet:
    return Evidence.objects.filter(recipe_name=recipe.name, verdict=Verdict.VERIFIED)


def _at_or_older(qs: QuerySet[Evidence], anchor: Evidence) -> QuerySet[Evidence]:
    at = anchor.attested_at
    return qs.filter(Q(attested_at__lt=at) | Q(attested_at=at, pk__lte=anchor.pk))


def _newer(qs: QuerySet[Evidence], anchor: Evidence) -> QuerySet[Evidence]:
    at = anchor.attested_at
    return qs.filter(Q(attested_at__gt=at) | Q(attested_at=at, pk__gt=anchor.pk))


def _status(phase: str, name: str) -> KeyTextTransform:
    """``check_results -> phase -> name ->> 'status'`` (parameters, never SQL text)."""
    return KeyTextTransform("status", KeyTransform(name, KeyTransform(phase, "check_results")))


def _counted(recipe: Recipe) -> QuerySet[Evidence]:
    return _records(recipe).counted()


def _newest_passes(records: QuerySet[Evidence], rows: Sequence[RowKey]) -> dict[RowKey, datetime]:
    aliases = {f"s{i}": _status(phase, name) for i, (phase, name) in enumerate(rows)}
    newest = records.alias(**aliases).aggregate(
        **{f"p{i}": Max("attested_at", filter=Q(**{f"s{i}": "passed"})) for i in range(len(rows))}
    )
    return {row: newest[f"p{i}"] for i, row in enumerate(rows) if newest[f"p{i}"] is not None}


def _last_counted_passes(
    recipe: Recipe, rows: Sequence[RowKey], counted_total: int
) -> dict[RowKey, datetime]:
    """The newest counted pass of each row over every record, in at most two queries.

    Reading a check's status decompresses the record's ``check_results`` once per check, so
    reading every record for every row costs ~15 ms per 1,000 records. Passes are usually
    recent: the newest RECENT_PASS_SCAN counted records are read first, and only the rows
    without a pass there are looked up in all the records.
    """
    if not rows:
        return {}
    newest = _counted(recipe).order_by("-attested_at", "-pk").values("pk")[:RECENT_PASS_SCAN]
    found = _newest_passes(_counted(recipe).filter(pk__in=newest), rows)
    missing = [row for row in rows if row not in found]
    if missing and counted_total > RECENT_PASS_SCAN:
        found |= _newest_passes(_counted(recipe), missing)
    return found


def _why(evidence: Evidence, counted: bool) -> str:
    """Whether the record counts for consensus and why, in a few words (``is_counted``'s
    rule; the signer page and ``counting_explanation`` say it in full)."""
    if evidence.withdrawn_at is not None:
        return "not counted: withdrawn"
    if evidence.is_simulated:
        return "not counted: simulated cluster"
    if evidence_standing(evidence) == "unsupported":
        return f"not counted: outside the supported AICR range ({supported_range().text})"
    signer = evidence.signer
    if counted:
        if signer.signer_class == SignerClass.REGISTERED_KEY:
            return "counted: registered key"
        return f"counted: allowlisted ({signer.get_signer_class_display().lower()})"
    if signer.kind == SignerKind.KEY:
        return "not counted: key not registered"
    return "not counted: not on the allowlist"


def _parse_cell(text: str | None) -> tuple[str, int] | str | None:
    """``(row key, evidence id)``, None when absent, or an error sentence."""
    if text is None or text == "":
        return None
    found = _CELL.fullmatch(text)
    if found is None:
        return (
            f"cell: “{text[:100]}” is not a cell; a cell is <check>@<evidence id>, "
            "e.g. operator-health@12."
        )
    return found["key"], int(found["pk"])


def _resolve(
    recipe: Recipe, records: QuerySet[Evidence], start: str | None, cell: str | None
) -> tuple[Evidence | None, tuple[str, int] | None, list[str]]:
    """The record a page starts from (``from``) or centres on (``cell``), the wanted cell,
    and the errors naming a bad parameter."""
    errors: list[str] = []
    wanted = _parse_cell(cell)
    if isinstance(wanted, str):
        errors.append(wanted)
        wanted = None
    anchor_id: int | None = None
    if wanted is not None:
        anchor_id = wanted[1]
    elif start:
        if _EVIDENCE_ID.fullmatch(start):
            anchor_id = int(start)
        else:
            errors.append(f"from: “{start[:100]}” is not an evidence id (a whole number).")
    if anchor_id is None:
        return None, wanted, errors
    anchor = records.only("pk", "attested_at").filter(pk=anchor_id).first()
    if anchor is None:
        errors.append(
            f"{'cell' if wanted is not None else 'from'}: no verified evidence {anchor_id} "
            f"for {recipe.name}; showing the newest records."
        )
        return None, None, errors
    return anchor, wanted, errors


@dataclass(frozen=True)
class _Window:
    """Where a page starts (None: the newest record) and what is newer than its start."""

    anchor: Evidence | None = None
    newer_ids: list[int] = field(default_factory=list)  # nearest first
    newer_count: int = 0


def _window(records: QuerySet[Evidence], anchor: Evidence | None, centre: bool) -> _Window:
    """The page from ``anchor``; with ``centre``, the page with ``anchor`` in its middle."""
    if anchor is None:
        return _Window()
    # The newer records' ids nearest first and how many there are in all, in one query (the
    # window count is taken before the LIMIT): enough to start a page half a page before a
    # cell's record and still link the page before that one.
    newer = list(
        _newer(records, anchor)
        .annotate(_total=Window(Count("pk")))
        .order_by("attested_at", "pk")
        .values_list("pk", "attested_at", "_total")[: COLUMNS_SHOWN + CELL_LEAD]
    )
    count = newer[0][2] if newer else 0
    ids = [pk for pk, _, _ in newer]
    if not centre:
        return _Window(anchor=anchor, newer_ids=ids, newer_count=count)
    if count < COLUMNS_SHOWN:
        return _Window()  # the record is on the newest page
    pk, attested_at, _ = newer[CELL_LEAD - 1]
    start = Evidence(pk=pk, attested_at=attested_at)
    return _Window(anchor=start, newer_ids=ids[CELL_LEAD:], newer_count=count - CELL_LEAD)


def _columns(
    shown: Sequence[Evidence],
) -> tuple[list[HistoryColumn], list[dict[str, dict[str, CheckOutcome]]]]:
    stale = staleness_bulk(shown)
    columns: list[HistoryColumn] = []
    outcomes: list[dict[str, dict[str, CheckOutcome]]] = []
    for evidence in shown:
        found = check_outcomes(evidence.check_results)
        counted = is_counted(evidence)
        outcomes.append(found)
        columns.append(
            HistoryColumn(
                evidence=evidence,
                counted=counted,
                why=_why(evidence, counted),
                stale=stale.get(evidence.pk, []),
                summaries=phase_summaries({"phases": getattr(evidence, "_phases", None)}),
                summary_only=not any(found.get(phase) for phase in GRID_PHASES),
            )
        )
    return columns, outcomes


def _row(
    row: RowKey,
    key: str,
    declared: Mapping[RowKey, list[dict[str, Any]]],
    columns: Sequence[HistoryColumn],
    outcomes: Sequence[Mapping[str, Mapping[str, CheckOutcome]]],
    last_pass: datetime | None,
    target: str,
) -> HistoryRow:
    phase, name = row
    thresholds = declared.get(row, [])
    cells = []
    for column, found in zip(columns, outcomes, strict=True):
        outcome = found.get(phase, {}).get(name)
        anchor = f"c{column.evidence.pk}-{key}"
        cells.append(
            HistoryCell(
                column=column,
                anchor=anchor,
                permalink=f"{key}@{column.evidence.pk}",
                result=outcome.result if outcome is not None else NO_RESULT,
                outcome=outcome,
                numbers=_numbers(name, thresholds, outcome) if outcome is not None else (),
                highlighted=anchor == target,
            )
        )
    return HistoryRow(
        phase=phase,
        name=name,
        key=key,
        declared=row in declared,
        thresholds=thresholds,
        cells=cells,
        last_counted_pass=_newest_counted_pass(last_pass, cells),
        flaky=_flaky(cells),
    )


def recipe_history(
    *, recipe: Recipe, start: str | None = None, cell: str | None = None
) -> RecipeHistory:
    """The history of ``recipe`` from record ``start`` (its id; None: the newest), or around
    the record of the highlighted ``cell`` (``<check>@<evidence id>``)."""
    records = _records(recipe)
    anchor, wanted, errors = _resolve(recipe, records, start, cell)
    counts = records.aggregate(
        n=Count("pk"),
        counted=Count("pk", filter=counted_q()),
    )
    window = _window(records, anchor, centre=wanted is not None)
    older_or_at = _at_or_older(records, window.anchor) if window.anchor else records
    loaded = list(
        older_or_at.select_related("signer")
        .only(*GRID_FIELDS)
        .annotate(_phases=KeyTransform("phases", "predicate"))
        .order_by("-attested_at", "-pk")[: COLUMNS_SHOWN + 1]
    )
    columns, outcomes = _columns(loaded[:COLUMNS_SHOWN])

    declared = declared_checks(recipe.checks)
    extra = sorted(
        {
            (phase, name)
            for found in outcomes
            for phase in GRID_PHASES
            for name in found.get(phase, {})
            if (phase, name) not in declared
        },
        key=row_order,
    )
    row_list = sorted([*declared, *extra[:EXTRA_ROWS_SHOWN]], key=row_order)
    keys = row_keys(row_list)
    target = ""
    if wanted is not None:
        if wanted[0] not in keys.values():
            errors.append(f"cell: no check “{wanted[0][:100]}” in the history of {recipe.name}.")
        else:
            target = f"c{wanted[1]}-{wanted[0]}"
    last_pass = _last_counted_passes(recipe, row_list, counts["counted"])
    rows = [
        _row(row, keys[row], declared, columns, outcomes, last_pass.get(row), target)
        for row in row_list
    ]
    newer_ids = window.newer_ids
    return RecipeHistory(
        recipe=recipe,
        columns=columns,
        phases=[
            HistoryPhase(
                phase=p,
                rows=[row for row in rows if row.phase == p],
                counts=[
                    PhaseCounts.of(c.summaries.get(p)) if c.summary_only else None for c in columns
                ],
            )
            for p in GRID_PHASES
        ],
        charts=_charts(recipe, declared),
        total=counts["n"],
        counted_total=counts["counted"],
        start=window.anchor.pk if window.anchor else None,
        older_from=loaded[COLUMNS_SHOWN].pk if len(loaded) > COLUMNS_SHOWN else None,
        newer_from=newer_ids[COLUMNS_SHOWN - 1] if len(newer_ids) >= COLUMNS_SHOWN else None,
        has_newer=window.newer_count > 0,
        hidden_rows=max(0, len(extra) - EXTRA_ROWS_SHOWN),
        newer_count=window.newer_count,
        target=target,
        errors=errors,
    )


def _newest_counted_pass(stored: datetime | None, cells: Sequence[HistoryCell]) -> datetime | None:
    """The aggregate's answer, or a newer counted pass among the shown cells (check results
    stored in a shape the query does not read)."""
    shown = [c.column.evidence.attested_at for c in cells if c.result == PASS and c.column.counted]
    candidates = [t for t in (stored, *shown) if t is not None]
    return max(candidates) if candidates else None


# --- charts ------------------------------------------------------------------------------


def _bound(requirement: str) -> float | None:
    """The line a threshold draws: its number, as the cells judge it (``threshold_bound``)."""
    bound = threshold_bound(requirement)
    return bound[1] if bound is not None else None


def _charts(recipe: Recipe, declared: Mapping[RowKey, list[dict[str, Any]]]) -> list[HistoryChart]:
    """One chart per performance threshold with a comparison operator (or per performance
    check without thresholds), over the newest CHART_RUNS counted runs: one query."""
    checks = [(name, ts) for (phase, name), ts in declared.items() if phase == "performance"]
    if not checks:
        return []
    runs = list(
        _counted(recipe)
        .annotate(_perf=KeyTransform("performance", "check_results"))
        .order_by("-attested_at", "-pk")
        .values_list("pk", "attested_at", "signer__label", "is_demo", "_perf")[:CHART_RUNS]
    )
    results = [
        (pk, at, label, demo, check_outcomes({"performance": perf}).get("performance", {}))
        for pk, at, label, demo, perf in runs
    ]
    charts = []
    for name, thresholds in checks:
        series = [
            (i, t) for i, t in enumerate(thresholds) if _bound(str(t.get("value", ""))) is not None
        ]
        if not thresholds:
            series = [(-1, {"name": name, "value": ""})]
        for index, threshold in series:
            samples: list[history_charts.Sample[ChartRow]] = []
            unit = ""
            for pk, at, label, demo, found in results:
                outcome = found.get(name)
                if outcome is None:
                    continue
                picked = _picked(name, thresholds, index, outcome.metrics)
                if picked is None:
                    continue
                metric, meets = picked
                unit = unit or metric.unit
                row = ChartRow(
                    evidence_id=pk,
                    attested_at=at,
                    signer=label,
                    demo=demo,
                    value=metric.value,
                    finite=math.isfinite(metric.value),
                )
                samples.append(
                    history_charts.Sample(when=at, value=metric.value, meets=meets, ref=row)
                )
            requirement = str(threshold.get("value", ""))[:200]
            charts.append(
                HistoryChart(
                    check=name,
                    metric=str(threshold.get("name", name))[:200],
                    requirement=requirement,
                    unit=unit,
                    geometry=history_charts.chart(samples, _bound(requirement)),
                    table=samples,
                    runs=len(runs),
                )
            )
    return charts


def _picked(
    name: str, thresholds: Sequence[Mapping[str, Any]], index: int, metrics: Sequence[Metric]
) -> tuple[Metric, bool | None] | None:
    """The metric a chart plots for one run, and whether it meets the threshold."""
    if index < 0:
        return (metrics[0], None) if len(metrics) == 1 else None
    check: ThresholdCheck = threshold_checks(name, thresholds, metrics)[index]
    return (check.metric, check.meets) if check.metric is not None else None

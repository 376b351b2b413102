"""The consensus grid of one recipe: its signers as columns, its checks as rows, each cell a
run's result, each row, phase and the recipe a consensus state (``rules.recipe_consensus``).

- **Columns** are signers: one per verified signer (and one more for a signer's simulated
  runs), counted first, then reported, then simulated. Withdrawn evidence is listed (struck,
  with its reason; the newest WITHDRAWN_SHOWN, then a count) but never selected.
- **Lens**: by default each column's single newest run (``attested_at``, then id) whatever
  its AICR version; with a version, each column's newest run *at that version* and only the
  columns that have one: strict same-version consensus, as AICR's per-version grids. The
  newest run per column is picked in SQL. States use every column; the page renders at most
  COUNTED_COLUMNS_SHOWN counted and OTHER_COLUMNS_SHOWN reported and simulated columns
  (newest runs first) unless asked for all (``signers="all"``), and says so.
- Evidence without per-check CTRF data (a bare Sigstore bundle) only has the predicate's phase
  summary, so it is not-run on every row and its column says so.

``consensus_grid`` runs a fixed number of queries whatever the number of evidence rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection
from django.db.models import Count, F, Max, QuerySet, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce

from evidence_app.consensus import columns as stored_columns
from evidence_app.consensus.columns import ColumnCounts, newest_per_column
from evidence_app.consensus.outcomes import (
    CheckOutcome,
    PhaseSummary,
    check_outcomes,
    phase_summaries,
)
from evidence_app.consensus.rules import (
    GRID_PHASES,
    RUN_FIELDS,
    RecipeConsensus,
    RowConsensus,
    RowKey,
    Run,
    StaleSummary,
    declared_checks,
    eligible,
    fold_consensus,
    in_supported_range,
    is_counted,
    outcome_statuses,
    recipe_consensus,
    signer_group,
)
from evidence_app.corroborate import (
    NOT_RUN,
    Consensus,
    RecipeRollup,
    bucket_status,
    order_versions_newest_first,
    parse_rfc3339,
)
from evidence_app.models import Evidence, Release, Signer, SignerKind, Verdict
from evidence_app.selectors import HEAVY_FIELDS
from evidence_app.services.facet_tallies import recipe_records
from evidence_app.services.staleness import StaleReason, staleness_bulk
from recipes_app.models import Recipe

RECENT_EVIDENCE = 5  # then a link to all of them (the page's byte budget)
WITHDRAWN_SHOWN = 20  # the recipe page lists this many withdrawn runs, then a count
# The grid shows at most this many counted signer columns (newest runs first) and this many
# reported and simulated ones each, unless asked for all (``signers="all"``); states are
# always computed over every column. Few by default: each column is a cell in every row, and
# the recipe page stays within its byte budget at 10,000 records (docs/benchmarks.md).
COUNTED_COLUMNS_SHOWN = 10
OTHER_COLUMNS_SHOWN = 3
COLUMN_CAPS = {
    "counted": COUNTED_COLUMNS_SHOWN,
    "reported": OTHER_COLUMNS_SHOWN,
    "unsupported": OTHER_COLUMNS_SHOWN,
    "simulated": OTHER_COLUMNS_SHOWN,
}
# What the grid reads of each selected run (the predicate only as its ``phases`` object).
GRID_FIELDS = (*RUN_FIELDS, "k8s_version")


@dataclass
class Column:
    """One signer (or one signer's simulated runs) and the run selected for the lens."""

    key: str
    signer: Signer
    simulated: bool
    evidence: Evidence
    outcomes: dict[str, dict[str, CheckOutcome]] = field(default_factory=dict)
    summaries: dict[str, PhaseSummary] = field(default_factory=dict)
    stale: list[StaleReason] = field(default_factory=list)

    @property
    def counted(self) -> bool:
        return is_counted(self.evidence)

    @property
    def group(self) -> str:
        """``simulated``, ``unsupported`` (outside the supported AICR range: a counted
        signer's such runs get a column of their own, never counted), else the signer's."""
        if self.simulated:
            return "simulated"
        if not in_supported_range(self.evidence):
            return "unsupported"
        return signer_group(self.signer)

    @property
    def summary_only(self) -> bool:
        """No per-check CTRF data: the column only has the predicate's phase summaries."""
        return not any(self.outcomes.get(phase) for phase in GRID_PHASES)


@dataclass(frozen=True)
class Cell:
    column: Column
    result: str  # pass | fail | not-run
    outcome: CheckOutcome | None


@dataclass(frozen=True)
class Row:
    phase: str
    name: str
    declared: bool
    thresholds: list[dict[str, Any]]
    consensus: Consensus
    cells: list[Cell]
    in_rollup: bool = True  # False: only reported or simulated runs carry this name
    demo: bool = False  # a counted demo run gave it a pass or a fail
    voters: int = 0  # counted runs with a pass or a fail on it
    stale_voters: int = 0  # … of which stale

    @property
    def state(self) -> str:
        return self.consensus.state

    @property
    def stale_note(self) -> str:
        if not self.stale_voters:
            return ""
        return f"{self.stale_voters} of {self.voters} counted results from stale runs"


@dataclass(frozen=True)
class PhaseCell:
    column: Column
    summary: PhaseSummary | None


@dataclass(frozen=True)
class GridPhase:
    phase: str
    state: str
    rows: list[Row]
    summaries: list[PhaseCell]
    demo: bool = False  # its state rests on a pass or fail of demo evidence


@dataclass(frozen=True)
class LensOption:
    value: str  # "" = latest run per signer
    label: str
    selected: bool


@dataclass
class ConsensusGrid:
    recipe_name: str
    lens: str
    lens_error: str
    lens_options: list[LensOption]
    # Set for a release lens: what it counts, and that key-signed columns would not pass
    # AICR's upstream gate.
    lens_note: str = field(default="", kw_only=True)
    columns: list[Column]  # every column: the states are computed over all of them
    phases: list[GridPhase]  # rows' cells and phase summaries: the shown columns only
    consensus: RecipeConsensus
    recent: list[Evidence]  # newest evidence of this recipe (withdrawn ones included)
    withdrawn: list[Evidence]  # the newest WITHDRAWN_SHOWN withdrawn ones
    stale: dict[int, list[StaleReason]]
    evidence_count: int
    withdrawn_count: int = 0
    shown_columns: list[Column] = field(default_factory=list)  # the columns rendered
    all_signers: bool = False  # asked for every column (``signers="all"``)
    # How many columns there are in each group: all of them, read or not.
    counts: ColumnCounts = field(default_factory=ColumnCounts)

    @property
    def is_capped(self) -> bool:
        """Some columns are not rendered (they still count in every state)."""
        return len(self.shown_columns) < self.counts.total

    @property
    def cappable(self) -> bool:
        """Showing every column, though the default view would cap them."""
        return self.all_signers and _capped_total(self.counts) < self.counts.total

    @property
    def shown_counted(self) -> int:
        return sum(1 for c in self.shown_columns if c.counted)

    @property
    def shown_reported(self) -> int:
        return sum(1 for c in self.shown_columns if c.group == "reported")

    @property
    def shown_simulated(self) -> int:
        return sum(1 for c in self.shown_columns if c.simulated)

    @property
    def rollup(self) -> RecipeRollup:
        return self.consensus.rollup

    @property
    def state(self) -> str:
        return self.consensus.state

    @property
    def includes_demo(self) -> bool:
        return self.consensus.includes_demo

    @property
    def stale_summary(self) -> StaleSummary:
        return self.consensus.stale

    @property
    def withdrawn_hidden(self) -> int:
        return max(0, self.withdrawn_count - len(self.withdrawn))

    @property
    def rows(self) -> list[Row]:
        return [row for phase in self.phases for row in phase.rows]

    @property
    def has_columns(self) -> bool:
        return self.counts.total > 0

    # The columns read (every one in a lens or with ``signers="all"``, else the shown ones).
    @property
    def counted_columns(self) -> list[Column]:
        return [c for c in self.columns if c.counted]

    @property
    def reported_columns(self) -> list[Column]:
        return [c for c in self.columns if c.group == "reported"]

    @property
    def simulated_columns(self) -> list[Column]:
        return [c for c in self.columns if c.simulated]

    @property
    def unsupported_columns(self) -> list[Column]:
        """Runs outside the supported AICR range (never counted), one column per signer."""
        return [c for c in self.columns if c.group == "unsupported"]

    @property
    def has_summary_only(self) -> bool:
        return any(c.summary_only for c in self.shown_columns)

    @property
    def has_shown_only_rows(self) -> bool:
        return any(not row.in_rollup for row in self.rows)

    @property
    def phase_rollup(self) -> dict[str, str]:
        return {phase.phase: phase.state for phase in self.phases}


def _column_key(evidence: Evidence) -> str:
    source = evidence.signer.source_id
    if evidence.is_simulated:
        return f"{source}:simulated"
    return source if in_supported_range(evidence) else f"{source}:unsupported"


def _instant(moment: datetime) -> int:
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    instant = parse_rfc3339(text)
    return instant if instant is not None else 0


def _versions_newest_first(pairs: Iterable[tuple[str, datetime]]) -> list[str]:
    """AICR versions (each with its newest run's ``attested_at``), newest release first:
    AICR's lens order."""
    newest: dict[str, int] = {}
    for version, attested_at in pairs:
        instant = _instant(attested_at)
        if instant > newest.get(version, -(2**63)):
            newest[version] = instant
    return order_versions_newest_first(newest, newest)


def _column_order(column: Column) -> tuple[int, str, str]:
    group = {"counted": 0, "reported": 1, "unsupported": 2, "simulated": 3}[column.group]
    return (group, column.signer.label.lower(), column.key)


def _shown_columns(columns: Sequence[Column], show_all: bool) -> list[Column]:
    """The columns rendered: all of them, or the newest COUNTED_COLUMNS_SHOWN counted ones
    and the newest OTHER_COLUMNS_SHOWN reported and simulated ones each, in grid order."""
    if show_all:
        return list(columns)
    caps = COLUMN_CAPS
    newest = sorted(columns, key=lambda c: (c.evidence.attested_at, c.evidence.pk), reverse=True)
    taken: dict[str, int] = {}
    keep: set[int] = set()
    for column in newest:
        group = "counted" if column.counted else column.group
        if taken.get(group, 0) < caps[group]:
            taken[group] = taken.get(group, 0) + 1
            keep.add(id(column))
    return [c for c in columns if id(c) in keep]


def _capped_total(counts: ColumnCounts) -> int:
    """How many columns the default view shows of ``counts``."""
    return sum(min(getattr(counts, group), cap) for group, cap in COLUMN_CAPS.items())


def _counts(columns: Sequence[Column]) -> ColumnCounts:
    return ColumnCounts(
        counted=sum(1 for c in columns if c.counted),
        reported=sum(1 for c in columns if c.group == "reported"),
        unsupported=sum(1 for c in columns if c.group == "unsupported"),
        simulated=sum(1 for c in columns if c.simulated),
    )


# ``release:<id>``: the lens of a release's identities (releases.status; imported where used,
# since releases.status reads the consensus rules).
LENS_PREFIX = "release:"
UPSTREAM_GATE = "not accepted by AICR's upstream gate"


@dataclass(frozen=True)
class _Lens:
    """The lens asked for, checked against the AICR versions that have eligible runs."""

    version: str  # "" = latest run per signer; "release:<id>" = a release's identities
    error: str
    versions: list[str]  # newest first
    releases: tuple[tuple[int, str], ...] = ()  # releases claiming the recipe: (id, name)

    @property
    def options(self) -> list[LensOption]:
        options = [LensOption(value="", label="Latest run per signer", selected=not self.version)]
        options += [
            LensOption(value=v, label=f"AICR {v}", selected=v == self.version)
            for v in self.versions
        ]
        options += [
            LensOption(
                value=f"{LENS_PREFIX}{pk}",
                label=f"Identities of release {name}",
                selected=self.version == f"{LENS_PREFIX}{pk}",
            )
            for pk, name in self.releases
        ]
        return options


# The AICR versions of a recipe's eligible runs (``rules.eligible``), each with its newest
# run's ``attested_at``, by a skip scan of ``evidence_recipe_versions_idx``: each step one
# probe for the next version, then one backward probe per version for its newest run (a
# handful of versions, whatever the number of records; grouping the recipe's records was
# 170 ms at 1,000,000, issue 22). PostgreSQL only, as the qualifications' pairs: SQLite keeps
# the plain group.
_VERSIONS_SQL = """
WITH RECURSIVE versions (aicr_version) AS (
    (SELECT aicr_version FROM evidence_app_evidence
     WHERE recipe_name = %(name)s AND verdict = %(verified)s AND withdrawn_at IS NULL
     ORDER BY aicr_version LIMIT 1)
    UNION ALL
    SELECT (SELECT e.aicr_version FROM evidence_app_evidence AS e
            WHERE e.recipe_name = %(name)s AND e.verdict = %(verified)s
              AND e.withdrawn_at IS NULL AND e.aicr_version > versions.aicr_version
            ORDER BY e.aicr_version LIMIT 1)
    FROM versions WHERE versions.aicr_version IS NOT NULL
)
SELECT aicr_version, (
    SELECT e.attested_at FROM evidence_app_evidence AS e
    WHERE e.recipe_name = %(name)s AND e.verdict = %(verified)s AND e.withdrawn_at IS NULL
      AND e.aicr_version = versions.aicr_version
    ORDER BY e.attested_at DESC LIMIT 1
)
FROM versions WHERE aicr_version IS NOT NULL
"""


def _version_pairs(mine: QuerySet[Evidence], recipe_name: str) -> list[tuple[str, datetime]]:
    """``(AICR version, newest attested_at)`` of the eligible runs of ``mine``, the records of
    ``recipe_name`` (the empty version included: a run without one)."""
    if connection.vendor == "postgresql" and recipe_name:
        with connection.cursor() as cursor:
            cursor.execute(_VERSIONS_SQL, {"name": recipe_name, "verified": Verdict.VERIFIED})
            return [(version, newest) for version, newest in cursor.fetchall()]
    rows = eligible(mine).order_by().values("aicr_version").annotate(newest=Max("attested_at"))
    return [(r["aicr_version"], r["newest"]) for r in rows]


def _lens(
    mine: QuerySet[Evidence], asked: str, *, has_evidence: bool, recipe_name: str = ""
) -> _Lens:
    """``asked`` if some eligible run has that AICR version (or it names a release claiming
    the recipe: ``release:<id>``), else the default lens (and why)."""
    releases = tuple(
        (r.pk, r.name)
        for r in Release.objects.only("pk", "name", "profiles").order_by("-created_at")[:50]
        if recipe_name in r.claimed
    )
    if asked.startswith(LENS_PREFIX):
        if any(f"{LENS_PREFIX}{pk}" == asked for pk, _ in releases):
            return _Lens(version=asked, error="", versions=[], releases=releases)
        error = (
            f"No release claiming this recipe is “{asked}”; showing each signer's latest "
            "run instead."
        )
        return _Lens(version="", error=error, versions=[], releases=releases)
    versions: list[str] = []
    if has_evidence:
        # A run without an AICR version cannot be picked by version; it still shows in the
        # default lens.
        versions = [v for v in _versions_newest_first(_version_pairs(mine, recipe_name)) if v]
    if asked and asked not in versions:
        error = (
            f"No counted or reported evidence was produced with AICR version “{asked}”; "
            "showing each signer's latest run instead."
        )
        return _Lens(version="", error=error, versions=versions, releases=releases)
    return _Lens(version=asked, error="", versions=versions, releases=releases)


def _selected_runs(
    mine: QuerySet[Evidence], lens: str, recipe: Recipe | None = None
) -> list[Evidence]:
    """Each column's newest eligible run for the lens, without the bytes, the transcript or
    the predicate beyond its phase summaries (one windowed query; a release lens first reads
    which runs record the release's identities)."""
    candidates = eligible(mine)
    from evidence_app.releases.status import lens_release, matching_evidence

    release = lens_release(lens) if recipe is not None else None
    if release is not None and recipe is not None:
        ids = list(candidates.values_list("pk", flat=True))
        candidates = candidates.filter(pk__in=sorted(matching_evidence(release, recipe, ids)))
    elif lens:
        candidates = candidates.filter(aicr_version=lens)
    return list(
        newest_per_column(candidates)
        .select_related("signer")
        .only(*GRID_FIELDS)
        .annotate(_phases=F("predicate__phases"))
        .order_by("-attested_at", "-pk")
    )


def _columns(selected: Sequence[Evidence], stale: dict[int, list[StaleReason]]) -> list[Column]:
    """One column per selected run, in grid order, with the statuses consensus reads."""
    columns = [
        Column(
            key=_column_key(e),
            signer=e.signer,
            simulated=e.is_simulated,
            evidence=e,
            outcomes=check_outcomes(e.check_results, detail=False),
            stale=stale.get(e.pk, []),
        )
        for e in selected
    ]
    columns.sort(key=_column_order)
    return columns


def _read_cell_details(shown_columns: Iterable[Column]) -> None:
    """The shown columns' cell details (durations, messages, metrics) and phase summaries."""
    for column in shown_columns:
        evidence = column.evidence
        column.outcomes = check_outcomes(evidence.check_results)
        column.summaries = phase_summaries({"phases": getattr(evidence, "_phases", None)})


def _row(
    found: RowConsensus,
    declared: dict[RowKey, list[dict[str, Any]]],
    columns: Sequence[Column],
    shown: Sequence[int],
) -> Row:
    """One row of the grid: its consensus, and a cell for each shown column (by index)."""
    phase, name = found.key
    cells = []
    for i in shown:
        outcome = columns[i].outcomes.get(phase, {}).get(name)
        result = NOT_RUN if outcome is None else bucket_status(outcome.status)
        cells.append(Cell(column=columns[i], result=result, outcome=outcome))
    return Row(
        phase=phase,
        name=name,
        declared=found.key in declared,
        thresholds=declared.get(found.key, []),
        consensus=found.consensus,
        cells=cells,
        in_rollup=found.in_rollup,
        demo=found.demo,
        voters=found.voters,
        stale_voters=found.stale_voters,
    )


def _grid_phases(
    consensus: RecipeConsensus,
    declared: dict[RowKey, list[dict[str, Any]]],
    columns: Sequence[Column],
    shown_columns: Sequence[Column],
) -> list[GridPhase]:
    """The grid's phases with their rows (cells for the shown columns only)."""
    shown_ids = {id(c) for c in shown_columns}
    shown = [i for i, c in enumerate(columns) if id(c) in shown_ids]
    by_phase: dict[str, list[Row]] = {phase: [] for phase in GRID_PHASES}
    for found in consensus.rows:
        by_phase[found.key[0]].append(_row(found, declared, columns, shown))
    return [
        GridPhase(
            phase=phase,
            state=consensus.phase_states[phase],
            rows=by_phase[phase],
            summaries=[PhaseCell(column=c, summary=c.summaries.get(phase)) for c in shown_columns],
            demo=consensus.phase_demo[phase],
        )
        for phase in GRID_PHASES
    ]


def consensus_grid(
    *, recipe: Recipe, lens: str | None = None, signers: str | None = None
) -> ConsensusGrid:
    """The consensus grid of ``recipe`` (evidence matched by recipe name, any catalog version:
    evidence of another digest shows as stale, recipe changed, and still counts, as in AICR).

    Only what is shown is read: the counts, the AICR versions (a skip scan), the newest
    RECENT_EVIDENCE rows, the newest WITHDRAWN_SHOWN withdrawn rows, the staleness reads, and
    the columns: in the default view the stored ones (``consensus.columns``: the shown
    columns' runs, the counts per group and the row tallies every state is folded from, so
    neither the rows nor the work grow with the signers); in a lens, or with every column
    asked for, each column's newest run for the lens. A constant number of queries.

    The states are computed over every column; only ``shown_columns`` (all of them with
    ``signers="all"``, else a capped number per group, newest runs first) get cells.
    """
    show_all = (signers or "").strip().lower() == "all"
    mine = Evidence.objects.filter(recipe_name=recipe.name)
    # The recipe's records from its facet tally (a COUNT over them was 136 ms at 1,000,000;
    # issue 22); the withdrawn ones are counted by the query that lists the newest of them.
    evidence_count = recipe_records(recipe.name)
    chosen = _lens(
        mine, (lens or "").strip()[:100], has_evidence=bool(evidence_count), recipe_name=recipe.name
    )
    selected: list[Evidence] = []
    recent: list[Evidence] = []
    withdrawn: list[Evidence] = []
    withdrawn_count = 0
    # The default and version lenses read the stored columns: the shown ones, and the row
    # tallies every state is folded from (``consensus.columns``); a release's lens or every
    # column reads the runs.
    version_lens = not chosen.version.startswith(LENS_PREFIX)  # "" or an AICR version
    from_store = bool(evidence_count) and version_lens and not show_all
    from_store = from_store and _stored_current(recipe.name)
    if evidence_count:
        if from_store:
            selected = _stored_shown_runs(recipe.name, chosen.version)
        else:
            selected = _selected_runs(mine, chosen.version, recipe)
        recent, withdrawn, withdrawn_count = _recent_and_withdrawn(recipe.name)
    shown = {e.pk: e for e in [*selected, *recent, *withdrawn]}
    stale = staleness_bulk(list(shown.values()))

    columns = _columns(selected, stale)
    shown_columns = columns if from_store else _shown_columns(columns, show_all)
    _read_cell_details(shown_columns)
    declared = declared_checks(recipe.checks)
    if from_store:
        lens = chosen.version
        counts, stale_summary = stored_columns.column_summary(recipe.name, lens)
        tallies = stored_columns.stored_tallies([recipe.name], lens).get(recipe.name, {})
        consensus = fold_consensus(declared, tallies, stale_summary)
    else:
        counts = _counts(columns)
        consensus = recipe_consensus(declared, [_run_of(c) for c in columns])
    note = ""
    if chosen.version.startswith(LENS_PREFIX):
        keyed = len([c for c in columns if c.signer.kind == SignerKind.KEY])
        note = (
            "Counts only evidence whose recorded identities equal the release's (its images "
            "and the profile's tuple) for the current plan."
            + (f" {keyed} key-signed column{'s' * (keyed != 1)}: {UPSTREAM_GATE}." if keyed else "")
        )
    return ConsensusGrid(
        lens_note=note,
        recipe_name=recipe.name,
        lens=chosen.version,
        lens_error=chosen.error,
        lens_options=chosen.options,
        columns=columns,
        phases=_grid_phases(consensus, declared, columns, shown_columns),
        consensus=consensus,
        recent=recent,
        withdrawn=withdrawn,
        stale=stale,
        evidence_count=evidence_count,
        withdrawn_count=withdrawn_count,
        shown_columns=shown_columns,
        all_signers=show_all,
        counts=counts,
    )


def _stored_current(name: str) -> bool:
    """Whether the name's stored columns can be read: built, and with no counted run aged
    into staleness since they were judged (``stored.consensus_refresh_expired`` judges them
    again first, as before every list read)."""
    from evidence_app.consensus.stored import consensus_refresh_expired  # it reads this module

    consensus_refresh_expired(names=[name])
    return stored_columns.is_built(name)


def _stored_shown_runs(name: str, lens: str) -> list[Evidence]:
    """The runs of the name's shown columns in ``lens`` (the newest of each group, up to its
    cap)."""
    return list(
        Evidence.objects.filter(pk__in=stored_columns.newest_column_runs(name, COLUMN_CAPS, lens))
        .select_related("signer")
        .only(*GRID_FIELDS)
        .annotate(_phases=F("predicate__phases"))
        .order_by("-attested_at", "-pk")
    )


# The ids of a recipe's newest RECENT_EVIDENCE records and of its newest WITHDRAWN_SHOWN
# withdrawn ones: one end of ``evidence_recipe_newest_idx`` and of
# ``evidence_recipe_withdrawn_idx`` each (issue 22: ranking every record of the recipe in a
# window was 289 ms at 1,000,000). Each limited select is a subquery of its own, as SQLite
# allows no LIMIT on a member of a compound select.
_RECENT_IDS_SQL = """
SELECT id FROM (
    SELECT id FROM evidence_app_evidence WHERE recipe_name = %s
    ORDER BY attested_at DESC, id DESC LIMIT %s
) AS newest
UNION ALL
SELECT id FROM (
    SELECT id FROM evidence_app_evidence WHERE recipe_name = %s AND withdrawn_at IS NOT NULL
    ORDER BY attested_at DESC, id DESC LIMIT %s
) AS withdrawn
"""


def _recent_and_withdrawn(recipe_name: str) -> tuple[list[Evidence], list[Evidence], int]:
    """The newest RECENT_EVIDENCE records of ``recipe_name``, its newest WITHDRAWN_SHOWN
    withdrawn ones and how many are withdrawn (newest first: ``attested_at``, then id), in one
    query: the rows of either list, each with the withdrawn count (a subquery evaluated once,
    from the withdrawn rows' index)."""
    mine = Evidence.objects.filter(recipe_name=recipe_name)
    withdrawn_n = (
        mine.filter(withdrawn_at__isnull=False)
        .order_by()
        .values("recipe_name")
        .annotate(n=Count("pk"))
        .values("n")
    )
    # A constant statement, its values bound as parameters.
    ids = RawSQL(_RECENT_IDS_SQL, [recipe_name, RECENT_EVIDENCE, recipe_name, WITHDRAWN_SHOWN])  # noqa: S611
    rows = list(
        mine.filter(pk__in=ids)
        .select_related("signer")
        .defer(*HEAVY_FIELDS)
        .annotate(_withdrawn_n=Coalesce(Subquery(withdrawn_n), 0))
        .order_by("-attested_at", "-pk")
    )
    # The newest RECENT_EVIDENCE records are the first rows (every other row is older than
    # them), and every withdrawn row is one of the newest WITHDRAWN_SHOWN withdrawn ones (a
    # withdrawn row among the newest RECENT_EVIDENCE has fewer withdrawn rows before it).
    recent: list[Evidence] = list(rows[:RECENT_EVIDENCE])
    withdrawn: list[Evidence] = [e for e in rows if e.withdrawn_at is not None]
    return recent, withdrawn[:WITHDRAWN_SHOWN], int(rows[0]._withdrawn_n) if rows else 0


def _run_of(column: Column) -> Run:
    return Run(
        key=column.key,  # the signer's source id; its other columns' keys say which they are
        counted=column.counted,
        simulated=column.simulated,
        statuses=outcome_statuses(column.outcomes),
        demo=column.evidence.is_demo,
        stale=tuple(reason.code for reason in column.stale),
    )

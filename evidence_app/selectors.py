"""Reads behind the evidence pages, and the consensus the recipe pages show.

Consensus is AICR's (``evidence_app.corroborate``: ``bucket_status``, ``compute_consensus``,
``rollup_phase``, ``rollup_recipe``, ``order_versions_newest_first``), fed from database rows.
Other apps read consensus (state names included) from here, never from ``corroborate``.

- **Counted** evidence is ``EvidenceQuerySet.counted()``; ``is_counted`` is the same rule for
  one loaded row (the API's ``counted``, the evidence tables, the grid's counted columns).
- **Eligible** evidence is verified and not withdrawn. Withdrawn evidence is listed (struck,
  with its reason; the newest WITHDRAWN_SHOWN, then a count) but never selected; simulated
  evidence is selected into its own columns (labelled, never counted); demo evidence (signed
  with a demo key) counts like any other, and every state it feeds says so.
- **Columns** are signers: one per verified signer (and one more for a signer's simulated
  runs), counted first, then reported, then simulated. A counted signer is allowlisted or a
  registered key (``Signer.counted``); the rest are AICR's zero-weight "reported" sources.
- **Lens**: by default each column's single newest run (``attested_at``, then id) whatever
  its AICR version; with a version, each column's newest run *at that version* and only the
  columns that have one: strict same-version consensus, as AICR's per-version grids. The
  newest run per column is picked in SQL. States use every column; the page renders at most
  COUNTED_COLUMNS_SHOWN counted and OTHER_COLUMNS_SHOWN reported and simulated columns
  (newest runs first) unless asked for all (``signers="all"``), and says so.
- **Rows** are the recipe's declared checks (deployment, conformance, performance; readiness
  has no CTRF) plus every CTRF name of the counted runs, by phase then name. A name only
  reported or simulated runs carry is shown as a row outside the rollups: an uncounted signer
  never changes a state. A row absent from a selected run is not-run for that signer (no
  fallback to older runs). Evidence without per-check CTRF data (a bare Sigstore bundle) only
  has the predicate's phase summary, so it is not-run on every row and its column says so.
- **States** per row over distinct counted signers; phases and the recipe fold worst-first
  with PARTIAL for positive + untested rows (``rollup_phase``/``rollup_recipe``).

``recipe_consensus`` is the one computation of a recipe's state, with what it rests on (demo
evidence, stale counted runs from ``services.staleness``): the grid, the list badges, the
``?consensus=`` filter and the recipe API all use it, so they cannot disagree.

Every function runs a fixed number of queries whatever the number of evidence rows.
The list page's badges and ``?consensus=`` filter read each recipe's badge from a stored row
(``recipes_app.models.RecipeConsensusState``), which ``services.consensus`` keeps current in
every service that changes evidence, signers or the catalog, from ``recipe_badges_computed``
(``recipe_consensus`` over the newest counted run per signer): one truth, computed where it
changes instead of on the next read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.core.paginator import Page, Paginator
from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    F,
    Max,
    Q,
    QuerySet,
    Window,
)
from django.db.models.functions import RowNumber
from django.urls import reverse
from django.utils import timezone

from evidence_app.corroborate import (
    CONFIRMED,
    CONTESTED,
    FAIL,
    FAILING,
    NOT_RUN,
    PARTIAL,
    PASS,
    PHASE_ORDER,
    SINGLE,
    UNTESTED,
    Consensus,
    RecipeRollup,
    SignerResult,
    bucket_status,
    compute_consensus,
    order_versions_newest_first,
    parse_rfc3339,
    rollup_phase,
    rollup_recipe,
)
from evidence_app.models import (
    Evidence,
    Signer,
    SignerClass,
    SignerClassChange,
    SignerKind,
    Verdict,
)
from evidence_app.services.staleness import CODES as STALE_CODES
from evidence_app.services.staleness import StaleReason, stale_after_days, staleness_bulk
from evidence_app.verification.commands import VerifyCommand, commands_for
from evidence_app.verification.ctrf import CtrfTest
from evidence_app.verification.signature import SignatureOutcome, SignerClaims
from recipes_app.models import DIMENSIONS, Recipe

# The filter's choices, best first (what a person looking for validated recipes wants first).
STATES: tuple[str, ...] = (CONFIRMED, SINGLE, PARTIAL, CONTESTED, FAILING, UNTESTED)
STATE_DESCRIPTIONS = {
    CONFIRMED: "two or more counted signers pass, none fails",
    SINGLE: "exactly one counted signer passes, none fails",
    PARTIAL: "some checks pass, the rest are untested, nothing fails",
    CONTESTED: "counted signers disagree: at least one passes and one fails",
    FAILING: "counted signers fail, none passes",
    UNTESTED: "no counted signer has a result",
}
GRID_PHASES: tuple[str, ...] = PHASE_ORDER  # deployment, conformance, performance
PAGE_SIZE = 25
RECENT_EVIDENCE = 10  # then a link to all of them (the page's byte budget)
WITHDRAWN_SHOWN = 20  # the recipe page lists this many withdrawn runs, then a count
# The grid shows at most this many counted signer columns (newest runs first) and this many
# reported and simulated ones each, unless asked for all (``signers="all"``); states are
# always computed over every column. Few by default: each column is a cell in every row, and
# the recipe page stays within its byte budget at 10,000 records (docs/benchmarks.md).
COUNTED_COLUMNS_SHOWN = 12
OTHER_COLUMNS_SHOWN = 4
# The columns of an evidence row that lists and grids never read (bytes and big JSON).
HEAVY_FIELDS = ("content", "artifact", "transcript", "predicate", "check_results", "certificate")


# --- labels ---------------------------------------------------------------------------------


def signer_group(signer: Signer) -> str:
    """``counted`` (allowlisted or a registered key) or ``reported`` (verified, zero weight)."""
    return "counted" if signer.counted else "reported"


def counting_explanation(signer: Signer) -> str:
    """Why this signer's evidence counts for consensus, or why it does not."""
    if signer.counted:
        if signer.signer_class == SignerClass.REGISTERED_KEY:
            return "Counted: signed with a public key a maintainer registered."
        return (
            f"Counted: the certificate's issuer and identity match the allowlist "
            f"({signer.get_signer_class_display().lower()})."
        )
    if signer.kind == SignerKind.KEY:
        return "Reported, not counted: the public key is not registered (or was revoked)."
    return (
        "Reported, not counted: the signature verified, but this issuer and identity are not "
        "on the allowlist. Its results are shown and never change a consensus state."
    )


# --- staleness ------------------------------------------------------------------------------


def staleness_map(evidences: Sequence[Evidence]) -> dict[int, list[StaleReason]]:
    """Stale reasons of each evidence row, by id (``services.staleness``; constant queries)."""
    if not evidences:
        return {}
    return staleness_bulk(list(evidences))


# --- per-check results ----------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    label: str
    value: float
    unit: str


@dataclass(frozen=True)
class CheckOutcome:
    """One CTRF test of one run: raw status, AICR bucket, numbers it printed."""

    name: str
    status: str
    result: str  # pass | fail | not-run (bucket_status)
    duration_ms: float | None = None
    message: str = ""
    metrics: tuple[Metric, ...] = ()


def _text(value: Any, limit: int = 4096) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _metrics(entry: Mapping[str, Any]) -> tuple[Metric, ...]:
    found: list[Metric] = []
    raw = entry.get("metrics")
    if isinstance(raw, list):
        for item in raw[:50]:
            if not isinstance(item, Mapping):
                continue
            value = item.get("value")
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            found.append(
                Metric(_text(item.get("label"), 200), float(value), _text(item.get("unit"), 32))
            )
        return tuple(found)
    stdout = entry.get("stdout")
    if isinstance(stdout, str):
        stdout = stdout.splitlines()
    if isinstance(stdout, list):
        lines = tuple(line for line in stdout[:500] if isinstance(line, str))
        test = CtrfTest(
            name="", status="", raw_status="", duration_ms=None, suite=(), phase=None, stdout=lines
        )
        found = [Metric(m.label, m.value, m.unit or "") for m in test.metrics]
    return tuple(found)


def _outcome(name: str, entry: Any, detail: bool = True) -> CheckOutcome | None:
    if not isinstance(name, str) or not name.strip():
        return None
    if isinstance(entry, str):
        return CheckOutcome(name=name[:4096], status=entry[:32], result=bucket_status(entry))
    if not isinstance(entry, Mapping):
        return None
    status = _text(entry.get("status"), 32)
    if not detail:  # the status alone (what consensus reads), without the metrics parse
        return CheckOutcome(name=name[:4096], status=status, result=bucket_status(status))
    duration = entry.get("duration_ms", entry.get("duration"))
    if isinstance(duration, bool) or not isinstance(duration, int | float):
        duration = None
    return CheckOutcome(
        name=name[:4096],
        status=status,
        result=bucket_status(status),
        duration_ms=float(duration) if duration is not None else None,
        message=_text(entry.get("message")),
        metrics=_metrics(entry),
    )


def check_outcomes(check_results: Any, detail: bool = True) -> dict[str, dict[str, CheckOutcome]]:
    """``Evidence.check_results`` read defensively: phase → CTRF name → outcome.

    Accepts ``{phase: [{name, status, …}]}`` (CTRF tests), ``{phase: {"tests": […]}}`` and
    ``{phase: {name: status | {status, …}}}``; anything else reads as no data. Without
    ``detail`` only names and statuses are read (no duration, message or metrics): the same
    names and results, for runs whose cells are not shown.
    """
    out: dict[str, dict[str, CheckOutcome]] = {}
    if not isinstance(check_results, Mapping):
        return out
    for phase, entries in check_results.items():
        if not isinstance(phase, str):
            continue
        if isinstance(entries, Mapping) and isinstance(entries.get("tests"), list):
            entries = entries["tests"]
        by_name: dict[str, CheckOutcome] = {}
        if isinstance(entries, list):
            for entry in entries[:5000]:
                if isinstance(entry, Mapping):
                    outcome = _outcome(entry.get("name"), entry, detail)
                    if outcome is not None and outcome.name not in by_name:
                        by_name[outcome.name] = outcome
        elif isinstance(entries, Mapping):
            for name, entry in list(entries.items())[:5000]:
                outcome = _outcome(name, entry, detail)
                if outcome is not None:
                    by_name[outcome.name] = outcome
        out[phase] = by_name
    return out


def _statuses(outcomes: Mapping[str, Mapping[str, CheckOutcome]]) -> dict[str, dict[str, str]]:
    return {
        phase: {name: o.status for name, o in by_name.items()}
        for phase, by_name in outcomes.items()
        if phase in GRID_PHASES
    }


@dataclass(frozen=True)
class PhaseSummary:
    """The predicate's claimed per-phase counts (what a bare bundle carries)."""

    phase: str
    passed: int
    failed: int
    skipped: int
    ctrf_digest: str = ""

    @property
    def result(self) -> str:
        if self.failed:
            return FAIL
        return PASS if self.passed else NOT_RUN


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def phase_summaries(predicate: Any) -> dict[str, PhaseSummary]:
    phases = predicate.get("phases") if isinstance(predicate, Mapping) else None
    if not isinstance(phases, Mapping):
        return {}
    out = {}
    for phase, summary in phases.items():
        if isinstance(phase, str) and isinstance(summary, Mapping):
            out[phase] = PhaseSummary(
                phase=phase[:64],
                passed=_count(summary.get("passed")),
                failed=_count(summary.get("failed")),
                skipped=_count(summary.get("skipped")),
                ctrf_digest=_text(summary.get("ctrfDigest"), 100),
            )
    return out


# --- the consensus core (shared by the grid and the list badges) ----------------------------


def is_counted(evidence: Evidence) -> bool:
    """Whether consensus counts this evidence row: exactly ``EvidenceQuerySet.counted()``
    (verified, not withdrawn, a counted signer, not simulated) for one loaded row. Demo
    evidence counts (and is labelled wherever a state derived from it is shown)."""
    return (
        evidence.verdict == Verdict.VERIFIED
        and evidence.withdrawn_at is None
        and evidence.signer.counted
        and not evidence.is_simulated
    )


@dataclass(frozen=True)
class _Run:
    """One selected run as consensus sees it."""

    key: str  # the signer's verified source id: one identity is one signer
    counted: bool  # ``is_counted`` of its evidence
    simulated: bool
    statuses: Mapping[str, Mapping[str, str]]  # phase → CTRF name → raw status
    demo: bool = False  # signed with a demo key
    stale: tuple[str, ...] = ()  # its stale reason codes (``services.staleness``)


RowKey = tuple[str, str]


def declared_checks(recipe_checks: Any) -> dict[RowKey, list[dict[str, Any]]]:
    """The recipe's declared checks in the grid's phases, with their thresholds."""
    declared: dict[RowKey, list[dict[str, Any]]] = {}
    if not isinstance(recipe_checks, Mapping):
        return declared
    for phase in GRID_PHASES:
        for check in recipe_checks.get(phase) or ():
            if isinstance(check, Mapping) and isinstance(check.get("name"), str):
                declared[(phase, check["name"])] = list(check.get("thresholds") or [])
    return declared


def _row_order(key: RowKey) -> tuple[int, str]:
    return (GRID_PHASES.index(key[0]), key[1])


@dataclass(frozen=True)
class StaleSummary:
    """How many of the counted runs behind a state are stale, and why (reason codes with the
    number of runs carrying each, in ``services.staleness.CODES`` order)."""

    counted_runs: int = 0
    stale_runs: int = 0
    reasons: tuple[tuple[str, int], ...] = ()

    @property
    def stale(self) -> bool:
        return self.stale_runs > 0

    @property
    def note(self) -> str:
        """``2 of 3 counted runs stale`` ('' when none is)."""
        if not self.stale_runs:
            return ""
        runs = "run" if self.counted_runs == 1 else "runs"
        return f"{self.stale_runs} of {self.counted_runs} counted {runs} stale"

    @property
    def reasons_note(self) -> str:
        """``older-than-30-days (2), recipe-changed (1)``: each code with its runs."""
        return ", ".join(f"{code} ({count})" for code, count in self.reasons)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stale": self.stale,
            "counted_runs": self.counted_runs,
            "stale_runs": self.stale_runs,
            "reasons": {code: count for code, count in self.reasons},
            "summary": self.note,
        }

    @classmethod
    def of(cls, runs: Iterable[_Run]) -> StaleSummary:
        counted = [run for run in runs if run.counted]
        by_code: dict[str, int] = {}
        for run in counted:
            for code in dict.fromkeys(run.stale):
                by_code[code] = by_code.get(code, 0) + 1
        order = {code: i for i, code in enumerate(STALE_CODES)}
        reasons = tuple(sorted(by_code.items(), key=lambda item: order.get(item[0], 99)))
        return cls(
            counted_runs=len(counted),
            stale_runs=sum(1 for run in counted if run.stale),
            reasons=reasons,
        )


@dataclass(frozen=True)
class RowConsensus:
    """One row of the consensus: AICR's state over the counted signers, every run's bucket."""

    key: RowKey
    consensus: Consensus
    results: tuple[str, ...]  # one per run, in the runs' order
    in_rollup: bool  # declared, or found in a counted run: part of the phase and recipe state
    demo: bool  # a counted demo run gave it a pass or a fail
    voters: int  # counted runs with a pass or a fail on it
    stale_voters: int  # … of which stale


@dataclass(frozen=True)
class RecipeBadge:
    """What a recipe's state badge says wherever it is shown (list, filter, API, page)."""

    state: str
    includes_demo: bool
    stale: StaleSummary

    def encode(self) -> str:
        """A compact text form, so a list query can carry the badge as one annotation."""
        reasons = ",".join(f"{code}={count}" for code, count in self.stale.reasons)
        demo = int(self.includes_demo)
        return f"{self.state}|{demo}|{self.stale.counted_runs}|{self.stale.stale_runs}|{reasons}"

    @classmethod
    def decode(cls, text: str | None, state: str = UNTESTED) -> RecipeBadge:
        """``encode``'s inverse; anything else is a plain ``state`` badge."""
        parts = (text or "").split("|")
        if len(parts) != 5 or not all(p.isdigit() for p in parts[1:4]):
            return cls(state=state, includes_demo=False, stale=StaleSummary())
        reasons = []
        for item in filter(None, parts[4].split(",")):
            code, _, count = item.partition("=")
            reasons.append((code, int(count) if count.isdigit() else 0))
        return cls(
            state=parts[0],
            includes_demo=parts[1] == "1",
            stale=StaleSummary(
                counted_runs=int(parts[2]), stale_runs=int(parts[3]), reasons=tuple(reasons)
            ),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "consensus": self.state,
            "consensus_includes_demo": self.includes_demo,
            "consensus_stale": self.stale.as_dict(),
        }


@dataclass(frozen=True)
class RecipeConsensus:
    """The recipe-level consensus of one set of selected runs (``recipe_consensus``)."""

    rows: tuple[RowConsensus, ...]
    phase_states: dict[str, str]
    phase_demo: dict[str, bool]
    rollup: RecipeRollup
    includes_demo: bool
    stale: StaleSummary

    @property
    def state(self) -> str:
        return self.rollup.state

    @property
    def badge(self) -> RecipeBadge:
        return RecipeBadge(state=self.state, includes_demo=self.includes_demo, stale=self.stale)


def recipe_consensus(declared: Iterable[RowKey], runs: Sequence[_Run]) -> RecipeConsensus:
    """THE recipe-level consensus, used by the grid, the list badges, the ``?consensus=``
    filter and the API alike.

    Rows are the declared checks plus every CTRF name of a *counted* run; names only
    reported or simulated runs carry are rows too (shown, so nothing a signer sent is
    hidden) but stay out of the phase and recipe rollups: an uncounted signer never changes
    a state. Each row's state is AICR's ``compute_consensus`` over the non-simulated runs
    (reported ones with zero weight); phases and the recipe fold the rollup rows worst-first.
    """
    in_rollup = set(declared)
    shown_only: set[RowKey] = set()
    for run in runs:
        target = in_rollup if run.counted else shown_only
        for phase in GRID_PHASES:
            target.update((phase, name) for name in run.statuses.get(phase, {}))
    rows = []
    for key in sorted(in_rollup | shown_only, key=_row_order):
        phase, name = key
        results = []
        for run in runs:
            status = run.statuses.get(phase, {}).get(name)
            results.append(NOT_RUN if status is None else bucket_status(status))
        consensus = compute_consensus(
            SignerResult(run.key, run.counted, result)
            for run, result in zip(runs, results, strict=True)
            if not run.simulated
        )
        voters = [
            run
            for run, result in zip(runs, results, strict=True)
            if run.counted and result in (PASS, FAIL)
        ]
        rows.append(
            RowConsensus(
                key=key,
                consensus=consensus,
                results=tuple(results),
                in_rollup=key in in_rollup,
                demo=any(run.demo for run in voters),
                voters=len(voters),
                stale_voters=sum(1 for run in voters if run.stale),
            )
        )
    counted_rows = [row for row in rows if row.in_rollup]
    phase_states = {
        phase: rollup_phase([row.consensus.state for row in counted_rows if row.key[0] == phase])
        for phase in GRID_PHASES
    }
    phase_demo = {
        phase: any(row.demo for row in counted_rows if row.key[0] == phase) for phase in GRID_PHASES
    }
    rollup = rollup_recipe(
        [
            {"consensus": row.consensus.state, "reported": row.consensus.reported}
            for row in counted_rows
        ]
    )
    return RecipeConsensus(
        rows=tuple(rows),
        phase_states=phase_states,
        phase_demo=phase_demo,
        rollup=rollup,
        includes_demo=any(phase_demo.values()),
        stale=StaleSummary.of(runs),
    )


# --- the consensus grid of one recipe -------------------------------------------------------


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
        return "simulated" if self.simulated else signer_group(self.signer)

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

    @property
    def is_capped(self) -> bool:
        """Some columns are not rendered (they still count in every state)."""
        return len(self.shown_columns) < len(self.columns)

    @property
    def cappable(self) -> bool:
        """Showing every column, though the default view would cap them."""
        return self.all_signers and len(_shown_columns(self.columns, False)) < len(self.columns)

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
    def counted_columns(self) -> list[Column]:
        return [c for c in self.columns if c.counted]

    @property
    def reported_columns(self) -> list[Column]:
        return [c for c in self.columns if c.group == "reported"]

    @property
    def simulated_columns(self) -> list[Column]:
        return [c for c in self.columns if c.simulated]

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
    return f"{source}:simulated" if evidence.is_simulated else source


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
    group = {"counted": 0, "reported": 1, "simulated": 2}[column.group]
    return (group, column.signer.label.lower(), column.key)


def _eligible(queryset: QuerySet[Evidence]) -> QuerySet[Evidence]:
    """Selectable runs: verified, not withdrawn (simulated ones get their own columns)."""
    return queryset.filter(verdict=Verdict.VERIFIED, withdrawn_at__isnull=True)


def _latest_per(queryset: QuerySet[Evidence], *partition: str) -> QuerySet[Evidence]:
    """The newest row (``attested_at``, then id) of each ``partition`` group, in SQL."""
    return queryset.annotate(
        _rank=Window(
            RowNumber(),
            partition_by=[F(name) for name in partition],
            order_by=[F("attested_at").desc(), F("pk").desc()],
        )
    ).filter(_rank=1)


# What the grid reads of each selected run (the predicate only as its ``phases`` object).
GRID_FIELDS = (
    "pk",
    "recipe_name",
    "subject_digest",
    "attested_at",
    "aicr_version",
    "validator_catalog_version",
    "k8s_version",
    "withdrawn_at",
    "withdrawal_reason",
    "verdict",
    "is_demo",
    "is_simulated",
    "check_results",
    "signer",
)


def _shown_columns(columns: Sequence[Column], show_all: bool) -> list[Column]:
    """The columns rendered: all of them, or the newest COUNTED_COLUMNS_SHOWN counted ones
    and the newest OTHER_COLUMNS_SHOWN reported and simulated ones each, in grid order."""
    if show_all:
        return list(columns)
    caps = {
        "counted": COUNTED_COLUMNS_SHOWN,
        "reported": OTHER_COLUMNS_SHOWN,
        "simulated": OTHER_COLUMNS_SHOWN,
    }
    newest = sorted(columns, key=lambda c: (c.evidence.attested_at, c.evidence.pk), reverse=True)
    taken: dict[str, int] = {}
    keep: set[int] = set()
    for column in newest:
        group = "counted" if column.counted else column.group
        if taken.get(group, 0) < caps[group]:
            taken[group] = taken.get(group, 0) + 1
            keep.add(id(column))
    return [c for c in columns if id(c) in keep]


def consensus_grid(
    *, recipe: Recipe, lens: str | None = None, signers: str | None = None
) -> ConsensusGrid:
    """The consensus grid of ``recipe`` (evidence matched by recipe name, any catalog version:
    evidence of another digest shows as stale, recipe changed, and still counts, as in AICR).

    Only what is shown is read: the counts, the AICR versions (aggregated), each column's
    newest run for the lens (one windowed query, without the bytes, the transcript or the
    predicate beyond its phase summaries), the newest RECENT_EVIDENCE rows, the newest
    WITHDRAWN_SHOWN withdrawn rows, and the staleness reads: constant, whatever the number
    of evidence rows.

    The states are computed over every column; only ``shown_columns`` (all of them with
    ``signers="all"``, else a capped number per group, newest runs first) get cells.
    """
    lens = (lens or "").strip()[:100]
    show_all = (signers or "").strip().lower() == "all"
    mine = Evidence.objects.filter(recipe_name=recipe.name)
    counts = mine.aggregate(
        n=Count("pk"), withdrawn=Count("pk", filter=Q(withdrawn_at__isnull=False))
    )
    versions: list[str] = []
    selected: list[Evidence] = []
    recent: list[Evidence] = []
    withdrawn: list[Evidence] = []
    if counts["n"]:
        # A run without an AICR version cannot be picked by version; it still shows in the
        # default lens.
        version_rows = (
            _eligible(mine).order_by().values("aicr_version").annotate(newest=Max("attested_at"))
        )
        pairs = ((r["aicr_version"], r["newest"]) for r in version_rows)
        versions = [v for v in _versions_newest_first(pairs) if v]
    lens_error = ""
    if lens and lens not in versions:
        lens_error = (
            f"No counted or reported evidence was produced with AICR version “{lens}”; "
            "showing each signer's latest run instead."
        )
        lens = ""

    if counts["n"]:
        candidates = _eligible(mine)
        if lens:
            candidates = candidates.filter(aicr_version=lens)
        selected = list(
            _latest_per(candidates, "signer_id", "is_simulated")
            .select_related("signer")
            .only(*GRID_FIELDS)
            .annotate(_phases=F("predicate__phases"))
            .order_by("-attested_at", "-pk")
        )
        recent, withdrawn = _recent_and_withdrawn(mine)
    shown = {e.pk: e for e in [*selected, *recent, *withdrawn]}
    stale = staleness_map(list(shown.values()))

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
    shown_columns = _shown_columns(columns, show_all)
    for column in shown_columns:  # the cells' details and the phase summaries
        evidence = column.evidence
        column.outcomes = check_outcomes(evidence.check_results)
        column.summaries = phase_summaries({"phases": getattr(evidence, "_phases", None)})
    shown_ids = {id(c) for c in shown_columns}
    shown = [i for i, c in enumerate(columns) if id(c) in shown_ids]

    declared = declared_checks(recipe.checks)
    consensus = recipe_consensus(declared, [_run_of(c) for c in columns])
    by_phase: dict[str, list[Row]] = {phase: [] for phase in GRID_PHASES}
    for found in consensus.rows:
        phase, name = found.key
        cells = [
            Cell(
                column=columns[i],
                result=found.results[i],
                outcome=columns[i].outcomes.get(phase, {}).get(name),
            )
            for i in shown
        ]
        by_phase[phase].append(
            Row(
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
        )
    phases = [
        GridPhase(
            phase=phase,
            state=consensus.phase_states[phase],
            rows=by_phase[phase],
            summaries=[PhaseCell(column=c, summary=c.summaries.get(phase)) for c in shown_columns],
            demo=consensus.phase_demo[phase],
        )
        for phase in GRID_PHASES
    ]
    options = [LensOption(value="", label="Latest run per signer", selected=not lens)]
    options += [LensOption(value=v, label=f"AICR {v}", selected=v == lens) for v in versions]
    return ConsensusGrid(
        recipe_name=recipe.name,
        lens=lens,
        lens_error=lens_error,
        lens_options=options,
        columns=columns,
        phases=phases,
        consensus=consensus,
        recent=recent,
        withdrawn=withdrawn,
        stale=stale,
        evidence_count=counts["n"],
        withdrawn_count=counts["withdrawn"],
        shown_columns=shown_columns,
        all_signers=show_all,
    )


def _recent_and_withdrawn(mine: QuerySet[Evidence]) -> tuple[list[Evidence], list[Evidence]]:
    """The newest RECENT_EVIDENCE rows and the newest WITHDRAWN_SHOWN withdrawn ones, in one
    query (each row ranked overall and within its withdrawn-or-not group)."""
    newest_first = [F("attested_at").desc(), F("pk").desc()]
    is_withdrawn = ExpressionWrapper(Q(withdrawn_at__isnull=False), output_field=BooleanField())
    rows = list(
        mine.select_related("signer")
        .defer(*HEAVY_FIELDS)
        .annotate(
            _withdrawn=is_withdrawn,
            _pos=Window(RowNumber(), order_by=newest_first),
            _group_pos=Window(RowNumber(), partition_by=[is_withdrawn], order_by=newest_first),
        )
        .filter(Q(_pos__lte=RECENT_EVIDENCE) | Q(_group_pos__lte=WITHDRAWN_SHOWN))
        .order_by("-attested_at", "-pk")
    )
    recent = [e for e in rows if e._pos <= RECENT_EVIDENCE]
    withdrawn = [e for e in rows if e._withdrawn and e._group_pos <= WITHDRAWN_SHOWN]
    return recent, withdrawn


def _run_of(column: Column) -> _Run:
    return _Run(
        key=column.signer.source_id,
        counted=column.counted,
        simulated=column.simulated,
        statuses=_statuses(column.outcomes),
        demo=column.evidence.is_demo,
        stale=tuple(reason.code for reason in column.stale),
    )


# --- consensus of many recipes at once (stored badges: list page, filter, API) -------------


@dataclass(frozen=True)
class ComputedBadges:
    """``recipe_badges_computed``'s answer: every recipe row's badge and when it expires."""

    badges: dict[tuple[int, str], RecipeBadge]  # (Recipe pk, name) → badge, if counted runs
    names: frozenset[str]  # the recipe names this covers (counted evidence or not)
    expires: dict[str, datetime | None]  # name → when its first fresh counted run goes stale
    unbadged_pks: frozenset[int] = frozenset()  # recipe rows of those names without a badge


# What the badges read of each selected run.
BADGE_FIELDS = (
    "pk",
    "recipe_name",
    "subject_digest",
    "attested_at",
    "aicr_version",
    "validator_catalog_version",
    "withdrawn_at",
    "withdrawal_reason",
    "verdict",
    "is_demo",
    "is_simulated",
    "check_results",
    "signer",
    "signer__source_id",
    "signer__counted",
    "signer__label",
)


def recipe_badges_computed(
    *, names: Iterable[str] | None = None, now: datetime | None = None
) -> ComputedBadges:
    """The full recomputation of the badges of every recipe row (any catalog version) called
    one of ``names`` (None: every recipe name): what ``services.consensus`` stores, and what
    the grid shows (``recipe_consensus`` over the newest counted run of each signer; reported
    and simulated runs cannot change a state, so they are not read).

    A fixed number of queries (the runs, the staleness facts, the recipes' declared checks)
    whatever the number of names or evidence rows.
    """
    now = now or timezone.now()
    recipes = Recipe.objects.all()
    if names is not None:
        recipes = recipes.filter(name__in=sorted(set(names)))
    rows = list(recipes.order_by().values_list("pk", "name", "checks"))
    covered = frozenset(name for _, name, _ in rows)
    if not covered:
        return ComputedBadges(badges={}, names=covered, expires={})
    counted = Evidence.objects.counted()
    counted = counted.filter(recipe_name__in=sorted(covered)) if names is not None else counted
    # The newest run's id per (recipe, signer) first, from the index columns alone (the
    # partial ``evidence_live_latest_idx`` on PostgreSQL: no row of the recipe's older runs is
    # read), then only those rows with what the badge needs.
    newest = _latest_per(counted, "recipe_name", "signer_id").values("pk")
    latest = list(
        Evidence.objects.filter(pk__in=newest)
        .select_related("signer")
        .only(*BADGE_FIELDS)
        .order_by("-attested_at", "-pk")
    )
    latest = [e for e in latest if e.recipe_name in covered]
    stale = staleness_bulk(latest, now=now) if latest else {}
    runs: dict[str, list[_Run]] = {}
    ages: dict[str, list[datetime]] = {}
    stale_after = timedelta(days=stale_after_days())
    for e in latest:
        runs.setdefault(e.recipe_name, []).append(
            _Run(
                key=e.signer.source_id,
                counted=is_counted(e),
                simulated=e.is_simulated,
                statuses=_statuses(check_outcomes(e.check_results, detail=False)),
                demo=e.is_demo,
                stale=tuple(reason.code for reason in stale.get(e.pk, [])),
            )
        )
        ages.setdefault(e.recipe_name, []).append(e.attested_at + stale_after)
    badges = {
        (pk, name): recipe_consensus(declared_checks(checks), runs[name]).badge
        for pk, name, checks in rows
        if name in runs
    }
    # A run turns "older than N days" once now passes attested_at + N days; the first of
    # those moments still ahead is when the stored badge stops being true.
    expires = {
        name: min((m for m in moments if m >= now), default=None) for name, moments in ages.items()
    }
    unbadged = frozenset(pk for pk, name, _ in rows if name not in runs)
    return ComputedBadges(badges=badges, names=covered, expires=expires, unbadged_pks=unbadged)


# --- verification display helpers -----------------------------------------------------------


@dataclass(frozen=True)
class CommandLine:
    tool: str
    text: str
    note: str


def verify_commands(evidence: Evidence) -> list[CommandLine]:
    """The auditor commands ``commands_for`` built from the verified values at ingest; for
    rows stored without them, rebuilt the same way from the stored, verified signer (never
    from the bundle's own text)."""
    stored = evidence.verify_commands if isinstance(evidence.verify_commands, list) else []
    lines = [
        CommandLine(str(c.get("tool", "")), str(c.get("text", "")), str(c.get("note", "")))
        for c in stored
        if isinstance(c, Mapping) and c.get("text")
    ]
    if lines or evidence.verdict != Verdict.VERIFIED:
        return lines
    return [CommandLine(c.tool, c.text, c.note) for c in _rebuilt_commands(evidence)]


def _rebuilt_commands(evidence: Evidence) -> list[VerifyCommand]:
    signer = evidence.signer
    certificate = evidence.certificate if isinstance(evidence.certificate, Mapping) else {}
    mode = "key" if signer.kind == SignerKind.KEY else "keyless"
    production = certificate.get("production_root")
    if not isinstance(production, bool):
        production = True
    claims = SignerClaims(
        mode=mode,
        identity=signer.identity or None,
        issuer=signer.issuer or None,
        production_root=production,
    )
    outcome = SignatureOutcome(
        status="ok",
        detail="",
        mode=mode,
        content="dsse",
        signer=claims,
        has_tlog_entry=evidence.rekor_log_index is not None or bool(certificate.get("tlog_kind")),
        rekor_v2=certificate.get("tlog_kind") == "rekor-v2",
    )
    try:
        return commands_for(outcome, predicate_type=evidence.predicate_type or None)
    except ValueError:
        return []


CLAIM_LABELS: tuple[tuple[str, str], ...] = (
    ("source_repository_uri", "Repository"),
    ("source_repository_ref", "Ref"),
    ("source_repository_digest", "Commit"),
    ("build_config_uri", "Workflow"),
    ("build_signer_uri", "Signer workflow"),
    ("build_trigger", "Trigger"),
    ("run_invocation_uri", "Run"),
    ("runner_environment", "Runner"),
    ("source_repository_visibility_at_signing", "Visibility"),
    ("github_workflow_repository", "Repository (legacy claim)"),
    ("github_workflow_ref", "Ref (legacy claim)"),
    ("github_workflow_sha", "Commit (legacy claim)"),
    ("github_workflow_name", "Workflow name (legacy claim)"),
    ("github_workflow_trigger", "Trigger (legacy claim)"),
)
_HTTP = re.compile(r"https://[^\s\"'<>]{1,2000}")


@dataclass(frozen=True)
class Claim:
    label: str
    value: str
    url: str = ""  # set only for an https URL, so the template links nothing else


def certificate_claims(evidence: Evidence) -> list[Claim]:
    """The verified certificate's claims worth showing (identity and issuer come first)."""
    signer = evidence.signer
    certificate = evidence.certificate if isinstance(evidence.certificate, Mapping) else {}
    nested = certificate.get("claims")
    claims = nested if isinstance(nested, Mapping) else certificate
    out: list[Claim] = []
    if signer.kind == SignerKind.KEY:
        fingerprint = signer.key.fingerprint if signer.key_id and signer.key else ""
        out.append(Claim("Key fingerprint (sha256)", fingerprint or "unknown"))
    else:
        out.append(Claim("Identity", signer.identity))
        out.append(Claim("Issuer", signer.issuer))
    seen = set()
    for key, label in CLAIM_LABELS:
        value = claims.get(key)
        if isinstance(value, str) and value and value not in seen:
            seen.add(value)
            url = value if _HTTP.fullmatch(value) else ""
            out.append(Claim(label, value[:4096], url))
    for key in ("certificate_sha256", "trusted_root"):
        value = certificate.get(key)
        if isinstance(value, str) and value:
            label = "Certificate sha256" if key == "certificate_sha256" else "Trusted root"
            out.append(Claim(label, value[:4096]))
    return out


@dataclass(frozen=True)
class DimensionCheck:
    dimension: str
    recipe_requires: str  # from the bound recipe: verified by the digest binding
    fingerprint_provides: str  # claimed by the statement
    statement_says: str  # claimed: matched | mismatched | unknown
    site_says: str  # this site's comparison of the two


def _compare(required: str, provided: str) -> str:
    if required in ("", "any"):
        return "matched"
    if provided == "":
        return "unknown"
    return "matched" if required.lower() == provided.lower() else "mismatched"


def fingerprint_vs_recipe(evidence: Evidence, recipe: Recipe | None) -> list[DimensionCheck]:
    predicate = evidence.predicate if isinstance(evidence.predicate, Mapping) else {}
    fingerprint = predicate.get("fingerprint")
    fingerprint = fingerprint if isinstance(fingerprint, Mapping) else {}
    match = predicate.get("criteriaMatch")
    per_dimension = match.get("perDimension") if isinstance(match, Mapping) else None
    claimed: dict[str, Mapping[str, Any]] = {}
    for item in per_dimension if isinstance(per_dimension, list) else ():
        if isinstance(item, Mapping) and isinstance(item.get("dimension"), str):
            claimed.setdefault(item["dimension"], item)
    out = []
    for dim in (*DIMENSIONS, "nodes"):
        item = claimed.get(dim, {})
        required = getattr(recipe, dim, "") if recipe is not None and dim != "nodes" else ""
        required = required or _text(item.get("recipeRequires"), 4096)
        provided = _text(item.get("fingerprintProvides"), 4096)
        if not provided:
            fp = fingerprint.get(dim)
            if isinstance(fp, Mapping) and fp.get("value") not in (None, ""):
                provided = str(fp.get("value"))[:4096]
        out.append(
            DimensionCheck(
                dimension=dim,
                recipe_requires=required,
                fingerprint_provides=provided,
                statement_says=_text(item.get("match"), 32) or "—",
                site_says=_compare(required, provided) if dim != "nodes" else "—",
            )
        )
    return out


@dataclass(frozen=True)
class FingerprintItem:
    name: str
    value: str
    detail: str


def fingerprint_items(evidence: Evidence) -> list[FingerprintItem]:
    predicate = evidence.predicate if isinstance(evidence.predicate, Mapping) else {}
    fingerprint = predicate.get("fingerprint")
    if not isinstance(fingerprint, Mapping):
        return []
    out = []
    for name, item in list(fingerprint.items())[:64]:
        if not isinstance(name, str) or not isinstance(item, Mapping):
            continue
        value = item.get("value")
        details = [
            f"{k} {item[k]}" for k in ("version", "source") if isinstance(item.get(k), str | int)
        ]
        out.append(
            FingerprintItem(
                name=name[:200],
                value="" if value is None else str(value)[:4096],
                detail=" · ".join(details)[:4096],
            )
        )
    return out


_THRESHOLD = re.compile(
    r"^\s*(>=|<=|==|=|>|<)?\s*([-+]?\d+(?:\.\d+)?)\s*([A-Za-z%/][\w%/.-]*)?\s*$"
)
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class ThresholdCheck:
    name: str
    requirement: str
    metric: Metric | None
    meets: bool | None  # None: no number to compare, or not a numeric threshold
    numeric: bool = False  # the requirement is "<op> <number>" (else a setting or version)


def _meets(op: str, value: float, bound: float) -> bool:
    return {
        ">=": value >= bound,
        ">": value > bound,
        "<=": value <= bound,
        "<": value < bound,
        "==": value == bound,
        "=": value == bound,
    }[op or ">="]


def _pick_metric(
    check: str, threshold: str, metrics: Sequence[Metric], only: bool
) -> Metric | None:
    key = threshold[len(check) + 1 :] if threshold.startswith(check + "-") else ""
    if threshold == check or not key:
        return metrics[0] if len(metrics) == 1 or (metrics and only) else None
    wanted = set(_WORD.findall(key.lower())) - {"inference"}
    for metric in metrics:
        if wanted and wanted <= set(_WORD.findall(metric.label.lower())):
            return metric
    return None


def threshold_checks(
    check: str, thresholds: Sequence[Mapping[str, Any]], metrics: Sequence[Metric]
) -> list[ThresholdCheck]:
    """Each declared threshold of a check against the number the run printed for it."""
    out = []
    for threshold in thresholds:
        name = _text(threshold.get("name"), 200)
        requirement = str(threshold.get("value", ""))[:200]
        metric = _pick_metric(check, name, metrics, only=len(thresholds) == 1)
        parsed = _THRESHOLD.match(requirement)
        meets = None
        if metric is not None and parsed is not None:
            meets = _meets(parsed.group(1) or ">=", metric.value, float(parsed.group(2)))
        out.append(
            ThresholdCheck(
                name=name,
                requirement=requirement,
                metric=metric,
                meets=meets,
                numeric=parsed is not None,
            )
        )
    return out


@dataclass(frozen=True)
class EvidenceCheck:
    outcome: CheckOutcome
    declared: bool
    thresholds: list[ThresholdCheck]


@dataclass(frozen=True)
class EvidencePhase:
    phase: str
    summary: PhaseSummary | None
    checks: list[EvidenceCheck]


def evidence_phases(evidence: Evidence, recipe: Recipe | None) -> list[EvidencePhase]:
    outcomes = check_outcomes(evidence.check_results)
    summaries = phase_summaries(evidence.predicate)
    declared = declared_checks(recipe.checks if recipe is not None else {})
    names = [p for p in GRID_PHASES if p in outcomes or p in summaries]
    names += sorted(p for p in {*outcomes, *summaries} if p not in GRID_PHASES)
    phases = []
    for phase in names:
        checks = [
            EvidenceCheck(
                outcome=outcome,
                declared=(phase, name) in declared,
                thresholds=threshold_checks(name, declared.get((phase, name), []), outcome.metrics),
            )
            for name, outcome in sorted(outcomes.get(phase, {}).items())
        ]
        phases.append(EvidencePhase(phase=phase[:64], summary=summaries.get(phase), checks=checks))
    return phases


@dataclass(frozen=True)
class FieldProvenance:
    field: str
    value: str
    how: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "value": self.value, "how": self.how}


def verified_and_claimed(
    evidence: Evidence,
) -> tuple[list[FieldProvenance], list[FieldProvenance]]:
    """What this site checked itself (signature-covered and verified) and what the signer
    only asserts inside the signed statement: the one source of both lists, for the evidence
    page and the API. A value the verification did not establish (no Rekor entry, no signed
    timestamp) is never listed as verified."""
    passed = {
        str(step.get("step")): bool(step.get("ok"))
        for step in (evidence.transcript if isinstance(evidence.transcript, list) else [])
        if isinstance(step, Mapping)
    }
    signer = evidence.signer
    verified = [FieldProvenance("Bundle sha256", evidence.sha256, "hash of the stored bytes")]
    if passed.get("signature"):
        if signer.kind == SignerKind.KEY:
            verified.append(
                FieldProvenance("Signing key", signer.label, "DSSE signature checked against it")
            )
        else:
            verified.append(
                FieldProvenance(
                    "Signer identity", signer.identity, "certificate verified to the trusted root"
                )
            )
            verified.append(FieldProvenance("OIDC issuer", signer.issuer, "certificate claim"))
        if evidence.rekor_log_index is not None:
            verified.append(
                FieldProvenance(
                    "Rekor log index", str(evidence.rekor_log_index), "inclusion proof checked"
                )
            )
        if evidence.integrated_time is not None:
            verified.append(
                FieldProvenance(
                    "Signed at",
                    evidence.integrated_time.strftime("%Y-%m-%d %H:%M:%S UTC"),
                    "Rekor integrated time / signed timestamp",
                )
            )
    if passed.get("statement"):
        verified.append(
            FieldProvenance("Predicate type", evidence.predicate_type, "signed statement")
        )
    if passed.get("bind"):
        verified.append(
            FieldProvenance(
                "Recipe",
                f"{evidence.recipe_name} @ {evidence.subject_digest}",
                "subject digest equals a known recipe digest",
            )
        )
    if passed.get("manifest"):
        verified.append(
            FieldProvenance(
                "Files and CTRF reports", "manifest.json", "every sha256 matches the signed digests"
            )
        )
    if passed.get("classify"):
        verified.append(
            FieldProvenance("Signer class", signer.get_signer_class_display(), "allowlist")
        )
    claimed = [
        FieldProvenance("Attested at", evidence.attested_at.strftime("%Y-%m-%d %H:%M UTC"), ""),
        FieldProvenance("AICR version", evidence.aicr_version or "—", ""),
        FieldProvenance("Validator catalog", evidence.validator_catalog_version or "—", ""),
        FieldProvenance("Kubernetes version", evidence.k8s_version or "—", ""),
        FieldProvenance("Fingerprint and criteria match", "see below", ""),
        FieldProvenance("Check results and performance numbers", "see below", ""),
    ]
    if evidence.is_simulated:
        claimed.append(FieldProvenance("Environment", "simulated cluster", "run by this site"))
    return verified, claimed


# --- pages ----------------------------------------------------------------------------------


def evidence_get(*, pk: int) -> Evidence | None:
    return (
        Evidence.objects.select_related("signer", "signer__key", "recipe", "recipe__catalog")
        .defer("content", "artifact", "recipe__catalog__files")
        .filter(pk=pk)
        .first()
    )


@dataclass
class EvidencePage:
    evidence: Evidence
    recipe: Recipe
    stale: list[StaleReason]
    claims: list[Claim]
    dimensions: list[DimensionCheck]
    fingerprint: list[FingerprintItem]
    phases: list[EvidencePhase]
    verified: list[FieldProvenance]
    claimed: list[FieldProvenance]
    commands: list[VerifyCommand]
    bundle_url: str

    @property
    def has_ctrf(self) -> bool:
        """Per-check CTRF results exist (a phase without any then simply had none)."""
        return any(phase.checks for phase in self.phases)

    @property
    def transcript(self) -> list[dict[str, Any]]:
        steps = self.evidence.transcript if isinstance(self.evidence.transcript, list) else []
        return [
            {
                "step": str(s.get("step", "")),
                "ok": bool(s.get("ok")),
                "detail": str(s.get("detail", "")),
            }
            for s in steps
            if isinstance(s, Mapping)
        ]


def bundle_url(evidence: Evidence) -> str:
    """The exact stored bytes (``/api/v1/evidence/<id>/bundle``)."""
    return reverse("api:evidence-bundle", args=[evidence.pk])


def evidence_page(*, evidence: Evidence) -> EvidencePage:
    stale = staleness_map([evidence]).get(evidence.pk, [])
    verified, claimed = verified_and_claimed(evidence)
    return EvidencePage(
        evidence=evidence,
        recipe=evidence.recipe,
        stale=stale,
        claims=certificate_claims(evidence),
        dimensions=fingerprint_vs_recipe(evidence, evidence.recipe),
        fingerprint=fingerprint_items(evidence),
        phases=evidence_phases(evidence, evidence.recipe),
        verified=verified,
        claimed=claimed,
        commands=verify_commands(evidence),
        bundle_url=bundle_url(evidence),
    )


@dataclass
class EvidenceListing:
    page: Page[Evidence]
    stale: dict[int, list[StaleReason]]
    recipe: str
    signer: str
    query: str


def evidence_queryset() -> QuerySet[Evidence]:
    return Evidence.objects.select_related("signer").defer(*HEAVY_FIELDS)


def evidence_listing(*, params: Mapping[str, Any], page_number: Any) -> EvidenceListing:
    """Evidence, newest first, optionally for one recipe name and/or one signer slug."""
    recipe = str(params.get("recipe") or "").strip()[:200]
    signer = str(params.get("signer") or "").strip()[:64]
    qs = evidence_queryset().order_by("-attested_at", "-pk")
    if recipe:
        qs = qs.filter(recipe_name=recipe)
    if signer:
        qs = qs.filter(signer__slug=signer)
    page = Paginator(qs, PAGE_SIZE).get_page(page_number)
    items = list(page.object_list)
    page.object_list = items
    query = urlencode([(k, v) for k, v in (("recipe", recipe), ("signer", signer)) if v])
    return EvidenceListing(
        page=page,
        stale=staleness_map(items),
        recipe=recipe,
        signer=signer,
        query=query,
    )


@dataclass
class SignerPage:
    signer: Signer
    explanation: str
    changes: list[SignerClassChange]
    page: Page[Evidence]
    stale: dict[int, list[StaleReason]]
    recipe_count: int


def signer_get(*, slug: str) -> Signer | None:
    return Signer.objects.select_related("key").filter(slug=slug).first()


def signer_page(*, signer: Signer, page_number: Any) -> SignerPage:
    qs = evidence_queryset().filter(signer=signer).order_by("-attested_at", "-pk")
    page = Paginator(qs, PAGE_SIZE).get_page(page_number)
    items = list(page.object_list)
    page.object_list = items
    changes = list(SignerClassChange.objects.filter(signer=signer).select_related("allowlist"))
    recipe_count = Evidence.objects.filter(signer=signer).values("recipe_name").distinct().count()
    return SignerPage(
        signer=signer,
        explanation=counting_explanation(signer),
        changes=changes,
        page=page,
        stale=staleness_map(items),
        recipe_count=recipe_count,
    )

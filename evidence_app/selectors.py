"""Reads behind the evidence pages, and the consensus the recipe pages show.

Consensus is AICR's (``evidence_app.corroborate``: ``bucket_status``, ``compute_consensus``,
``rollup_phase``, ``rollup_recipe``, ``order_versions_newest_first``), fed from database rows:

- **Eligible** evidence is verified and not withdrawn. Withdrawn evidence is listed (struck,
  with its reason) but never selected; simulated evidence is selected into its own columns
  (labelled, never counted); demo evidence counts like any other and is labelled everywhere.
- **Columns** are signers: one per verified signer (and one more for a signer's simulated
  runs), counted first, then reported, then simulated. A counted signer is allowlisted or a
  registered key (``Signer.counted``); the rest are AICR's zero-weight "reported" sources.
- **Lens**: by default each column's single newest run (``attested_at``, then id) whatever
  its AICR version; with a version, each column's newest run *at that version* and only the
  columns that have one: strict same-version consensus, as AICR's per-version grids.
- **Rows** are the recipe's declared checks (deployment, conformance, performance; readiness
  has no CTRF) plus every CTRF name of the selected runs, by phase then name. A row absent from
  a selected run is not-run for that signer (no fallback to older runs). Evidence without
  per-check CTRF data (a bare Sigstore bundle) only has the predicate's phase summary, so it
  is not-run on every row and its column says so.
- **States** per row over distinct counted signers; phases and the recipe fold worst-first
  with PARTIAL for positive + untested rows (``rollup_phase``/``rollup_recipe``).

Every function runs a fixed number of queries whatever the number of evidence rows.
``recipe_consensus_states`` (the list page's badges and filter) is cached under a key that
includes a cheap "evidence generation" aggregate, so any upload, withdrawal or signer class
change invalidates it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from django.core.cache import cache
from django.core.paginator import Page, Paginator
from django.db.models import Count, F, Max, Q, QuerySet, Subquery, Window
from django.db.models.functions import RowNumber
from django.urls import reverse

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
from evidence_app.services.staleness import StaleReason, staleness_bulk
from evidence_app.verification.commands import VerifyCommand, commands_for
from evidence_app.verification.ctrf import CtrfTest
from evidence_app.verification.signature import SignatureOutcome, SignerClaims
from recipes_app.models import DIMENSIONS, Catalog, Recipe

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
CACHE_TIMEOUT = 24 * 60 * 60
CACHE_PREFIX = "evidence:consensus-states:v1"
PAGE_SIZE = 25
RECENT_EVIDENCE = 20
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


def _outcome(name: str, entry: Any) -> CheckOutcome | None:
    if not isinstance(name, str) or not name.strip():
        return None
    if isinstance(entry, str):
        return CheckOutcome(name=name[:4096], status=entry[:32], result=bucket_status(entry))
    if not isinstance(entry, Mapping):
        return None
    status = _text(entry.get("status"), 32)
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


def check_outcomes(check_results: Any) -> dict[str, dict[str, CheckOutcome]]:
    """``Evidence.check_results`` read defensively: phase → CTRF name → outcome.

    Accepts ``{phase: [{name, status, …}]}`` (CTRF tests), ``{phase: {"tests": […]}}`` and
    ``{phase: {name: status | {status, …}}}``; anything else reads as no data.
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
                    outcome = _outcome(entry.get("name"), entry)
                    if outcome is not None and outcome.name not in by_name:
                        by_name[outcome.name] = outcome
        elif isinstance(entries, Mapping):
            for name, entry in list(entries.items())[:5000]:
                outcome = _outcome(name, entry)
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


@dataclass(frozen=True)
class _Run:
    """One selected run as consensus sees it."""

    key: str  # the signer's verified source id: one identity is one signer
    counted: bool
    simulated: bool
    statuses: Mapping[str, Mapping[str, str]]  # phase → CTRF name → raw status


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


def _consensus_rows(
    declared: Iterable[RowKey], runs: Sequence[_Run]
) -> list[tuple[RowKey, Consensus, list[str]]]:
    """Per row: AICR's consensus over the non-simulated runs, and every run's bucket."""
    keys = set(declared)
    for run in runs:
        for phase in GRID_PHASES:
            keys.update((phase, name) for name in run.statuses.get(phase, {}))
    rows = []
    for key in sorted(keys, key=_row_order):
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
        rows.append((key, consensus, results))
    return rows


def _recipe_state(states: Sequence[str]) -> str:
    return rollup_recipe([{"consensus": state} for state in states]).state


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
        return self.signer.counted and not self.simulated

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

    @property
    def state(self) -> str:
        return self.consensus.state


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
    columns: list[Column]
    phases: list[GridPhase]
    rollup: RecipeRollup
    recent: list[Evidence]  # newest evidence of this recipe (withdrawn ones included)
    withdrawn: list[Evidence]
    stale: dict[int, list[StaleReason]]
    evidence_count: int

    @property
    def state(self) -> str:
        return self.rollup.state

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
        return any(c.summary_only for c in self.columns)

    @property
    def phase_rollup(self) -> dict[str, str]:
        return {phase.phase: phase.state for phase in self.phases}


def _column_key(evidence: Evidence) -> str:
    source = evidence.signer.source_id
    return f"{source}:simulated" if evidence.is_simulated else source


def _newest_first(evidences: Iterable[Evidence]) -> list[Evidence]:
    return sorted(evidences, key=lambda e: (e.attested_at, e.pk), reverse=True)


def _instant(moment: datetime) -> int:
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    instant = parse_rfc3339(text)
    return instant if instant is not None else 0


def lens_versions(evidences: Iterable[Evidence]) -> list[str]:
    """AICR versions of eligible evidence, newest release first (AICR's lens order)."""
    newest: dict[str, int] = {}
    for e in evidences:
        instant = _instant(e.attested_at)
        if instant > newest.get(e.aicr_version, -(2**63)):
            newest[e.aicr_version] = instant
    return order_versions_newest_first(newest, newest)


def _column_order(column: Column) -> tuple[int, str, str]:
    group = {"counted": 0, "reported": 1, "simulated": 2}[column.group]
    return (group, column.signer.label.lower(), column.key)


def consensus_grid(*, recipe: Recipe, lens: str | None = None) -> ConsensusGrid:
    """The consensus grid of ``recipe`` (evidence matched by recipe name, any catalog version:
    evidence of another digest shows as stale, recipe changed, and still counts, as in AICR).

    Queries: the evidence rows, the selected runs' results, and the staleness reads: constant.
    """
    lens = (lens or "").strip()[:100]
    rows = list(
        Evidence.objects.filter(recipe_name=recipe.name)
        .select_related("signer")
        .defer(*HEAVY_FIELDS)
    )
    rows = _newest_first(rows)
    eligible = [e for e in rows if e.verdict == Verdict.VERIFIED and e.withdrawn_at is None]
    # A run without an AICR version cannot be picked by version; it still shows in the default.
    versions = [v for v in lens_versions(eligible) if v]
    lens_error = ""
    if lens and lens not in versions:
        lens_error = (
            f"No counted or reported evidence was produced with AICR version “{lens}”; "
            "showing each signer's latest run instead."
        )
        lens = ""

    selected: dict[str, Evidence] = {}
    for e in eligible:
        if lens and e.aicr_version != lens:
            continue
        selected.setdefault(_column_key(e), e)

    heavy: dict[int, tuple[Any, Any]] = {}
    if selected:
        heavy = {
            pk: (check_results, predicate)
            for pk, check_results, predicate in Evidence.objects.filter(
                pk__in=[e.pk for e in selected.values()]
            ).values_list("pk", "check_results", "predicate")
        }
    recent = rows[:RECENT_EVIDENCE]
    withdrawn = [e for e in rows if e.withdrawn_at is not None]
    shown = {e.pk: e for e in [*selected.values(), *recent, *withdrawn]}
    stale = staleness_map(list(shown.values()))

    columns = []
    for key, e in selected.items():
        check_results, predicate = heavy.get(e.pk, ({}, {}))
        columns.append(
            Column(
                key=key,
                signer=e.signer,
                simulated=e.is_simulated,
                evidence=e,
                outcomes=check_outcomes(check_results),
                summaries=phase_summaries(predicate),
                stale=stale.get(e.pk, []),
            )
        )
    columns.sort(key=_column_order)

    declared = declared_checks(recipe.checks)
    runs = [
        _Run(
            key=c.signer.source_id,
            counted=c.counted,
            simulated=c.simulated,
            statuses=_statuses(c.outcomes),
        )
        for c in columns
    ]
    by_phase: dict[str, list[Row]] = {phase: [] for phase in GRID_PHASES}
    for (phase, name), consensus, results in _consensus_rows(declared, runs):
        cells = [
            Cell(column=c, result=result, outcome=c.outcomes.get(phase, {}).get(name))
            for c, result in zip(columns, results, strict=True)
        ]
        by_phase[phase].append(
            Row(
                phase=phase,
                name=name,
                declared=(phase, name) in declared,
                thresholds=declared.get((phase, name), []),
                consensus=consensus,
                cells=cells,
            )
        )
    phases = [
        GridPhase(
            phase=phase,
            state=rollup_phase([row.state for row in by_phase[phase]]),
            rows=by_phase[phase],
            summaries=[PhaseCell(column=c, summary=c.summaries.get(phase)) for c in columns],
        )
        for phase in GRID_PHASES
    ]
    all_rows = [row for phase in phases for row in phase.rows]
    rollup = rollup_recipe(
        [{"consensus": row.state, "reported": row.consensus.reported} for row in all_rows]
    )
    options = [LensOption(value="", label="Latest run per signer", selected=not lens)]
    options += [LensOption(value=v, label=f"AICR {v}", selected=v == lens) for v in versions]
    return ConsensusGrid(
        recipe_name=recipe.name,
        lens=lens,
        lens_error=lens_error,
        lens_options=options,
        columns=columns,
        phases=phases,
        rollup=rollup,
        recent=recent,
        withdrawn=withdrawn,
        stale=stale,
        evidence_count=len(rows),
    )


# --- consensus of many recipes at once (list page, badge, filter, API) ----------------------


def evidence_generation() -> tuple[Any, ...]:
    """A cheap aggregate that changes whenever anything consensus depends on changes:
    evidence added (count, max id, newest upload), withdrawn (count, newest withdrawal), or a
    signer's class or counting changed (newest SignerClassChange). One query."""
    newest_change = SignerClassChange.objects.order_by("-pk")
    agg = Evidence.objects.aggregate(
        n=Count("pk"),
        top=Max("pk"),
        uploaded=Max("uploaded_at"),
        withdrawn=Count("pk", filter=Q(withdrawn_at__isnull=False)),
        last_withdrawn=Max("withdrawn_at"),
        change=Max(Subquery(newest_change.values("pk")[:1])),
        change_at=Max(Subquery(newest_change.values("at")[:1])),
    )
    return tuple(
        value.isoformat() if isinstance(value, datetime) else value
        for value in (
            agg["n"],
            agg["top"],
            agg["uploaded"],
            agg["withdrawn"],
            agg["last_withdrawn"],
            agg["change"],
            agg["change_at"],
        )
    )


def _cache_key(catalog: Catalog, generation: tuple[Any, ...]) -> str:
    parts = [str(catalog.pk), catalog.content_digest[:16], *map(str, generation)]
    return f"{CACHE_PREFIX}:" + ":".join(re.sub(r"[^0-9A-Za-z._-]", "_", p) for p in parts)


def recipe_consensus_states(*, catalog: Catalog | None) -> dict[str, str]:
    """Recipe name → consensus state (default lens) for every recipe of ``catalog`` that has
    evidence; a recipe missing from the map is UNTESTED.

    One query on a cache hit (the generation aggregate); on a miss two more when there is any
    evidence: the newest eligible run of each (recipe, counted signer), and the declared
    checks of the recipes that have one. Reported and simulated runs cannot change a state,
    so they are not read.
    """
    if catalog is None:
        return {}
    generation = evidence_generation()
    if not generation[0]:
        return {}
    key = _cache_key(catalog, generation)
    states = cache.get(key)
    if states is None:
        states = _compute_recipe_states(catalog)
        cache.set(key, states, CACHE_TIMEOUT)
    return states


def _compute_recipe_states(catalog: Catalog) -> dict[str, str]:
    latest = (
        Evidence.objects.filter(
            verdict=Verdict.VERIFIED,
            withdrawn_at__isnull=True,
            is_simulated=False,
            signer__counted=True,
            recipe_name__in=Recipe.objects.filter(catalog=catalog).values("name"),
        )
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F("recipe_name"), F("signer_id")],
                order_by=[F("attested_at").desc(), F("pk").desc()],
            )
        )
        .filter(rank=1)
        .values_list("recipe_name", "signer__source_id", "check_results")
    )
    runs: dict[str, list[_Run]] = {}
    for name, source, check_results in latest:
        runs.setdefault(name, []).append(
            _Run(
                key=source,
                counted=True,
                simulated=False,
                statuses=_statuses(check_outcomes(check_results)),
            )
        )
    if not runs:
        return {}
    checks = Recipe.objects.filter(catalog=catalog, name__in=list(runs)).values_list(
        "name", "checks"
    )
    states = {}
    for name, recipe_checks in checks:
        rows = _consensus_rows(declared_checks(recipe_checks), runs[name])
        states[name] = _recipe_state([consensus.state for _, consensus, _ in rows])
    return states


def state_of(states: Mapping[str, str], name: str) -> str:
    return states.get(name, UNTESTED)


def names_in_state(states: Mapping[str, str], state: str) -> tuple[set[str], bool]:
    """``(names, exclude)``: the recipes in ``state`` are ``names`` — or, for UNTESTED (the
    default of recipes without evidence), every recipe *except* ``names``."""
    if state == UNTESTED:
        return {name for name, s in states.items() if s != UNTESTED}, True
    return {name for name, s in states.items() if s == state}, False


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


def verified_and_claimed(
    evidence: Evidence,
) -> tuple[list[FieldProvenance], list[FieldProvenance]]:
    """What this site checked itself (signature-covered and verified) and what the signer
    only asserts inside the signed statement."""
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

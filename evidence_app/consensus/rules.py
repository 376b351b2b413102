"""Which runs count, and the consensus state they give: AICR's rules fed from database rows.

The rules are AICR's (``evidence_app.corroborate``: ``bucket_status``, ``compute_consensus``,
``rollup_phase``, ``rollup_recipe``), applied to the runs selected here:

- **Counted** evidence is ``EvidenceQuerySet.counted()`` (``models.counted_q``); ``is_counted``
  is the same rule for one loaded row (the API's ``counted``, the evidence tables, the grid's
  counted columns). Evidence made with an AICR version outside ``AICR_SUPPORTED_RANGE`` is
  not counted (``unsupported``): its signer's runs are shown with zero weight, as reported.
- **Eligible** evidence is verified and not withdrawn (``eligible``). Simulated evidence is
  eligible for its own columns (labelled, never counted); demo evidence (signed with a demo
  key) counts like any other, and every state it feeds says so.
- A signer's runs are **counted** (allowlisted or a registered key, ``Signer.counted``) or
  AICR's zero-weight **reported** source (``signer_group``).
- **Rows** are the recipe's declared checks (deployment, conformance, performance; readiness
  has no CTRF) plus every CTRF name of the counted runs, by phase then name. A name only
  reported or simulated runs carry is a row outside the rollups: an uncounted signer never
  changes a state. A row absent from a run is not-run for that signer.
- **States** per row over distinct counted signers; phases and the recipe fold worst-first
  with PARTIAL for positive + untested rows.

``confirmed_lacks`` says what a recipe lacks for CONFIRMED, from ``corroborate``'s
``confirmed_shortfall`` (the row rule read backwards) and the worst-first fold (CONFIRMED
only when every rollup row is).

``recipe_consensus`` is the one computation of a recipe's state, with what it rests on (demo
evidence, stale counted runs): the grid, the stored list badges, the ``?consensus=`` filter,
the recipe API and the audit package all use it, so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber

from evidence_app.consensus.outcomes import CheckOutcome, check_statuses_of
from evidence_app.corroborate import (
    CONFIRMED,
    CONFIRMED_MIN_PASSES,
    CONTESTED,
    FAIL,
    FAILING,
    PARTIAL,
    PASS,
    PHASE_ORDER,
    SINGLE,
    UNTESTED,
    ConfirmedShortfall,
    Consensus,
    RecipeRollup,
    bucket_status,
    confirmed_shortfall,
    consensus_of_counts,
    rollup_phase,
    rollup_recipe,
)
from evidence_app.models import Evidence, Signer, Verdict
from evidence_app.services.staleness import CODES as STALE_CODES
from evidence_app.services.versions import supported_range
from recipes_app.models import RecipeConsensusState

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

RowKey = tuple[str, str]  # (phase, CTRF name)
# What consensus reads of each selected run (``is_counted``, ``Run``, the staleness facts).
RUN_FIELDS = (
    "pk",
    "recipe",  # its catalog's validator check set
    "recipe_name",
    "subject_digest",
    "predicate_type",  # which of the recipe's digests the subject names
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
)


# --- which runs count -----------------------------------------------------------------------


def signer_group(signer: Signer) -> str:
    """``counted`` (allowlisted or a registered key) or ``reported`` (verified, zero weight)."""
    return "counted" if signer.counted else "reported"


def evidence_standing(evidence: Evidence) -> str:
    """Where a verified record stands for consensus: ``withdrawn``, ``simulated`` (never
    counted), ``unsupported`` (its AICR version is outside the supported range), else its
    signer's group, ``counted`` or ``reported`` — ``is_counted`` in words."""
    if evidence.withdrawn_at is not None:
        return "withdrawn"
    if evidence.is_simulated:
        return "simulated"
    if not in_supported_range(evidence):
        return "unsupported"
    return signer_group(evidence.signer)


def in_supported_range(evidence: Evidence) -> bool:
    """Whether the record's AICR version is in ``AICR_SUPPORTED_RANGE`` (any, when empty)."""
    return supported_range().contains(evidence.aicr_version)


def is_counted(evidence: Evidence) -> bool:
    """Whether consensus counts this evidence row: exactly ``EvidenceQuerySet.counted()``
    (verified, not withdrawn, a counted signer, not simulated, in the supported AICR range)
    for one loaded row. Demo evidence counts (and is labelled wherever a state derived from
    it is shown)."""
    return (
        evidence.verdict == Verdict.VERIFIED
        and evidence.withdrawn_at is None
        and evidence.signer.counted
        and not evidence.is_simulated
        and in_supported_range(evidence)
    )


def eligible(queryset: QuerySet[Evidence]) -> QuerySet[Evidence]:
    """Selectable runs: verified, not withdrawn (simulated ones get their own columns)."""
    return queryset.filter(verdict=Verdict.VERIFIED, withdrawn_at__isnull=True)


def latest_per(queryset: QuerySet[Evidence], *partition: str) -> QuerySet[Evidence]:
    """The newest row (``attested_at``, then id) of each ``partition`` group, in SQL."""
    return queryset.annotate(
        _rank=Window(
            RowNumber(),
            partition_by=[F(name) for name in partition],
            order_by=[F("attested_at").desc(), F("pk").desc()],
        )
    ).filter(_rank=1)


# --- what consensus reads of a run ----------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One selected run as consensus sees it."""

    key: str  # the signer's verified source id (an audit package: its slug)
    counted: bool  # ``is_counted`` of its evidence
    simulated: bool
    statuses: Mapping[str, Mapping[str, str]]  # phase → CTRF name → raw status
    demo: bool = False  # signed with a demo key
    stale: tuple[str, ...] = ()  # its stale reason codes (``services.staleness``)


def outcome_statuses(
    outcomes: Mapping[str, Mapping[str, CheckOutcome]],
) -> dict[str, dict[str, str]]:
    """Phase → CTRF name → raw status, in the grid's phases only: a ``Run``'s ``statuses``."""
    return {
        phase: {name: o.status for name, o in by_name.items()}
        for phase, by_name in outcomes.items()
        if phase in GRID_PHASES
    }


def check_statuses(check_results: Any) -> dict[str, dict[str, str]]:
    """``outcome_statuses`` of a raw ``Evidence.check_results`` (names and statuses only)."""
    return check_statuses_of(check_results, GRID_PHASES)


# --- the consensus of one recipe ------------------------------------------------------------


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


def row_order(key: RowKey) -> tuple[int, str]:
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
    def of(cls, runs: Iterable[Run]) -> StaleSummary:
        return cls.of_groups((run.stale, 1) for run in runs if run.counted)

    @classmethod
    def of_groups(cls, counted: Iterable[tuple[tuple[str, ...], int]]) -> StaleSummary:
        """From (a counted run's stale codes, how many runs have exactly those) pairs."""
        runs = stale = 0
        by_code: dict[str, int] = {}
        for codes, n in counted:
            runs += n
            stale += n if codes else 0
            for code in dict.fromkeys(codes):
                by_code[code] = by_code.get(code, 0) + n
        return cls(counted_runs=runs, stale_runs=stale, reasons=_in_code_order(by_code))


def _in_code_order(by_code: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """The reasons in ``STALE_CODES`` order (a stored JSON object keeps no key order)."""
    order = {code: i for i, code in enumerate(STALE_CODES)}
    return tuple(sorted(by_code.items(), key=lambda item: (order.get(item[0], 99), item[0])))


@dataclass(frozen=True)
class RowTally:
    """What the selected runs add up to on one row: the counts AICR's state is computed from
    (``consensus_of_counts``) and what the grid notes of it. A run adds to the rows it carries
    (``run_tallies``); runs are distinct signer columns, so these are distinct-signer counts.
    Stored per (recipe name, row) by ``consensus.columns`` and kept by adding and subtracting
    one column's tallies when its selected run changes."""

    pass_counted: int = 0  # counted runs whose result is a pass
    fail_counted: int = 0  # … a fail
    reported: int = 0  # uncounted, non-simulated runs with a pass or a fail (zero weight)
    counted_carriers: int = 0  # counted runs that carry the name: the row is in the rollups
    other_carriers: int = 0  # uncounted runs (reported, unsupported, simulated) carrying it
    demo_voters: int = 0  # counted demo runs with a pass or a fail
    stale_voters: int = 0  # counted stale runs with a pass or a fail

    FIELDS = (
        "pass_counted",
        "fail_counted",
        "reported",
        "counted_carriers",
        "other_carriers",
        "demo_voters",
        "stale_voters",
    )

    def values(self) -> tuple[int, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def plus(self, other: RowTally, sign: int = 1) -> RowTally:
        return RowTally(*(a + sign * b for a, b in zip(self.values(), other.values(), strict=True)))

    @property
    def empty(self) -> bool:
        return not (self.counted_carriers or self.other_carriers)

    @property
    def consensus(self) -> Consensus:
        return consensus_of_counts(self.pass_counted, self.fail_counted, self.reported)


def run_tallies(run: Run) -> dict[RowKey, RowTally]:
    """What one selected run adds to each row it carries (a row it lacks is not-run for it,
    which adds nothing)."""
    out: dict[RowKey, RowTally] = {}
    for phase in GRID_PHASES:
        for name, status in run.statuses.get(phase, {}).items():
            result = bucket_status(status)
            voter = result in (PASS, FAIL)
            if run.counted:
                out[(phase, name)] = RowTally(
                    pass_counted=int(result == PASS),
                    fail_counted=int(result == FAIL),
                    counted_carriers=1,
                    demo_voters=int(voter and run.demo),
                    stale_voters=int(voter and bool(run.stale)),
                )
            else:
                out[(phase, name)] = RowTally(
                    reported=int(voter and not run.simulated), other_carriers=1
                )
    return out


def tally_runs(runs: Iterable[Run]) -> dict[RowKey, RowTally]:
    """Every row's tally over ``runs`` (distinct signer columns)."""
    totals: dict[RowKey, RowTally] = {}
    for run in runs:
        for key, tally in run_tallies(run).items():
            totals[key] = totals[key].plus(tally) if key in totals else tally
    return totals


@dataclass(frozen=True)
class RowConsensus:
    """One row of the consensus: AICR's state over the counted signers."""

    key: RowKey
    consensus: Consensus
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
    # What it lacks for CONFIRMED (``confirmed_lacks``); empty when CONFIRMED, and for a
    # recipe without counted evidence (UNTESTED says it: no signer has passed anything yet).
    lacks: tuple[ConfirmedLack, ...] = ()

    @property
    def _first_lack(self) -> ConfirmedLack | None:
        """The lack a short line names: a failing signer first (what stands in the way now),
        else the one with most checks (``confirmed_lacks``' order)."""
        failing = [lack for lack in self.lacks if lack.shortfall.failing_signers]
        candidates = failing or list(self.lacks)
        return candidates[0] if candidates else None

    @property
    def lacks_short(self) -> str:
        """One line for a list row: one lack, one check named (the rest on the recipe page)."""
        first = self._first_lack
        if first is None:
            return ""
        more = "; more on its page" if len(self.lacks) > 1 else ""
        return f"{first.sentence_naming(1)}{more}"

    @property
    def lacks_brief(self) -> str:
        """A few words for a coverage cell: the signers that lack needs, no check."""
        first = self._first_lack
        return first.brief if first else ""

    @classmethod
    def untested(cls) -> RecipeBadge:
        """A recipe without counted evidence."""
        return cls(state=UNTESTED, includes_demo=False, stale=StaleSummary())

    @classmethod
    def stored(cls, row: RecipeConsensusState | None) -> RecipeBadge:
        """The badge a ``RecipeConsensusState`` row holds (``consensus.stored`` writes it);
        None, a recipe without a row, has no counted evidence: UNTESTED."""
        if row is None:
            return cls.untested()
        return cls(
            state=row.state,
            includes_demo=row.includes_demo,
            stale=StaleSummary(
                counted_runs=row.counted_runs,
                stale_runs=row.stale_runs,
                reasons=_in_code_order(row.stale_reasons),
            ),
            lacks=ConfirmedLack.all_from_json(row.confirmed_lacks),
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "consensus": self.state,
            "consensus_includes_demo": self.includes_demo,
            "consensus_stale": self.stale.as_dict(),
        }


NAMED_CHECKS = 3  # checks a shortfall sentence names before "and N more"
_COUNT_WORDS = {1: "one", 2: "two", 3: "three"}


def _count(n: int) -> str:
    return _COUNT_WORDS.get(n, str(n))


@dataclass(frozen=True)
class ConfirmedLack:
    """Checks that lack the same thing for CONFIRMED (``corroborate.confirmed_shortfall``)."""

    shortfall: ConfirmedShortfall
    checks: tuple[str, ...]  # CTRF names, in grid row order

    @property
    def sentence(self) -> str:
        """``needs one more independent passing signer on check-nvidia-smi``."""
        return self.sentence_naming(NAMED_CHECKS)

    def _needs(self) -> list[str]:
        failing, more = self.shortfall.failing_signers, self.shortfall.more_passing_signers
        needs = []
        if failing:
            signers = "signer" if failing == 1 else "signers"
            needs.append(f"its {_count(failing)} failing {signers} to pass")
        if more:
            signers = "signer" if more == 1 else "signers"
            extra = " more" if failing or more < CONFIRMED_MIN_PASSES else ""
            needs.append(f"{_count(more)}{extra} independent passing {signers}")
        return needs

    def sentence_naming(self, named_checks: int) -> str:
        """The sentence, naming at most ``named_checks`` checks before "and N more checks"."""
        named = ", ".join(self.checks[:named_checks])
        rest = len(self.checks) - named_checks
        if rest > 0:
            named += f" and {rest} more check{'s' if rest > 1 else ''}"
        return f"needs {' and '.join(self._needs())} on {named}"

    @property
    def brief(self) -> str:
        """``needs one more independent passing signer``: the sentence without its checks."""
        return f"needs {' and '.join(self._needs())}"

    def as_json(self) -> dict[str, Any]:
        """What ``RecipeConsensusState.confirmed_lacks`` stores of it."""
        return {
            "failing": self.shortfall.failing_signers,
            "more": self.shortfall.more_passing_signers,
            "checks": list(self.checks),
        }

    @classmethod
    def all_from_json(cls, stored: Any) -> tuple[ConfirmedLack, ...]:
        """The stored lacks back (a row written before the column: none)."""
        return tuple(
            cls(
                shortfall=ConfirmedShortfall(
                    failing_signers=int(item["failing"]), more_passing_signers=int(item["more"])
                ),
                checks=tuple(str(c) for c in item["checks"]),
            )
            for item in (stored if isinstance(stored, list) else [])
        )


def confirmed_lacks(rows: Iterable[RowConsensus]) -> tuple[ConfirmedLack, ...]:
    """What a recipe lacks for CONFIRMED: its rollup folds worst-first, so it is CONFIRMED
    exactly when every rollup row is; each row not yet CONFIRMED lacks what
    ``confirmed_shortfall`` says, grouped by that shortfall (most checks first). A recipe
    without any rollup row lacks a check with two passing signers. Empty: it is CONFIRMED."""
    by_shortfall: dict[ConfirmedShortfall, list[str]] = {}
    rollup_rows = [row for row in rows if row.in_rollup]
    for row in rollup_rows:
        if row.consensus.state == CONFIRMED:
            continue
        shortfall = confirmed_shortfall(row.consensus)
        by_shortfall.setdefault(shortfall, []).append(row.key[1])
    if not rollup_rows:
        none_yet = ConfirmedShortfall(failing_signers=0, more_passing_signers=CONFIRMED_MIN_PASSES)
        return (ConfirmedLack(shortfall=none_yet, checks=("at least one check",)),)
    lacks = [ConfirmedLack(shortfall=s, checks=tuple(c)) for s, c in by_shortfall.items()]
    return tuple(sorted(lacks, key=lambda lack: -len(lack.checks)))


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
        return RecipeBadge(
            state=self.state,
            includes_demo=self.includes_demo,
            stale=self.stale,
            # Without a counted run there is no stored row to hold it (``RecipeBadge.untested``).
            lacks=self.lacks_for_confirmed if self.stale.counted_runs else (),
        )

    @property
    def lacks_for_confirmed(self) -> tuple[ConfirmedLack, ...]:
        return confirmed_lacks(self.rows)


def recipe_consensus(declared: Iterable[RowKey], runs: Sequence[Run]) -> RecipeConsensus:
    """THE recipe-level consensus, used by the grid, the list badges, the ``?consensus=``
    filter, the API and the audit package alike: ``fold_consensus`` of the runs' tallies."""
    return fold_consensus(declared, tally_runs(runs), StaleSummary.of(runs))


def fold_consensus(
    declared: Iterable[RowKey], tallies: Mapping[RowKey, RowTally], stale: StaleSummary
) -> RecipeConsensus:
    """The recipe-level consensus from its rows' tallies (computed from the runs, or stored).

    Rows are the declared checks plus every CTRF name of a *counted* run; names only
    reported or simulated runs carry are rows too (shown, so nothing a signer sent is
    hidden) but stay out of the phase and recipe rollups: an uncounted signer never changes
    a state. Each row's state is AICR's ``compute_consensus`` over the non-simulated runs
    (reported ones with zero weight), from its counts; phases and the recipe fold the rollup
    rows worst-first.
    """
    in_rollup = set(declared) | {k for k, t in tallies.items() if t.counted_carriers}
    shown_only = {k for k, t in tallies.items() if t.other_carriers} - in_rollup
    rows = []
    for key in sorted(in_rollup | shown_only, key=row_order):
        tally = tallies.get(key, RowTally())
        rows.append(
            RowConsensus(
                key=key,
                consensus=tally.consensus,
                in_rollup=key in in_rollup,
                demo=tally.demo_voters > 0,
                voters=tally.pass_counted + tally.fail_counted,
                stale_voters=tally.stale_voters,
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
        stale=stale,
    )

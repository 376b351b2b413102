"""Consensus states: result buckets, per-row consensus, phase and recipe rollups.

Port of ``pkg/corroborate/consensus.go`` plus the renderer's ``rollupPhase``/``rollupRecipe``
tallies (``pkg/corroborate/renderer/index.html``). Everything here works on plain values so
the Django app can feed it from database rows without the evidence tree.

The consensus counts **distinct allowlisted signers, never builds**: N nightly runs from one
CI loop are one source, so a sybil cannot manufacture a CONFIRMED cell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Cell states. PARTIAL is a rollup-only state, never a row state.
CONFIRMED = "CONFIRMED"  # >= 2 distinct allowlisted passes, no allowlisted fail
SINGLE = "SINGLE"  # exactly one allowlisted pass, no allowlisted fail
CONTESTED = "CONTESTED"  # allowlisted passes and fails disagree; surfaced, never averaged
FAILING = "FAILING"  # allowlisted fails only
UNTESTED = "UNTESTED"  # no allowlisted signer ran the row: a coverage gap, not a failure
PARTIAL = "PARTIAL"  # rollup only: some rows positive, the rest not run, nothing failing

STATES = (CONFIRMED, SINGLE, CONTESTED, FAILING, UNTESTED)

# Distinct allowlisted passing signers a row needs to be CONFIRMED (``consensus.go``).
CONFIRMED_MIN_PASSES = 2

# Result buckets (the wire values of series cells).
PASS = "pass"  # noqa: S105 - a result bucket, not a password
FAIL = "fail"
NOT_RUN = "not-run"

# validator.PhaseOrder rendered as strings: the ctrf/<phase>.json basenames and row order.
PHASE_ORDER = ("deployment", "conformance", "performance")

# Worst-first rollup precedence: a lower index is worse and wins, so one CONTESTED row is
# never masked by an otherwise green phase.
PHASE_PRIORITY = (CONTESTED, FAILING, UNTESTED, SINGLE, CONFIRMED)

_CTRF_BUCKETS = {
    "passed": PASS,
    "failed": FAIL,
    "other": FAIL,
    "skipped": NOT_RUN,
    "pending": NOT_RUN,
}


def bucket_status(status: str) -> str:
    """Map a raw CTRF test status to ``pass``/``fail``/``not-run``.

    The mapping is total and fails closed: an unknown or empty status is a ``fail``, so a
    garbled report can never masquerade as a passing corroboration.
    """
    return _CTRF_BUCKETS.get(status, FAIL)


@dataclass(frozen=True, slots=True)
class SignerResult:
    """One distinct signer's latest in-scope result for a single row.

    ``signer_id`` is the counting key: the verified ``issuer + "\\n" + identity``, never a
    contributor-controlled id hash. ``allowlisted`` decides whether the signer carries weight;
    an unallowlisted signer is a zero-weight "reported" dot.
    """

    signer_id: str
    allowlisted: bool
    result: str


@dataclass(frozen=True, slots=True)
class Consensus:
    """The computed verdict for one row."""

    state: str
    pass_allow: int
    fail_allow: int
    reported: int


def compute_consensus(signers: Iterable[SignerResult]) -> Consensus:
    """Derive one row's state from its distinct-signer results.

    Duplicate ``signer_id`` entries are collapsed defensively (first occurrence kept), so one
    identity is one signer even when a caller forgot to pre-reduce to latest-per-signer.
    ``not-run`` is excluded from both buckets: a skipped latest neither promotes a row to
    CONFIRMED nor suppresses a CONTESTED.
    """
    pass_allow = fail_allow = reported = 0
    seen: set[str] = set()
    for s in signers:
        if s.signer_id in seen:
            continue
        seen.add(s.signer_id)
        if not s.allowlisted:
            if s.result in (PASS, FAIL):
                reported += 1
            continue
        if s.result == PASS:
            pass_allow += 1
        elif s.result == FAIL:
            fail_allow += 1
    return consensus_of_counts(pass_allow, fail_allow, reported)


def consensus_of_counts(pass_allow: int, fail_allow: int, reported: int) -> Consensus:
    """``compute_consensus``'s state from its distinct-signer counts: what a row's stored
    tallies (``evidence_app.consensus.columns``) give without its signers' results."""
    if pass_allow == 0 and fail_allow == 0:
        state = UNTESTED
    elif pass_allow and fail_allow:
        state = CONTESTED
    elif fail_allow:
        state = FAILING
    elif pass_allow >= CONFIRMED_MIN_PASSES:
        state = CONFIRMED
    else:
        state = SINGLE
    return Consensus(state, pass_allow, fail_allow, reported)


@dataclass(frozen=True, slots=True)
class ConfirmedShortfall:
    """What one row lacks to become CONFIRMED under ``compute_consensus``'s rule: the
    allowlisted signers whose latest result fails must pass (a newer passing run, or the
    failing one withdrawn), and this many more distinct allowlisted signers must pass."""

    failing_signers: int
    more_passing_signers: int

    @property
    def lacks_nothing(self) -> bool:
        return not (self.failing_signers or self.more_passing_signers)


def confirmed_shortfall(consensus: Consensus) -> ConfirmedShortfall:
    """The inverse of ``compute_consensus`` for CONFIRMED: what ``consensus`` lacks to reach it.

    A failing signer that turns to passing counts as one of the passes, so the passes still
    missing are those beyond every current pass and every failing signer. Reported
    (unallowlisted) signers never help: they carry no weight.
    """
    failing = consensus.fail_allow
    more = max(0, CONFIRMED_MIN_PASSES - consensus.pass_allow - failing)
    return ConfirmedShortfall(failing_signers=failing, more_passing_signers=more)


def priority_of(state: str) -> int:
    """Rollup rank of a state; an unknown state ranks last (len = 5) and cannot win."""
    try:
        return PHASE_PRIORITY.index(state)
    except ValueError:
        return len(PHASE_PRIORITY)


def _fold(states: Sequence[str]) -> str:
    if not states:
        return UNTESTED
    worst = states[0]
    for st in states[1:]:
        if priority_of(st) < priority_of(worst):
            worst = st
    # A phase mixing passing and not-yet-run rows would be dragged to UNTESTED, hiding the
    # coverage it has. CONTESTED/FAILING outrank UNTESTED, so the worst is only UNTESTED here
    # when nothing failed; then PARTIAL if some row is positive.
    if worst == UNTESTED and any(st in (CONFIRMED, SINGLE) for st in states):
        return PARTIAL
    return worst


def rollup_phase(states: Sequence[str]) -> str:
    """Fold a phase's row states worst-first (``RollupPhase``); no rows is UNTESTED."""
    return _fold(states)


def phase_rollup(states_by_phase: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Every phase's rollup, each phase always present (an empty phase is UNTESTED).

    Keys are sorted: it is a Go map in index.json (``conformance, deployment, performance``).
    """
    return {phase: rollup_phase(states_by_phase.get(phase, ())) for phase in sorted(PHASE_ORDER)}


# --- renderer tallies (index.html rollupPhase / rollupRecipe) -----------------------------


@dataclass(frozen=True, slots=True)
class PhaseTally:
    """The renderer's per-phase badge: state plus allowlisted pass/fail and reported counts."""

    state: str
    passed: int
    failed: int
    reported: int

    @property
    def total(self) -> int:
        return self.passed + self.failed


@dataclass(frozen=True, slots=True)
class RecipeRollup:
    """The renderer's recipe-level badge over every row of one grid."""

    state: str
    contested: int
    failing: int
    confirmed: int
    single: int
    untested: int
    reported: int


def _row_tally(row: Mapping[str, Any], sources: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
    # consensusOf(): distinct allowlisted signers of the row; unknown sources never count.
    passed = failed = 0
    seen: set[str] = set()
    for signer in row.get("signers") or ():
        src = signer.get("src", "")
        if src in seen:
            continue
        seen.add(src)
        if not (sources.get(src) or {}).get("allowlisted"):
            continue
        if signer.get("result") == PASS:
            passed += 1
        elif signer.get("result") == FAIL:
            failed += 1
    return passed, failed


def tally_phase(
    rows: Sequence[Mapping[str, Any]], sources: Mapping[str, Mapping[str, Any]]
) -> PhaseTally:
    """Renderer ``rollupPhase`` over one phase's index.json rows (baked ``consensus``)."""
    passed = failed = reported = 0
    for row in rows:
        p, f = _row_tally(row, sources)
        passed, failed, reported = passed + p, failed + f, reported + int(row.get("reported", 0))
    return PhaseTally(_fold([row["consensus"] for row in rows]), passed, failed, reported)


def rollup_recipe(rows: Sequence[Mapping[str, Any]]) -> RecipeRollup:
    """Renderer ``rollupRecipe``: the phase fold applied to all rows of a grid."""
    states = [row["consensus"] for row in rows]
    return RecipeRollup(
        state=_fold(states),
        contested=states.count(CONTESTED),
        failing=states.count(FAILING),
        confirmed=states.count(CONFIRMED),
        single=states.count(SINGLE),
        untested=sum(st not in (CONTESTED, FAILING, CONFIRMED, SINGLE) for st in states),
        reported=sum(int(row.get("reported", 0)) for row in rows),
    )

"""A run's per-check results and phase summaries, read defensively from its JSON columns.

``Evidence.check_results`` (CTRF tests per phase) and the predicate's ``phases`` object come
from a signed statement, not from this site: anything of an unexpected shape reads as no data,
and every string is bounded. Plain Python (no queries): the consensus rules, the grid, the
evidence page and the exports all read results through here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from evidence_app.corroborate import FAIL, NOT_RUN, PASS, bucket_status
from evidence_app.verification.ctrf import CtrfTest


def bounded_text(value: Any, limit: int = 4096) -> str:
    """``value`` if it is a string (cut at ``limit`` characters), else ''."""
    return value[:limit] if isinstance(value, str) else ""


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
                Metric(
                    bounded_text(item.get("label"), 200),
                    float(value),
                    bounded_text(item.get("unit"), 32),
                )
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


def _outcome(name: object, entry: object, detail: bool = True) -> CheckOutcome | None:
    if not isinstance(name, str) or not name.strip():
        return None
    if isinstance(entry, str):
        return CheckOutcome(name=name[:4096], status=entry[:32], result=bucket_status(entry))
    if not isinstance(entry, Mapping):
        return None
    status = bounded_text(entry.get("status"), 32)
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
        message=bounded_text(entry.get("message")),
        metrics=_metrics(entry),
    )


# ``dict`` first: JSON decodes to dicts, and an ABC check costs ten times an exact one (a third
# of reading an audit record's statuses).
_MAPPINGS = (dict, Mapping)


def _phase_entries(check_results: Any) -> Iterator[tuple[str, list[tuple[object, object]]]]:
    """The (name, entry) pairs of each phase of a raw ``check_results``, in the shapes
    ``check_outcomes`` accepts, at most 5,000 a phase; the one place those shapes are read."""
    if not isinstance(check_results, _MAPPINGS):
        return
    for phase, entries in check_results.items():
        if not isinstance(phase, str):
            continue
        if isinstance(entries, _MAPPINGS) and isinstance(entries.get("tests"), list):
            entries = entries["tests"]
        if isinstance(entries, list):
            yield (
                phase,
                [(e.get("name"), e) for e in entries[:5000] if isinstance(e, _MAPPINGS)],
            )
        elif isinstance(entries, _MAPPINGS):
            yield phase, list(entries.items())[:5000]
        else:
            yield phase, []


def check_outcomes(check_results: Any, detail: bool = True) -> dict[str, dict[str, CheckOutcome]]:
    """``Evidence.check_results`` read defensively: phase → CTRF name → outcome.

    Accepts ``{phase: [{name, status, …}]}`` (CTRF tests), ``{phase: {"tests": […]}}`` and
    ``{phase: {name: status | {status, …}}}``; anything else reads as no data. A name listed
    twice in a list keeps its first entry. Without ``detail`` only names and statuses are read
    (no duration, message or metrics): the same names and results, for runs whose cells are
    not shown.
    """
    out: dict[str, dict[str, CheckOutcome]] = {}
    for phase, entries in _phase_entries(check_results):
        by_name: dict[str, CheckOutcome] = {}
        for name, entry in entries:
            outcome = _outcome(name, entry, detail)
            if outcome is not None and outcome.name not in by_name:
                by_name[outcome.name] = outcome
        out[phase] = by_name
    return out


def check_statuses_of(check_results: Any, phases: Collection[str]) -> dict[str, dict[str, str]]:
    """Phase → CTRF name → raw status for ``phases`` only: what ``check_outcomes`` gives, read
    without building an outcome per check (a counted upload and each audit record read this;
    a test holds the two equal)."""
    out: dict[str, dict[str, str]] = {}
    for phase, entries in _phase_entries(check_results):
        if phase not in phases:
            continue
        by_name: dict[str, str] = {}
        for name, entry in entries:
            if not isinstance(name, str) or not name.strip():
                continue
            if isinstance(entry, str):
                status = entry[:32]
            elif isinstance(entry, _MAPPINGS):
                raw = entry.get("status")
                status = raw[:32] if isinstance(raw, str) else ""
            else:
                continue
            by_name.setdefault(name[:4096], status)
        out[phase] = by_name
    return out


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
                ctrf_digest=bounded_text(summary.get("ctrfDigest"), 100),
            )
    return out

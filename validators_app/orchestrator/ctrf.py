"""CTRF reports byte-compatible with AICR's Go JSON (``pkg/validator/ctrf``, AICR-VALIDATE.md §6.7).

Field order is the Go structs' declaration order; empty ``message``/``stdout``/``extra`` are
omitted (``omitempty``); ``duration`` is always present. Bytes are ``json.MarshalIndent(report,
"", "  ")`` plus the writer's newline, written by ``evidence_app.corroborate.gojson`` (a
Django-free module) which escapes ``< > &`` and U+2028/U+2029 the way Go does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from evidence_app.corroborate.gojson import marshal_indent

from .model import CheckOutcome

__all__ = ["build_phase_report", "exit_code_status", "merge_reports", "phase_status", "to_bytes"]

_COUNTED = ("passed", "failed", "skipped", "pending", "other")


def exit_code_status(exit_code: int) -> str:
    """ExitCodeToCTRFStatus: 0 passed, 1 failed, 2 skipped, anything else other."""
    return {0: "passed", 1: "failed", 2: "skipped"}.get(exit_code, "other")


def _test(outcome: CheckOutcome) -> dict[str, Any]:
    test: dict[str, Any] = {
        "name": outcome.name,
        "status": outcome.status,
        "duration": outcome.duration_ms,
        "suite": [outcome.phase],
    }
    if outcome.message:
        test["message"] = outcome.message
    if outcome.stdout:
        test["stdout"] = list(outcome.stdout)
    if outcome.extra:
        test["extra"] = {k: outcome.extra[k] for k in sorted(outcome.extra)}  # Go sorts map keys
    return test


def _rfc3339(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _report(
    version: str, tests: list[dict[str, Any]] | None, start: int, stop: int, ts: str
) -> dict[str, Any]:
    summary: dict[str, int] = {"tests": len(tests or ())}
    for status in _COUNTED:
        summary[status] = sum(1 for t in tests or () if t["status"] == status)
    summary["start"], summary["stop"] = start, stop
    return {
        "reportFormat": "CTRF",
        "specVersion": "0.0.1",
        "timestamp": ts,
        "generatedBy": "aicr",
        "results": {
            "tool": {"name": "aicr", "version": version},
            "summary": summary,
            "tests": tests,
        },
    }


def build_phase_report(
    *, version: str, outcomes: Sequence[CheckOutcome], start_ms: int, stop_ms: int
) -> dict[str, Any]:
    """One phase's report; ``stop_ms`` is the build time and gives ``timestamp`` (seconds, UTC)."""
    return _report(version, [_test(o) for o in outcomes], start_ms, stop_ms, _rfc3339(stop_ms))


def merge_reports(version: str, reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """MergeReports("aicr", version, reports): one report unchanged; else concatenated.

    Several reports with no tests at all merge into ``"tests": null`` (a nil Go slice).
    """
    if len(reports) == 1:
        return dict(reports[0])
    concatenated = [t for r in reports for t in r["results"]["tests"] or ()]
    tests = concatenated or None  # Go appends to a nil slice: nothing appended stays nil
    starts = [r["results"]["summary"]["start"] for r in reports]
    stops = [r["results"]["summary"]["stop"] for r in reports]
    ts = reports[0]["timestamp"] if reports else ""
    merged = _report(version, tests, min(starts, default=0), max(stops, default=0), ts)
    merged["results"]["summary"] = {
        **{k: sum(r["results"]["summary"][k] for r in reports) for k in ("tests", *_COUNTED)},
        "start": min(starts, default=0),
        "stop": max(stops, default=0),
    }
    return merged


def phase_status(report: Mapping[str, Any]) -> str:
    """failed if any failed; else other if any other; else skipped if no tests; else passed."""
    s = report["results"]["summary"]
    if s["failed"]:
        return "failed"
    if s["other"]:
        return "other"
    if not s["tests"]:
        return "skipped"
    return "passed"


def to_bytes(report: Mapping[str, Any]) -> bytes:
    """Go ``json.MarshalIndent(report, "", "  ")`` + ``"\\n"``."""
    return marshal_indent(report)

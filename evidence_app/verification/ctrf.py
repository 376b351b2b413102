"""Parse a CTRF (Common Test Report Format) report, bounded, into per-test results.

AICR writes one report per phase (``ctrf/<phase>.json``): ``results.tests[]`` with ``name``,
``status`` (passed | failed | skipped | pending | other), ``duration`` (ms), ``suite`` (the phase),
and — in ``--full`` bundles — ``stdout`` lines and ``message``; ``extra`` holds allowlisted
structured outcome fields. Performance checks print their numbers to stdout
(``RESULT: Inference throughput: 108789.87 tokens/sec``); ``CtrfTest.metrics`` extracts them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._json import JSONLimitError, JSONLimits, load_json

MAX_CTRF_BYTES = 8 * 1024 * 1024
MAX_TESTS = 5_000
MAX_STDOUT_LINES = 500
MAX_TEXT = 4096
CTRF_LIMITS = JSONLimits(
    max_bytes=MAX_CTRF_BYTES, max_depth=32, max_object_keys=512, max_values=500_000
)
STATUSES = ("passed", "failed", "skipped", "pending", "other")

_METRIC = re.compile(
    r"^(?:RESULT:\s*)?(?P<label>[A-Za-z][^:]{0,200}?)\s*:\s*"
    r"(?P<value>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(?P<unit>[A-Za-z%/][A-Za-z0-9%/._-]{0,31})?\s*$"
)


class CtrfError(ValueError):
    """The report is not a readable CTRF document; ``field`` names the JSON path at fault."""

    def __init__(self, field: str, message: str, *, file: str | None = None) -> None:
        prefix = f"{file}: " if file else ""
        super().__init__(f"{prefix}{field}: {message}")
        self.field = field
        self.message = message
        self.file = file


@dataclass(frozen=True)
class Metric:
    label: str
    value: float
    unit: str | None
    line: str


@dataclass(frozen=True)
class CtrfTest:
    name: str
    status: str  # one of STATUSES ("other" for anything unknown; see raw_status)
    raw_status: str
    duration_ms: float | None
    suite: tuple[str, ...]
    phase: str | None
    stdout: tuple[str, ...] = ()
    message: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def metrics(self) -> tuple[Metric, ...]:
        """Numbers printed as ``[RESULT: ]<label>: <number> [unit]`` lines (performance checks)."""
        found = []
        for line in self.stdout:
            m = _METRIC.match(line.strip())
            if m:
                found.append(
                    Metric(
                        label=m.group("label").strip(),
                        value=float(m.group("value")),
                        unit=m.group("unit"),
                        line=line,
                    )
                )
        return tuple(found)


@dataclass(frozen=True)
class CtrfSummary:
    tests: int
    passed: int
    failed: int
    skipped: int
    pending: int
    other: int
    start: int | None
    stop: int | None


@dataclass(frozen=True)
class CtrfReport:
    tool_name: str | None
    tool_version: str | None
    spec_version: str | None
    timestamp: str | None
    summary: CtrfSummary
    tests: tuple[CtrfTest, ...]
    phase: str | None = None

    def counts(self) -> dict[str, int]:
        """Tests per status, counted from the tests themselves."""
        result = dict.fromkeys(STATUSES, 0)
        for test in self.tests:
            result[test.status] += 1
        return result


def _text(value: Any, where: str, *, file: str | None, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise CtrfError(where, "expected a string", file=file)
    if len(value) > limit:
        raise CtrfError(where, f"longer than {limit} characters", file=file)
    return value


def _opt_text(obj: Mapping[str, Any], key: str, where: str, *, file: str | None) -> str | None:
    value = obj.get(key)
    return None if value is None else _text(value, f"{where}.{key}" if where else key, file=file)


def _count(obj: Mapping[str, Any], key: str, where: str, *, file: str | None) -> int:
    value = obj.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CtrfError(f"{where}.{key}", "expected a non-negative integer", file=file)
    return value


def _opt_int(obj: Mapping[str, Any], key: str, where: str, *, file: str | None) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise CtrfError(f"{where}.{key}", "expected an integer", file=file)
    return value


def parse_ctrf(
    data: bytes | str, *, file: str | None = None, phase: str | None = None
) -> CtrfReport:
    """Parse a CTRF report; ``file`` names it in errors, ``phase`` is the expected phase."""
    try:
        doc = load_json(data, what=file or "ctrf", limits=CTRF_LIMITS)
    except JSONLimitError as exc:
        raise CtrfError("document", str(exc), file=None) from None
    if not isinstance(doc, dict):
        raise CtrfError("document", "expected a JSON object", file=file)
    fmt = doc.get("reportFormat")
    if fmt is not None and fmt != "CTRF":
        raise CtrfError("reportFormat", f"{str(fmt)[:40]!r} is not CTRF", file=file)
    results = doc.get("results")
    if not isinstance(results, dict):
        raise CtrfError("results", "expected an object", file=file)
    tool = results.get("tool") or {}
    if not isinstance(tool, dict):
        raise CtrfError("results.tool", "expected an object", file=file)
    summary = _summary(results.get("summary"), file=file)
    raw_tests = results.get("tests")
    if not isinstance(raw_tests, list):
        raise CtrfError("results.tests", "expected a list", file=file)
    if len(raw_tests) > MAX_TESTS:
        raise CtrfError("results.tests", f"more than {MAX_TESTS} tests", file=file)
    tests = tuple(
        _test(item, f"results.tests[{i}]", file=file, phase=phase)
        for i, item in enumerate(raw_tests)
    )
    return CtrfReport(
        tool_name=_opt_text(tool, "name", "results.tool", file=file),
        tool_version=_opt_text(tool, "version", "results.tool", file=file),
        spec_version=_opt_text(doc, "specVersion", "", file=file),
        timestamp=_opt_text(doc, "timestamp", "", file=file),
        summary=summary,
        tests=tests,
        phase=phase,
    )


def _summary(summary_obj: Any, *, file: str | None) -> CtrfSummary:
    w = "results.summary"
    if not isinstance(summary_obj, dict):
        raise CtrfError(w, "expected an object", file=file)
    return CtrfSummary(
        tests=_count(summary_obj, "tests", w, file=file),
        passed=_count(summary_obj, "passed", w, file=file),
        failed=_count(summary_obj, "failed", w, file=file),
        skipped=_count(summary_obj, "skipped", w, file=file),
        pending=_count(summary_obj, "pending", w, file=file),
        other=_count(summary_obj, "other", w, file=file),
        start=_opt_int(summary_obj, "start", w, file=file),
        stop=_opt_int(summary_obj, "stop", w, file=file),
    )


def _test(item: Any, where: str, *, file: str | None, phase: str | None) -> CtrfTest:
    """One ``results.tests[]`` entry; a status CTRF does not define counts as ``other``."""
    if not isinstance(item, dict):
        raise CtrfError(where, "expected an object", file=file)
    name = _text(item.get("name"), f"{where}.name", file=file, limit=512)
    if not name.strip():
        raise CtrfError(f"{where}.name", "must not be empty", file=file)
    raw_status = _text(item.get("status"), f"{where}.status", file=file, limit=32)
    duration = item.get("duration")
    if duration is not None and (
        isinstance(duration, bool) or not isinstance(duration, int | float)
    ):
        raise CtrfError(f"{where}.duration", "expected a number", file=file)
    suite = _suite(item.get("suite"), where, file=file)
    stdout = _stdout(item.get("stdout"), where, file=file)
    extra = item.get("extra") or {}
    if not isinstance(extra, dict):
        raise CtrfError(f"{where}.extra", "expected an object", file=file)
    return CtrfTest(
        name=name,
        status=raw_status if raw_status in STATUSES else "other",
        raw_status=raw_status,
        duration_ms=float(duration) if duration is not None else None,
        suite=suite,
        phase=suite[0] if suite else phase,
        stdout=stdout,
        message=_opt_text(item, "message", where, file=file),
        extra=extra,
    )


def _suite(suite_raw: Any, where: str, *, file: str | None) -> tuple[str, ...]:
    if suite_raw is None:
        return ()
    if isinstance(suite_raw, str):
        return (_text(suite_raw, f"{where}.suite", file=file, limit=256),)
    if isinstance(suite_raw, list) and len(suite_raw) <= 16:
        return tuple(
            _text(s, f"{where}.suite[{j}]", file=file, limit=256) for j, s in enumerate(suite_raw)
        )
    raise CtrfError(f"{where}.suite", "expected a string or a short list", file=file)


def _stdout(stdout_raw: Any, where: str, *, file: str | None) -> tuple[str, ...]:
    """At most ``MAX_STDOUT_LINES`` lines, from a list of lines or one string."""
    if stdout_raw is None:
        return ()
    if isinstance(stdout_raw, list):
        return tuple(
            _text(s, f"{where}.stdout[{j}]", file=file)
            for j, s in enumerate(stdout_raw[:MAX_STDOUT_LINES])
        )
    if isinstance(stdout_raw, str):
        text = _text(stdout_raw, f"{where}.stdout", file=file, limit=64 * 1024)
        return tuple(text.splitlines()[:MAX_STDOUT_LINES])
    raise CtrfError(f"{where}.stdout", "expected a list of lines", file=file)

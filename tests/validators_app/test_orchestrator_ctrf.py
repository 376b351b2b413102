"""CTRF bytes identical to AICR's Go writer (AICR-VALIDATE.md §6.7)."""

from __future__ import annotations

import json

from tests.shared_data import CTRF_NO_CLUSTER, EVIDENCE_EXAMPLE_BUNDLE
from validators_app.orchestrator import CheckOutcome, merge_reports, to_bytes
from validators_app.orchestrator.ctrf import build_phase_report, exit_code_status, phase_status


def _outcome(test: dict, **over: object) -> CheckOutcome:
    fields = {
        "phase": test["suite"][0],
        "name": test["name"],
        "status": test["status"],
        "exit_code": 2,
        "message": test.get("message", ""),
        "duration_ms": test["duration"],
        "stdout": tuple(test.get("stdout", ())),
        "extra": test.get("extra", {}),
        "job_name": "",
    }
    fields.update(over)
    return CheckOutcome(**fields)  # type: ignore[arg-type]


def _phase_reports(doc: dict) -> list[dict]:
    summary = doc["results"]["summary"]
    phases: dict[str, list[CheckOutcome]] = {}
    for test in doc["results"]["tests"]:
        phases.setdefault(test["suite"][0], []).append(_outcome(test))
    return [
        build_phase_report(
            version="dev", outcomes=o, start_ms=summary["start"], stop_ms=summary["stop"]
        )
        for o in phases.values()
    ]


def test_merged_report_is_byte_identical_to_aicr_no_cluster_output() -> None:
    golden = CTRF_NO_CLUSTER.read_bytes()
    merged = merge_reports("dev", _phase_reports(json.loads(golden)))
    assert to_bytes(merged) == golden


def test_phase_reports_are_byte_identical_to_the_example_bundle() -> None:
    for phase in ("deployment", "conformance", "performance"):
        golden = (EVIDENCE_EXAMPLE_BUNDLE / "ctrf" / f"{phase}.json").read_bytes()
        (report,) = _phase_reports(json.loads(golden))
        assert to_bytes(report) == golden, phase


def test_it_escapes_like_go_and_omits_empty_fields() -> None:
    outcome = CheckOutcome(
        phase="performance",
        name="nccl-all-reduce-bw",
        status="passed",
        exit_code=0,
        message="",
        duration_ms=3000,
        stdout=(
            "Constraint: >= 300 → true",
            "<b>&amp;</b>",
            "ls\u2028ps\u2029",
            "tab\there",
            "\x01",
        ),
        extra={"z": "1", "a": "2"},
        job_name="aicr-nccl-all-reduce-bw-00000000",
    )
    report = build_phase_report(version="v0.19.0", outcomes=[outcome], start_ms=1000, stop_ms=2000)
    text = to_bytes(report).decode()
    assert '"Constraint: \\u003e= 300 → true"' in text
    assert '"\\u003cb\\u003e\\u0026amp;\\u003c/b\\u003e"' in text
    assert '"ls\\u2028ps\\u2029"' in text
    assert '"tab\\there"' in text
    assert '"\\u0001"' in text
    assert '"message"' not in text
    assert text.index('"a": "2"') < text.index('"z": "1"')  # Go sorts map keys
    test = json.loads(text)["results"]["tests"][0]
    assert list(test) == ["name", "status", "duration", "suite", "stdout", "extra"]
    assert text.endswith("}\n")
    assert '\n  "results": {\n    "tool": {' in text
    assert json.loads(text)["timestamp"] == "1970-01-01T00:00:02Z"


def test_merge_edges_follow_go() -> None:
    empty = [
        build_phase_report(version="dev", outcomes=[], start_ms=s, stop_ms=s + 5) for s in (10, 20)
    ]
    assert b'"tests": []' in to_bytes(empty[0])  # one phase without checks: an empty slice
    merged = merge_reports("dev", empty)
    assert b'"tests": null' in to_bytes(merged)  # all empty: a nil slice
    assert merged["results"]["summary"]["start"] == 10
    assert merged["results"]["summary"]["stop"] == 25
    assert merged["timestamp"] == empty[0]["timestamp"]
    assert merge_reports("dev", empty[:1]) == empty[0]


def test_exit_codes_and_phase_status() -> None:
    assert [exit_code_status(c) for c in (0, 1, 2, -1, 137, 143)] == [
        "passed", "failed", "skipped", "other", "other", "other",
    ]  # fmt: skip
    t = {"name": "x", "suite": ["deployment"], "duration": 0}

    def status(*statuses: str) -> str:
        outs = [_outcome({**t, "status": s}) for s in statuses]
        return phase_status(build_phase_report(version="dev", outcomes=outs, start_ms=0, stop_ms=0))

    assert status() == "skipped"
    assert status("passed", "skipped") == "passed"
    assert status("passed", "other") == "other"
    assert status("other", "failed") == "failed"
    assert status("skipped") == "passed"  # tests > 0 and nothing failed

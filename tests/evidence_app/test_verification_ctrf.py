"""CTRF reports: bounded parsing into per-test results and performance numbers."""

from __future__ import annotations

import json

import pytest

from evidence_app.verification import CtrfError, parse_ctrf
from tests.shared_data import AICR, GOLDEN

CTRF = GOLDEN / "generated/evidence-example-full/summary-bundle/ctrf"


def test_it_reads_the_reports_aicr_emits() -> None:
    report = parse_ctrf((CTRF / "performance.json").read_bytes(), file="ctrf/performance.json")
    assert report.tool_name == "aicr"
    assert report.summary.tests == 4
    assert report.summary.skipped == 4
    assert [t.name for t in report.tests] == [
        "nccl-all-reduce-bw",
        "inference-perf",
        "nccl-all-reduce-bw-net",
        "nccl-all-reduce-bw-nvls",
    ]
    assert {t.phase for t in report.tests} == {"performance"}
    assert report.counts()["skipped"] == 4
    no_cluster = parse_ctrf((AICR / "_generated/validate-no-cluster.ctrf.json").read_bytes())
    assert no_cluster.tests[0].message == "skipped - no-cluster mode"


def test_it_extracts_performance_numbers_from_stdout() -> None:
    doc = {
        "results": {
            "summary": {"tests": 2, "passed": 2},
            "tests": [
                {
                    "name": "inference-perf",
                    "status": "passed",
                    "duration": 301234,
                    "suite": ["performance"],
                    "stdout": [
                        "RESULT: Inference throughput: 108789.87 tokens/sec",
                        "RESULT: Inference TTFT p99: 687.50 ms",
                        "Throughput constraint: >= 50000 → PASS",
                    ],
                    "extra": {"nodes": 2},
                },
                {
                    "name": "nccl-all-reduce-bw-net",
                    "status": "weird",
                    "stdout": "NCCL All Reduce bandwidth (nccl-all-reduce-bw-net): 412.5 GB/s\n",
                },
            ],
        }
    }
    report = parse_ctrf(json.dumps(doc), phase="performance")
    perf, nccl = report.tests
    assert [(m.label, m.value, m.unit) for m in perf.metrics] == [
        ("Inference throughput", 108789.87, "tokens/sec"),
        ("Inference TTFT p99", 687.5, "ms"),
    ]
    assert perf.duration_ms == 301234
    assert perf.extra == {"nodes": 2}
    assert [(m.value, m.unit) for m in nccl.metrics] == [(412.5, "GB/s")]
    assert (nccl.status, nccl.raw_status, nccl.phase) == ("other", "weird", "performance")


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"results": {"summary": {}, "tests": {}}}, "results.tests"),
        ({"results": {"summary": {"passed": -1}, "tests": []}}, "results.summary.passed"),
        ({"results": {"summary": {}, "tests": [{"status": "passed"}]}}, "results.tests[0].name"),
        (
            {"results": {"summary": {}, "tests": [{"name": "x", "status": 1}]}},
            "results.tests[0].status",
        ),
        (
            {
                "results": {
                    "summary": {},
                    "tests": [{"name": "x", "status": "passed", "duration": "1"}],
                }
            },
            "duration",
        ),
        ({"reportFormat": "JUnit", "results": {}}, "reportFormat"),
        ({"results": {"summary": {}, "tests": [{"name": "x" * 600, "status": "passed"}]}}, "name"),
    ],
)
def test_it_rejects_malformed_reports(doc: dict, field: str) -> None:
    with pytest.raises(CtrfError) as info:
        parse_ctrf(json.dumps(doc), file="ctrf/x.json")
    assert field in info.value.field
    assert str(info.value).startswith("ctrf/x.json: ")

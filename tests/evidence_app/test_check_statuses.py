"""``check_statuses`` (names and statuses, read without an outcome per check: a counted upload
and each audit record read it) gives what the full ``check_outcomes`` reading gives."""

from __future__ import annotations

from typing import Any

import pytest

from evidence_app.consensus.outcomes import check_outcomes
from evidence_app.consensus.rules import check_statuses, outcome_statuses

LONG = "n" * 5000

SHAPES: dict[str, Any] = {
    "ctrf-list": {
        "deployment": [
            {"name": "operator-health", "status": "passed", "duration": 12},
            {"name": "gpu-operator", "status": "failed", "message": "x"},
        ],
        "performance": [{"name": "nccl", "status": "skipped", "metrics": [{"value": 1}]}],
    },
    "tests-wrapper": {"conformance": {"tests": [{"name": "dra", "status": "other"}]}},
    "name-to-status": {"deployment": {"a": "passed", "b": {"status": "failed"}, "c": 3}},
    "a-name-twice-keeps-the-first": {
        "deployment": [{"name": "a", "status": "passed"}, {"name": "a", "status": "failed"}]
    },
    "long-names-cut-alike": {
        "deployment": [
            {"name": LONG, "status": "passed"},
            {"name": LONG + "x", "status": "failed"},
        ]
    },
    "long-status-cut": {"deployment": [{"name": "a", "status": "p" * 100}]},
    "blank-and-odd-names": {
        "deployment": [{"name": " ", "status": "passed"}, {"name": 7}, {"status": "x"}, "a", 1]
    },
    "phase-outside-the-grid": {"readiness": [{"name": "a", "status": "passed"}]},
    "non-string-phase": {3: [{"name": "a", "status": "passed"}]},
    "odd-phase-values": {"deployment": "passed", "conformance": None, "performance": 4},
    "status-not-a-string": {"deployment": [{"name": "a", "status": ["passed"]}]},
    "past-5000-entries": {
        "deployment": [{"name": f"c{i}", "status": "passed"} for i in range(5_010)]
    },
    "not-a-mapping": ["deployment"],
    "none": None,
}


@pytest.mark.parametrize("shape", SHAPES.values(), ids=SHAPES.keys())
def test_it_reads_what_the_full_reading_reads(shape: Any) -> None:
    assert check_statuses(shape) == outcome_statuses(check_outcomes(shape, detail=False))
    assert check_statuses(shape) == outcome_statuses(check_outcomes(shape, detail=True))


def test_it_gives_the_statuses_as_written() -> None:
    assert check_statuses(SHAPES["ctrf-list"]) == {
        "deployment": {"operator-health": "passed", "gpu-operator": "failed"},
        "performance": {"nccl": "skipped"},
    }
    assert check_statuses(SHAPES["a-name-twice-keeps-the-first"]) == {"deployment": {"a": "passed"}}
    assert check_statuses(SHAPES["long-names-cut-alike"]) == {"deployment": {"n" * 4096: "passed"}}
    assert check_statuses(SHAPES["long-status-cut"]) == {"deployment": {"a": "p" * 32}}
    assert check_statuses(SHAPES["blank-and-odd-names"]) == {"deployment": {}}
    assert check_statuses(SHAPES["phase-outside-the-grid"]) == {}
    assert check_statuses(SHAPES["odd-phase-values"]) == {
        "deployment": {},
        "conformance": {},
        "performance": {},
    }
    assert len(check_statuses(SHAPES["past-5000-entries"])["deployment"]) == 5_000

"""Hostile snapshots are refused with a sentence naming the problem, before anything reads them."""

from __future__ import annotations

import pytest

from evidence_app.coverage.snapshot_input import (
    MAX_READINGS,
    MAX_SNAPSHOT_BYTES,
    SnapshotInputError,
    read_snapshot_input,
)
from tests.shared_data import EVIDENCE_EXAMPLE_BUNDLE, MOCK_SNAPSHOT, SNAPSHOT_EXAMPLE

BILLION_LAUGHS = """\
a: &a ["x","x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]
measurements: [*g]
"""


def _huge_readings() -> str:
    lines = [
        "measurements:",
        "  - type: K8s",
        "    subtypes:",
        "      - subtype: helm",
        "        data:",
    ]
    lines += [f"          r{i}: v" for i in range(MAX_READINGS + 1)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "path", [SNAPSHOT_EXAMPLE, MOCK_SNAPSHOT, EVIDENCE_EXAMPLE_BUNDLE / "snapshot.yaml"]
)
def test_it_reads_aicrs_example_snapshots(path) -> None:  # type: ignore[no-untyped-def]
    doc = read_snapshot_input(path.read_bytes())
    assert {m["type"] for m in doc["measurements"]} >= {"K8s", "OS"}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "the snapshot is empty"),
        (b"   \n", "the snapshot is empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary, not YAML text"),
        (b"measurements: [\xff\xfe]", "not UTF-8 text (invalid byte at offset 15)"),
        (b"- a\n- b\n", "the document is not a mapping"),
        (b"kind: Recipe\nmeasurements: []\n", "kind is 'Recipe', not 'Snapshot'"),
        (b"kind: Snapshot\n", "the snapshot has no measurements"),
        (b"measurements: []\n", "the snapshot has no measurements"),
        (b"measurements: [3]\n", "measurements[0] is not a mapping"),
        (b"measurements: [{subtypes: []}]\n", "measurements[0].type is missing"),
        (
            b"measurements: [{type: Bogus, subtypes: []}]\n",
            "measurements[0].type 'Bogus' is not an AICR measurement type",
        ),
        (b"measurements: [{type: K8s}]\n", "measurements[0] (K8s).subtypes is missing"),
        (
            b"measurements: [{type: OS, subtypes: [{data: {}}]}]\n",
            "measurements[0] (OS).subtypes[0].subtype is missing",
        ),
        (
            b"measurements: [{type: OS, subtypes: [{subtype: release, data: [1]}]}]\n",
            "measurements[0] (OS).subtypes[0] (release).data is not a mapping",
        ),
        (b"measurements: [\n", "unreadable snapshot"),
        (b"a: b: c\n", "unreadable snapshot"),
    ],
)
def test_it_refuses_bad_input_naming_the_problem(raw: bytes, message: str) -> None:
    with pytest.raises(SnapshotInputError) as err:
        read_snapshot_input(raw)
    assert message in str(err.value)


def test_it_refuses_a_yaml_bomb_before_expanding_it() -> None:
    with pytest.raises(SnapshotInputError, match="unreadable snapshot"):
        read_snapshot_input(BILLION_LAUGHS)


def test_it_refuses_too_many_measurements() -> None:
    text = "measurements:\n" + "  - {type: OS, subtypes: []}\n" * 65
    with pytest.raises(SnapshotInputError, match="65 measurements; at most 64"):
        read_snapshot_input(text)


def test_it_refuses_a_huge_reading_list() -> None:
    with pytest.raises(SnapshotInputError, match=f"{MAX_READINGS + 1} readings"):
        read_snapshot_input(_huge_readings())


def test_it_refuses_an_oversized_snapshot() -> None:
    raw = b"measurements: []\n#" + b"x" * MAX_SNAPSHOT_BYTES
    with pytest.raises(SnapshotInputError, match=f"at most {MAX_SNAPSHOT_BYTES} are accepted"):
        read_snapshot_input(raw)

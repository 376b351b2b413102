"""A pasted or uploaded ``aicr snapshot`` document, checked before anything reads it.

The text is untrusted: it is parsed with the resolver's bounded yaml.v3 loader (size, depth,
alias and expanded-node budgets, so a YAML bomb is refused before it grows) through
``evidence_app.attestation.snapshot.parse_snapshot``, then its shape is checked against AICR's
Snapshot (AICR.md §2) with an error naming the first thing that is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evidence_app.attestation.snapshot import SnapshotError, parse_snapshot

# A real snapshot is a few KiB to a few hundred KiB (a thousand-node label table included).
MAX_SNAPSHOT_BYTES = 2 * 1024 * 1024
MAX_MEASUREMENTS = 64
MAX_READINGS = 50_000
KIND = "Snapshot"
# pkg/measurement types (main-08).
MEASUREMENT_TYPES = frozenset({"SystemD", "OS", "K8s", "GPU", "NodeTopology", "NetworkTopology"})


class SnapshotInputError(ValueError):
    """The snapshot cannot be checked; the message names what is wrong."""


def _decode(raw: bytes | str) -> str:
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_SNAPSHOT_BYTES:
        raise SnapshotInputError(
            f"the snapshot is {len(raw)} bytes; at most {MAX_SNAPSHOT_BYTES} are accepted"
        )
    if not raw.strip():
        raise SnapshotInputError("the snapshot is empty")
    if b"\x00" in raw:
        raise SnapshotInputError("the snapshot is binary, not YAML text (it contains NUL bytes)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotInputError(
            f"the snapshot is not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None


def _check_measurement(index: int, m: Any) -> int:
    where = f"measurements[{index}]"
    if not isinstance(m, Mapping):
        raise SnapshotInputError(f"{where} is not a mapping")
    mtype = m.get("type")
    if not isinstance(mtype, str) or not mtype:
        raise SnapshotInputError(f"{where}.type is missing")
    if mtype not in MEASUREMENT_TYPES:
        raise SnapshotInputError(
            f"{where}.type {mtype[:60]!r} is not an AICR measurement type "
            f"(known: {', '.join(sorted(MEASUREMENT_TYPES))})"
        )
    subtypes = m.get("subtypes")
    if not isinstance(subtypes, list):
        raise SnapshotInputError(f"{where} ({mtype}).subtypes is missing or not a list")
    readings = 0
    for j, s in enumerate(subtypes):
        if not isinstance(s, Mapping) or not isinstance(s.get("subtype"), str):
            raise SnapshotInputError(f"{where} ({mtype}).subtypes[{j}].subtype is missing")
        data = s.get("data", {})
        if data is not None and not isinstance(data, Mapping):
            raise SnapshotInputError(
                f"{where} ({mtype}).subtypes[{j}] ({s['subtype'][:60]}).data is not a mapping"
            )
        readings += len(data or {}) + len(s.get("items") or ())
    return readings


def read_snapshot_input(raw: bytes | str) -> dict[str, Any]:
    """The snapshot document, or ``SnapshotInputError`` naming the problem."""
    text = _decode(raw)
    try:
        doc = parse_snapshot(text)
    except SnapshotError as exc:
        raise SnapshotInputError(str(exc)) from None
    kind = doc.get("kind")
    if kind is not None and kind != KIND:
        raise SnapshotInputError(f"kind is {str(kind)[:60]!r}, not {KIND!r}")
    measurements = doc.get("measurements")
    if not isinstance(measurements, list) or not measurements:
        raise SnapshotInputError("the snapshot has no measurements (a non-empty list is required)")
    if len(measurements) > MAX_MEASUREMENTS:
        raise SnapshotInputError(
            f"the snapshot has {len(measurements)} measurements; at most {MAX_MEASUREMENTS}"
        )
    readings = sum(_check_measurement(i, m) for i, m in enumerate(measurements))
    if readings > MAX_READINGS:
        raise SnapshotInputError(
            f"the snapshot has {readings} readings; at most {MAX_READINGS} are accepted"
        )
    return doc

"""Criteria from a snapshot, as ``aicr recipe --snapshot`` derives them (AICR.md §1.3 step 11, §2).

The snapshot's fingerprint (``evidence_app.attestation.fingerprint_of``: a plain mapping of
``{value, source?}`` entries) gives ``service``, ``accelerator`` and ``os``; ``intent`` and
``platform`` are never measurable, so they come only from what the caller states. A stated
value wins over the derived one (the caller's flag is the more deliberate answer), and the
result records where each value came from so a page can say "derived from the snapshot".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DERIVABLE = ("service", "accelerator", "os")
STATED_ONLY = ("intent", "platform")
DIMENSIONS = (*DERIVABLE, *STATED_ONLY)


@dataclass(frozen=True)
class DerivedCriteria:
    """The query for the resolver plus each value's origin (``snapshot`` or ``stated``)."""

    values: dict[str, str]
    origin: dict[str, str]

    def stated(self) -> list[str]:
        return [dim for dim, where in self.origin.items() if where == "stated"]


def _fingerprint_value(fingerprint: Mapping[str, Any], dimension: str) -> str:
    entry = fingerprint.get(dimension)
    value = entry.get("value") if isinstance(entry, Mapping) else None
    return value if isinstance(value, str) else ""


def criteria_from_snapshot(
    fingerprint: Mapping[str, Any], stated: Mapping[str, str | None]
) -> DerivedCriteria:
    """Derived ``service/accelerator/os`` overlaid with the stated dimensions (blank = unstated)."""
    values: dict[str, str] = {}
    origin: dict[str, str] = {}
    for dimension in DIMENSIONS:
        given = (stated.get(dimension) or "").strip()
        if given:
            values[dimension], origin[dimension] = given, "stated"
        elif dimension in DERIVABLE and (derived := _fingerprint_value(fingerprint, dimension)):
            values[dimension], origin[dimension] = derived, "snapshot"
    return DerivedCriteria(values=values, origin=origin)
